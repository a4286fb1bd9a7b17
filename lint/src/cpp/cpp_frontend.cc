// C/C++/CUDA frontend, tier 1: Clang's raw lexer. It needs no headers and no compile database,
// reads every preprocessor branch torch 2.15 may compile (torch_version_branches.h), and skips
// comments and string contents by construction.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cpp/cpp_module.h"
#include "cpp/cpp_tokens.h"
#include "cpp/torch_version_branches.h"

namespace nccl_migrate::lint {
namespace {

// How far a pattern may look ahead from its first token. Real casts, setenv calls and class heads
// are far shorter; the bound keeps a file of repeated openers (`setenv(setenv(...`) linear.
constexpr size_t kMaxLookahead = 256;

constexpr const char* kLegacyClass = "c10d::ProcessGroupNCCL";

const std::unordered_set<std::string> kCastNames = {
    "dynamic_cast", "static_cast", "reinterpret_cast",
    "dynamic_pointer_cast", "static_pointer_cast",
    "dynamic_intrusive_pointer_cast", "static_intrusive_pointer_cast",
};

// Functions that construct the class named by their template argument.
const std::unordered_set<std::string> kFactoryNames = {"make_intrusive", "make_shared", "make_unique"};

class CppScanner {
 public:
  CppScanner(std::vector<Tok> tokens, SourceModel& model) : toks_(std::move(tokens)), model_(model) {}

  // Names a header of the tree declared (aliases), known before this file's own.
  void seed(const std::unordered_map<std::string, std::string>& typeAliases,
            const std::unordered_map<std::string, std::string>& namespaceAliases,
            const std::unordered_set<std::string>& legacySubclasses) {
    typeAliases_.insert(typeAliases.begin(), typeAliases.end());
    namespaceAliases_.insert(namespaceAliases.begin(), namespaceAliases.end());
    legacySubclasses_.insert(legacySubclasses.begin(), legacySubclasses.end());
  }

  // Only the names a file declares, for a header included by the linted file.
  void collectDeclarations() {
    dropComments(false);
    collectNamespaceFacts();
  }
  const std::unordered_map<std::string, std::string>& typeAliases() const { return typeAliases_; }
  const std::unordered_map<std::string, std::string>& namespaceAliases() const { return namespaceAliases_; }
  const std::unordered_set<std::string>& legacySubclasses() const { return legacySubclasses_; }

  // `#include "a/b.h"` and `#include <a/b.h>`, as written.
  std::vector<std::string> includes() const {
    std::vector<std::string> out;
    for (size_t i = 0; i + 2 < toks_.size(); ++i) {
      if (!isPunct(i, "#") || !isIdent(i + 1, "include") || toks_[i + 2].where.line != toks_[i].where.line) continue;
      if (toks_[i + 2].kind == clang::tok::string_literal) {
        out.push_back(unquote(toks_[i + 2].text));
      } else if (isPunct(i + 2, "<")) {
        std::string name;
        for (size_t j = i + 3; j < toks_.size() && !isPunct(j, ">") && toks_[j].where.line == toks_[i].where.line; ++j)
          name += toks_[j].text;
        out.push_back(name);
      }
    }
    return out;
  }

  void scan() {
    dropComments(true);
    collectNamespaceFacts();
    for (size_t i = 0; i < toks_.size(); ++i) {
      const Tok& t = toks_[i];
      if (t.kind == clang::tok::string_literal) {
        model_.strings.push_back({unquote(t.text), t.where});
        continue;
      }
      if (isPunct(i, "(")) onCStyleCast(i);
      if (t.kind != clang::tok::raw_identifier) continue;
      if ((t.text == "setenv" || t.text == "putenv" || t.text == "_putenv") && isPunct(i + 1, "(")) onSetenv(i);
      if (kCastNames.contains(t.text) && isPunct(i + 1, "<")) onCast(i);
      else if (kFactoryNames.contains(t.text) && isPunct(i + 1, "<")) onFactory(i);
      else if (t.text == "new") onNew(i);
    }
  }

 private:
  // Comments only feed suppressions; token patterns must see through them.
  void dropComments(bool keepForSuppressions) {
    std::vector<Tok> code;
    code.reserve(toks_.size());
    for (Tok& t : toks_) {
      if (t.kind != clang::tok::comment) code.push_back(std::move(t));
      else if (keepForSuppressions) onComment(t);
    }
    toks_ = std::move(code);
  }

  bool isPunct(size_t i, std::string_view p) const {
    return i < toks_.size() && toks_[i].kind != clang::tok::raw_identifier && toks_[i].text == p;
  }
  bool isIdent(size_t i, std::string_view name) const {
    return i < toks_.size() && toks_[i].kind == clang::tok::raw_identifier && toks_[i].text == name;
  }

  // A comment spanning lines is recorded on each of them, so `NOLINT` works wherever it sits.
  void onComment(const Tok& t) {
    int line = t.where.line;
    size_t start = 0;
    while (start <= t.text.size()) {
      size_t end = t.text.find('\n', start);
      if (end == std::string::npos) end = t.text.size();
      model_.comments.push_back({line++, t.text.substr(start, end - start)});
      start = end + 1;
    }
  }

  // setenv("NAME", "value", 1) and putenv("NAME=value"): string literal arguments only.
  void onSetenv(size_t i) {
    const Tok& callee = toks_[i];
    // The first string literal of each argument; arguments are split at top-level commas.
    std::vector<std::string> literals(1);
    int depth = 0;
    for (size_t j = i + 2; j < std::min(toks_.size(), i + kMaxLookahead) && !isPunct(j, ";"); ++j) {
      if (isPunct(j, "(")) ++depth;
      else if (isPunct(j, ")") && depth-- == 0) break;
      else if (isPunct(j, ",") && depth == 0) literals.emplace_back();
      else if (toks_[j].kind == clang::tok::string_literal && literals.back().empty()) literals.back() = unquote(toks_[j].text);
    }
    model_.calls.push_back({callee.text, callee.text, callee.where, {}, 0});
    if (callee.text == "setenv" && literals.size() >= 2 && !literals[0].empty()) {
      model_.settings.push_back({literals[0], literals[1], callee.where, true});
    } else if (callee.text != "setenv" && !literals.empty()) {
      size_t eq = literals[0].find('=');
      if (eq != std::string::npos && eq > 0) {
        model_.settings.push_back({literals[0].substr(0, eq), literals[0].substr(eq + 1), callee.where, true});
      }
    }
  }

  // "text" -> text; prefixes (u8, L, R) and raw-string delimiters are dropped.
  static std::string unquote(const std::string& literal) {
    size_t open = literal.find('"');
    size_t close = literal.rfind('"');
    if (open == std::string::npos || close <= open) return "";
    std::string body = literal.substr(open + 1, close - open - 1);
    if (open > 0 && literal[open - 1] == 'R') {
      size_t paren = body.find('(');
      size_t last = body.rfind(')');
      if (paren != std::string::npos && last != std::string::npos && last > paren) body = body.substr(paren + 1, last - paren - 1);
    }
    return body;
  }

  // Namespace context that decides what an unqualified ProcessGroupNCCL means.
  void collectNamespaceFacts() {
    for (size_t i = 0; i + 2 < toks_.size(); ++i) {
      if (isIdent(i, "using") && isIdent(i + 1, "namespace") && isIdent(i + 2, "c10d")) usesC10d_ = true;
      if (isIdent(i, "namespace") && isIdent(i + 1, "c10d") && isPunct(i + 2, "{")) usesC10d_ = true;
      if (isIdent(i, "namespace") && toks_[i + 1].kind == clang::tok::raw_identifier && isPunct(i + 2, "=")) {
        size_t end = i + 3;
        std::string target = qualifiedNameAt(end);
        if (!target.empty()) namespaceAliases_[toks_[i + 1].text] = target;
      }
      if (isIdent(i, "using") && toks_[i + 1].kind == clang::tok::raw_identifier && isPunct(i + 2, "=")) {
        size_t end = i + 3;
        while (isIdent(end, "typename") || isIdent(end, "class") || isIdent(end, "struct")) ++end;
        std::string target = qualifiedNameAt(end);
        if (!target.empty() && !isPunct(end, "<")) typeAliases_[toks_[i + 1].text] = target;
      }
      if (isIdent(i, "typedef")) onTypedef(i);
      if ((isIdent(i, "class") || isIdent(i, "struct")) && isIdent(i + 1, "ProcessGroupNCCL") && !usesC10d_) {
        definesOwnLegacyName_ = true;
      }
      if (isIdent(i, "class") || isIdent(i, "struct")) collectLegacySubclass(i);
    }
  }

  // Reads `a :: b :: C` starting at i (a leading `::` allowed); advances i past it.
  std::string qualifiedNameAt(size_t& i) const {
    std::string name;
    if (isPunct(i, "::")) ++i;
    while (i < toks_.size() && toks_[i].kind == clang::tok::raw_identifier) {
      name += toks_[i].text;
      if (!isPunct(i + 1, "::")) { ++i; break; }
      name += "::";
      i += 2;
    }
    return resolve(name);
  }

  // `typedef a::B C;` (also `typedef class a::B C;`): C stands for a::B.
  void onTypedef(size_t i) {
    size_t j = i + 1;
    while (isIdent(j, "class") || isIdent(j, "struct") || isIdent(j, "typename")) ++j;
    std::string target = qualifiedNameAt(j);
    if (!target.empty() && j < toks_.size() && toks_[j].kind == clang::tok::raw_identifier && isPunct(j + 1, ";")) {
      typeAliases_[toks_[j].text] = target;
    }
  }

  std::string resolve(const std::string& name) const {
    if (name.empty()) return name;
    // A type alias declared in this file (the raw lexer sees no headers, so only this file's).
    if (name.find("::") == std::string::npos) {
      if (auto it = typeAliases_.find(name); it != typeAliases_.end()) return it->second;
    }
    size_t sep = name.find("::");
    std::string head = name.substr(0, sep);
    if (auto it = namespaceAliases_.find(head); it != namespaceAliases_.end()) {
      return it->second + (sep == std::string::npos ? "" : name.substr(sep));
    }
    if (sep == std::string::npos && usesC10d_ && !definesOwnLegacyName_) return "c10d::" + name;
    return name;
  }

  void onCast(size_t i) {
    const std::string& castName = toks_[i].text;
    size_t j = i + 2;
    while (isIdent(j, "const") || isIdent(j, "volatile") || isIdent(j, "class") || isIdent(j, "struct")) ++j;
    Location where = j < toks_.size() ? toks_[j].where : toks_[i].where;
    std::string spelled;
    for (size_t k = j; k < std::min(toks_.size(), j + kMaxLookahead) && !isPunct(k, "*") && !isPunct(k, "&") &&
                       !isPunct(k, ">");
         ++k) {
      spelled += toks_[k].text;
    }
    std::string target = qualifiedNameAt(j);
    if (target.empty()) return;
    auto kind = castName.starts_with("dynamic") ? TypeCheck::Kind::CheckedCast : TypeCheck::Kind::UncheckedCast;
    TypeCheck check{kind, target, castName + "<" + spelled + ">", where};
    if (legacySubclasses_.contains(target)) {
      check.qualifiedName = kLegacyClass;
      check.downcastTo = target;
    }
    bool pointer = castName.ends_with("pointer_cast");
    while (isPunct(j, "*") || isPunct(j, "&") || isPunct(j, "&&") || isIdent(j, "const") || isIdent(j, "volatile")) {
      pointer |= isPunct(j, "*");
      ++j;
    }
    size_t close = isPunct(j, ">") && isPunct(j + 1, "(") ? matching(j + 1) : kNone;
    // Over a pointer already checked against the legacy class (what NM201's fix writes), the
    // cast reinterprets only a legacy object: the inner cast is the one to report.
    if (close != kNone && !castName.starts_with("dynamic") && checkedAgainstLegacy(j + 2)) return;
    if (close != kNone) {
      size_t first = calleeStart(i);
      check.callee = {toks_[first].begin, toks_[j + 1].begin};
      check.castName = {toks_[i].begin, toks_[i].end};
      check.operand = {toks_[j + 1].end, toks_[close].begin};
      check.operandIsObjectPointer = isObjectPointer(j + 2, close);
      check.toPointer = pointer && !castName.ends_with("pointer_cast");
      if (pointer && !castAgainInStatement(close + 1, spelled.substr(spelled.rfind(':') + 1))) markNullTest(check, first, close);
    }
    model_.typeChecks.push_back(std::move(check));
  }

  // Whether the operand in tokens [begin, end) ends with a call that yields an object's pointer:
  // `x.get()`, `x->get()`, `pg.getBackend(...)`, `pg.getDefaultBackend()`.
  bool isObjectPointer(size_t begin, size_t end) const {
    if (end <= begin + 2 || !isPunct(end - 1, ")")) return false;
    int depth = 0;
    size_t open = end - 1;
    for (size_t k = end; k-- > begin;) {
      if (isPunct(k, ")")) ++depth;
      else if (isPunct(k, "(") && --depth == 0) {
        open = k;
        break;
      }
    }
    if (depth != 0 || open <= begin) return false;
    const auto& name = toks_[open - 1].text;
    if (name == "getBackend" || name == "getDefaultBackend") return true;
    return name == "get" && open == end - 2 && open >= begin + 2 && (isPunct(open - 2, ".") || isPunct(open - 2, "->"));
  }

  // `(T*)expr` where T is the legacy class or a subclass of it declared in the tree, as in
  // `(Hack*)(void*)pg.getBackend(...).get()`: a reinterpretation no named-cast pattern sees.
  void onCStyleCast(size_t i) {
    if (i > 0 && ((toks_[i - 1].kind == clang::tok::raw_identifier && toks_[i - 1].text != "return") ||
                  isPunct(i - 1, ")") || isPunct(i - 1, "]") || isPunct(i - 1, ">"))) {
      return;  // a call, a declaration's parameter list, sizeof(...), a template's argument
    }
    size_t j = i + 1;
    while (isIdent(j, "const") || isIdent(j, "class") || isIdent(j, "struct")) ++j;
    if (j >= toks_.size() || (toks_[j].kind != clang::tok::raw_identifier && !isPunct(j, "::"))) return;
    size_t nameBegin = j;
    std::string target = qualifiedNameAt(j);
    bool subclass = legacySubclasses_.contains(target);
    if (!isPunct(j, "*") || (target != kLegacyClass && !subclass)) return;
    size_t nameEnd = j;
    while (isPunct(j, "*") || isIdent(j, "const")) ++j;
    if (!isPunct(j, ")") || !startsExpression(j + 1)) return;
    size_t close = j;
    size_t operand = close + 1;
    std::string spelled = "(" + spelledBetween(nameBegin, nameEnd) + "*)";
    for (size_t hop = voidPointerCastEnd(operand); hop != kNone; hop = voidPointerCastEnd(operand)) {
      spelled += "(void*)";
      operand = hop + 1;
    }
    if (checkedAgainstLegacy(operand)) return;
    TypeCheck check{TypeCheck::Kind::UncheckedCast, kLegacyClass, spelled, toks_[nameBegin].where};
    if (subclass) check.downcastTo = target;
    check.toPointer = true;
    check.callee = {toks_[i].begin, toks_[close].end};
    size_t last = postfixExpressionEnd(operand);
    if (last != kNone) check.operand = {toks_[operand].begin, toks_[last].end};
    check.operandIsObjectPointer = last != kNone && isObjectPointer(operand, last + 1);
    model_.typeChecks.push_back(std::move(check));
  }

  static constexpr size_t kNone = static_cast<size_t>(-1);

  // `dynamic_cast<c10d::ProcessGroupNCCL*>(` at k.
  bool checkedAgainstLegacy(size_t k) const {
    if (isPunct(k, "::")) ++k;
    if (!isIdent(k, "dynamic_cast") || !isPunct(k + 1, "<")) return false;
    size_t j = k + 2;
    return qualifiedNameAt(j) == kLegacyClass && isPunct(j, "*");
  }

  // The parenthesis closing the one at `open`, or kNone (a statement ends first, or too far).
  size_t matching(size_t open) const {
    int depth = 0;
    for (size_t k = open; k < std::min(toks_.size(), open + kMaxLookahead); ++k) {
      if (isPunct(k, "(")) ++depth;
      else if (isPunct(k, ")") && --depth == 0) return k;
      else if (isPunct(k, ";") || isPunct(k, "{") || isPunct(k, "}")) return kNone;
    }
    return kNone;
  }

  // The first token of the callee whose name is at `i`, its qualifiers included (`std::`, `::`).
  size_t calleeStart(size_t i) const {
    while (i >= 2 && isPunct(i - 1, "::") && toks_[i - 2].kind == clang::tok::raw_identifier) i -= 2;
    if (i >= 1 && isPunct(i - 1, "::")) --i;
    return i;
  }

  bool startsExpression(size_t k) const {
    if (k >= toks_.size()) return false;
    return toks_[k].kind == clang::tok::raw_identifier || isPunct(k, "(") || isPunct(k, "::") || isPunct(k, "*") ||
           isPunct(k, "&");
  }

  // `(void*)` or `(const void*)` at k: the index of its `)`, else kNone.
  size_t voidPointerCastEnd(size_t k) const {
    if (!isPunct(k, "(")) return kNone;
    size_t j = k + 1;
    if (isIdent(j, "const")) ++j;
    if (!isIdent(j, "void") || !isPunct(j + 1, "*") || !isPunct(j + 2, ")")) return kNone;
    return j + 2;
  }

  // The last token of the postfix expression starting at k (`a::b.c(d)->e[f]`, `(x)`), or kNone
  // where its extent is not plain to the lexer (template arguments, operators).
  size_t postfixExpressionEnd(size_t k) const {
    size_t last = kNone;
    if (isPunct(k, "(")) {
      last = matching(k);
    } else {
      size_t j = k;
      if (isPunct(j, "::")) ++j;
      while (j < toks_.size() && toks_[j].kind == clang::tok::raw_identifier) {
        last = j;
        if (!isPunct(j + 1, "::")) break;
        j += 2;
      }
    }
    while (last != kNone && last + 1 < toks_.size()) {
      size_t next = last + 1;
      if ((isPunct(next, ".") || isPunct(next, "->")) && next + 1 < toks_.size() &&
          toks_[next + 1].kind == clang::tok::raw_identifier) {
        last = next + 1;
      } else if (isPunct(next, "(")) {
        last = matching(next);
      } else if (isPunct(next, "[")) {
        size_t depth = 0, j = next;
        for (; j < std::min(toks_.size(), next + kMaxLookahead); ++j) {
          if (isPunct(j, "[")) ++depth;
          else if (isPunct(j, "]") && --depth == 0) break;
        }
        last = j < toks_.size() && isPunct(j, "]") ? j : kNone;
      } else if (isPunct(next, "<")) {
        return kNone;
      } else {
        break;
      }
    }
    return last;
  }

  // Whether the statement goes on, from token `from`, to cast to `className` again or to name it
  // (`cast && cast->uid()`, `if (cast) static_cast<T*>(b)->f();`): the null test guards that use,
  // and a name test in its place would let the rewritten backend's object reach it as null.
  bool castAgainInStatement(size_t from, std::string_view className) const {
    int depth = 0;
    for (size_t k = from; k < toks_.size() && k < from + 4 * kMaxLookahead; ++k) {
      if (isPunct(k, "(") || isPunct(k, "[")) ++depth;
      else if (isPunct(k, ")") || isPunct(k, "]")) --depth;
      // `if (cast) { static_cast<...>(b)->legacyOnly(); }`: the block the test guards counts too.
      else if (isPunct(k, "{") && depth <= 0) return castInBlock(k, className);
      else if ((isPunct(k, ";") || isPunct(k, "}")) && depth <= 0) return false;
      else if (namesCast(k, className)) return true;
    }
    return false;
  }

  bool namesCast(size_t k, std::string_view className) const {
    return toks_[k].kind == clang::tok::raw_identifier && (toks_[k].text == className || toks_[k].text.ends_with("_cast"));
  }

  // Whether the block opened at `open` casts again or names the class; a block too long to read
  // whole counts as one that does, so its guard is left as it is.
  bool castInBlock(size_t open, std::string_view className) const {
    int depth = 0;
    for (size_t k = open; k < toks_.size(); ++k) {
      if (k >= open + 64 * kMaxLookahead) return true;
      if (isPunct(k, "{")) ++depth;
      else if (isPunct(k, "}") && --depth == 0) return false;
      else if (namesCast(k, className)) return true;
    }
    return true;
  }

  // A cast whose result is only tested for null (`if (cast)`, `!cast`, `cast && x`,
  // `cast != nullptr`): a test that a name comparison can replace. Tokens first..last span the
  // cast; a result read further (`cast->x`, `auto* p = cast`) is a value, left alone.
  void markNullTest(TypeCheck& check, size_t first, size_t last) const {
    auto is = [&](size_t k, std::initializer_list<std::string_view> any) {
      if (k >= toks_.size()) return false;
      for (std::string_view p : any)
        if (p == "return" ? isIdent(k, p) : isPunct(k, p)) return true;
      return false;
    };
    auto isNull = [&](size_t k) {
      return isIdent(k, "nullptr") || isIdent(k, "NULL") ||
             (k < toks_.size() && toks_[k].kind == clang::tok::numeric_constant && toks_[k].text == "0");
    };
    const std::initializer_list<std::string_view> kBefore = {"(", "=", "return", "&&", "||", ",", "?", ":", "{", ";"};
    const std::initializer_list<std::string_view> kAfter = {")", ";", "&&", "||", ",", "?", ":", "}"};
    size_t prev = first == 0 ? kNone : first - 1;
    size_t next = last + 1;
    if (is(next, {".", "->", "[", "("})) return;
    if ((is(next, {"==", "!="})) && isNull(next + 1) && is(next + 2, kAfter) && is(prev, kBefore)) {
      check.nullTest = {toks_[first].begin, toks_[next + 1].end};
      check.testNegated = isPunct(next, "==");
    } else if (prev != kNone && prev >= 2 && is(prev, {"==", "!="}) && isNull(prev - 1) && is(prev - 2, kBefore) &&
               is(next, kAfter)) {
      check.nullTest = {toks_[prev - 1].begin, toks_[last].end};
      check.testNegated = isPunct(prev, "==");
    } else if (is(prev, {"!"}) || (is(prev, {"&&", "||"}) && is(next, kAfter)) ||
               (is(next, {"&&", "||", "?"}) && is(prev, kBefore)) ||
               (is(prev, {"("}) && prev >= 1 && (isIdent(prev - 1, "if") || isIdent(prev - 1, "while")) && is(next, {")"}))) {
      check.nullTest = {toks_[first].begin, toks_[last].end};
    } else if (is(prev, {"="}) && is(next, {";"}) && heldOnlyForNullTests(prev, next)) {
      check.nullTest = {toks_[first].begin, toks_[last].end};  // the test stays with the variable
    }
  }

  // `auto* p = cast;` (`auto p`, `const auto* p`) where every later use of p in its block is a
  // test for null (`p != nullptr`, `p == nullptr`, `!p`, `if (p)`, `p && ...`): the variable
  // holds a test, and anything of the same kind (the backend or null) can stand for the cast.
  // A declared class type would not take another kind of pointer: only `auto` is read so.
  bool heldOnlyForNullTests(size_t assign, size_t semicolon) const {
    if (assign < 2 || toks_[assign - 1].kind != clang::tok::raw_identifier) return false;
    const std::string& name = toks_[assign - 1].text;
    size_t k = assign - 1;
    bool seenAuto = false;
    while (k > 0 && (isIdent(k - 1, "auto") || isIdent(k - 1, "const") || isPunct(k - 1, "*"))) {
      seenAuto |= isIdent(k - 1, "auto");
      --k;
    }
    if (!seenAuto || (k > 0 && !isPunct(k - 1, ";") && !isPunct(k - 1, "{") && !isPunct(k - 1, "}"))) return false;
    auto isNull = [&](size_t i) {
      return isIdent(i, "nullptr") || isIdent(i, "NULL") ||
             (i < toks_.size() && toks_[i].kind == clang::tok::numeric_constant && toks_[i].text == "0");
    };
    auto isAny = [&](size_t i, std::initializer_list<std::string_view> any) {
      for (std::string_view p : any)
        if (isPunct(i, p)) return true;
      return false;
    };
    int depth = 0, uses = 0;
    for (size_t i = semicolon + 1; i < toks_.size(); ++i) {
      if (isPunct(i, "{")) ++depth;
      else if (isPunct(i, "}") && --depth < 0) break;  // the end of the variable's block
      if (!isIdent(i, name) || isAny(i - 1, {".", "->", "::"})) continue;
      size_t before = i - 1, after = i + 1;
      bool test = isPunct(before, "!") ||
                  (isAny(after, {"==", "!="}) && isNull(after + 1)) || (isAny(before, {"==", "!="}) && isNull(before - 1)) ||
                  (isAny(after, {"&&", "||", "?"}) && !isAny(before, {"==", "!=", "<", ">", "*", "&", "+", "-"})) ||
                  (isAny(before, {"&&", "||"}) && isAny(after, {")", ";", "&&", "||", ",", "?", ":"})) ||
                  (isPunct(before, "(") && before > 0 && (isIdent(before - 1, "if") || isIdent(before - 1, "while")) &&
                   isPunct(after, ")"));
      if (!test) return false;
      ++uses;
    }
    return uses > 0;
  }

  // make_intrusive<T>(...), make_shared<T>(...), make_unique<T>(...): a construction of T, recorded
  // as a call whose qualified name is the class.
  void onFactory(size_t i) {
    size_t j = i + 2;
    Location where = j < toks_.size() ? toks_[j].where : toks_[i].where;
    std::string target = qualifiedNameAt(j);
    if (target.empty() || !isPunct(j, ">")) return;  // a member such as T::Options, or a template
    std::string spelled = toks_[i].text + "<" + spelledBetween(i + 2, j) + ">";
    model_.calls.push_back({target, spelled, where, {}, 0});
  }

  // `new T(...)` or `new T{...}`.
  void onNew(size_t i) {
    size_t j = i + 1;
    Location where = j < toks_.size() ? toks_[j].where : toks_[i].where;
    std::string target = qualifiedNameAt(j);
    if (target.empty() || !(isPunct(j, "(") || isPunct(j, "{"))) return;
    model_.calls.push_back({target, "new " + spelledBetween(i + 1, j), where, {}, 0});
  }

  std::string spelledBetween(size_t begin, size_t end) const {
    std::string out;
    for (size_t k = begin; k < end && k < toks_.size(); ++k) out += toks_[k].text;
    return out;
  }

  // `class X : public a::B, private C {`: X and its bases, resolved; none for a head without a list.
  std::vector<std::string> classHead(size_t i, std::string& name) const {
    std::vector<std::string> bases;
    size_t j = i + 1;
    size_t limit = std::min(toks_.size(), i + kMaxLookahead);
    while (j < limit && toks_[j].kind == clang::tok::raw_identifier && !isPunct(j + 1, ":") &&
           !isPunct(j + 1, "{") && !isPunct(j + 1, ";")) {
      ++j;  // attributes/macros such as TORCH_API before the class name
    }
    if (j >= toks_.size() || toks_[j].kind != clang::tok::raw_identifier || !isPunct(j + 1, ":")) return bases;
    name = toks_[j].text;
    j += 2;
    // A base list ends at its body, or where another declaration begins.
    while (j < limit && !isPunct(j, "{") && !isPunct(j, ";") && !isIdent(j, "class") && !isIdent(j, "struct")) {
      while (isIdent(j, "public") || isIdent(j, "private") || isIdent(j, "protected") || isIdent(j, "virtual")) ++j;
      std::string base = qualifiedNameAt(j);
      if (!base.empty()) bases.push_back(base);
      while (j < limit && !isPunct(j, ",") && !isPunct(j, "{") && !isPunct(j, ";")) ++j;
      if (isPunct(j, ",")) ++j;
    }
    return bases;
  }

  // A class deriving from the legacy one (directly or through another such class): a pointer
  // cast to it is a downcast the rewritten backend's object is not. The declaration itself checks
  // nothing, and is no finding.
  void collectLegacySubclass(size_t i) {
    std::string name;
    for (const std::string& base : classHead(i, name)) {
      if (base != kLegacyClass && !legacySubclasses_.contains(base)) continue;
      legacySubclasses_.insert(name);
      legacySubclasses_.insert(resolve(name));
      return;
    }
  }

  std::vector<Tok> toks_;
  SourceModel& model_;
  bool usesC10d_ = false;
  bool definesOwnLegacyName_ = false;
  std::unordered_map<std::string, std::string> namespaceAliases_;
  std::unordered_map<std::string, std::string> typeAliases_;  // `using X = a::B;`, `typedef a::B X;`
  std::unordered_set<std::string> legacySubclasses_;  // as written and as resolved
};

}  // namespace

namespace {

// Headers of the tree a file includes, searched from its folder upward and in an `include` folder
// at each level (a project's include roots sit above its sources), read for their declarations only, a few levels deep and a bounded
// number of them: enough for `using PG = c10d::ProcessGroupNCCL;` in the project's own header.
class TreeHeaders {
 public:
  void collect(const std::string& path, const std::vector<std::string>& includes, int depth) {
    if (depth > kMaxDepth) return;
    for (const std::string& include : includes) {
      if (visited_.size() >= kMaxHeaders) return;
      std::optional<std::filesystem::path> header = find(path, include);
      if (!header || !visited_.insert(header->string()).second) continue;
      std::optional<std::string> text = read(*header);
      if (!text) continue;
      SourceModel unused;
      CppScanner scanner(keepCompiledForTorch(tokenize(header->string(), *text)), unused);
      std::vector<std::string> nested = scanner.includes();
      scanner.collectDeclarations();
      typeAliases_.insert(scanner.typeAliases().begin(), scanner.typeAliases().end());
      namespaceAliases_.insert(scanner.namespaceAliases().begin(), scanner.namespaceAliases().end());
      legacySubclasses_.insert(scanner.legacySubclasses().begin(), scanner.legacySubclasses().end());
      collect(header->string(), nested, depth + 1);
    }
  }

  void seed(CppScanner& scanner) const { scanner.seed(typeAliases_, namespaceAliases_, legacySubclasses_); }

 private:
  static constexpr int kMaxDepth = 3;
  static constexpr size_t kMaxHeaders = 64;
  static constexpr int kMaxLevelsUp = 6;
  static constexpr std::uintmax_t kMaxHeaderBytes = 1u << 20;

  static std::optional<std::filesystem::path> find(const std::string& from, const std::string& include) {
    if (include.empty() || include.find("..") != std::string::npos) return std::nullopt;
    std::error_code ec;
    std::filesystem::path dir = std::filesystem::path(from).parent_path();
    for (int up = 0; up <= kMaxLevelsUp && !dir.empty(); ++up, dir = dir.parent_path()) {
      for (const std::filesystem::path& root : {dir, dir / "include"}) {
        std::filesystem::path candidate = root / include;
        if (std::filesystem::is_regular_file(candidate, ec)) return candidate;
      }
      if (dir == dir.parent_path()) break;
    }
    return std::nullopt;
  }

  static std::optional<std::string> read(const std::filesystem::path& header) {
    std::error_code ec;
    std::uintmax_t size = std::filesystem::file_size(header, ec);
    if (ec || size > kMaxHeaderBytes) return std::nullopt;
    std::ifstream in(header, std::ios::binary);
    std::string text(size, '\0');
    in.read(text.data(), static_cast<std::streamsize>(size));
    text.resize(static_cast<size_t>(in.gcount()));
    return text;
  }

  std::set<std::string> visited_;
  std::unordered_map<std::string, std::string> typeAliases_;
  std::unordered_map<std::string, std::string> namespaceAliases_;
  std::unordered_set<std::string> legacySubclasses_;
};

}  // namespace

SourceModel clangLexCpp(const std::string& path, const std::string& text) {
  SourceModel model;
  model.path = path;
  model.language = Language::Cpp;
  CppScanner scanner(keepCompiledForTorch(tokenize(path, text)), model);
  TreeHeaders headers;
  headers.collect(path, scanner.includes(), 0);
  headers.seed(scanner);
  scanner.scan();
  return model;
}

}  // namespace nccl_migrate::lint
