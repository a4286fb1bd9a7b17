// How fixed code recognises a backend that runs NCCL: torch's legacy class, its rewritten ones
// (ProcessGroupNCCL2, ProcessGroupNCCLLazy) and the toolkit's own backends, whatever torch is
// installed. Each of these reports "nccl", "nccl2" or "nccl-lazy" as its name; nothing else does.
// The test is one helper per file (the fix engine puts it after the imports or includes, once),
// called where each check stood.
#pragma once

#include <string>

namespace nccl_migrate::lint {

// Python: `_is_nccl_backend(obj, classes=())`, true for every NCCL backend and for instances of
// `classes` (the other classes of an isinstance tuple). torch's classes are looked up when it
// runs, with getattr, so the module imports on torch versions without the rewritten ones.
std::string pythonNcclBackendHelperName();
std::string pythonNcclBackendHelper();

// C++: `asNcclBackend(b)`, the backend pointer (raw, c10::intrusive_ptr or shared_ptr) where it
// runs NCCL, else null, so it stands where a dynamic cast to the legacy class was tested for
// null, its result tested the same way. It needs only c10d::Backend::getBackendName, so it
// compiles against every torch, with or without the nccl2 headers; inline, under an include
// guard of its own, so a fixed header and a fixed source that includes it never define it twice.
std::string cppNcclBackendHelperName();
std::string cppNcclBackendHelper();

}  // namespace nccl_migrate::lint
