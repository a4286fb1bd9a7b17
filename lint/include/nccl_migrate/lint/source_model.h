// The one representation every frontend produces and every rule reads. Rules never see a parser:
// they ask a SourceModel what was checked, called, compared or assigned, already qualified by name.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace nccl_migrate::lint {

// Python covers .py/.pyi and notebooks; Config covers YAML, TOML, JSON and .env files.
enum class Language { Python, Cpp, Shell, Dockerfile, Config };

struct Location {
  int line = 0;    // 1-based; in a notebook, within the cell
  int column = 0;  // 1-based, in bytes
  int cell = 0;    // a notebook's cell (1-based, counting every cell); 0 outside notebooks
};

// A byte range of the file's text, for fixes.
struct Range {
  size_t begin = 0;
  size_t end = 0;
  // Whether it covers any text: a frontend leaves a range empty where it cannot tell.
  bool known() const { return end > begin; }
};

// A runtime type test against a named class: Python isinstance / `type(x) is`, C++ casts and
// base-class lists. `qualifiedName` is the class as the frontend resolved it
// ("torch.distributed.ProcessGroupNCCL", "c10d::ProcessGroupNCCL"); empty when unresolvable.
struct TypeCheck {
  // CheckedCast: dynamic_cast and *dynamic*_pointer_cast (null on mismatch); UncheckedCast:
  // static/reinterpret casts (undefined behaviour on mismatch).
  enum class Kind { Isinstance, TypeIdentity, CheckedCast, UncheckedCast, Subclass };
  Kind kind;
  std::string qualifiedName;
  std::string spelling;  // the name, or the whole cast, as written in the source, for messages
  Location where;
  // A cast from the class `qualifiedName` down to this subclass of it (a project's own), which the
  // object stops being when the backend is replaced; empty for other checks.
  std::string downcastTo;
  // Where fixes may edit; empty ranges where the frontend cannot tell. `callee`: what the check
  // is made with: Python's word `isinstance`; a C++ named cast from its first token (qualifiers
  // included) to its opening parenthesis (`std::static_pointer_cast<c10d::ProcessGroupNCCL>`);
  // a C-style cast's parenthesised type. `operand`: the object checked: a named cast's argument,
  // the expression a C-style cast applies to (past `(void*)` hops), isinstance's first argument.
  Range callee;
  Range operand;
  Range castName;  // C++ named casts: the name alone (`static_pointer_cast`), for a rename
  // C++: the span to replace when the cast's result is only tested for null (`if (cast)`,
  // `!cast`, `cast && ...`, `cast != nullptr`), from the cast to the end of its comparison with
  // null; `testNegated` when that comparison is `== nullptr`. Empty when the result is used.
  Range nullTest;
  bool testNegated = false;
  bool toPointer = false;  // C++: the cast yields a raw pointer (`T*`), not a reference or smart pointer
  // C++: the operand is known to be an object's pointer: it ends with `.get()`/`->get()` or a
  // call of `getBackend`/`getDefaultBackend` (a smart pointer's or a process group's backend). A
  // raw pointer's type is not known to the lexer, and one from `void*` takes neither dynamic_cast
  // nor a method call, so the fixes that need an object's pointer ask for this.
  bool operandIsObjectPointer = false;
};

// What an expression is made of, as far as the source shows it: one node per part that decides a
// value, kept in SourceModel::values (operands by index there). Names stay names here;
// traceValue() follows them to what was assigned. The Python frontend sees through parentheses
// and the builtin conversions int() and str(), which keep which value it is.
struct ValueNode {
  enum class Kind {
    Literal,      // a number, True/False/None, or a string with no interpolation: `text` is its value
    Environment,  // os.environ["X"], os.environ.get("X", d), os.getenv("X", d): `text` is X, the operand d
    Name,         // a plain name: `text`
    Attribute,    // a dotted name (`args.local_rank`): `text` as written
    Call,         // a call: `text` its callee, qualified where known ("torch.device"), else as written;
                  // operands: its arguments, a keyword one with `keyword`
    Operator,     // an operator: `text` ("%", "+", "//", "==", "not in", "and"), operands left and
                  // right; `not` has one operand
    Format,       // an f-string, "..." % x or "...".format(x): `text` the literal parts with "{}" for each operand
    Sequence,     // a list or tuple display: operands its elements
    Comprehension,  // a list/generator comprehension: operands what its first `for` iterates over, then
                    // (where read) each item's expression and the first `for`'s target, as a Name
    OneOf,        // one of the operands: `a if c else b`, or (traceValue) the assignments that may reach a name
    Item,         // an item of a container, `x[i]` (not os.environ's, no slice): operands the container and
                  // the index; `text` as written (clipped)
    Unknown,      // anything else: `text` is a short piece of its source
  };
  Kind kind = Kind::Unknown;
  std::string text;
  std::string keyword;        // a call's keyword argument: its keyword
  std::vector<int> operands;  // indices in the same vector
  Location where;
};

// One argument of a call as written.
struct Argument {
  std::string keyword;                     // empty for a positional argument
  std::string text;                        // source text of the value
  std::optional<std::string> stringValue;  // the value when it is a string known at this point
  std::vector<std::string> elements;       // source text of each element of a list/tuple literal
  // For a name, the source text of the value last assigned to it in the file (clipped); empty
  // otherwise. `device_ids=gpus` after `gpus = list(range(n))`.
  std::string assignedText;
  bool isSequenceLiteral = false;
  Location where;
  int value = -1;  // what it is made of: its root in SourceModel::values (-1: not recorded)
};

// A call whose callee the frontend could name.
struct Call {
  std::string qualifiedName;  // "torch.distributed.new_group", "setenv"; empty if unresolved
  std::string spelling;       // callee as written: "dist.new_group", "pg.name"
  Location where;
  std::vector<Argument> arguments;
  int loopDepth = 0;  // enclosing for/while loops and comprehensions in the same function
  // The innermost function around the call (its bare name; empty at module level), and whether it
  // is one of the project's group wrappers: the groups are then made where it is called.
  std::string function;
  int functionId = -1;  // which definition that is, numbered in the file (-1: module level)
  bool inGroupWrapper = false;
  // How the project model saw that function run repeatedly, in this file or another, as a clause
  // ("which Bench.ping calls in a loop at bench.py:12, through self.backend", "which Conv.forward
  // calls at conv.py:8, once per step of the model"; describeLoopedCall). Empty when it saw none.
  // Known for the functions that issue torch's point-to-point transfers (NM502's table) only.
  std::string calledInLoopAt;
  // An arm of an `if` statement: the statement (numbered in the file) and which arm (0 for its
  // `if` block, then each `elif`, then `else`).
  struct Arm {
    int statement = 0;
    int index = 0;
  };
  std::vector<Arm> branches;  // the arms around the call in its function, outermost first
  // For fixes that add an argument, where a written argument list takes one more: just past its
  // last argument (before a trailing comma), or just past `(` when it has none.
  bool hasArgumentList = false;
  size_t nextArgumentAt = 0;

  // Whether this call and `other` stand in different arms of one `if` statement, so that no run
  // passes both.
  bool exclusiveWith(const Call& other) const {
    for (size_t i = 0; i < branches.size() && i < other.branches.size(); ++i) {
      if (branches[i].statement != other.branches[i].statement) return false;
      if (branches[i].index != other.branches[i].index) return true;
    }
    return false;
  }

  const Argument* keyword(const std::string& name) const {
    for (const Argument& a : arguments)
      if (a.keyword == name) return &a;
    return nullptr;
  }
  const Argument* positional(size_t index) const {
    size_t seen = 0;
    for (const Argument& a : arguments) {
      if (!a.keyword.empty()) continue;
      if (seen++ == index) return &a;
    }
    return nullptr;
  }
  // The keyword argument `name`, else the positional one at `index`.
  const Argument* argument(const std::string& name, size_t index) const {
    if (const Argument* a = keyword(name)) return a;
    return positional(index);
  }
};

// A name bound in the file, for traceValue(): `x = value`, `args.gpu = value` (a dotted target as
// written), and, with no value (-1), the bindings whose value is not read here: a function's
// parameters, loop targets, tuple unpacking, `x += ...`, `with ... as x`. The Python frontend adds
// bindings of its own (python_frontend.h): `os.environ["X"] = value`, the condition of an `if` arm
// (kArmCondition) and another file's function returns (kOtherFileReturns).
struct Binding {
  std::string name;
  int value = -1;  // root in SourceModel::values
  int functionId = -1;
  std::vector<Call::Arm> branches;  // as a call's
  Location where;
};

// A value followed through the file (the Python frontend's value tracing): nodes as in
// SourceModel::values, the root first, where each name or dotted name is replaced by the values
// that may reach it where it is read (the bindings before it in its function that no other arm of
// an `if` holds, back to one that always runs; in a function that binds it nowhere, the module's),
// and each call of a function the file defines once by what that function returns, a few steps
// deep. A name bound to no value here (a parameter, a loop target) or bound nowhere in the file
// stays a Name or Attribute; so does anything past the depth.
struct TracedValue {
  std::vector<ValueNode> nodes;
  const ValueNode* root() const { return nodes.empty() ? nullptr : &nodes.front(); }
  const ValueNode& operand(const ValueNode& node, size_t i) const { return nodes[static_cast<size_t>(node.operands[i])]; }
};

// `<subject> == "literal"` and friends, where the subject is a call such as `pg.name()`.
struct StringComparison {
  std::string subjectCallee;       // qualified callee, else as spelled ("backend.name")
  bool subjectCallHasArguments = false;
  std::string op;                  // "==", "!=", "in", "not in"
  std::vector<std::string> literals;
  Location where;
  Range literalSide;  // operator and literal side, which a fix may rewrite
  std::string subjectText;
};

// `x.attr` reads of an attribute (the object is unknown: attribute names are what rules test).
struct AttributeUse {
  std::string name;
  std::string objectText;
  Location where;
  // For fixes, empty where the frontend cannot tell: the object expression, and the rest of the
  // attribute expression from the end of the object to the end of the name (`.name`, with any
  // blanks or line breaks between); `called` when the attribute is the function of a call.
  Range object;
  Range dotName;
  bool called = false;
};

// A string literal in code (never a comment or a docstring).
struct StringLiteral {
  std::string value;
  Location where;
  // Printed, logged or a help text: it documents a value rather than setting one.
  bool documentation = false;
};

// A key set to a value: environment variables (Python os.environ, shell export, Dockerfile ENV,
// C++ setenv/putenv) and keys of configuration files (YAML, TOML, JSON, .env).
struct Setting {
  std::string key;
  std::string value;  // the value as far as it is known; unknown parts are left out
  Location where;
  bool isEnvironment = false;  // set in the environment (not only a config key)
  // For fixes that remove the setting, empty where the frontend cannot tell: `statement` is all
  // that sets it (the whole line with its newline for `export X=0`, `ENV X=0`, `X: 0`; the word
  // and its separating blank for one of several assignments on a line); `valueRange` the value as
  // written, quotes excluded, so that one item of a compound value can be cut.
  Range statement;
  Range valueRange;
};

// A comment, for suppressions; frontends collect them, the linter interprets them.
struct Comment {
  int line = 0;
  std::string text;
};

struct SourceModel {
  std::string path;
  Language language = Language::Python;
  std::vector<TypeCheck> typeChecks;
  std::vector<Call> calls;
  std::vector<StringComparison> comparisons;
  std::vector<AttributeUse> attributes;
  std::vector<StringLiteral> strings;
  std::vector<Setting> settings;
  std::vector<Comment> comments;
  bool hadSyntaxErrors = false;  // the tree was kept; findings still come
  // The module imports Ascend's torch_npu unconditionally (at module level, outside try and if):
  // it runs only where that package loads, on Ascend NPUs, whose groups are HCCL's, not NCCL's.
  bool needsAscendNpu = false;
  // For traceValue(): the parts of arguments, bindings and returns; each definition's bare name, by
  // functionId; the names bound and the `return` statements (with the function's name), in
  // source order.
  std::vector<ValueNode> values;
  std::vector<std::string> functions;
  std::vector<Binding> bindings;
  std::vector<Binding> returns;
};

// `argument` of `call` followed through `model` (see TracedValue); empty when the frontend
// recorded no value for it (languages other than Python).
TracedValue traceValue(const SourceModel& model, const Call& call, const Argument& argument);

}  // namespace nccl_migrate::lint
