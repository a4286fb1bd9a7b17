// Values a Python tree's callers choose: which parameters with a string default (`backend="gloo"`)
// some call in the tree passes another value, found by a scan of the texts rather than a parse,
// so that a run can afford it over every Python file before the files are linted.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace nccl_migrate::lint {

// The key of a function's parameter in parametersCallersPass: "<bare function name>:<parameter>".
std::string callerParameterKey(std::string_view function, std::string_view parameter);

// The parameters with a string literal default, defined anywhere in `texts` (`def f(..., backend="gloo")`),
// that some call in `texts` passes a value other than that default: by keyword, by position (past
// `self`/`cls` for a method called on an object, as a class's constructor is for `__init__`), or
// through `*args`/`**kwargs`, which may hold it. A call is found by the function's bare name before
// `(`, whatever the object or module it is reached through: two functions of one name share their
// callers. Where no call passes it, or every call passes that same string, the default is the value
// the function works with. The texts are read on `jobs` threads.
std::set<std::string> parametersCallersPass(const std::vector<std::string_view>& texts, unsigned jobs = 1);

}  // namespace nccl_migrate::lint
