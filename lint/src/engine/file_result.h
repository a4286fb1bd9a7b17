// What linting one file produced, and its byte encoding: a file is linted in a worker process
// (isolation.h), which hands its result to the run as bytes over a pipe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nccl_migrate/lint/rule.h"

namespace nccl_migrate::lint {

struct FileResult {
  std::vector<Finding> findings;
  std::vector<std::string> warnings;
  bool scanned = false;
  bool parsed = false;
  int suppressed = 0;
};

std::string encodeFileResult(const FileResult& result);

// nullopt when `bytes` is not a whole encoding (a worker that died while writing it).
std::optional<FileResult> decodeFileResult(std::string_view bytes);

}  // namespace nccl_migrate::lint
