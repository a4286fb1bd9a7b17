// Jupyter notebooks: code cells joined in order for the Python frontend, with where each cell
// starts so findings can name their cell. Magics and shell escapes (`%`, `!`) are blanked so they
// do not turn the rest of a cell into syntax errors.
#include <algorithm>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "python/python_frontend.h"

namespace nccl_migrate::lint {
namespace {

using Json = nlohmann::json;

// A cell's source: one string, or a list of lines (anything else: none).
std::string cellSource(const Json& cell) {
  auto source = cell.find("source");
  if (source == cell.end()) return "";
  if (source->is_string()) return source->get<std::string>();
  std::string joined;
  if (source->is_array()) {
    for (const Json& line : *source) {
      if (line.is_string()) joined += line.get_ref<const std::string&>();
    }
  }
  return joined;
}

bool isCodeCell(const Json& cell) {
  if (!cell.is_object()) return false;
  auto type = cell.find("cell_type");
  return type != cell.end() && type->is_string() && type->get_ref<const std::string&>() == "code";
}

// The cell's lines, each ending in a newline, with magics commented out; returns the line count.
int appendBlankingMagics(const std::string& cell, std::string& out) {
  int lines = 0;
  size_t start = 0;
  while (start < cell.size()) {
    size_t end = cell.find('\n', start);
    if (end == std::string::npos) end = cell.size();
    std::string line = cell.substr(start, end - start);
    size_t first = line.find_first_not_of(" \t");
    if (first != std::string::npos && (line[first] == '%' || line[first] == '!')) line = "#" + line;
    out += line + "\n";
    ++lines;
    start = end + 1;
  }
  return lines;
}

}  // namespace

NotebookCode notebookCode(const std::string& text) {
  Json json;
  try {
    json = Json::parse(text);
  } catch (const Json::parse_error& e) {
    throw std::runtime_error(std::string("not notebook JSON (") + e.what() + ")");
  }
  auto cells = json.is_object() ? json.find("cells") : json.end();
  if (cells == json.end() || !cells->is_array()) throw std::runtime_error("not a notebook: no \"cells\" list");
  NotebookCode out;
  int nextLine = 1;
  for (size_t i = 0; i < cells->size(); ++i) {
    const Json& cell = (*cells)[i];
    if (!isCodeCell(cell)) continue;
    int lines = appendBlankingMagics(cellSource(cell), out.code);
    if (lines == 0) continue;
    out.cells.push_back({static_cast<int>(i) + 1, nextLine});
    nextLine += lines;
  }
  return out;
}

Location NotebookCode::locate(Location joined) const {
  auto after = std::upper_bound(cells.begin(), cells.end(), joined.line,
                                [](int line, const Cell& cell) { return line < cell.firstLine; });
  if (after == cells.begin()) return joined;
  const Cell& cell = *(after - 1);
  return {joined.line - cell.firstLine + 1, joined.column, cell.number};
}

}  // namespace nccl_migrate::lint
