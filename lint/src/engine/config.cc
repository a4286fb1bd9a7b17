// Reading [tool.nccl-migrate] / .nccl-migrate.toml with toml++ and deciding which rules are on.
#include "nccl_migrate/lint/config.h"

#include "engine/toml.h"

#include "nccl_migrate/lint/rule.h"

namespace nccl_migrate::lint {
namespace fs = std::filesystem;
namespace {

std::string where(const fs::path& file, const toml::node& node) {
  return file.string() + ":" + std::to_string(node.source().begin.line);
}

std::vector<std::string> stringList(const fs::path& file, const std::string& key, const toml::node& node) {
  const toml::array* array = node.as_array();
  if (!array) throw ConfigError(where(file, node) + ": '" + key + "' must be a list of strings, e.g. " + key + " = [\"NM2\"]");
  std::vector<std::string> out;
  for (const toml::node& item : *array) {
    if (!item.is_string()) throw ConfigError(where(file, item) + ": every entry of '" + key + "' must be a string");
    out.push_back(item.as_string()->get());
  }
  return out;
}

void readTable(const fs::path& file, const toml::table& table, LintConfig& config) {
  for (const auto& [k, node] : table) {
    std::string key(k.str());
    if (key == "select") config.select = stringList(file, key, node);
    else if (key == "extend-select") config.extendSelect = stringList(file, key, node);
    else if (key == "ignore") config.ignore = stringList(file, key, node);
    else if (key == "exclude") config.exclude = stringList(file, key, node);
    else if (key == "group-wrappers") config.groupWrappers = stringList(file, key, node);
    else if (key == "respect-gitignore" && node.is_boolean()) config.respectGitignore = node.as_boolean()->get();
    else if (key == "output-format" && node.is_string()) {
      config.outputFormat = node.as_string()->get();
      config.outputFormatSource = where(file, node);
    }
    else if (key == "environment" && node.is_boolean()) config.environment = node.as_boolean()->get();
    else if (key == "python") {
      // A configuration file usually comes with the code being linted (a pull request's, under
      // pre-commit or CI): it may not name a program for lint to run.
      throw ConfigError(where(file, node) + ": 'python' cannot be set in a configuration file, which comes with the "
                        "code being linted; name the interpreter on the command line with --python PATH");
    }
    else if (key == "group-sites-threshold" && node.is_integer()) config.groupSitesThreshold = static_cast<int>(node.as_integer()->get());
    else if (key == "max-file-size-kb" && node.is_integer() && node.as_integer()->get() > 0)
      config.maxFileBytes = static_cast<std::uint64_t>(node.as_integer()->get()) * 1024;
    else if ((key == "equivalent-modules" || key == "per-file-ignores") && node.is_table()) {
      for (const auto& [name, value] : *node.as_table()) {
        if (key == "per-file-ignores") {
          config.perFileIgnores[std::string(name.str())] = stringList(file, key + "." + std::string(name.str()), value);
        } else if (value.is_string()) {
          config.equivalentModules[std::string(name.str())] = value.as_string()->get();
        } else {
          throw ConfigError(where(file, value) + ": 'equivalent-modules' maps a module to a module name string, e.g. "
                            "\"deepspeed.comm\" = \"torch.distributed\"");
        }
      }
    } else {
      throw ConfigError(where(file, node) + ": unknown or mistyped key '" + key +
                        "'; known keys: select, extend-select, ignore, exclude, per-file-ignores, equivalent-modules, "
                        "group-wrappers, output-format (full, concise, json, sarif or gitlab), group-sites-threshold (integer), max-file-size-kb (integer), "
                        "respect-gitignore (boolean), environment (boolean)");
    }
  }
}

bool matches(const std::string& selector, const std::string& code, const std::string& slug) {
  if (selector == "ALL") return true;
  return selector == slug || code.starts_with(selector);
}

}  // namespace

LintConfig loadConfigFile(const fs::path& file) {
  toml::parse_result parsed = toml::parse_file(file.string());
  if (!parsed) {
    const toml::parse_error& e = parsed.error();
    throw ConfigError(file.string() + ":" + std::to_string(e.source().begin.line) + ": invalid TOML: " +
                      std::string(e.description()));
  }
  LintConfig config;
  config.source = file;
  const toml::table& root = parsed.table();
  if (file.filename() == "pyproject.toml") {
    const toml::node* section = root.at_path("tool.nccl-migrate").node();
    if (!section) return config;
    if (!section->is_table()) throw ConfigError(file.string() + ": [tool.nccl-migrate] must be a table");
    readTable(file, *section->as_table(), config);
  } else {
    readTable(file, root, config);
  }
  return config;
}

LintConfig discoverConfig(const fs::path& start) {
  std::error_code ec;
  fs::path dir = fs::absolute(start, ec);
  if (!fs::is_directory(dir, ec)) dir = dir.parent_path();
  for (; !dir.empty(); dir = dir.parent_path()) {
    if (fs::exists(dir / ".nccl-migrate.toml", ec)) return loadConfigFile(dir / ".nccl-migrate.toml");
    fs::path pyproject = dir / "pyproject.toml";
    if (fs::exists(pyproject, ec)) {
      LintConfig config = loadConfigFile(pyproject);
      if (!config.source.empty() && toml::parse_file(pyproject.string()).table().at_path("tool.nccl-migrate")) return config;
    }
    if (dir == dir.root_path()) break;
  }
  return LintConfig{};
}

bool ruleEnabled(const LintConfig& config, const std::string& code, const std::string& slug, bool enabledByDefault) {
  bool on = enabledByDefault;
  if (!config.select.empty()) {
    on = false;
    for (const std::string& s : config.select) on |= matches(s, code, slug);
  }
  for (const std::string& s : config.extendSelect) on |= matches(s, code, slug);
  for (const std::string& s : config.ignore) {
    if (matches(s, code, slug)) on = false;
  }
  return on;
}

void validateSelectors(const LintConfig& config) {
  auto check = [](const std::vector<std::string>& selectors, const char* option) {
    for (const std::string& s : selectors) {
      bool known = s == "ALL";
      for (const Rule* rule : allRules()) known |= matches(s, rule->info().code, rule->info().slug);
      if (!known) {
        throw ConfigError(std::string(option) + ": '" + s + "' names no rule; use a code (NM201), a prefix (NM2) "
                          "or a slug (legacy-class-check); `nccl-migrate rules` lists them");
      }
    }
  };
  check(config.select, "select");
  check(config.extendSelect, "extend-select");
  check(config.ignore, "ignore");
  for (const auto& [glob, codes] : config.perFileIgnores) check(codes, "per-file-ignores");
}

}  // namespace nccl_migrate::lint
