// The one representation every frontend produces and every rule reads. Rules never see a parser:
// they ask a SourceModel what was checked, called or assigned, already qualified by name.
#pragma once

#include <string>
#include <vector>

namespace nccl_migrate::lint {

enum class Language { Python, Cpp };

struct Location {
  int line = 0;    // 1-based
  int column = 0;  // 1-based, in bytes
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
  std::string spelling;  // the name as written in the source, for messages
  Location where;
};

// A call whose callee the frontend could name.
struct Call {
  std::string qualifiedName;  // "torch.distributed.new_group", "setenv"
  std::string spelling;
  Location where;
};

struct SourceModel {
  std::string path;
  Language language = Language::Python;
  std::vector<TypeCheck> typeChecks;
  std::vector<Call> calls;
  bool hadSyntaxErrors = false;  // the tree was kept; findings still come
};

}  // namespace nccl_migrate::lint
