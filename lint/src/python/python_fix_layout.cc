// Python's side of laying out fixes: the project's line length, the helper's place, the
// rewritten call's line breaks.
#include "python/python_fix_layout.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>

#include "engine/toml.h"
#include "python/python_parse.h"

namespace nccl_migrate::lint {
namespace fs = std::filesystem;
namespace {

constexpr int kDefaultLineLength = 88;  // ruff's and black's

std::optional<std::string> readText(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::optional<int> positive(std::optional<int64_t> value) {
  if (!value || *value <= 0 || *value > 100000) return std::nullopt;
  return static_cast<int>(*value);
}

std::optional<int> fromToml(const fs::path& path, bool pyproject) {
  std::optional<std::string> text = readText(path);
  if (!text) return std::nullopt;
  toml::parse_result parsed = toml::parse(*text);
  if (!parsed) return std::nullopt;
  const toml::table& table = parsed.table();
  // ruff takes the nearest file that configures it, with its default where that file sets no
  // line length: the search ends there.
  if (!pyproject) return positive(table["line-length"].value<int64_t>()).value_or(kDefaultLineLength);
  if (table["tool"]["ruff"].is_table())
    return positive(table["tool"]["ruff"]["line-length"].value<int64_t>()).value_or(kDefaultLineLength);
  // black reads its keys with `-` and `_` alike (`line_length` in many projects).
  if (auto black = positive(table["tool"]["black"]["line-length"].value<int64_t>())) return black;
  return positive(table["tool"]["black"]["line_length"].value<int64_t>());
}

std::string trimmed(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r"), b = s.find_last_not_of(" \t\r");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// `max-line-length` (or `max_line_length`) in an INI file's [flake8] section.
std::optional<int> fromFlake8(const fs::path& path) {
  std::optional<std::string> text = readText(path);
  if (!text) return std::nullopt;
  std::istringstream in(*text);
  std::string line;
  bool inSection = false;
  while (std::getline(in, line)) {
    std::string t = trimmed(line);
    if (t.starts_with("[")) {
      inSection = t == "[flake8]";
      continue;
    }
    size_t eq = t.find_first_of("=:");
    if (!inSection || eq == std::string::npos) continue;
    std::string key = trimmed(t.substr(0, eq));
    if (key != "max-line-length" && key != "max_line_length") continue;
    try {
      return positive(std::stoll(trimmed(t.substr(eq + 1))));
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

std::optional<int> configuredIn(const fs::path& dir) {
  if (auto n = fromToml(dir / ".ruff.toml", false)) return n;
  if (auto n = fromToml(dir / "ruff.toml", false)) return n;
  if (auto n = fromToml(dir / "pyproject.toml", true)) return n;
  for (const char* ini : {"setup.cfg", "tox.ini", ".flake8"})
    if (auto n = fromFlake8(dir / ini)) return n;
  return std::nullopt;
}

size_t lineStart(const std::string& text, size_t at) {
  size_t nl = at == 0 ? std::string::npos : text.rfind('\n', at - 1);
  return nl == std::string::npos ? 0 : nl + 1;
}

size_t lineEnd(const std::string& text, size_t at) {
  size_t nl = text.find('\n', at);
  return nl == std::string::npos ? text.size() : nl;
}

// Columns as ruff counts them for ASCII and most text: one per code point.
size_t width(const std::string& s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

std::string_view typeOf(TSNode node) { return ts_node_type(node); }

bool isOpening(char c) { return c == '(' || c == '[' || c == '{'; }
bool isClosing(char c) { return c == ')' || c == ']' || c == '}'; }

// A statement ruff lays out as one: a simple statement, or the header of an if/elif/while up to
// its condition's end (the `:` follows). `parens` are the parentheses ruff adds around the value
// of an assignment, a return or a condition when it splits it, and drops when it joins it.
struct Statement {
  size_t begin = 0, end = 0;
  TSNode written;              // what the statement writes between begin and end
  std::vector<size_t> parens;  // offsets of both characters of each such pair
};

std::optional<Statement> statementAround(TSNode node) {
  for (; !ts_node_is_null(node); node = ts_node_parent(node)) {
    std::string_view type = typeOf(node);
    bool header = type == "if_statement" || type == "elif_clause" || type == "while_statement";
    if (type != "expression_statement" && type != "return_statement" && !header) continue;
    Statement s{ts_node_start_byte(node), ts_node_end_byte(node), node, {}};
    TSNode value = ts_node_named_child(node, 0);
    if (header) {
      value = ts_node_child_by_field_name(node, "condition", 9);
      if (ts_node_is_null(value)) return std::nullopt;
      s.end = ts_node_end_byte(value);
      s.written = value;
    } else if (!ts_node_is_null(value) && typeOf(value) == "assignment") {
      value = ts_node_child_by_field_name(value, "right", 5);
    } else if (type == "expression_statement") {
      value = TSNode{};
    }
    // Not around `yield` or `:=`, which need them there.
    TSNode inner = ts_node_is_null(value) ? value : ts_node_named_child(value, 0);
    if (!ts_node_is_null(value) && typeOf(value) == "parenthesized_expression" && !ts_node_is_null(inner) &&
        typeOf(inner) != "yield" && typeOf(inner) != "named_expression")
      s.parens = {ts_node_start_byte(value), ts_node_end_byte(value) - 1};
    return s;
  }
  return std::nullopt;
}

// Whether `node`'s subtree holds what the join leaves to ruff: a comment, a string over several
// lines, strings written one after another.
bool keepsLines(TSNode node, const std::string& text) {
  std::string_view type = typeOf(node);
  if (type == "comment" || type == "concatenated_string") return true;
  if (type == "string" && text.find('\n', ts_node_start_byte(node)) < ts_node_end_byte(node)) return true;
  for (uint32_t k = 0; k < ts_node_child_count(node); ++k)
    if (keepsLines(ts_node_child(node, k), text)) return true;
  return false;
}

// `text` over several lines written as ruff writes it on one: nothing after an opening bracket
// or before a closing one, one space elsewhere. nullopt where ruff keeps it split whatever its
// length: a magic trailing comma, a backslash continuation.
std::optional<std::string> flattened(const std::string& text) {
  std::string out;
  std::istringstream in(text);
  std::string line;
  bool first = true;
  while (std::getline(in, line)) {
    std::string piece = first ? line.substr(0, line.find_last_not_of(" \t\r") + 1) : trimmed(line);
    first = false;
    if (piece.empty()) continue;
    if (!out.empty() && out.back() == '\\') return std::nullopt;
    if (!out.empty() && out.back() == ',' && isClosing(piece.front())) return std::nullopt;
    if (!out.empty() && !isOpening(out.back()) && !isClosing(piece.front())) out += ' ';
    out += piece;
  }
  return out;
}

// `begin`..`end` of `text` with `edits` (inside it, in order) applied and the characters at
// `dropped` left out.
std::string rewritten(const std::string& text, size_t begin, size_t end, const std::vector<Edit>& edits,
                      const std::vector<size_t>& dropped) {
  std::string out;
  auto copy = [&](size_t from, size_t to) {
    for (size_t k = from; k < to; ++k)
      if (std::find(dropped.begin(), dropped.end(), k) == dropped.end()) out += text[k];
  };
  size_t at = begin;
  for (const Edit& e : edits) {
    copy(at, e.range.begin);
    out += e.replacement;
    at = e.range.end;
  }
  copy(at, end);
  return out;
}

// A statement ruff had split because a call in it was long, joined where the rewritten call makes
// it fit, as ruff joins it; one whose original would have fitted on one line was split by its
// author, and stays so. `edits` are in file order; those of a joined statement become one.
std::vector<Edit> joinShortenedStatements(const std::string& text, TSNode root, std::vector<Edit> edits,
                                          const std::vector<size_t>& calls, int lineLength) {
  std::vector<Edit> out;
  size_t next = 0;  // the first edit not yet in `out`
  for (size_t call : calls) {
    if (call < next) continue;
    TSNode node = ts_node_descendant_for_byte_range(root, edits[call].range.begin, edits[call].range.end);
    std::optional<Statement> s = statementAround(node);
    if (!s || text.find('\n', s->begin) >= s->end || keepsLines(s->written, text)) continue;
    size_t start = lineStart(text, s->begin), stop = lineEnd(text, s->end);
    std::string indent = text.substr(start, s->begin - start);
    std::string after = text.substr(s->end, stop - s->end);
    if (!trimmed(indent).empty() || (!trimmed(after).empty() && trimmed(after) != ":")) continue;
    size_t first = call, last = call;
    auto within = [&](const Edit& e) {  // an insertion at the statement's start goes before it
      return e.range.begin > s->begin || (e.range.begin == s->begin && e.range.end > s->begin);
    };
    while (first > next && within(edits[first - 1])) --first;
    while (last + 1 < edits.size() && edits[last + 1].range.begin < s->end) ++last;
    if (edits[first].range.begin < s->begin || edits[last].range.end > s->end) continue;
    std::vector<Edit> inside(edits.begin() + first, edits.begin() + last + 1);
    std::optional<std::string> was = flattened(rewritten(text, s->begin, s->end, {}, s->parens));
    std::optional<std::string> now = flattened(rewritten(text, s->begin, s->end, inside, s->parens));
    auto fits = [&](const std::string& line) {
      return width(indent + line + trimmed(after)) <= static_cast<size_t>(lineLength);
    };
    if (!was || !now || fits(*was) || !fits(*now)) continue;
    for (size_t k = next; k < first; ++k) out.push_back(edits[k]);
    out.push_back({{s->begin, s->end}, *now});
    next = last + 1;
  }
  for (size_t k = next; k < edits.size(); ++k) out.push_back(edits[k]);
  return out;
}

}  // namespace

int pythonLineLength(const fs::path& file) {
  static std::mutex mutex;
  static std::map<fs::path, int> known;  // by folder: a project's files share it
  std::error_code ec;
  fs::path dir = fs::absolute(file, ec).parent_path();
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = known.find(dir); it != known.end()) return it->second;
  int found = kDefaultLineLength;
  for (fs::path d = dir; !d.empty(); d = d.parent_path()) {
    if (auto n = configuredIn(d)) {
      found = *n;
      break;
    }
    if (d == d.root_path()) break;
  }
  known[dir] = found;
  return found;
}

Edit pythonDefinitionPlacement(const std::string& text, const std::string& definition, size_t firstUse) {
  size_t after = 0;  // where the module's header (comments, docstring, imports) ends
  bool header = false;
  if (PythonTree tree = parsePythonRegions(text, {})) {
    TSNode root = ts_tree_root_node(tree.get());
    uint32_t count = ts_node_named_child_count(root);
    bool first = true, onlyComments = true;
    for (uint32_t i = 0; i < count; ++i) {
      TSNode statement = ts_node_named_child(root, i);
      if (ts_node_start_byte(statement) >= firstUse) break;
      std::string_view type = typeOf(statement);
      bool comment = type == "comment";
      bool docstring = first && type == "expression_statement" && ts_node_named_child_count(statement) == 1 &&
                       typeOf(ts_node_named_child(statement, 0)) == "string";
      if (type == "import_statement" || type == "import_from_statement" || type == "future_import_statement" ||
          docstring || (comment && onlyComments)) {
        after = std::min(text.size(), lineEnd(text, ts_node_end_byte(statement)) + 1);
        header = true;
      }
      if (!comment) first = onlyComments = false;
    }
  }
  size_t next = after;  // blank lines after the header make way for the two around the function
  for (size_t k = after; k < text.size();) {
    size_t end = lineEnd(text, k);
    if (!trimmed(text.substr(k, end - k)).empty()) break;
    k = std::min(text.size(), end + 1);
    next = k;
  }
  std::string replacement;
  if (after > 0 && text[after - 1] != '\n') replacement += "\n";
  if (header) replacement += "\n\n";
  replacement += definition;
  if (next < text.size()) replacement += "\n\n";
  return {{after, next}, replacement};
}

std::vector<Edit> layOutPythonCalls(const std::string& text, std::vector<Edit> edits,
                                    const std::vector<std::string>& helpers, int lineLength) {
  PythonTree tree = parsePythonRegions(text, {});
  if (!tree) return edits;
  TSNode root = ts_tree_root_node(tree.get());
  std::sort(edits.begin(), edits.end(), [](const Edit& a, const Edit& b) { return a.range.begin < b.range.begin; });
  std::vector<Edit> out;
  std::vector<size_t> calls;  // which of `out` rewrote a call whole
  for (size_t i = 0; i < edits.size(); ++i) {
    const Edit& rename = edits[i];
    bool helper = std::find(helpers.begin(), helpers.end(), rename.replacement) != helpers.end();
    TSNode name = ts_node_descendant_for_byte_range(root, rename.range.begin, rename.range.end);
    TSNode call = ts_node_parent(name);
    if (!helper || ts_node_is_null(call) || typeOf(call) != "call" || typeOf(name) != "identifier" ||
        ts_node_start_byte(name) != rename.range.begin || ts_node_end_byte(name) != rename.range.end) {
      out.push_back(rename);
      continue;
    }
    TSNode arguments = ts_node_child_by_field_name(call, "arguments", 9);
    size_t callEnd = ts_node_end_byte(call);
    size_t last = i;  // the edits inside the call: the rename and what the fix cut from its arguments
    while (last + 1 < edits.size() && edits[last + 1].range.begin < callEnd) ++last;
    std::vector<std::string> kept;
    bool plain = !ts_node_is_null(arguments) && typeOf(arguments) == "argument_list" && edits[last].range.end <= callEnd;
    for (uint32_t k = 0; plain && k < ts_node_named_child_count(arguments); ++k) {
      TSNode arg = ts_node_named_child(arguments, k);
      size_t b = ts_node_start_byte(arg), e = ts_node_end_byte(arg);
      if (typeOf(arg) == "comment") plain = false;
      bool cut = false, touched = false;
      for (size_t j = i + 1; j <= last; ++j) {
        const Edit& edit = edits[j];
        if (edit.replacement.empty() && edit.range.begin <= b && e <= edit.range.end) cut = true;
        else if (edit.range.begin < e && b < edit.range.end) touched = true;
      }
      std::string argText = text.substr(b, e - b);
      if (touched || argText.find('\n') != std::string::npos) plain = false;
      if (!cut) kept.push_back(argText);
    }
    if (!plain) {
      for (size_t j = i; j <= last; ++j) out.push_back(edits[j]);
      i = last;
      continue;
    }
    std::string args;
    for (const std::string& a : kept) args += (args.empty() ? "" : ", ") + a;
    size_t callBegin = ts_node_start_byte(call);
    size_t start = lineStart(text, callBegin);
    std::string prefix = text.substr(start, callBegin - start);
    std::string suffix = text.substr(callEnd, lineEnd(text, callEnd) - callEnd);
    std::string flat = rename.replacement + "(" + args + ")";
    std::string written = flat;
    if (width(prefix + flat + suffix) > static_cast<size_t>(lineLength)) {
      // As ruff splits a call: its arguments on one line of their own where they fit, else one a
      // line, each with its comma.
      std::string indent = prefix.substr(0, prefix.find_first_not_of(" \t"));
      std::string inner = indent + "    ";
      if (kept.size() > 1 && width(inner + args) > static_cast<size_t>(lineLength)) {
        args.clear();
        for (const std::string& a : kept) args += (args.empty() ? "" : "\n" + inner) + a + ",";
      }
      written = rename.replacement + "(\n" + inner + args + "\n" + indent + ")";
    }
    calls.push_back(out.size());
    out.push_back({{callBegin, callEnd}, written});
    i = last;
  }
  return joinShortenedStatements(text, root, std::move(out), calls, lineLength);
}

}  // namespace nccl_migrate::lint
