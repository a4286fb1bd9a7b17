// Jupyter notebooks: code cells joined in order and read by the Python frontend. Magics and shell
// escapes (`%`, `!`) are blanked so they do not turn the rest of a cell into syntax errors.
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

std::string blankMagics(const std::string& cell) {
  std::string out;
  size_t start = 0;
  while (start < cell.size()) {
    size_t end = cell.find('\n', start);
    if (end == std::string::npos) end = cell.size();
    std::string line = cell.substr(start, end - start);
    size_t first = line.find_first_not_of(" \t");
    if (first != std::string::npos && (line[first] == '%' || line[first] == '!')) line = "#" + line;
    out += line + "\n";
    start = end + 1;
  }
  return out;
}

}  // namespace

SourceModel parseNotebook(const std::string& path, const std::string& text, const NameEquivalences& names) {
  llvm::Expected<llvm::json::Value> json = llvm::json::parse(text);
  if (!json) {
    std::string message = llvm::toString(json.takeError());
    throw std::runtime_error("not notebook JSON (" + message + ")");
  }
  const llvm::json::Object* root = json->getAsObject();
  const llvm::json::Array* cells = root ? root->getArray("cells") : nullptr;
  if (!cells) throw std::runtime_error("not a notebook: no \"cells\" list");
  std::string code;
  for (const llvm::json::Value& cell : *cells) {
    const llvm::json::Object* c = cell.getAsObject();
    if (!c || c->getString("cell_type").value_or("") != "code") continue;
    code += blankMagics(cellSource(c->get("source")));
  }
  return parsePython(path, code, names);
}

}  // namespace nccl_migrate::lint
