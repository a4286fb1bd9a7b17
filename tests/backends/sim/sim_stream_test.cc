// Communicators' streams: each communicator runs on a stream of its own, never one of torch's
// pool. torch's pool (c10::cuda::getStreamFromPool, c10/cuda/CUDAStream.h: 32 streams per
// priority per device, handed out round robin and shared with every user in the process) would
// put the 33rd communicator on the first one's stream, or a communicator on a stream the job or
// torch's own backend uses: a stuck kernel there would hold every op queued behind it, an abort
// included. The simulated device has such a pool (SimRuntime::poolStream), so these tests fail
// if communicators draw from it.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "nccl/nccl_communicator.h"
#include "ranks.h"
#include "sim_backend.h"
#include "sim_device.h"
#include "sim_nccl.h"

namespace nccl_migrate::sim {
namespace {

using backends::NcclCommunicator;
using backends::nccl::CommunicatorStreams;
using backends::nccl::StreamRef;

// A one-rank communicator of this process on sim:0, under its own store prefix.
std::unique_ptr<NcclCommunicator> oneRankCommunicator(RankContext& ctx, const std::string& name, Faults faults = {}) {
  backends::CommunicatorInfo info;
  info.key = "sim:0";
  info.purpose = "collective";
  info.device = simDevice(0);
  info.rank = 0;
  info.size = 1;
  info.groupRanks = {0};
  auto store = c10::make_intrusive<c10d::PrefixStore>(name, ctx.store);
  return NcclCommunicator::create(store, "comm", info, name, backends::FutureOrder::CallerStreamWaits, {},
                                  *simulatedSeams(store, faults), std::chrono::seconds(10));
}

// Whether an all_reduce on `comm` finishes within `limit`.
bool anOpFinishes(NcclCommunicator& comm, std::chrono::milliseconds limit) {
  at::Tensor t = at::ones({4});
  auto op = comm.allReduce(t, backends::Reduction{});
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!op->isDone()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return !op->failure();
}

// Beyond torch's 32 pool streams: the 33rd communicator's op does not wait for the first's
// stuck one.
TEST(SimulatedStreams, TheThirtyThirdCommunicatorsOpsDoNotWaitForTheFirstsStuckOp) {
  EXPECT_EQ(runRanks(1,
                     [](RankContext& ctx) {
                       Faults stallFirst;
                       stallFirst.stallAt = 1;
                       auto first = oneRankCommunicator(ctx, "first", stallFirst);
                       at::Tensor stuck = at::ones({4});
                       auto stuckOp = first->allReduce(stuck, backends::Reduction{});
                       std::vector<std::unique_ptr<NcclCommunicator>> more;
                       for (int i = 2; i <= 33; ++i) more.push_back(oneRankCommunicator(ctx, "c" + std::to_string(i)));
                       bool finished = anOpFinishes(*more.back(), std::chrono::seconds(5));
                       first->abort();  // releases the stuck op
                       check(finished, "the 33rd communicator's op waited for the first communicator's stuck op");
                     }),
            "");
}

// A job (or torch's own NCCL backend) may hold every stream of torch's pool with stuck work: a
// communicator made then still runs its ops.
TEST(SimulatedStreams, ACommunicatorsOpsNeverQueueBehindWorkOnTorchsPoolStreams) {
  EXPECT_EQ(runRanks(1,
                     [](RankContext& ctx) {
                       auto release = std::make_shared<std::promise<void>>();
                       auto released = release->get_future().share();
                       auto runtime = SimRuntime::instance();
                       for (size_t i = 0; i < SimRuntime::kPoolStreams; ++i) {
                         StreamRef pooled = runtime->poolStream(simDevice(0), /*highPriority=*/false);
                         SimRuntime::streamOf(pooled).enqueue([released] { released.wait(); });
                       }
                       auto comm = oneRankCommunicator(ctx, "beside-the-pool");
                       bool finished = anOpFinishes(*comm, std::chrono::seconds(5));
                       release->set_value();
                       check(finished, "the communicator's op queued behind work on one of torch's pool streams");
                     }),
            "");
}

// What CommunicatorStreams does with a stream, seen through made-up streams: handles are
// addresses in `made`, and a stream is idle unless listed in `busy`.
struct MadeStreams {
  std::vector<std::unique_ptr<int>> made;
  std::set<void*> busy;
  CommunicatorStreams streams{[this](c10::Device, bool) -> void* {
                                made.push_back(std::make_unique<int>(0));
                                return made.back().get();
                              },
                              [this](void* handle, c10::Device) { return !busy.count(handle); }};
};

TEST(SimulatedStreams, AStreamIsItsHoldersAloneUntilEveryCopyOfItsRefIsGone) {
  MadeStreams s;
  c10::Device device(c10::kCPU, 0);
  StreamRef first = s.streams.take(device, false);
  StreamRef copy = first;
  StreamRef second = s.streams.take(device, false);
  EXPECT_NE(first.handle, second.handle);
  first = StreamRef{};
  StreamRef third = s.streams.take(device, false);
  EXPECT_NE(third.handle, copy.handle) << "a stream was handed out while a copy of its ref lived";
  EXPECT_EQ(s.made.size(), 3u);
}

TEST(SimulatedStreams, AReleasedStreamIsHandedOutAgainOnlyOnceIdleAndOfTheSameDeviceAndPriority) {
  MadeStreams s;
  c10::Device device(c10::kCPU, 0);
  void* released = nullptr;
  {
    StreamRef ref = s.streams.take(device, false);
    released = ref.handle;
  }
  s.busy.insert(released);  // a stuck kernel on it
  EXPECT_NE(s.streams.take(device, false).handle, released) << "a stream with stuck work was handed out again";
  EXPECT_NE(s.streams.take(c10::Device(c10::kCPU, 1), false).handle, released) << "handed to another device";
  EXPECT_NE(s.streams.take(device, true).handle, released) << "handed out at another priority";
  s.busy.erase(released);
  EXPECT_EQ(s.streams.take(device, false).handle, released) << "an idle released stream was not reused";
}

}  // namespace
}  // namespace nccl_migrate::sim
