// Where the Gloo backend of an aborted CPU communicator is torn down: on the abort's own thread,
// never on the thread of an op whose call was still inside Gloo when the abort came. The
// backend's destructor (torch's waits for Gloo's work queue and joins its workers) would
// otherwise run on the job's thread, without bound. A stand-in backend holds its op call until
// the abort's thread has had every chance to let go of its reference, and notes which thread
// destroys it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "cpu/gloo_communicator.h"

namespace nccl_migrate::backends {
namespace {

using namespace std::chrono_literals;

class DoneWork final : public c10d::Work {
 public:
  bool isCompleted() override { return true; }
  bool wait(std::chrono::milliseconds) override { return true; }
};

// What the test learns from the stand-in backend, which outlives it.
struct Observed {
  std::mutex mutex;
  std::condition_variable changed;
  bool inCall = false;
  bool aborted = false;
  bool destroyed = false;
  std::thread::id destroyer;
};

// Its all_reduce waits for the abort, then for up to 2 s until the call's reference is the only
// one left (the abort's thread let go of its own): then the call's reference is the last.
class HoldingBackend final : public c10d::Backend {
 public:
  explicit HoldingBackend(std::shared_ptr<Observed> observed) : Backend(0, 2), observed_(std::move(observed)) {}
  ~HoldingBackend() override {
    std::lock_guard<std::mutex> lock(observed_->mutex);
    observed_->destroyed = true;
    observed_->destroyer = std::this_thread::get_id();
    observed_->changed.notify_all();
  }
  const std::string getBackendName() const override { return "holding"; }
  void abort() override {
    std::lock_guard<std::mutex> lock(observed_->mutex);
    observed_->aborted = true;
    observed_->changed.notify_all();
  }
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>&, const c10d::AllreduceOptions&) override {
    {
      std::unique_lock<std::mutex> lock(observed_->mutex);
      observed_->inCall = true;
      observed_->changed.notify_all();
      observed_->changed.wait_for(lock, 10s, [&] { return observed_->aborted; });
    }
    auto until = std::chrono::steady_clock::now() + 2s;
    while (c10::raw::intrusive_ptr::use_count(this) > 1 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(5ms);
    }
    return c10::make_intrusive<DoneWork>();
  }

 private:
  std::shared_ptr<Observed> observed_;
};

TEST(GlooTeardown, AnAbortDuringAnOpsCallTearsDownOnTheAbortsThread) {
  auto observed = std::make_shared<Observed>();
  CommunicatorInfo info;
  info.key = "cpu";
  info.size = 2;
  GlooCommunicator comm(info, c10::make_intrusive<HoldingBackend>(observed), 1000ms);
  std::thread::id caller;
  std::thread job([&] {
    caller = std::this_thread::get_id();
    at::Tensor t = at::ones({4});
    comm.allReduce(t, Reduction{});
  });
  {
    std::unique_lock<std::mutex> lock(observed->mutex);
    ASSERT_TRUE(observed->changed.wait_for(lock, 10s, [&] { return observed->inCall; }));
  }
  comm.abort();
  job.join();
  std::unique_lock<std::mutex> lock(observed->mutex);
  ASSERT_TRUE(observed->changed.wait_for(lock, 10s, [&] { return observed->destroyed; }))
      << "the aborted communicator's backend was never torn down";
  EXPECT_NE(observed->destroyer, caller) << "the backend was torn down on the thread of the op's call";
}

}  // namespace
}  // namespace nccl_migrate::backends
