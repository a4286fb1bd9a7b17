// Which Python runs the torch-side commands.
#pragma once

#include <string>

namespace nccl_migrate::cli {

struct PythonChoice {
  std::string interpreter;
  std::string why;  // for error messages: where the choice came from
};

// In order: NCCL_MIGRATE_PYTHON (an explicit choice wins); `python3` or `python` beside this
// binary, links resolved (an installed wheel's environment: the venv, pipx's or the user's
// prefix); the interpreter an in-tree build was configured with; `python3` on PATH.
PythonChoice choosePython();

}  // namespace nccl_migrate::cli
