// The CLI's subcommands; each returns the process exit status.
#pragma once

#include <string>
#include <vector>

namespace nccl_migrate::cli {

std::string versionText();
int runLint(const std::vector<std::string>& args);
int runRules(const std::vector<std::string>& args);
// Hands a torch-side subcommand to `python -m nccl_migrate <command>`.
int runInPython(const std::string& command, const std::vector<std::string>& args);

}  // namespace nccl_migrate::cli
