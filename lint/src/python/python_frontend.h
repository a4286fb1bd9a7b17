// The Python frontend: a Python file's or notebook's text into a SourceModel, through
// tree-sitter-python. The only code outside python/ that reaches a Python parser goes through here.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "nccl_migrate/lint/linter.h"
#include "nccl_migrate/lint/source_model.h"

namespace nccl_migrate::lint {

// What the user's configuration tells a frontend about names.
struct NameEquivalences {
  std::map<std::string, std::string> modules;  // "deepspeed.comm" -> "torch.distributed"
  std::vector<std::string> groupWrappers;      // callees that stand for torch.distributed.new_group
  // Functions of the scanned tree found to create groups (bare names: a call to `x.name` or
  // `name` stands for torch.distributed.new_group).
  std::set<std::string> inferredGroupWrappers;
  // Of those, the ones whose keywords turn their creation off, with those keywords: a call passing
  // one as False or None (`DeviceMesh(..., _init_backend=False)`) is no creation (GroupWrapperTable).
  std::map<std::string, std::set<std::string>> groupWrapperSwitches;
  // The catalogue's many-group library functions ("megatron.core.parallel_state.initialize_model_parallel")
  // that the scanned tree defines itself: there they are the tree's wrappers (treeDefines).
  std::set<std::string> libraryFunctionsTreeDefines;
  // Functions of the scanned tree that issue point-to-point transfers and run repeatedly (called in
  // a loop, or from a model's forward), as keys of python_project.h, each with the clause that says
  // how (describeLoopedCall): Call::calledInLoopAt.
  std::map<std::string, std::string> functionsCalledInLoops;
  // What module-level functions of the scanned tree return, as keys of python_project.h
  // ("mypkg.utils:get_rank"), each return's value traced in its own file: a call of such a function
  // that this file imports is followed into them (see kOtherFileReturns).
  std::map<std::string, std::vector<TracedValue>> functionReturns;
  // The parameters with a string default that some call in the scanned tree passes another value,
  // as callerParameterKey names them ("bench.backend.initialize_backend:backend", python_parameter_callers.h): their value
  // is the caller's, not the default. A parameter absent here works with its default.
  std::set<std::string> parametersCallersPass;
};

// Below this size a Python file parses faster whole than split into the regions a run needs.
constexpr size_t kPythonWorthSplitting = 4 * 1024;

// A part of a file to parse, whole lines: bytes [begin, end), rows [beginRow, endRow] and the
// column where it ends (0 unless it ends the file without a newline).
struct ParseRegion {
  size_t begin = 0;
  size_t end = 0;
  uint32_t beginRow = 0;
  uint32_t endRow = 0;
  uint32_t endColumn = 0;
  bool definition = false;  // a def, class or decorated statement, which may be left unparsed
  std::string name;         // what a definition defines
};

// A Python file's top-level statements in order, found by lines (indentation, triple-quoted
// strings, continuation lines), so that the engine can leave out definitions no rule needs.
std::vector<ParseRegion> pythonTopLevelBlocks(std::string_view text);
// The statements of a block's body at `indent` (a class's members), the block's header first.
std::vector<ParseRegion> pythonStatements(std::string_view text, const ParseRegion& within, size_t indent);

// Bindings the Python frontend records besides the names Python binds, under names no Python
// name reads, for rules that look for them in SourceModel::bindings:
// - environmentBinding(key): `os.environ[key] = value`, where it stands (the Setting records the
//   key; the binding, what the value is made of and the arms around it).
// - kArmCondition: the condition of an `if` or `elif` arm, bound in the arm it opens (the binding's
//   branches end with that arm). Its value reads comparisons (`x == -1`), `not x` and `a and b` as
//   Operator nodes ("==", "not", "and"; `not` with its one operand).
std::string environmentBinding(std::string_view key);
// - a return of another file's function (NameEquivalences::functionReturns) that this file calls:
//   in SourceModel::returns under the name the call is qualified to ("mypkg.utils.get_rank"), in
//   function kOtherFileReturns, its value a OneOf of that function's returns named so.
inline constexpr int kOtherFileReturns = -2;
// The environment as a value (an Attribute node): `os.environ` however the file names it, and a dict
// made of it (`dict(os.environ)`, `{k: os.environ[k] for k in keys}`). traceValue reads an item of
// it by a known key (`env["RANK"]`, `env.get("RANK", d)`) as that environment variable's read.
inline constexpr const char* kEnviron = "os.environ";
inline constexpr const char* kArmCondition = "<if condition>";
// - kParameters: a function's parameters that take a position, in order (`self` included), bound
//   in the function where its parameter list stands: a Sequence of Name nodes (parameterAt).
inline constexpr const char* kParameters = "<parameters>";

// The name of function `functionId`'s positional parameter at `index` (0 for the first); empty
// when it has none there.
std::string parameterAt(const SourceModel& model, int functionId, size_t index);

// A binding's value followed through the file as traceValue follows an argument, read where the
// binding stands.
TracedValue traceBinding(const SourceModel& model, const Binding& binding);

// The condition binding (kArmCondition) of the arm `branches[depth]` of a place in function
// `functionId` with those branches, or of an earlier arm of the same `if` (`index`: which arm);
// null for an `else` arm or where none was recorded.
const Binding* armCondition(const SourceModel& model, int functionId, const std::vector<Call::Arm>& branches,
                            size_t depth, int index);

// Python through tree-sitter-python: error tolerant, so a file with a syntax error keeps its
// other findings. With `regions`, only those parts are parsed (positions stay the file's);
// `leftOut` are the definitions left out (in order), which still shadow what they are called from
// where they stand.
SourceModel parsePython(const std::string& path, const std::string& text, const NameEquivalences& names,
                        const std::vector<ParseRegion>& regions = {}, const std::vector<ParseRegion>& leftOut = {});

// A Jupyter notebook's code cells, joined into one Python source for the prefilter and
// parsePython, and where each cell starts in it.
struct NotebookCode {
  struct Cell {
    int number = 0;     // 1-based, counting every cell of the notebook (markdown too), as Jupyter shows them
    int firstLine = 0;  // its first line in `code`
  };
  std::string code;
  std::vector<Cell> cells;

  // A location in `code` as cell, line within the cell and column.
  Location locate(Location joined) const;
};

// Throws std::runtime_error when the file is not notebook JSON.
NotebookCode notebookCode(const std::string& text);

}  // namespace nccl_migrate::lint
