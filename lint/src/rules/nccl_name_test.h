// How fixed code recognises a backend that runs NCCL: torch's legacy class, its rewritten ones
// (ProcessGroupNCCL2, ProcessGroupNCCLLazy) and the toolkit's own backends, whatever torch is
// installed. Each of these reports "nccl", "nccl2" or "nccl-lazy" as its name; nothing else does.
#pragma once

#include <string>

namespace nccl_migrate::lint {

// C++: a generic lambda to call on a backend pointer (raw, c10::intrusive_ptr or shared_ptr),
// false for null. It needs only c10d::Backend::getBackendName, so it compiles against every
// torch, with or without the nccl2 headers, and one expression stands wherever the test stood.
std::string cppRunsNcclLambda();

// Python: a callable taking (object, classes) to write in place of `isinstance`, so that
// `isinstance(pg, dist.ProcessGroupNCCL)` keeps its arguments as written (comments and line
// breaks included) and becomes one expression, safe inside any condition. torch's rewritten
// classes are looked up with getattr, so it runs on torch versions without them.
std::string pythonRunsNcclIsinstance();

// ("nccl", "nccl2", "nccl-lazy") as a Python tuple.
std::string pythonNcclNames();

}  // namespace nccl_migrate::lint
