// Registers _C.torch_features(): what the torch this module was built against offers.
#pragma once

#include <pybind11/pybind11.h>

namespace nccl_migrate::python {

void bindTorchFeatures(pybind11::module_& m);

}  // namespace nccl_migrate::python
