// The user's settings for a lint run: from `[tool.nccl-migrate]` in pyproject.toml or from
// .nccl-migrate.toml (found upward from the linted path), then overridden by the command line.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace nccl_migrate::lint {

// A configuration or command-line value that cannot be used; the message names the file, the key
// and what to write instead.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct LintConfig {
  // Codes, code prefixes ("NM2") or slugs. Empty select means the rules that are on by default.
  std::vector<std::string> select;
  std::vector<std::string> extendSelect;
  std::vector<std::string> ignore;
  // Glob patterns of paths never linted (matched against the path and each of its names).
  std::vector<std::string> exclude;
  // Path glob -> codes ignored in those files.
  std::map<std::string, std::vector<std::string>> perFileIgnores;
  // Python module treated as another. Well-known mirrors of torch.distributed are built in; the
  // configuration adds to them (or maps one elsewhere).
  std::map<std::string, std::string> equivalentModules = {{"deepspeed.comm", "torch.distributed"}};
  // Project functions that create process groups like torch.distributed.new_group.
  std::vector<std::string> groupWrappers;
  // The interpreter whose sys.path resolves imports that leave the linted tree (empty: python3 on
  // PATH), and whether they are resolved at all.
  std::string python;
  bool environment = true;
  // A file with at least this many group-creation calls is reported (NM401).
  int groupSitesThreshold = 4;
  // Files larger than this are skipped with a warning.
  std::uint64_t maxFileBytes = 8u << 20;
  bool respectGitignore = true;
  // The output format a file asks for (`output-format`, as ruff's setting); empty: the command
  // line's, else full. Checked by the command, which knows the formats.
  std::string outputFormat;
  std::string outputFormatSource;  // file:line of `output-format`, for its error
  // Where the settings came from, for messages; empty when no file was found.
  std::filesystem::path source;
};

// Finds the configuration that applies to `start` (a file or directory): the nearest
// .nccl-migrate.toml, or pyproject.toml with a [tool.nccl-migrate] table, searching upward.
// Returns defaults when there is none. Throws ConfigError on a malformed file or unknown key.
LintConfig discoverConfig(const std::filesystem::path& start);

// Reads one configuration file (pyproject.toml reads [tool.nccl-migrate]).
LintConfig loadConfigFile(const std::filesystem::path& file);

// Whether a rule is on under this configuration (select/extend-select/ignore by code, prefix or slug).
bool ruleEnabled(const LintConfig& config, const std::string& code, const std::string& slug, bool enabledByDefault);

// Throws ConfigError when a selector names no rule.
void validateSelectors(const LintConfig& config);

}  // namespace nccl_migrate::lint
