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

#include "settings/settings_frontends.h"
#include "settings/setting_ranges.h"

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

// Where a line's code sits in the file, for the settings' ranges; none for text that is not
// the file's bytes (a TOML string's contents).
struct CodeSpan {
  size_t start = 0;   // the code's first byte in the file
  Range line;         // the whole line with its newline
  bool continued = false;
};

// Every `NAME=value` word of a shell command line: exports, `env X=1 cmd`, `X=1 cmd`.
void scanAssignments(const std::string& code, int line, int columnOffset, SourceModel& model,
                     const CodeSpan* span = nullptr) {
  static const std::regex kAssignment(R"((^|[\s;&|(`])([A-Za-z_][A-Za-z0-9_]*)=("[^"]*"|'[^']*'|[^\s;&|)`]*))");
  for (auto it = std::sregex_iterator(code.begin(), code.end(), kAssignment); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    int column = columnOffset + static_cast<int>(m.position(2)) + 1;
    Setting setting{m[2].str(), stripQuotes(m[3].str()), {line, column}, true};
    if (span) {
      size_t valueBegin = static_cast<size_t>(m.position(3)), valueEnd = valueBegin + static_cast<size_t>(m.length(3));
      Range word{span->start + static_cast<size_t>(m.position(2)), span->start + valueEnd};
      setting.statement = assignmentStatement(code, span->start, word, span->line, span->continued);
      Range value = unquotedRange(code, valueBegin, valueEnd);
      setting.valueRange = {span->start + value.begin, span->start + value.end};
    }
    model.settings.push_back(std::move(setting));
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

// Whether line `index` of a YAML or .env file can go alone and leave its block as it was in kind:
// it is a key or shell line, not a list item (`- X: 0` may hold more keys on the lines below, or
// be its list's only item, whose removal makes the list null), and another key or shell line
// stands at its indentation in the same block. Removing the only key of a mapping makes it null
// (an anchor merged with `<<:` then fails to load), and the only line of a block scalar
// (`run: |`) leaves an empty script.
bool hasSiblingLine(const std::vector<std::string>& lines, size_t index) {
  auto indentOf = [](const std::string& line) { return line.find_first_not_of(" \t"); };
  auto isItem = [&](const std::string& line) { return line.compare(indentOf(line), 2, "- ") == 0; };
  if (isItem(lines[index])) return false;  // an item may hold more keys, or be its list's only one
  size_t indent = indentOf(lines[index]);
  if (indent == 0) return true;  // a top-level key: the document stays a mapping or is empty
  auto sibling = [&](size_t i) {  // 1: a sibling, -1: the block ended, 0: look further
    size_t at = indentOf(lines[i]);
    if (at == std::string::npos || lines[i][at] == '#') return 0;
    if (at < indent) return -1;
    return at == indent && !isItem(lines[i]) ? 1 : 0;
  };
  for (size_t i = index; i-- > 0;) {
    if (int s = sibling(i)) {
      if (s > 0) return true;
      break;
    }
  }
  for (size_t i = index + 1; i < lines.size(); ++i) {
    if (int s = sibling(i)) return s > 0;
  }
  return false;
}

// Key/value lines of YAML, JSON and .env files, plus `NAME=value` words inside values (commands
// in YAML, `KEY=VALUE` list items) and Kubernetes-style `- name: X` / `value: Y` pairs.
// A JSON line cannot be removed on its own (the commas between members), so JSON settings
// offer only their values' ranges.
void scanKeyValueLines(const std::string& text, bool hashComments, SourceModel& model, bool removableLines) {
  static const std::regex kKeyValue(R"(^\s*-?\s*["']?([A-Za-z_][A-Za-z0-9_.\-]*)["']?\s*[:=]\s*(.*)$)");
  std::vector<std::string> lines = splitLines(text);
  LineSpans spans(text);
  std::string pendingName;
  for (size_t i = 0; i < lines.size(); ++i) {
    CodeSpan span{spans.start(i), spans.withNewline(i), spans.continued(i)};
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
      scanAssignments(line, number, 0, model, removableLines ? &span : nullptr);
      continue;
    }
    std::string key = m[1].str();
    std::string value = stripQuotes(m[2].str());
    int column = static_cast<int>(m.position(1)) + 1;
    Range raw = unquotedRange(line, static_cast<size_t>(m.position(2)), line.size());
    Range valueRange{span.start + raw.begin, span.start + raw.end};
    if (key == "value" && !pendingName.empty()) {
      // Its `- name:` line would be left without a value: no statement to remove alone.
      Setting setting{pendingName, value, {number, column}, true};
      setting.valueRange = valueRange;
      model.settings.push_back(std::move(setting));
      pendingName.clear();
    } else {
      Setting setting{key, value, {number, column}, false};
      setting.valueRange = valueRange;
      if (removableLines && !span.continued) setting.statement = span.line;
      model.settings.push_back(std::move(setting));
      pendingName = key == "name" ? value : "";
    }
    CodeSpan valueSpan{span.start + static_cast<size_t>(m.position(2)), span.line, span.continued};
    scanAssignments(m[2].str(), number, static_cast<int>(m.position(2)), model, removableLines ? &valueSpan : nullptr);
  }
  // A line goes alone only where its block keeps a line of its kind, and a shell block in a value
  // (`run: |`) keeps a command between `then` and `fi`.
  for (Setting& s : model.settings) {
    size_t index = static_cast<size_t>(s.where.line - 1);
    Range line = spans.withNewline(index);
    bool wholeLine = s.statement.begin == line.begin && s.statement.end == line.end && s.statement.end > s.statement.begin;
    if (wholeLine && (!hasSiblingLine(lines, index) || onlyCommandOfShellBlock(lines, index))) s.statement = {};
  }
}

// A TOML file's lines, for the ranges of its `key = value` lines.
struct TomlLines {
  std::vector<std::string> lines;
  LineSpans spans;
};

// `key = "value"` (or `key = 0`) alone on its line, the value written without escapes: the
// line is the statement and the value's bytes its range. Other forms (arrays, inline tables,
// escapes) get no ranges.
void tomlRanges(const TomlLines& file, const std::string& key, Setting& setting) {
  size_t index = static_cast<size_t>(setting.where.line) - 1;
  if (setting.where.line < 1 || index >= file.lines.size()) return;
  const std::string& line = file.lines[index];
  std::string code = line.substr(0, commentStart(line));
  size_t at = code.find_first_not_of(" \t");
  if (at == std::string::npos) return;
  char keyQuote = code[at] == '"' || code[at] == '\'' ? code[at] : 0;
  if (keyQuote) ++at;
  if (code.compare(at, key.size(), key) != 0) return;
  at += key.size();
  if (keyQuote && (at >= code.size() || code[at++] != keyQuote)) return;
  at = code.find_first_not_of(" \t", at);
  if (at == std::string::npos || code[at] != '=') return;
  Range value = unquotedRange(code, at + 1, code.size());
  if (code.substr(value.begin, value.end - value.begin) != setting.value) return;
  size_t start = file.spans.start(index);
  setting.valueRange = {start + value.begin, start + value.end};
  setting.statement = file.spans.withNewline(index);
}

void walkToml(const toml::node& node, const std::string& key, SourceModel& model, const TomlLines& file) {
  if (const toml::table* table = node.as_table()) {
    for (const auto& [k, v] : *table) walkToml(v, std::string(k.str()), model, file);
  } else if (const toml::array* array = node.as_array()) {
    for (const toml::node& v : *array) walkToml(v, key, model, file);
  } else if (const auto* str = node.as_string()) {
    const toml::source_region& src = node.source();
    Location where{static_cast<int>(src.begin.line), static_cast<int>(src.begin.column)};
    Setting setting{key, str->get(), where, false};
    tomlRanges(file, key, setting);
    model.settings.push_back(std::move(setting));
    scanAssignments(str->get(), where.line, where.column, model);
  } else if (node.is_integer() || node.is_boolean()) {
    const toml::source_region& src = node.source();
    std::ostringstream value;
    if (node.is_integer()) value << node.as_integer()->get();
    else value << (node.as_boolean()->get() ? "true" : "false");
    Setting setting{key, value.str(), {static_cast<int>(src.begin.line), static_cast<int>(src.begin.column)}, false};
    tomlRanges(file, key, setting);
    model.settings.push_back(std::move(setting));
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
    scanKeyValueLines(text, true, model, true);
    return;
  }
  walkToml(parsed.table(), "", model, TomlLines{lines, LineSpans(text)});
}

}  // namespace

SourceModel scanShell(const std::string& path, const std::string& text) {
  SourceModel model = emptyModel(path, Language::Shell);
  std::vector<std::string> lines = splitLines(text);
  LineSpans spans(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    int number = static_cast<int>(i) + 1;
    const std::string& line = lines[i];
    if (line.starts_with("#SBATCH")) scanSbatchExport(line, number, model);
    size_t hash = commentStart(line);
    if (hash != std::string::npos) addComment(model, number, line.substr(hash));
    CodeSpan span{spans.start(i), spans.withNewline(i), spans.continued(i)};
    size_t first = model.settings.size();
    scanAssignments(line.substr(0, hash), number, 0, model, &span);
    for (size_t k = first; k < model.settings.size(); ++k) {
      Setting& s = model.settings[k];
      bool wholeLine = s.statement.begin == span.line.begin && s.statement.end == span.line.end;
      if (wholeLine && onlyCommandOfShellBlock(lines, i)) s.statement = {};  // `then` ... `fi` left empty
    }
  }
  return model;
}

SourceModel scanDockerfile(const std::string& path, const std::string& text) {
  SourceModel model = emptyModel(path, Language::Dockerfile);
  static const std::regex kEnvPair(R"(^\s*(ENV|ARG)\s+([A-Za-z_][A-Za-z0-9_]*)\s+([^=].*)$)", std::regex::icase);
  std::vector<std::string> lines = splitLines(text);
  LineSpans spans(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    int number = static_cast<int>(i) + 1;
    const std::string& line = lines[i];
    CodeSpan span{spans.start(i), spans.withNewline(i), spans.continued(i)};
    size_t first = line.find_first_not_of(" \t");
    if (first != std::string::npos && line[first] == '#') {
      addComment(model, number, line.substr(first));
      continue;
    }
    std::smatch m;
    if (std::regex_match(line, m, kEnvPair)) {  // legacy `ENV NAME value` form: the line sets one variable
      Setting setting{m[2].str(), stripQuotes(m[3].str()), {number, static_cast<int>(m.position(2)) + 1}, true};
      if (!span.continued) setting.statement = span.line;
      Range raw = unquotedRange(line, static_cast<size_t>(m.position(3)), line.size());
      setting.valueRange = {span.start + raw.begin, span.start + raw.end};
      model.settings.push_back(std::move(setting));
      continue;
    }
    size_t hash = commentStart(line);
    if (hash != std::string::npos) addComment(model, number, line.substr(hash));
    scanAssignments(line.substr(0, hash), number, 0, model, &span);  // ENV a=b c=d, ARG, RUN X=1 cmd
  }
  return model;
}

SourceModel scanConfig(const std::string& path, const std::string& text) {
  SourceModel model = emptyModel(path, Language::Config);
  if (path.ends_with(".toml")) scanToml(text, model);
  else scanKeyValueLines(text, !path.ends_with(".json"), model, !path.ends_with(".json"));
  return model;
}

}  // namespace nccl_migrate::lint
