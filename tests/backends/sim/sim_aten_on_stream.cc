// AtenOnCurrentStream: see sim_aten_on_stream.h. A dispatcher fallback on torch's testing mode
// key (c10::DispatchKey::TESTING_ONLY_GenericMode, which torch keeps for such single-process
// tests) takes every op the thread calls while the guard lives, and sorts it by its schema:
//   - views (a returned alias, nothing written) touch no data: they run now, and an op that
//     returns an alias only when it has nothing to do (to(), contiguous()) sends the ops it
//     calls back through here;
//   - in-place and out= ops (an argument written) run on the stream; their returns are the
//     arguments they write, available at once as on CUDA;
//   - ops that make new tensors run now only to size their results, which are then poisoned
//     (NaN, or a sentinel for integers) and filled on the stream by running the op again there,
//     where it reads its inputs in the stream's order;
//   - ops that hand the host a value (item(), equal()) wait for the stream first, as a CUDA
//     synchronization does.
#include "sim_aten_on_stream.h"

#include <chrono>
#include <future>
#include <limits>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <torch/library.h>

#include "sim_device.h"

namespace nccl_migrate::sim {
namespace {

constexpr auto kModeKey = c10::DispatchKey::TESTING_ONLY_GenericMode;

// The ops that hand the host a value read from a tensor's data (the rest of those returning no
// tensor read only sizes and types).
bool readsDataForTheHost(const c10::OperatorName& name) {
  for (const char* reader : {"aten::_local_scalar_dense", "aten::item", "aten::equal", "aten::is_nonzero",
                             "aten::allclose", "aten::_is_all_true", "aten::_is_any_true"}) {
    if (name.name == reader) return true;
  }
  return false;
}

void drain(SimStream& stream, const c10::OperatorName& reader) {
  auto reached = std::make_shared<std::promise<void>>();
  auto done = reached->get_future();
  stream.enqueue([reached] { reached->set_value(); });
  TORCH_CHECK(done.wait_for(std::chrono::seconds(30)) == std::future_status::ready, "simulated device: ",
              reader.name, " waited 30 s for a job stream that never got there (a stream held back while the "
              "host reads from it)");
}

void poison(const at::Tensor& t) {
  if (!t.defined() || t.numel() == 0) return;
  if (at::isFloatingType(t.scalar_type())) {
    t.fill_(std::numeric_limits<double>::quiet_NaN());
  } else if (at::isIntegralType(t.scalar_type(), /*includeBool=*/false)) {
    t.fill_(-77);
  }
}

bool returnsOnlyTensors(const c10::FunctionSchema& schema) {
  for (const auto& r : schema.returns()) {
    auto kind = r.type()->kind();
    bool tensorList = kind == c10::TypeKind::ListType &&
                      r.type()->castRaw<c10::ListType>()->getElementType()->kind() == c10::TypeKind::TensorType;
    if (kind != c10::TypeKind::TensorType && !tensorList) return false;
  }
  return true;
}

std::vector<at::Tensor> tensorsOf(const c10::IValue& v) {
  if (v.isTensor()) return {v.toTensor()};
  if (v.isTensorList()) return v.toTensorVector();
  return {};
}

void onCurrentStream(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
  SimStream& stream = SimRuntime::streamOf(SimRuntime::instance()->currentStream(c10::Device(c10::kCPU)));
  const c10::FunctionSchema& schema = op.schema();
  bool writes = false;
  for (const auto& a : schema.arguments()) writes = writes || (a.alias_info() && a.alias_info()->isWrite());
  bool returnsAlias = false;
  for (const auto& r : schema.returns()) returnsAlias = returnsAlias || r.alias_info();
  if (!stream.isHost() && returnsAlias && !writes && returnsOnlyTensors(schema)) {
    // A view, or an op that returns its input when it has nothing to do (to(), contiguous(),
    // reshape()): it goes on below this key, and whatever it calls comes back here.
    return op.redispatchBoxed(keys & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, kModeKey), stack);
  }
  c10::impl::ExcludeDispatchKeyGuard plain(kModeKey);
  if (stream.isHost()) return op.callBoxed(stack);
  if (!returnsOnlyTensors(schema)) {
    // A value for the host: what the stream has queued comes first, where it reads data.
    if (readsDataForTheHost(schema.operator_name())) drain(stream, schema.operator_name());
    return op.callBoxed(stack);
  }
  const size_t n = schema.arguments().size();
  std::vector<c10::IValue> args(stack->end() - static_cast<std::ptrdiff_t>(n), stack->end());
  if (writes) {
    std::vector<c10::IValue> returns;
    for (const auto& r : schema.returns()) {
      const c10::Argument* written = nullptr;
      for (size_t i = 0; i < n && r.alias_info(); ++i) {
        const auto& a = schema.arguments()[i];
        if (a.alias_info() && a.alias_info()->isWrite() && a.alias_info()->beforeSets() == r.alias_info()->beforeSets()) {
          written = &a;
          returns.push_back(args[i]);
          break;
        }
      }
      if (!written) {  // returns something besides what it writes: keep it simple and exact
        drain(stream, schema.operator_name());
        return op.callBoxed(stack);
      }
    }
    torch::jit::drop(*stack, n);
    for (auto& r : returns) torch::jit::push(*stack, std::move(r));
    stream.enqueue([op, args]() mutable { op.callBoxed(&args); });
    return;
  }
  op.callBoxed(stack);  // sizes the results
  std::vector<at::Tensor> results;
  for (size_t i = stack->size() - schema.returns().size(); i < stack->size(); ++i) {
    for (const at::Tensor& t : tensorsOf((*stack)[i])) results.push_back(t);
  }
  for (const at::Tensor& t : results) poison(t);
  stream.enqueue([op, args, results]() mutable {
    op.callBoxed(&args);
    size_t k = 0;
    for (const c10::IValue& v : args) {
      for (const at::Tensor& t : tensorsOf(v)) {
        if (k < results.size()) results[k++].copy_(t);
      }
    }
  });
}

TORCH_LIBRARY_IMPL(_, TESTING_ONLY_GenericMode, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&onCurrentStream>());
}

}  // namespace

AtenOnCurrentStream::AtenOnCurrentStream() : include_(kModeKey) {}

}  // namespace nccl_migrate::sim
