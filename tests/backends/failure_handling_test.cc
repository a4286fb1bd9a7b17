// The engine's failure handling with a communicator of the test's own (one process, one rank):
// what the threads that see a failure, or issue an op, wait for while the watchdog aborts the group.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "nccl_migrate/backends/communicator_policy.h"
#include "nccl_migrate/backends/engine_services.h"
#include "nccl_migrate/backends/migrate_backend.h"

namespace nccl_migrate::backends {
namespace {

using namespace std::chrono_literals;

// What the communicator's ops see: whether its abort has begun.
struct AbortState {
  std::atomic<bool> begun{false};
  std::atomic<bool> creating{false};        // a communicator's creation has begun
  std::atomic<bool> creationMayEnd{true};   // false holds the creation until set
};

// An op that never completes; with `failsOnAbort`, it fails once the communicator's abort began
// (as NCCL's in-flight ops do once ncclCommAbort ran).
class PendingOp final : public InFlight {
 public:
  PendingOp(std::shared_ptr<AbortState> state, bool failsOnAbort) : state_(std::move(state)), failsOnAbort_(failsOnAbort) {}
  bool isDone() override { return false; }
  std::exception_ptr failure() override {
    if (failsOnAbort_ && state_->begun.load()) {
      return std::make_exception_ptr(std::runtime_error("the communicator was aborted under the op"));
    }
    return nullptr;
  }
  void wait(std::chrono::milliseconds timeout) override {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (auto error = failure()) std::rethrow_exception(error);
      std::this_thread::sleep_for(1ms);
    }
    throw OpTimedOut("timed out");
  }
  void onDone(std::function<void(std::exception_ptr)>) override {}

 private:
  std::shared_ptr<AbortState> state_;
  bool failsOnAbort_;
};

// A communicator whose abort takes `abortTakes` (a communicator stuck in its library: the NCCL
// communicator waits up to a second for a call holding it). Its first all_reduce never
// completes; the later ones fail once the abort began.
class SlowToAbortCommunicator final : public Communicator {
 public:
  SlowToAbortCommunicator(CommunicatorInfo info, std::shared_ptr<AbortState> state, std::chrono::milliseconds abortTakes)
      : info_(std::move(info)), state_(std::move(state)), abortTakes_(abortTakes) {}
  const CommunicatorInfo& info() const override { return info_; }
  std::unique_ptr<InFlight> allReduce(at::Tensor&, const Reduction&) override {
    return std::make_unique<PendingOp>(state_, /*failsOnAbort=*/allReduces_++ > 0);
  }
  std::unique_ptr<InFlight> broadcast(at::Tensor&, int) override { return unsupported(); }
  std::unique_ptr<InFlight> reduce(at::Tensor&, int, const Reduction&) override { return unsupported(); }
  std::unique_ptr<InFlight> allGather(at::Tensor&, at::Tensor&) override { return unsupported(); }
  std::unique_ptr<InFlight> reduceScatter(at::Tensor&, at::Tensor&, const Reduction&) override { return unsupported(); }
  std::unique_ptr<InFlight> allToAll(at::Tensor&, at::Tensor&, const std::vector<int64_t>&,
                                     const std::vector<int64_t>&) override {
    return unsupported();
  }
  std::unique_ptr<InFlight> send(at::Tensor&, int) override { return unsupported(); }
  std::unique_ptr<InFlight> recv(at::Tensor&, int) override { return unsupported(); }
  void beginBatch() override {}
  void copyAfterBatch(const at::Tensor&, const at::Tensor&) override {}
  std::unique_ptr<InFlight> endBatch() override { return unsupported(); }
  void abort() override {
    if (state_->begun.exchange(true)) return;
    std::this_thread::sleep_for(abortTakes_);
  }

 private:
  static std::unique_ptr<InFlight> unsupported() { TORCH_CHECK(false, "not used by these tests"); }
  CommunicatorInfo info_;
  std::shared_ptr<AbortState> state_;
  std::chrono::milliseconds abortTakes_;
  int allReduces_ = 0;
};

class SlowToAbortFactory final : public CommunicatorFactory {
 public:
  SlowToAbortFactory(std::shared_ptr<AbortState> state, std::chrono::milliseconds abortTakes)
      : state_(std::move(state)), abortTakes_(abortTakes) {}
  std::unique_ptr<Communicator> create(const CommunicatorRequest& request) override {
    state_->creating = true;
    while (!state_->creationMayEnd.load()) std::this_thread::sleep_for(1ms);
    CommunicatorInfo info;
    info.key = request.key;
    info.purpose = request.purpose;
    info.device = request.device;
    info.rank = request.myGroupRank;
    info.size = static_cast<int>(request.groupRanks.size());
    info.groupRanks = request.groupRanks;
    info.implementation = "test";
    return std::make_unique<SlowToAbortCommunicator>(std::move(info), state_, abortTakes_);
  }

 private:
  std::shared_ptr<AbortState> state_;
  std::chrono::milliseconds abortTakes_;
};

// A one-rank group (timeout 10 s) over a SlowToAbortCommunicator.
c10::intrusive_ptr<MigrateBackend> slowToAbortGroup(std::shared_ptr<AbortState> state,
                                                    std::chrono::milliseconds abortTakes, bool lazyInit = false) {
  GroupOptions options{"0", "default_pg", 10s, {}, c10::Device(c10::kCPU)};
  return c10::make_intrusive<MigrateBackend>(
      c10::make_intrusive<c10d::HashStore>(), 0, 1, options,
      [lazyInit](int rank, int size) { return makeRewrittenPolicy(rank, size, lazyInit); },
      [state, abortTakes](const c10::intrusive_ptr<c10d::Store>&, const GroupOptions&) {
        return std::make_shared<SlowToAbortFactory>(state, abortTakes);
      },
      EngineServices::fresh(16));
}

// Whether the communicator's abort began within `bound`.
bool abortBeginsWithin(const AbortState& state, std::chrono::milliseconds bound) {
  auto giveUp = std::chrono::steady_clock::now() + bound;
  while (!state.begun.load()) {
    if (std::chrono::steady_clock::now() >= giveUp) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

c10d::AllreduceOptions withTimeout(std::chrono::milliseconds timeout) {
  c10d::AllreduceOptions options;
  options.timeout = timeout;
  return options;
}

// The watchdog aborts the group after one op timed out, and the abort takes a while. Another op
// of the group that fails meanwhile raises on its own thread at once: reporting its failure
// does not wait for the abort.
TEST(FailureHandling, AnOpFailingDuringASlowAbortRaisesAtOnce) {
  auto state = std::make_shared<AbortState>();
  auto abortTakes = 2000ms;
  auto pg = slowToAbortGroup(state, abortTakes);
  std::vector<at::Tensor> a{at::ones({2})}, b{at::ones({2})};
  auto timesOut = pg->allreduce(a, withTimeout(200ms));  // the watchdog times it out and aborts
  auto failsOnAbort = pg->allreduce(b, withTimeout(10s));
  ASSERT_TRUE(abortBeginsWithin(*state, 5s)) << "the watchdog never aborted the group";
  auto abortBegan = std::chrono::steady_clock::now();
  EXPECT_THROW(failsOnAbort->wait(), c10::DistBackendError);
  auto raisedAfter = std::chrono::steady_clock::now() - abortBegan;
  EXPECT_LT(raisedAfter, 500ms) << "the op raised " << std::chrono::duration<double>(raisedAfter).count()
                                << " s after the abort began, which takes " << abortTakes.count() << " ms";
  EXPECT_THROW(timesOut->wait(), c10::DistBackendError);
}

// The campaign's finding (kill_store, nccl-lazy): the watchdog's abort holds the group while each
// communicator aborts, and an op the job issued meanwhile waited for the whole abort (5 s, one
// communicator's abort stuck in a store call) before it was refused. An op issued while an abort
// is under way is refused at once: the group is aborted from the abort's first moment.
TEST(FailureHandling, AnOpIssuedDuringASlowAbortIsRefusedAtOnce) {
  auto state = std::make_shared<AbortState>();
  auto abortTakes = 2000ms;
  auto pg = slowToAbortGroup(state, abortTakes);
  std::vector<at::Tensor> a{at::ones({2})}, b{at::ones({2})};
  auto timesOut = pg->allreduce(a, withTimeout(200ms));  // the watchdog times it out and aborts
  ASSERT_TRUE(abortBeginsWithin(*state, 5s)) << "the watchdog never aborted the group";
  auto abortBegan = std::chrono::steady_clock::now();
  std::string refusal;
  try {
    pg->allreduce(b, withTimeout(10s));
  } catch (const c10::DistBackendError& e) {
    refusal = e.what_without_backtrace();
  }
  auto refusedAfter = std::chrono::steady_clock::now() - abortBegan;
  EXPECT_NE(refusal.find("was aborted after a failed op or an abort"), std::string::npos)
      << "the op issued during the abort was not refused as one of an aborted group: '" << refusal << "'";
  EXPECT_LT(refusedAfter, 500ms) << "the op was refused " << std::chrono::duration<double>(refusedAfter).count()
                                 << " s after the abort began, which takes " << abortTakes.count() << " ms";
  EXPECT_THROW(timesOut->wait(), c10::DistBackendError);
}

// The review's finding: an op of a lazy group creates its communicator outside the group's lock
// (creation meets the peers), and an abort that ran meanwhile did not see the new communicator.
// The op then ran on it, in a group already aborted, and the communicator was never aborted.
// Now the op is refused (as any op of an aborted group, with no failure of its own reported),
// and the communicator aborted as the others were.
TEST(FailureHandling, AnOpWhoseCommunicatorWasCreatedDuringAnAbortIsRefused) {
  auto state = std::make_shared<AbortState>();
  state->creationMayEnd = false;
  auto pg = slowToAbortGroup(state, 0ms, /*lazyInit=*/true);
  std::string refusal = "not refused";
  std::thread issuer([&] {
    std::vector<at::Tensor> a{at::ones({2})};
    try {
      pg->allreduce(a, withTimeout(10s));
    } catch (const c10::DistBackendError& e) {
      refusal = e.what_without_backtrace();
    }
  });
  auto giveUp = std::chrono::steady_clock::now() + 5s;
  while (!state->creating.load() && std::chrono::steady_clock::now() < giveUp) std::this_thread::sleep_for(1ms);
  bool creating = state->creating.load();
  if (creating) pg->abort();
  state->creationMayEnd = true;
  issuer.join();
  ASSERT_TRUE(creating) << "the op never created its communicator";
  EXPECT_NE(refusal.find("was aborted after a failed op or an abort"), std::string::npos)
      << "the op whose communicator was created during the abort was not refused: '" << refusal << "'";
  EXPECT_EQ(refusal.find("could not be created"), std::string::npos) << "refused as a failed creation: " << refusal;
  EXPECT_TRUE(state->begun.load()) << "the communicator created during the abort was never aborted";
  EXPECT_EQ(pg->getError(), c10d::ErrorType::SUCCESS) << "the job's own abort was reported as a failure of the group";
}

}  // namespace
}  // namespace nccl_migrate::backends
