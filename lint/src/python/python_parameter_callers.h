// Values a Python tree's callers choose: which parameters with a string default (`backend="gloo"`)
// some call in the tree passes another value, found by a scan of the texts rather than a parse,
// so that a run can afford it over every Python file before the files are linted.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace nccl_migrate::lint {

// The key of a function's parameter in parametersCallersPass: "<module>.<function's name>:<parameter>"
// ("pkg.harness.setup:backend"; "setup:backend" where the module is unknown), a class's name for its
// __init__ ("pkg.harness.Harness:backend"), which calls of the class reach. Functions of one name in
// different modules keep their own callers.
std::string callerParameterKey(std::string_view module, std::string_view function, std::string_view parameter);

// The parameters with a string literal default, defined anywhere in `texts` (`def f(..., backend="gloo")`),
// that some call in `texts` passes a value other than that default: by keyword, by position (past
// `self`/`cls` for a method called on an object, as a class's call is for its `__init__`), or
// through `*args`/`**kwargs`, which may hold it. A call is found by the function's name before `(`
// in a text that can reach the definition: its own, one that names the defining module's last name
// (as an import of it does, `modules` giving each text's dotted module; none known: any text), or,
// for a method, any call on an object. Where no call passes it, or every call passes that same
// string, the default is the value the function works with. The texts are read on `jobs` threads.
std::set<std::string> parametersCallersPass(const std::vector<std::string_view>& texts, const std::vector<std::string>& modules,
                                            unsigned jobs = 1);
std::set<std::string> parametersCallersPass(const std::vector<std::string_view>& texts, unsigned jobs = 1);

}  // namespace nccl_migrate::lint
