// The project-wide table of group-creating wrappers: functions of the scanned tree whose body calls
// torch.distributed's group creators, directly or through another such function. A cheap scan of
// each source for calls of the names sought picks the statements worth reading (python_scopes.h);
// only those are parsed (frontends/python_project.h), each at most once, so signatures over
// several lines, decorators, nested functions and methods are read as Python reads them.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace nccl_migrate::lint {

// One source's functions that call one of `creators` (bare names), where the call names no backend
// other than an eager NCCL one and is not one of torch's other functions. For tests and the fuzzer.
std::set<std::string> functionsCalling(std::string_view source, const std::set<std::string>& creators);

// The wrappers defined in `texts` (Python sources of the modules `modules`, from
// pythonModuleOf; empty: unknown), to the fixed point, as keys of frontends/python_project.h
// ("mypkg.parallel_state:create_group", "self:_make"); each round scans the sources on up to
// `threads` threads.
std::set<std::string> inferGroupWrappers(const std::vector<std::string_view>& texts, const std::vector<std::string>& modules,
                                         unsigned threads = 1);
// The same for sources whose modules are unknown.
std::set<std::string> inferGroupWrappers(const std::vector<std::string_view>& texts, unsigned threads = 1);

}  // namespace nccl_migrate::lint
