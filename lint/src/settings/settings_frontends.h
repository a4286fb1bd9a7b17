// The settings frontends: shell scripts, Dockerfiles and configuration files (YAML, TOML, JSON,
// .env) read line by line, or through toml++, for the settings they assign and export.
#pragma once

#include <string>

#include "nccl_migrate/lint/source_model.h"

namespace nccl_migrate::lint {

// Shell scripts, Dockerfiles and configuration files: assignments and exported values.
SourceModel scanShell(const std::string& path, const std::string& text);
SourceModel scanDockerfile(const std::string& path, const std::string& text);
SourceModel scanConfig(const std::string& path, const std::string& text);

}  // namespace nccl_migrate::lint
