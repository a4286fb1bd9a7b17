// _C.torch_features(): the table cmake/TorchFeatures.cmake read from torch's headers when this
// module was configured, so the package (and `nccl-migrate doctor`) can say which features the
// build compiled out instead of failing later with a bare AttributeError.
#include "torch_features.h"

namespace py = pybind11;

namespace nccl_migrate::python {

void bindTorchFeatures(py::module_& m) {
  m.def(
      "torch_features",
      [] {
        py::dict features;
#define NCCL_MIGRATE_TORCH_FEATURE(name, present, kind, what) \
  {                                                           \
    py::dict feature;                                         \
    feature["present"] = static_cast<bool>(present);          \
    feature["kind"] = kind;                                   \
    feature["what"] = what;                                   \
    features[name] = feature;                                 \
  }
#include "nccl_migrate/torch_features.inc"
#undef NCCL_MIGRATE_TORCH_FEATURE
        return features;
      },
      "What the torch this module was built against offers: {name: {'present': bool, 'kind': 'feature' or "
      "'adapted', 'what': str}}, read from torch's headers at configure time; absent features are compiled out, "
      "adapted ones made up for by the toolkit.");
}

}  // namespace nccl_migrate::python
