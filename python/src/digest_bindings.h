// Registers the word digest on nccl_migrate._C.
#pragma once

#include <pybind11/pybind11.h>

namespace nccl_migrate::python {

void bindDigest(pybind11::module_& m);

}  // namespace nccl_migrate::python
