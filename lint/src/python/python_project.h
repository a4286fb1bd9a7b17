// The project model of Python sources: what each function calls, read from the parse tree, and
// which calls reach the project's group-creating wrappers (engine/group_wrappers.h builds the
// table). From the tree rather than the text, so that a signature over many lines, decorators,
// nested functions and methods all name the right function; calls are matched through the
// file's imports, not by name alone, so a `backward` or `_unflatten` of an unrelated class is not
// taken for a wrapper of the same name.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "python/python_frontend.h"
#include "python/python_names.h"

namespace nccl_migrate::lint {

// torch.distributed's group creators, by their last name: `new_group`, `split_group`, ...
const std::set<std::string>& groupCreatorNames();

// One call in a function's own body (a nested function's calls are the nested function's).
struct CallInFunction {
  std::string name;                    // the callee's last name: `create_group`, `_make` of `self._make`
  // As the file's imports resolve it ("mypkg.ps.create_group"; ".ps.create_group" through a
  // relative import); empty if they do not.
  std::string qualifiedName;
  std::optional<std::string> backend;  // a `backend=` string literal it passes
  bool onAttribute = false;            // `x.name(...)` rather than `name(...)`
  bool onSelf = false;                 // `self.name(...)` or `cls.name(...)`
  // The object a method is called on: `g`, `self.maker`, `_GROUPS` as written, or, for a call's
  // result (`DeviceGroup().get_group`), the callee of that call with `()`: "DeviceGroup()".
  std::string receiver;
  std::string receiverQualified;       // the receiver's head as the file's imports resolve it
  int loopDepth = 0;                   // loops and comprehensions around it in its function
  uint32_t row = 0, column = 0;        // where the call starts (0-based, the file's)
  // A call of a table's entry (`self.funcs[name](...)`, name empty): the table as written,
  // "self.funcs"; empty for any other call.
  std::string table;
  // The names whose truth the call's `if` arms test plainly (`if init_backend:` around it), and the
  // keywords it passes as False or None (`Mesh(..., init_backend=False)`): a wrapper whose every
  // creation stands under `if flag:` creates nothing where it is called with `flag=False`.
  std::vector<std::string> guards;
  std::vector<std::string> offKeywords;
};

// `target = Callee(...)`: a local, `self.attr` or a module-level name bound to a call's result,
// which is how a receiver gets its class. Each call of a conditional expression
// (`A(...) if c else B(...)`) binds the target too. `target = name` binds it to whatever the
// local `name` holds (`alias`, the callee the local's name).
struct Construction {
  std::string target;     // "g", "self.maker", "_GROUPS"
  std::string callee;     // "GroupMaker", "mod.GroupMaker"
  std::string qualified;  // as the file's imports resolve the callee; empty if they do not
  bool alias = false;
};

// `self.funcs["send"] = self.isend`, or `self.funcs = {"send": self.isend}`: a table of a
// function's object whose entries are its methods, so that a call of an entry may run any of them.
struct TableEntry {
  std::string table;   // "self.funcs"
  std::string method;  // "isend"
};

// Where a function is defined, which decides how it can be called.
enum class FunctionScope { Module, Method, Nested };

struct FunctionCalls {
  std::string function;  // bare name
  FunctionScope scope = FunctionScope::Module;
  std::vector<CallInFunction> calls;
  std::string owner;  // a method's class
  std::vector<Construction> constructions;  // what it binds to calls' results
  std::vector<TableEntry> tableEntries;     // the methods it stores in tables
  // The bases of a method's class as written (`nn.Module`), when its header was read.
  std::vector<std::string> ownerBases;
};

// A source's module-level statements read so far: the objects they make (`_GROUPS = GroupMaker()`)
// and the calls outside any function (a script's loop, a class body).
struct ModuleFacts {
  std::vector<Construction> constructions;
  std::vector<CallInFunction> calls;
};

// The functions defined in `regions` of `text` (empty: all of it) and the calls in each. Imports
// of the parsed regions bind in `names`, which qualify the calls after them, as in parsePython; a
// source read in parts keeps one `names` for them all, so its imports are parsed once.
std::vector<FunctionCalls> pythonFunctionCalls(std::string_view text, const std::vector<ParseRegion>& regions,
                                               PythonNames& names);
std::vector<FunctionCalls> pythonFunctionCalls(std::string_view text, const std::vector<ParseRegion>& regions);
// The same, with the module-level constructions added to `module`.
std::vector<FunctionCalls> pythonFunctionCalls(std::string_view text, const std::vector<ParseRegion>& regions,
                                               PythonNames& names, ModuleFacts& module);

// The dotted module a Python file defines, from its path ("/src/mypkg/ps.py" -> "src.mypkg.ps",
// a package's __init__.py its folder): matched against imports by its last components.
std::string pythonModuleOf(const std::string& path);

// A wrapper as the table keeps it: "<module>:<name>" for a module's function, "<module>#self:<name>"
// for a method, "<module>#local:<name>" for a nested function; the module is empty when unknown
// (a bare name is read as ":<name>").
std::string groupWrapperKey(const std::string& module, const FunctionCalls& function);
std::string groupWrapperName(const std::string& key);
// The key of a model's forward or backward (a method of a class with a base) that issues a transfer
// itself, among NM502's table's keys: its class's, "mod#self:Conv.forward", since groupWrapperKey's
// "mod#self:forward" stands for the method of that name of every class of the module.
std::string modelStepKey(const std::string& module, const std::string& owner, const std::string& method);
// Whether the module of a file (`module`, unknown when empty) is the one `imported` names: the same
// dotted name or its last components, or the package above it (a name its __init__.py re-exports).
bool moduleNamedBy(const std::string& module, const std::string& imported);

// The table's wrappers by name, to tell whether a call made in module `caller` reaches one: a
// module's function through its module (imported by name or as a module, relatively too, or called
// in its own module), a method through `self` in its own module, a nested function by its bare
// name in its own module. An unknown module (empty) matches any.
class GroupWrapperIndex {
 public:
  GroupWrapperIndex() = default;
  explicit GroupWrapperIndex(const std::set<std::string>& keys);
  void add(const std::string& key);

  bool reaches(const CallInFunction& call, const std::string& caller) const { return !reached(call, caller).empty(); }
  // The key of the wrapper the call reaches; empty if none.
  std::string reached(const CallInFunction& call, const std::string& caller) const;
  // Whether some wrapper has this name (the function a call stands in).
  bool names(const std::string& function) const { return scopes_.contains(function); }
  bool empty() const { return scopes_.empty(); }

 private:
  std::unordered_map<std::string, std::vector<std::string>> scopes_;  // name -> the part of its keys before the colon
};

// Whether a function of this name is one of the project's group wrappers, inferred (`inferred`)
// or configured (`configured`, a dotted name matching by its last part). One answer for the lint
// pass's text shortcut and the frontend: the shortcut is exact only while the two agree.
bool isGroupWrapperFunctionName(const GroupWrapperIndex& inferred, const std::vector<std::string>& configured,
                                const std::string& name);

// Whether the text defines a module-level function `name` (`def name(` at the start of a line): the
// cheap look over a tree's texts before moduleFunctionReturns parses one.
bool mayDefineModuleFunction(std::string_view text, const std::string& name);

// What the module-level functions of `names` that the file defines return, by name: each return
// traced in the file (traceBinding), as NameEquivalences::functionReturns carries them to the files
// that call one (NM102 reads a device selection through them). The file is parsed once, whole, with
// `equivalences`; a name it defines no module-level function of is absent (a method of that name
// is none).
std::map<std::string, std::vector<TracedValue>> moduleFunctionReturns(const std::string& path, const std::string& text,
                                                                      const std::set<std::string>& names,
                                                                      const NameEquivalences& equivalences);

// The leading imports of a source bound from their text, when they are written plainly: the tables
// bind each source's imports before they parse around its calls, and a parse of the imports (a
// third of the bytes the tables parsed on Megatron-LM) is what this spares. Binds the import
// statements of `imports` (leadingImports's regions of `text`) into `names`, in order, as the
// walker of pythonFunctionCalls binds them (`from __future__` binds nothing: the grammar has it as
// no import); false, with nothing bound, when one of them is written otherwise (a comment or
// string where a name stands, a backslash, a semicolon, a name that is not ASCII) or the regions
// hold more than comments after them, so the bindings are always the ones a parse makes.
bool bindPlainImports(std::string_view text, const std::vector<ParseRegion>& imports, PythonNames& names);

}  // namespace nccl_migrate::lint
