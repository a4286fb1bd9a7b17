// Deciding which preprocessor branches torch 2.15 compiles (torch_version_branches.h says why).
#include "cpp/torch_version_branches.h"

#include <cctype>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace nccl_migrate::lint {
const std::vector<TorchVersionMacro>& torchVersionMacros() {
  static const std::vector<TorchVersionMacro> kMacros = {{"TORCH_VERSION_MAJOR", 2, "2"},
                                                         {"TORCH_VERSION_MINOR", 15, "15"},
                                                         {"TORCH_VERSION_PATCH", std::nullopt, "0"},
                                                         {"TORCH_VERSION", std::nullopt, "\"2.15.0\""}};
  return kMacros;
}

namespace torch_branches {

// A condition's value: a number, or not known (a name the linter cannot see defined).
using Value = std::optional<int64_t>;

// Reads one `#if`/`#elif` condition. Recursive descent with a bound on depth: a condition nested
// deeper than any real guard is undecided, so 100,000 parentheses cost no stack.
class Condition {
 public:
  Condition(const std::vector<const Tok*>& toks, const std::unordered_map<std::string, Value>& macros)
      : toks_(toks), macros_(macros) {}

  Value evaluate() {
    Value v = ternary();
    if (failed_ || at_ != toks_.size()) return std::nullopt;
    return v;
  }

 private:
  static constexpr int kMaxDepth = 64;

  bool punct(std::string_view p) const {
    return at_ < toks_.size() && toks_[at_]->kind != clang::tok::raw_identifier && toks_[at_]->text == p;
  }
  bool take(std::string_view p) {
    if (!punct(p)) return false;
    ++at_;
    return true;
  }
  // Too deep, or not an expression: the whole condition is undecided.
  Value fail() {
    failed_ = true;
    at_ = toks_.size();
    return std::nullopt;
  }

  struct Deeper {
    explicit Deeper(Condition& c) : c(c) { ++c.depth_; }
    ~Deeper() { --c.depth_; }
    Condition& c;
  };

  Value ternary() {
    Deeper guard(*this);
    if (depth_ > kMaxDepth) return fail();
    Value test = logicalOr();
    if (!take("?")) return test;
    Value yes = ternary();
    if (!take(":")) return fail();
    Value no = ternary();
    if (test) return *test ? yes : no;
    return yes && no && *yes == *no ? yes : std::nullopt;
  }

  // `a || b` is true where either side is, whatever the other; `a && b` false likewise.
  Value logicalOr() {
    Value v = logicalAnd();
    while (take("||")) {
      Value r = logicalAnd();
      if ((v && *v) || (r && *r)) v = 1;
      else v = v && r ? Value(0) : std::nullopt;
    }
    return v;
  }
  Value logicalAnd() {
    Value v = binary(0);
    while (take("&&")) {
      Value r = binary(0);
      if ((v && !*v) || (r && !*r)) v = 0;
      else v = v && r ? Value(1) : std::nullopt;
    }
    return v;
  }

  // The binary operators below `&&`, loosest first; each level's operators share a precedence.
  static const std::vector<std::vector<std::string_view>>& levels() {
    static const std::vector<std::vector<std::string_view>> kLevels = {
        {"|"}, {"^"}, {"&"}, {"==", "!="}, {"<", "<=", ">", ">="}, {"<<", ">>"}, {"+", "-"}, {"*", "/", "%"}};
    return kLevels;
  }

  Value binary(size_t level) {
    if (level == levels().size()) return unary();
    Value v = binary(level + 1);
    while (true) {
      std::string_view op;
      for (std::string_view candidate : levels()[level])
        if (punct(candidate)) op = candidate;
      if (op.empty()) return v;
      ++at_;
      Value r = binary(level + 1);
      v = v && r ? apply(op, *v, *r) : std::nullopt;
    }
  }

  static Value apply(std::string_view op, int64_t a, int64_t b) {
    int64_t out = 0;
    if (op == "|") return a | b;
    if (op == "^") return a ^ b;
    if (op == "&") return a & b;
    if (op == "==") return a == b;
    if (op == "!=") return a != b;
    if (op == "<") return a < b;
    if (op == "<=") return a <= b;
    if (op == ">") return a > b;
    if (op == ">=") return a >= b;
    if (op == "<<" || op == ">>") {
      if (b < 0 || b >= 63 || a < 0) return std::nullopt;
      if (op == ">>") return a >> b;
      return a <= (std::numeric_limits<int64_t>::max() >> b) ? Value(a << b) : std::nullopt;
    }
    if (op == "+") return __builtin_add_overflow(a, b, &out) ? std::nullopt : Value(out);
    if (op == "-") return __builtin_sub_overflow(a, b, &out) ? std::nullopt : Value(out);
    if (op == "*") return __builtin_mul_overflow(a, b, &out) ? std::nullopt : Value(out);
    if (b == 0 || (a == std::numeric_limits<int64_t>::min() && b == -1)) return std::nullopt;
    return op == "/" ? a / b : a % b;
  }

  Value unary() {
    Deeper guard(*this);
    if (depth_ > kMaxDepth) return fail();
    if (take("!")) {
      Value v = unary();
      return v ? Value(!*v) : std::nullopt;
    }
    if (take("-")) {
      Value v = unary();
      return v && *v != std::numeric_limits<int64_t>::min() ? Value(-*v) : std::nullopt;
    }
    if (take("+")) return unary();
    if (take("~")) {
      Value v = unary();
      return v ? Value(~*v) : std::nullopt;
    }
    return primary();
  }

  Value primary() {
    if (take("(")) {
      Value v = ternary();
      return take(")") ? v : fail();
    }
    if (at_ >= toks_.size()) return fail();
    const Tok& t = *toks_[at_++];
    if (t.kind == clang::tok::numeric_constant) return number(t.text);
    if (t.kind != clang::tok::raw_identifier) return fail();  // a string, a character, a stray operator
    if (t.text == "defined") return defined();
    if (t.text == "true") return 1;  // C++ keeps these two in conditions
    if (t.text == "false") return 0;
    if (punct("(")) return skipArguments();  // a function-like macro or __has_include(...)
    auto it = macros_.find(t.text);
    return it == macros_.end() ? std::nullopt : it->second;
  }

  // `defined X` or `defined(X)`: true for torch's version macros, undecided for any other name.
  Value defined() {
    bool paren = take("(");
    if (at_ >= toks_.size() || toks_[at_]->kind != clang::tok::raw_identifier) return fail();
    const std::string& name = toks_[at_++]->text;
    if (paren && !take(")")) return fail();
    return macros_.contains(name) ? Value(1) : std::nullopt;
  }

  Value skipArguments() {
    int depth = 0;
    for (; at_ < toks_.size(); ++at_) {
      if (punct("(")) ++depth;
      else if (punct(")") && --depth == 0) break;
    }
    if (at_ == toks_.size()) return fail();
    ++at_;
    return std::nullopt;
  }

  // An integer literal (decimal, hex, octal, binary; suffixes and digit separators dropped).
  static Value number(std::string text) {
    std::erase(text, '\'');
    while (!text.empty() && (text.back() == 'u' || text.back() == 'U' || text.back() == 'l' || text.back() == 'L'))
      text.pop_back();
    int base = 10;
    size_t from = 0;
    if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) base = 16, from = 2;
    else if (text.size() > 2 && text[0] == '0' && (text[1] == 'b' || text[1] == 'B')) base = 2, from = 2;
    else if (text.size() > 1 && text[0] == '0') base = 8, from = 1;
    if (from >= text.size()) return text == "0" ? Value(0) : std::nullopt;
    int64_t v = 0;
    for (size_t i = from; i < text.size(); ++i) {
      char c = static_cast<char>(std::tolower(static_cast<unsigned char>(text[i])));
      int digit = std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : (c >= 'a' && c <= 'f' ? c - 'a' + 10 : 99);
      if (digit >= base || __builtin_mul_overflow(v, base, &v) || __builtin_add_overflow(v, digit, &v)) return std::nullopt;
    }
    return v;
  }

  const std::vector<const Tok*>& toks_;
  const std::unordered_map<std::string, Value>& macros_;
  size_t at_ = 0;
  int depth_ = 0;
  bool failed_ = false;
};

// The conditional blocks open at a token, innermost last.
struct Block {
  bool parentCompiled;  // the code around the block is compiled
  bool branchTaken;     // a branch before this one is certainly compiled, so no later one is
  bool compiled;        // the current branch may be compiled
};

enum class Truth { False, True, Undecided };

Truth truthOf(const Value& v) {
  if (!v) return Truth::Undecided;
  return *v ? Truth::True : Truth::False;
}

}  // namespace torch_branches

// For each token, whether torch 2.15 may compile it (directives included: a directive in a
// branch that is not compiled is not read). Directives are read in order, so a file's own
// `#define`/`#undef` of a version macro makes that macro undecided from there on. Blocks are kept
// on a stack, not walked recursively; an `#endif` or `#else` with no `#if` is ignored.
std::vector<bool> compiledForTorch(const std::vector<Tok>& toks) {
  using namespace torch_branches;
  std::unordered_map<std::string, Value> macros;
  for (const TorchVersionMacro& m : torchVersionMacros()) macros[m.name] = m.value;
  std::vector<Block> blocks;
  std::vector<bool> compiled(toks.size(), true);
  auto here = [&] { return blocks.empty() || blocks.back().compiled; };
  auto isIdent = [&](size_t k) { return k < toks.size() && toks[k].kind == clang::tok::raw_identifier; };

  for (size_t i = 0; i < toks.size();) {
    if (!(toks[i].atLineStart && toks[i].kind == clang::tok::hash)) {
      compiled[i] = here();
      ++i;
      continue;
    }
    size_t end = i + 1;
    while (end < toks.size() && !toks[end].atLineStart) ++end;
    std::string name = isIdent(i + 1) && i + 1 < end ? toks[i + 1].text : "";
    std::vector<const Tok*> rest;  // what follows the directive's name, comments left out
    for (size_t k = i + 2; k < end; ++k)
      if (toks[k].kind != clang::tok::comment) rest.push_back(&toks[k]);
    auto condition = [&]() -> Truth {
      if (name == "if" || name == "elif") return truthOf(Condition(rest, macros).evaluate());
      if (rest.size() != 1 || rest[0]->kind != clang::tok::raw_identifier) return Truth::Undecided;
      Truth defined = macros.contains(rest[0]->text) ? Truth::True : Truth::Undecided;
      bool negated = name == "ifndef" || name == "elifndef";
      if (defined == Truth::Undecided || !negated) return defined;
      return Truth::False;
    };

    bool directiveRead = here();
    if (name == "if" || name == "ifdef" || name == "ifndef") {
      Truth t = directiveRead ? condition() : Truth::False;
      blocks.push_back({directiveRead, t == Truth::True, directiveRead && t != Truth::False});
    } else if ((name == "elif" || name == "elifdef" || name == "elifndef" || name == "else") && !blocks.empty()) {
      Block& b = blocks.back();
      directiveRead = b.parentCompiled;
      if (!b.parentCompiled || b.branchTaken) {
        b.compiled = false;
      } else {
        Truth t = name == "else" ? Truth::True : condition();
        b.compiled = t != Truth::False;
        b.branchTaken = t == Truth::True;
      }
    } else if (name == "endif" && !blocks.empty()) {
      directiveRead = blocks.back().parentCompiled;
      blocks.pop_back();
    } else if ((name == "define" || name == "undef") && directiveRead && !rest.empty() &&
               macros.contains(rest[0]->text)) {
      // The file's own value or absence: from here on, read from the file, not assumed.
      if (name == "undef") macros.erase(rest[0]->text);
      else macros[rest[0]->text] = std::nullopt;
    }
    for (size_t k = i; k < end; ++k) compiled[k] = directiveRead;
    i = end;
  }
  return compiled;
}

// The tokens torch 2.15 may compile, in order.
std::vector<Tok> keepCompiledForTorch(std::vector<Tok> toks) {
  std::vector<bool> compiled = compiledForTorch(toks);
  std::vector<Tok> out;
  out.reserve(toks.size());
  for (size_t k = 0; k < toks.size(); ++k)
    if (compiled[k]) out.push_back(std::move(toks[k]));
  return out;
}

// The byte ranges of the text torch 2.15 does not compile (each from its first token to its last).
std::vector<Range> notCompiledForTorch(const std::vector<Tok>& toks) {
  std::vector<bool> compiled = compiledForTorch(toks);
  std::vector<Range> out;
  for (size_t k = 0; k < toks.size(); ++k) {
    if (compiled[k]) continue;
    if (k > 0 && !compiled[k - 1]) out.back().end = toks[k].end;
    else out.push_back({toks[k].begin, toks[k].end});
  }
  return out;
}

}  // namespace nccl_migrate::lint
