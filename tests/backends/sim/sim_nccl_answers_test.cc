// The communicator goes by what NCCL answers, never by what it expected: the mode NCCL chose
// (ncclInProgress), an error NCCL holds when the communicator is let go, and a call NCCL refuses
// before the communicator is ready. Each NCCL behaviour is the simulated NCCL's, sourced in
// docs/simulated-nccl.md.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <ATen/ATen.h>

#include "lagging_store.h"
#include "nccl/comm_handle.h"
#include "ranks.h"
#include "sim_backend.h"
#include "sim_nccl.h"

namespace nccl_migrate::sim {
namespace {

using namespace std::chrono_literals;

// A two-rank all_reduce through the toolkit's backend whose launch NCCL runs on its own thread
// (nonblocking mode) and which connects for a second before it queues anything: rank 1's
// simulated NCCL announces its connect of the all_reduce's algorithm (tree) 1 s late. Whatever the communicator expected,
// its work must not complete before NCCL put the op on the stream.
void expectNoEarlyCompletion(RankContext& ctx) {
  auto transfers = c10::make_intrusive<LaggingStore>(ctx.store, "/coll/tree/1", ctx.rank == 1 ? 1000ms : 0ms);
  auto pg = simBackend(ctx, rewritten(), 20s, {}, {}, backends::EngineServices::process(), transfers);
  std::vector<at::Tensor> t{at::ones({4})};
  pg->allreduce(t, allreduceWith(c10d::ReduceOp::SUM))->wait(10000ms);  // the host waits for the op's end
  expectEqual(t[0], at::full({4}, 2.0), "the all_reduce's result once its work completed");
}

std::string nonblockingConfFile() {
  std::string path = "/tmp/nccl_migrate_sim_conf_" + std::to_string(getpid());
  std::FILE* file = std::fopen(path.c_str(), "w");
  check(file != nullptr, "cannot write " + path);
  std::fputs("# set by the test\nNCCL_COMM_BLOCKING=0\n", file);
  std::fclose(file);
  return path;
}

// NCCL_COMM_BLOCKING=0 only in the file NCCL_CONF_FILE names: NCCL loads it into the
// environment at its first call, after the backend looked at the environment.
TEST(SimulatedDevice, NcclCommBlockingFromTheConfigFileIsHonoured) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       unsetenv("NCCL_COMM_BLOCKING");
                       std::string conf = nonblockingConfFile();
                       setenv("NCCL_CONF_FILE", conf.c_str(), 1);
                       expectNoEarlyCompletion(ctx);
                       std::remove(conf.c_str());
                       const char* loaded = std::getenv("NCCL_COMM_BLOCKING");
                       check(loaded && std::string(loaded) == "0", "the simulated NCCL did not load its config file");
                     }),
            "");
}

// NCCL reads NCCL_COMM_BLOCKING once per process: unset after NCCL's first read, it still
// makes every later communicator nonblocking.
TEST(SimulatedDevice, NcclCommBlockingIsReadOncePerProcess) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       setenv("NCCL_COMM_BLOCKING", "0", 1);
                       {
                         // A communicator of this rank alone: NCCL's first read of the parameter.
                         auto api = simulatedSeams(ctx.store)->api;
                         ncclUniqueId id;
                         check(api->getUniqueId(&id) == ncclSuccess, "ncclGetUniqueId");
                         ncclComm_t alone = nullptr;
                         ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
                         check(api->commInitRankConfig(&alone, 1, id, 0, &config) == ncclInProgress,
                               "NCCL_COMM_BLOCKING=0 did not make the first communicator nonblocking");
                       }
                       unsetenv("NCCL_COMM_BLOCKING");
                       expectNoEarlyCompletion(ctx);
                     }),
            "");
}

// check() takes ncclInProgress only where a caller waits for NCCL to finish (InProgressScope).
TEST(NcclChecks, InProgressOutsideAWaitingCallerIsAnError) {
  EXPECT_EQ(runRanks(1,
                     [](RankContext& ctx) {
                       auto api = simulatedSeams(ctx.store)->api;
                       backends::nccl::CallSite site{"allreduce", "pg", 0};
                       bool thrown = false;
                       try {
                         backends::nccl::check(*api, ncclInProgress, "ncclAllReduce", site);
                       } catch (const backends::nccl::NcclError& e) {
                         thrown = e.result() == ncclInProgress && std::string(e.what()).find("ncclInProgress") !=
                                                                      std::string::npos;
                       }
                       check(thrown, "ncclInProgress was taken as success with no caller waiting for it");
                       backends::nccl::InProgressScope waiting;
                       backends::nccl::check(*api, ncclInProgress, "ncclAllReduce", site);
                       check(waiting.seen(), "the waiting caller's scope did not note ncclInProgress");
                     }),
            "");
}

// A communicator of this rank alone, in blocking mode, with a handle holding it, which has run
// one all_reduce.
struct OneRankHandle {
  std::shared_ptr<backends::nccl::NcclApi> api;
  std::shared_ptr<backends::nccl::CommHandle> handle;
  std::shared_ptr<SimStream> stream = SimRuntime::instance()->makeWorkerStream("comm");
  at::Tensor t = at::ones({4});

  OneRankHandle(RankContext& ctx, Faults faults) : api(simulatedSeams(ctx.store, faults)->api) {
    ncclUniqueId id = sharedUniqueId(ctx, *api);
    ncclComm_t comm = nullptr;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    check(api->commInitRankConfig(&comm, 1, id, 0, &config) == ncclSuccess, "ncclCommInitRankConfig");
    handle = std::make_shared<backends::nccl::CommHandle>(api, comm, "pg", 0, "sim:0");
    handle->use("allreduce", [&](ncclComm_t c) {
      auto* onStream = static_cast<cudaStream_t>(static_cast<void*>(stream.get()));
      check(api->allReduce(t.data_ptr(), t.data_ptr(), 4, ncclFloat32, ncclSum, c, onStream) == ncclSuccess,
            "all_reduce");
    });
  }
  SimNcclApi& sim() const { return dynamic_cast<SimNcclApi&>(*api); }
  size_t count(const std::string& call) const {
    auto calls = sim().calls();
    return static_cast<size_t>(std::count(calls.begin(), calls.end(), call));
  }
};

// A peer fails while the group is idle: NCCL holds the error (its proxy's), the handle never
// polled it. Destroy would answer the error and free nothing; the handle must ask NCCL right
// before choosing, and abort.
TEST(SimulatedDevice, ACommunicatorWithAnErrorSinceItsLastPollIsAbortedNotDestroyed) {
  EXPECT_EQ(runRanks(1,
                     [](RankContext& ctx) {
                       OneRankHandle one(ctx, {});
                       one.sim().failWhileIdle(ncclRemoteError);
                       one.handle.reset();
                       check(one.count("ncclCommDestroy") == 0, "the communicator holding an error was destroyed");
                       check(one.count("ncclCommAbort") == 1, "the communicator holding an error was not aborted");
                       check(one.sim().liveCommunicators() == 0, "the communicator was not freed");
                     },
                     20s),
            "");
}

// The error arrives after the handle's last question and before ncclCommDestroy, which then
// answers it and frees nothing: an abort must follow, on a thread NCCL's failed destroy did not
// leave inside a group (there its reclaim would wait for a group end that never comes).
TEST(SimulatedDevice, ADestroyThatAnswersAnErrorIsFollowedByAnAbort) {
  EXPECT_EQ(runRanks(1,
                     [](RankContext& ctx) {
                       Faults faults;
                       faults.errorAtDestroy = ncclRemoteError;
                       OneRankHandle one(ctx, faults);
                       one.handle.reset();
                       check(one.count("ncclCommDestroy") == 1, "the communicator was not destroyed first");
                       check(one.count("ncclCommAbort") == 1, "no ncclCommAbort followed the failed destroy");
                       check(one.sim().liveCommunicators() == 0, "the communicator was not freed");
                     },
                     20s),
            "");
}

// A call on a nonblocking communicator whose init is still running: NCCL answers
// ncclInvalidArgument and keeps it as the communicator's state, which stays failed after the
// init ended.
TEST(SimulatedDevice, ACallBeforeReadyIsInvalidArgumentAndTheCommunicatorStaysFailed) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       // Rank 1's init announces itself 1 s late, so rank 0's init is still running.
                       auto transfers = c10::make_intrusive<LaggingStore>(ctx.store, "/init/1", 1000ms);
                       auto api = simulatedSeams(transfers)->api;
                       ncclUniqueId id = sharedUniqueId(ctx, *api);
                       ncclComm_t comm = nullptr;
                       ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
                       config.blocking = 0;
                       check(api->commInitRankConfig(&comm, 2, id, ctx.rank, &config) == ncclInProgress,
                             "a nonblocking init");
                       if (ctx.rank == 0) {
                         auto stream = SimRuntime::instance()->makeWorkerStream("comm");
                         auto* onStream = static_cast<cudaStream_t>(static_cast<void*>(stream.get()));
                         at::Tensor t = at::ones({4});
                         ncclResult_t early =
                             api->allReduce(t.data_ptr(), t.data_ptr(), 4, ncclFloat32, ncclSum, comm, onStream);
                         check(early == ncclInvalidArgument,
                               "a call before ready answered " + std::to_string(static_cast<int>(early)));
                       }
                       ncclResult_t state = ncclInProgress;
                       auto giveUp = std::chrono::steady_clock::now() + 10s;
                       while (std::chrono::steady_clock::now() < giveUp) {
                         check(api->commGetAsyncError(comm, &state) == ncclSuccess, "ncclCommGetAsyncError");
                         if (state != ncclInProgress && (ctx.rank == 1 || ctx.store->check({"init 1 done"}))) break;
                         std::this_thread::sleep_for(1ms);
                       }
                       if (ctx.rank == 1) {
                         check(state == ncclSuccess, "rank 1's init did not complete");
                         ctx.store->set("init 1 done", std::vector<uint8_t>{1});
                         return;
                       }
                       std::this_thread::sleep_for(100ms);  // rank 0's init ended too
                       check(api->commGetAsyncError(comm, &state) == ncclSuccess, "ncclCommGetAsyncError");
                       check(state == ncclInvalidArgument,
                             "after the init ended the communicator's state is " +
                                 std::to_string(static_cast<int>(state)) + ", not ncclInvalidArgument");
                     },
                     30s),
            "");
}

// NCCL connects again for each collective algorithm it picks (runtime connect; the simulated
// NCCL picks tree for a small all_reduce, ring for a large one). Rank 1 lives and never issues
// the large all_reduce: rank 0's must fail within the group's timeout, through its work, instead
// of leaving its caller inside NCCL's connect.
TEST(SimulatedDevice, ANewAlgorithmConnectsAgainAndAMissingPeerFailsIt) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       auto pg = simBackend(ctx, rewritten(), 1000ms);
                       std::vector<at::Tensor> small{at::ones({4})};
                       pg->allreduce(small, allreduceWith(c10d::ReduceOp::SUM))->wait(5000ms);
                       expectEqual(small[0], at::full({4}, 2.0), "the small all_reduce");
                       if (ctx.rank == 1) {
                         ctx.store->wait({"rank 0 done"}, 30s);  // alive, never issues the large one
                         return;
                       }
                       std::atomic<bool> returned{false};
                       auto outcome = std::make_shared<std::string>();
                       std::thread caller([pg, outcome, &returned] {
                         std::vector<at::Tensor> large{at::ones({1 << 18})};  // 1 MiB
                         try {
                           pg->allreduce(large, allreduceWith(c10d::ReduceOp::SUM))->wait();
                           *outcome = "completed without rank 1";
                         } catch (const c10::DistBackendError& e) {
                           *outcome = "failed";
                         } catch (const std::exception& e) {
                           *outcome = std::string("not a DistBackendError: ") + e.what();
                         }
                         returned = true;
                       });
                       auto started = std::chrono::steady_clock::now();
                       while (!returned && std::chrono::steady_clock::now() - started < 8s) {
                         std::this_thread::sleep_for(10ms);
                       }
                       ctx.store->set("rank 0 done", std::vector<uint8_t>{1});
                       if (!returned) {
                         caller.detach();  // inside NCCL for good
                         check(false, "the large all_reduce's caller was still inside NCCL 8 s later (timeout 1 s)");
                       }
                       caller.join();
                       check(*outcome == "failed", "the large all_reduce: " + *outcome);
                     },
                     40s),
            "");
}

}  // namespace
}  // namespace nccl_migrate::sim
