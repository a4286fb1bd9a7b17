// C/C++/CUDA's side of laying out fixes: the helper's place, read from the preprocessor lines.
#include "cpp/cpp_fix_layout.h"

#include <cctype>
#include <vector>

namespace nccl_migrate::lint {
namespace {

struct Line {
  size_t begin, end;  // end: past its newline
  int depth;          // #if blocks open at its start
  std::string directive;
};

// The directive a line holds (`include`, `if`, `endif`, ...), or "". Lines continued with `\`
// and block comments around a directive are rare enough at the top of a file to be read plainly.
std::string directiveOf(const std::string& line) {
  size_t k = line.find_first_not_of(" \t");
  if (k == std::string::npos || line[k] != '#') return "";
  k = line.find_first_not_of(" \t", k + 1);
  if (k == std::string::npos) return "";
  size_t e = k;
  while (e < line.size() && (std::isalpha(static_cast<unsigned char>(line[e])) != 0)) ++e;
  return line.substr(k, e - k);
}

bool blank(const std::string& text, const Line& line) {
  return text.find_first_not_of(" \t\r\n", line.begin) >= line.end;
}

}  // namespace

Edit cppDefinitionPlacement(const std::string& text, const std::string& definition, size_t firstUse) {
  std::vector<Line> lines;
  int depth = 0;
  for (size_t at = 0; at < text.size();) {
    size_t nl = text.find('\n', at);
    size_t end = nl == std::string::npos ? text.size() : nl + 1;
    std::string directive = directiveOf(text.substr(at, end - at));
    lines.push_back({at, end, depth, directive});
    if (directive == "if" || directive == "ifdef" || directive == "ifndef") ++depth;
    else if (directive == "endif" && depth > 0) --depth;
    at = end;
  }
  int base = 0;  // the depth at the first use: an include guard's block, or none
  for (const Line& line : lines)
    if (line.begin <= firstUse) base = line.depth;
  size_t lastInclude = lines.size();
  for (size_t i = 0; i < lines.size() && lines[i].begin < firstUse; ++i)
    if (lines[i].directive == "include" || lines[i].directive == "pragma") lastInclude = i;
  size_t after = 0;
  if (lastInclude < lines.size()) {
    size_t i = lastInclude;
    while (i + 1 < lines.size() && lines[i + 1].depth > base) ++i;  // out of the block it stands in
    after = lines[i].end;
  }
  size_t next = after;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].begin < after) continue;
    if (!blank(text, lines[i])) break;
    next = lines[i].end;
  }
  std::string replacement;
  if (after > 0 && text[after - 1] != '\n') replacement += "\n";
  if (after > 0) replacement += "\n";
  replacement += definition;
  if (next < text.size()) replacement += "\n";
  return {{after, next}, replacement};
}

}  // namespace nccl_migrate::lint
