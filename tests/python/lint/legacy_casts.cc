// C++ as jobs write it against the legacy class; test_lint_fixed_cpp_compiles.py fixes it with
// the CLI and compiles the result against torch's headers.
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include <memory>

// A project's subclass, to reach the legacy class's protected members.
class Hack : public c10d::ProcessGroupNCCL {
 public:
  using c10d::ProcessGroupNCCL::ProcessGroupNCCL;
};

bool runsNccl(c10d::Backend* b) {
  if (dynamic_cast<c10d::ProcessGroupNCCL*>(b)) return true;  // the usual test
  return false;
}

// A cast held only to be tested for null.
bool held(c10d::Backend* b, std::shared_ptr<c10d::Backend> s) {
  auto* p = dynamic_cast<c10d::ProcessGroupNCCL*>(b);
  auto q = std::dynamic_pointer_cast<c10d::ProcessGroupNCCL>(s);
  if (!q) return false;
  return p != nullptr;
}

bool tests(c10d::Backend* b, c10::intrusive_ptr<c10d::Backend> p, std::shared_ptr<c10d::Backend> s) {
  bool x = dynamic_cast<c10d::ProcessGroupNCCL*>(b) != nullptr;
  bool y = nullptr == c10::dynamic_intrusive_pointer_cast<c10d::ProcessGroupNCCL>(p);
  bool z = !std::dynamic_pointer_cast<c10d::ProcessGroupNCCL>(s) || x;
  return x && y && z && (std::static_pointer_cast<c10d::ProcessGroupNCCL>(s) ? true : false);
}

void values(c10d::ProcessGroup& pg, c10d::Backend* b, std::shared_ptr<c10d::Backend> s) {
  auto* hack = (Hack*)(void*)pg.getBackend(c10d::ProcessGroup::BackendType::NCCL).get();
  auto* legacy = static_cast<c10d::ProcessGroupNCCL*>(b);
  auto shared = std::static_pointer_cast<c10d::ProcessGroupNCCL>(s);
  auto* down = static_cast<Hack*>(b);
  auto* used = dynamic_cast<c10d::ProcessGroupNCCL*>(b);
  (void)hack, (void)legacy, (void)shared, (void)down, (void)used;
}
