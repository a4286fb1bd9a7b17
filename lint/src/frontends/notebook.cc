// Jupyter notebooks: code cells joined in order for the Python frontend, with where each cell
// starts so findings can name their cell. Magics and shell escapes (`%`, `!`) are blanked so they
// do not turn the rest of a cell into syntax errors.
#include <algorithm>
#include <stdexcept>
#include <string>

#include <llvm/Support/JSON.h>

#include "frontends.h"

namespace nccl_migrate::lint {
namespace {

std::string cellSource(const llvm::json::Value* source) {
  if (!source) return "";
  if (auto s = source->getAsString()) return s->str();
  std::string joined;
  if (const llvm::json::Array* lines = source->getAsArray()) {
    for (const llvm::json::Value& line : *lines) {
      if (auto s = line.getAsString()) joined += s->str();
    }
  }
  return joined;
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
  llvm::Expected<llvm::json::Value> json = llvm::json::parse(text);
  if (!json) {
    std::string message = llvm::toString(json.takeError());
    throw std::runtime_error("not notebook JSON (" + message + ")");
  }
  const llvm::json::Object* root = json->getAsObject();
  const llvm::json::Array* cells = root ? root->getArray("cells") : nullptr;
  if (!cells) throw std::runtime_error("not a notebook: no \"cells\" list");
  NotebookCode out;
  int nextLine = 1;
  for (size_t i = 0; i < cells->size(); ++i) {
    const llvm::json::Object* c = (*cells)[i].getAsObject();
    if (!c || c->getString("cell_type").value_or("") != "code") continue;
    int lines = appendBlankingMagics(cellSource(c->get("source")), out.code);
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
