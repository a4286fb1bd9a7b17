// Shell scripts, Dockerfiles and configuration files. What matters in them is which values are
// set (environment variables, backend names), so these frontends record settings and comments.
// TOML goes through a real TOML parser (toml++); shell, Dockerfile, YAML, JSON and .env files are
// read line by line, which keeps line numbers exact and tolerates templated files.
#include <regex>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "engine/toml.h"

#include "frontends.h"

namespace nccl_migrate::lint {
namespace {

std::vector<std::string> splitLines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
    if (end == text.size()) break;
    start = end + 1;
  }
  return lines;
}

std::string stripQuotes(std::string value) {
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t' || value.back() == ',')) value.pop_back();
  size_t first = value.find_first_not_of(" \t");
  value = first == std::string::npos ? "" : value.substr(first);
  if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') && value.back() == value.front()) {
    value = value.substr(1, value.size() - 2);
  }
  return value;
}

// Position of a `#` comment outside quotes, or npos. `#` must start the line or follow a blank,
// as in shell and YAML (so `a#b` is a word).
size_t commentStart(const std::string& line) {
  char quote = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quote) {
      if (c == quote) quote = 0;
      else if (c == '\\' && quote == '"') ++i;
      continue;
    }
    if (c == '"' || c == '\'') quote = c;
    else if (c == '#' && (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t')) return i;
  }
  return std::string::npos;
}

// Every `NAME=value` word of a shell command line: exports, `env X=1 cmd`, `X=1 cmd`.
void scanAssignments(const std::string& code, int line, int columnOffset, SourceModel& model) {
  static const std::regex kAssignment(R"((^|[\s;&|(`])([A-Za-z_][A-Za-z0-9_]*)=("[^"]*"|'[^']*'|[^\s;&|)`]*))");
  for (auto it = std::sregex_iterator(code.begin(), code.end(), kAssignment); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    int column = columnOffset + static_cast<int>(m.position(2)) + 1;
    model.settings.push_back({m[2].str(), stripQuotes(m[3].str()), {line, column}, true});
  }
}

void addComment(SourceModel& model, int line, const std::string& text) { model.comments.push_back({line, text}); }

// `#SBATCH --export=ALL,NAME=value` sets the job's environment from a comment line.
void scanSbatchExport(const std::string& line, int number, SourceModel& model) {
  size_t at = line.find("--export=");
  if (at == std::string::npos) return;
  std::string list = line.substr(at + 9);
  list = list.substr(0, list.find_first_of(" \t"));
  std::stringstream items(list);
  std::string item;
  while (std::getline(items, item, ',')) {
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    model.settings.push_back({item.substr(0, eq), stripQuotes(item.substr(eq + 1)), {number, static_cast<int>(at) + 1}, true});
  }
}

SourceModel emptyModel(const std::string& path, Language language) {
  SourceModel model;
  model.path = path;
  model.language = language;
  return model;
}

// Key/value lines of YAML, JSON and .env files, plus `NAME=value` words inside values (commands
// in YAML, `KEY=VALUE` list items) and Kubernetes-style `- name: X` / `value: Y` pairs.
void scanKeyValueLines(const std::string& text, bool hashComments, SourceModel& model) {
  static const std::regex kKeyValue(R"(^\s*-?\s*["']?([A-Za-z_][A-Za-z0-9_.\-]*)["']?\s*[:=]\s*(.*)$)");
  std::vector<std::string> lines = splitLines(text);
  std::string pendingName;
  for (size_t i = 0; i < lines.size(); ++i) {
    int number = static_cast<int>(i) + 1;
    std::string line = lines[i];
    if (hashComments) {
      size_t hash = commentStart(line);
      if (hash != std::string::npos) {
        addComment(model, number, line.substr(hash));
        line = line.substr(0, hash);
      }
    }
    std::smatch m;
    if (!std::regex_match(line, m, kKeyValue)) {
      scanAssignments(line, number, 0, model);
      continue;
    }
    std::string key = m[1].str();
    std::string value = stripQuotes(m[2].str());
    int column = static_cast<int>(m.position(1)) + 1;
    if (key == "value" && !pendingName.empty()) {
      model.settings.push_back({pendingName, value, {number, column}, true});
      pendingName.clear();
    } else {
      model.settings.push_back({key, value, {number, column}, false});
      pendingName = key == "name" ? value : "";
    }
    scanAssignments(m[2].str(), number, static_cast<int>(m.position(2)), model);
  }
}

void walkToml(const toml::node& node, const std::string& key, SourceModel& model) {
  if (const toml::table* table = node.as_table()) {
    for (const auto& [k, v] : *table) walkToml(v, std::string(k.str()), model);
  } else if (const toml::array* array = node.as_array()) {
    for (const toml::node& v : *array) walkToml(v, key, model);
  } else if (const auto* str = node.as_string()) {
    const toml::source_region& src = node.source();
    Location where{static_cast<int>(src.begin.line), static_cast<int>(src.begin.column)};
    model.settings.push_back({key, str->get(), where, false});
    scanAssignments(str->get(), where.line, where.column, model);
  } else if (node.is_integer() || node.is_boolean()) {
    const toml::source_region& src = node.source();
    std::ostringstream value;
    if (node.is_integer()) value << node.as_integer()->get();
    else value << (node.as_boolean()->get() ? "true" : "false");
    model.settings.push_back({key, value.str(), {static_cast<int>(src.begin.line), static_cast<int>(src.begin.column)}, false});
  }
}

void scanToml(const std::string& text, SourceModel& model) {
  std::vector<std::string> lines = splitLines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    size_t hash = commentStart(lines[i]);
    if (hash != std::string::npos) addComment(model, static_cast<int>(i) + 1, lines[i].substr(hash));
  }
  toml::parse_result parsed = toml::parse(text, model.path);
  if (!parsed) {
    // A broken file still gets its readable lines checked.
    model.hadSyntaxErrors = true;
    scanKeyValueLines(text, true, model);
    return;
  }
  walkToml(parsed.table(), "", model);
}

}  // namespace

SourceModel scanShell(const std::string& path, const std::string& text) {
  SourceModel model = emptyModel(path, Language::Shell);
  std::vector<std::string> lines = splitLines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    int number = static_cast<int>(i) + 1;
    const std::string& line = lines[i];
    if (line.starts_with("#SBATCH")) scanSbatchExport(line, number, model);
    size_t hash = commentStart(line);
    if (hash != std::string::npos) addComment(model, number, line.substr(hash));
    scanAssignments(line.substr(0, hash), number, 0, model);
  }
  return model;
}

SourceModel scanDockerfile(const std::string& path, const std::string& text) {
  SourceModel model = emptyModel(path, Language::Dockerfile);
  static const std::regex kEnvPair(R"(^\s*(ENV|ARG)\s+([A-Za-z_][A-Za-z0-9_]*)\s+([^=].*)$)", std::regex::icase);
  std::vector<std::string> lines = splitLines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    int number = static_cast<int>(i) + 1;
    const std::string& line = lines[i];
    size_t first = line.find_first_not_of(" \t");
    if (first != std::string::npos && line[first] == '#') {
      addComment(model, number, line.substr(first));
      continue;
    }
    std::smatch m;
    if (std::regex_match(line, m, kEnvPair)) {  // legacy `ENV NAME value` form
      model.settings.push_back({m[2].str(), stripQuotes(m[3].str()), {number, static_cast<int>(m.position(2)) + 1}, true});
      continue;
    }
    size_t hash = commentStart(line);
    if (hash != std::string::npos) addComment(model, number, line.substr(hash));
    scanAssignments(line.substr(0, hash), number, 0, model);  // ENV a=b c=d, ARG, RUN X=1 cmd
  }
  return model;
}

SourceModel scanConfig(const std::string& path, const std::string& text) {
  SourceModel model = emptyModel(path, Language::Config);
  if (path.ends_with(".toml")) scanToml(text, model);
  else scanKeyValueLines(text, !path.ends_with(".json"), model);
  return model;
}

}  // namespace nccl_migrate::lint
