// Text scan for aliases (see cpp_aliases.h): each declaration is read up to its ';', bounded.
#include "cpp/cpp_aliases.h"

#include <algorithm>
#include <cctype>

namespace nccl_migrate::lint {
namespace {

constexpr size_t kMaxDeclaration = 512;

bool isIdentifierByte(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Whether the declaration text ends in the class itself (`a::ProcessGroupNCCL`, spaces allowed),
// not in a member of it.
bool endsWithClass(std::string_view declaration, std::string_view className) {
  while (!declaration.empty() && std::isspace(static_cast<unsigned char>(declaration.back()))) declaration.remove_suffix(1);
  if (!declaration.ends_with(className)) return false;
  size_t before = declaration.size() - className.size();
  return before == 0 || !isIdentifierByte(declaration[before - 1]);
}

std::string_view identifierAt(std::string_view text, size_t at) {
  size_t end = at;
  while (end < text.size() && isIdentifierByte(text[end])) ++end;
  return text.substr(at, end - at);
}

size_t skipSpaces(std::string_view text, size_t at) {
  while (at < text.size() && std::isspace(static_cast<unsigned char>(text[at]))) ++at;
  return at;
}

// `using NAME = ...;`
void usingAliases(std::string_view source, std::string_view className, std::set<std::string>& out) {
  for (size_t at = source.find("using"); at != std::string_view::npos; at = source.find("using", at + 5)) {
    if ((at > 0 && isIdentifierByte(source[at - 1])) || (at + 5 < source.size() && isIdentifierByte(source[at + 5]))) continue;
    size_t nameAt = skipSpaces(source, at + 5);
    std::string_view name = identifierAt(source, nameAt);
    if (name.empty() || name == "namespace") continue;
    size_t eq = skipSpaces(source, nameAt + name.size());
    if (eq >= source.size() || source[eq] != '=') continue;
    size_t semicolon = source.find(';', eq);
    if (semicolon == std::string_view::npos || semicolon - eq > kMaxDeclaration) continue;
    if (endsWithClass(source.substr(eq + 1, semicolon - eq - 1), className)) out.insert(std::string(name));
  }
}

// `typedef ... CLASS NAME;`
void typedefAliases(std::string_view source, std::string_view className, std::set<std::string>& out) {
  for (size_t at = source.find("typedef"); at != std::string_view::npos; at = source.find("typedef", at + 7)) {
    if ((at > 0 && isIdentifierByte(source[at - 1])) || (at + 7 < source.size() && isIdentifierByte(source[at + 7]))) continue;
    size_t semicolon = source.find(';', at);
    if (semicolon == std::string_view::npos || semicolon - at > kMaxDeclaration) continue;
    std::string_view declaration = source.substr(at + 7, semicolon - at - 7);
    while (!declaration.empty() && std::isspace(static_cast<unsigned char>(declaration.back()))) declaration.remove_suffix(1);
    size_t nameStart = declaration.size();
    while (nameStart > 0 && isIdentifierByte(declaration[nameStart - 1])) --nameStart;
    if (nameStart == declaration.size()) continue;
    if (endsWithClass(declaration.substr(0, nameStart), className)) out.insert(std::string(declaration.substr(nameStart)));
  }
}

}  // namespace

std::set<std::string> aliasesOf(std::string_view source, std::string_view className) {
  std::set<std::string> out;
  if (source.find(className) == std::string_view::npos) return out;
  usingAliases(source, className, out);
  typedefAliases(source, className, out);
  return out;
}

bool isCppHeader(std::string_view filename) {
  for (std::string_view ext : {".h", ".hh", ".hpp", ".hxx", ".cuh", ".inl"})
    if (filename.ends_with(ext)) return true;
  return false;
}

}  // namespace nccl_migrate::lint
