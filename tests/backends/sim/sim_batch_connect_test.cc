// Connecting on first use inside a batch, and the bounds around it: a batch's sends and receives
// over directions NCCL has not connected yet meet their peers at the batch's end, all at once,
// before ncclGroupEnd connects (a peer that never comes fails the batch within the group's
// timeout; a ring of first sends does not deadlock); a meeting's bound holds whatever the store's
// own wait does; an abort left to a thread holding the communicator is never lost; a peer lost
// at the connect itself fails the op through its work.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "common/member_meeting.h"
#include "nccl/comm_handle.h"
#include "ranks.h"
#include "sim_backend.h"
#include "sim_nccl.h"

namespace nccl_migrate::sim {
namespace {

double secondsOf(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Each rank sends to the next and receives from the previous in one batch, on a communicator
// that has connected nothing yet: every rank's first send needs a peer that is itself at its
// first send, so meeting per op would deadlock; meeting at the batch's end does not.
void ringOfFirstSendsInOneBatch(RankContext& ctx, const backends::PolicyMaker& policy) {
  auto pg = simBackend(ctx, policy, std::chrono::seconds(10));
  int next = (ctx.rank + 1) % ctx.size, prev = (ctx.rank + ctx.size - 1) % ctx.size;
  std::vector<at::Tensor> out{at::full({4}, static_cast<float>(ctx.rank + 1))}, in{at::zeros({4})};
  pg->startCoalescing();
  pg->send(out, next, 0);
  pg->recv(in, prev, 0);
  pg->endCoalescing()->wait(std::chrono::seconds(15));
  expectEqual(in[0], at::full({4}, static_cast<float>(prev + 1)), "the batch's recv from rank " + std::to_string(prev));
}

TEST(BatchConnect, ARingOfFirstSendsInOneBatchCompletes) {
  EXPECT_EQ(runRanks(3, [](RankContext& ctx) { ringOfFirstSendsInOneBatch(ctx, rewritten()); }, std::chrono::seconds(40)),
            "");
}

// The lowered forms are batches of first sends too: scatter and gather on a fresh group.
TEST(BatchConnect, LoweredScatterAndGatherOnAFreshGroupComplete) {
  EXPECT_EQ(runRanks(3,
                     [](RankContext& ctx) {
                       auto pg = simBackend(ctx, rewritten(), std::chrono::seconds(10));
                       std::vector<at::Tensor> mine{at::zeros({2})};
                       std::vector<std::vector<at::Tensor>> parts;
                       if (ctx.rank == 0) parts = {{at::full({2}, 1.0), at::full({2}, 2.0), at::full({2}, 3.0)}};
                       c10d::ScatterOptions fromZero;
                       fromZero.rootRank = 0;
                       pg->scatter(mine, parts, fromZero)->wait(std::chrono::seconds(15));
                       expectEqual(mine[0], at::full({2}, static_cast<double>(ctx.rank + 1)), "the scattered part");
                       std::vector<std::vector<at::Tensor>> gathered;
                       if (ctx.rank == 2) gathered = {{at::zeros({2}), at::zeros({2}), at::zeros({2})}};
                       c10d::GatherOptions toTwo;
                       toTwo.rootRank = 2;
                       pg->gather(gathered, mine, toTwo)->wait(std::chrono::seconds(15));
                       if (ctx.rank == 2) {
                         for (int r = 0; r < 3; ++r) {
                           expectEqual(gathered[0][r], at::full({2}, static_cast<double>(r + 1)),
                                       "gathered from rank " + std::to_string(r));
                         }
                       }
                     },
                     std::chrono::seconds(40)),
            "");
}

// A batch of first sends to a peer that never issues its side fails as a whole within the
// group's timeout, naming the peer, through its work (the group's error set), instead of
// blocking the caller in ncclGroupEnd's connect; under each policy.
void aMissingPeerFailsABatchOfFirstSends(const backends::PolicyMaker& policy) {
  EXPECT_EQ(runRanks(2,
                     [&policy](RankContext& ctx) {
                       auto timeout = std::chrono::milliseconds(1500);
                       auto pg = simBackend(ctx, policy, timeout);
                       if (ctx.rank == 1) {
                         ctx.store->wait({"rank 0 done"}, std::chrono::seconds(25));  // alive, never issues
                         return;
                       }
                       std::vector<at::Tensor> out{at::ones({4})}, in{at::zeros({4})};
                       auto started = std::chrono::steady_clock::now();
                       std::string error;
                       try {
                         pg->startCoalescing();
                         pg->send(out, 1, 0);
                         pg->recv(in, 1, 0);
                         pg->endCoalescing()->wait(std::chrono::seconds(20));
                       } catch (const c10::DistBackendError& e) {
                         error = e.what();
                       }
                       auto took = std::chrono::steady_clock::now() - started;
                       ctx.store->set("rank 0 done", std::vector<uint8_t>{1});
                       check(!error.empty(), "a batch rank 1 never joins completed");
                       check(error.find("group rank(s) 1 did not arrive") != std::string::npos,
                             "the batch did not fail naming the missing rank: " + error);
                       check(took < timeout + backends::kMeetingAnswerGrace + std::chrono::milliseconds(500),
                             "failed after " + std::to_string(secondsOf(took)) + " s");
                       expectEqual(in[0], at::zeros({4}), "the failed batch's receive buffer");
                     },
                     std::chrono::seconds(30)),
            "");
}

TEST(BatchConnect, AMissingPeerFailsABatchOfFirstSendsWithinTheTimeout) {
  aMissingPeerFailsABatchOfFirstSends(rewritten());
}

TEST(BatchConnect, AMissingPeerFailsABatchOfFirstSendsUnderTheLegacyPolicy) {
  aMissingPeerFailsABatchOfFirstSends(legacy());
}

// Sends and receives keep their order per pair when some are held back: an all_to_all held for
// its one new direction (0 and 2 never exchanged) is not overtaken by a later all_to_all over
// pairs already connected (0-1, 1-2), which NCCL would match with the held one's data.
TEST(BatchConnect, AnAllToAllHeldBackIsNotOvertakenOnAPairItShares) {
  EXPECT_EQ(runRanks(3,
                     [](RankContext& ctx) {
                       auto pg = simBackend(ctx, rewritten(), std::chrono::seconds(10));
                       int me = ctx.rank;
                       std::vector<int> neighbours = me == 1 ? std::vector<int>{0, 2} : std::vector<int>{1};
                       std::vector<std::vector<at::Tensor>> warmUp;
                       pg->startCoalescing();  // connects 0-1 and 1-2, both ways
                       for (int peer : neighbours) {
                         warmUp.push_back({at::ones({1})});
                         pg->send(warmUp.back(), peer, 0);
                         warmUp.push_back({at::zeros({1})});
                         pg->recv(warmUp.back(), peer, 0);
                       }
                       pg->endCoalescing()->wait(std::chrono::seconds(15));
                       // First: everyone with everyone (0-2 is new). Then: 0 and 1 only, 2 with itself.
                       at::Tensor in1 = at::empty({3}), out1 = at::zeros({3});
                       for (int p = 0; p < 3; ++p) in1[p] = 100 * me + 10 + p;
                       std::vector<int64_t> everyone{1, 1, 1};
                       std::vector<int64_t> second = me == 2 ? std::vector<int64_t>{0, 0, 1} : std::vector<int64_t>{1, 1, 0};
                       at::Tensor in2 = at::full({me == 2 ? 1 : 2}, static_cast<float>(100 * me + 20));
                       at::Tensor out2 = at::zeros({me == 2 ? 1 : 2});
                       c10d::AllToAllOptions opts;
                       pg->startCoalescing();
                       pg->alltoall_base(out1, in1, everyone, everyone, opts);
                       pg->alltoall_base(out2, in2, second, second, opts);
                       pg->endCoalescing()->wait(std::chrono::seconds(15));
                       at::Tensor want1 = at::empty({3});
                       for (int p = 0; p < 3; ++p) want1[p] = 100 * p + 10 + me;
                       expectEqual(out1, want1, "rank " + std::to_string(me) + "'s first all_to_all");
                       at::Tensor want2 = me == 2 ? at::full({1}, 220.0) : at::tensor({20.0, 120.0});
                       expectEqual(out2, want2, "rank " + std::to_string(me) + "'s second all_to_all");
                     },
                     std::chrono::seconds(40)),
            "");
}

// A batch that fails at its end still launches what it issued (its NCCL group must close, and
// peers may wait for those ops), and launches it after the job's writes, like a batch that
// succeeded: here rank 2's batch holds an all_reduce, whose input the job writes on a stream of
// its own after a delay longer than the batch's failed meeting, and a receive from rank 1 that
// rank 1 never sends. Ranks 0 and 1 run the all_reduce alone: it may time out (the failed batch
// aborts rank 2's group), but must never complete with what was there before rank 2's write.
TEST(BatchConnect, AFailedBatchLaunchesItsIssuedOpsAfterTheJobsWrites) {
  EXPECT_EQ(runRanks(3,
                     [](RankContext& ctx) {
                       auto timeout = std::chrono::milliseconds(1500);
                       auto pg = simBackend(ctx, rewritten(), timeout);
                       std::vector<at::Tensor> t{at::ones({4})};
                       pg->allreduce(t, allreduceWith(c10d::ReduceOp::SUM))->wait(std::chrono::seconds(10));  // connected
                       t[0].fill_(static_cast<float>(ctx.rank + 1));
                       if (ctx.rank < 2) {
                         // Rank 2's failed batch is aborted with its group, maybe before its part ran: this
                         // all_reduce may time out, but must never complete with what rank 2 had not written.
                         bool completed = true;
                         try {
                           pg->allreduce(t, allreduceWith(c10d::ReduceOp::SUM))->wait(std::chrono::seconds(10));
                         } catch (const c10::DistBackendError&) {
                           completed = false;
                         }
                         if (completed) {
                           expectEqual(t[0], at::full({4}, 6.0), "rank " + std::to_string(ctx.rank) + "'s all_reduce");
                         }
                         ctx.store->wait({"rank 2 done"}, std::chrono::seconds(25));
                         return;
                       }
                       t[0].fill_(-100.0);  // what is there before the job's write
                       auto job = SimRuntime::instance()->makeWorkerStream("job");
                       SimRuntime::instance()->setCurrentStream(job.get());
                       at::Tensor written = t[0];
                       job->enqueue([written] {
                         std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // past the meeting's end
                         written.fill_(3.0);
                       });
                       std::vector<at::Tensor> fromOne{at::zeros({4})};
                       std::string error;
                       try {
                         pg->startCoalescing();
                         pg->allreduce(t, allreduceWith(c10d::ReduceOp::SUM));
                         pg->recv(fromOne, 1, 0);
                         pg->endCoalescing()->wait(std::chrono::seconds(10));
                       } catch (const c10::DistBackendError& e) {
                         error = e.what();
                       }
                       SimRuntime::instance()->setCurrentStream(nullptr);
                       ctx.store->set("rank 2 done", std::vector<uint8_t>{1});
                       check(error.find("group rank(s) 1 did not arrive") != std::string::npos,
                             "rank 2's batch did not fail naming rank 1: " + error);
                     },
                     std::chrono::seconds(40)),
            "");
}

// A peer can meet and still never connect: rank 1's batch also sends to rank 2, which never
// comes, so rank 1's batch fails at its meeting and rank 1 never enters ncclGroupEnd, while rank
// 0, which met rank 1, connects and waits for it. No meeting of a subset of members can rule
// that out. In nonblocking mode the wait is NCCL's launch thread's, and the group's timeout
// bounds the caller's poll: rank 0's batch fails through its work and the abort frees the launch.
// (In blocking mode rank 0's thread would stay inside ncclGroupEnd: docs/backends.md.)
TEST(BatchConnect, APeerThatMetButNeverConnectsFailsANonblockingBatchWithinTheTimeout) {
  EXPECT_EQ(runRanks(3,
                     [](RankContext& ctx) {
                       auto timeout = std::chrono::milliseconds(1500);
                       backends::DeviceCommOptions nonblocking;
                       nonblocking.blocking = 0;
                       auto pg = simBackend(ctx, rewritten(), timeout, {}, nonblocking);
                       if (ctx.rank == 2) {
                         ctx.store->wait({"rank 0 done"}, std::chrono::seconds(25));  // alive, never issues
                         return;
                       }
                       std::vector<at::Tensor> toZero{at::ones({4})}, toTwo{at::ones({4})}, fromOne{at::zeros({4})};
                       auto started = std::chrono::steady_clock::now();
                       std::string error;
                       try {
                         pg->startCoalescing();
                         if (ctx.rank == 1) {
                           pg->send(toZero, 0, 0);
                           pg->send(toTwo, 2, 0);
                         } else {
                           pg->recv(fromOne, 1, 0);
                         }
                         pg->endCoalescing()->wait(std::chrono::seconds(20));
                       } catch (const c10::DistBackendError& e) {
                         error = e.what();
                       }
                       auto took = std::chrono::steady_clock::now() - started;
                       if (ctx.rank == 1) {
                         check(error.find("group rank(s) 2 did not arrive") != std::string::npos,
                               "rank 1's batch did not fail naming rank 2: " + error);
                         ctx.store->wait({"rank 0 done"}, std::chrono::seconds(25));
                         return;
                       }
                       ctx.store->set("rank 0 done", std::vector<uint8_t>{1});
                       check(error.find("in progress") != std::string::npos,
                             "rank 0's batch did not fail as a launch still in progress: " + error);
                       check(took < 2 * timeout + backends::kMeetingAnswerGrace,
                             "failed after " + std::to_string(secondsOf(took)) + " s");
                       expectEqual(fromOne[0], at::zeros({4}), "the failed batch's receive buffer");
                       check(pg->getError() == c10d::ErrorType::COMM_ERROR, "the group's error is not COMM_ERROR");
                     },
                     std::chrono::seconds(40)),
            "");
}

// A member that gives up its meeting writes its place's verdict, "left": the member that waited
// names the one that never came, and the one arriving after that fails at once naming the one
// that gave up, instead of taking it for present and blocking in ncclGroupEnd on a member that
// left, or waiting out a timeout of its own for a meeting that cannot happen.
TEST(BatchConnect, AMemberArrivingAfterItsPeerGaveUpFailsAtOnceNamingIt) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       auto timeout = std::chrono::milliseconds(1500);
                       auto pg = simBackend(ctx, rewritten(), timeout);
                       std::vector<at::Tensor> t{at::ones({4})};
                       bool late = ctx.rank == 0;
                       if (late) std::this_thread::sleep_for(timeout + std::chrono::milliseconds(1000));
                       auto started = std::chrono::steady_clock::now();
                       std::string error;
                       try {
                         pg->startCoalescing();
                         if (late) {
                           pg->send(t, 1, 0);
                         } else {
                           pg->recv(t, 0, 0);
                         }
                         pg->endCoalescing()->wait(std::chrono::seconds(10));
                       } catch (const c10::DistBackendError& e) {
                         error = e.what();
                       }
                       auto took = std::chrono::steady_clock::now() - started;
                       std::string expected = late ? "group rank 1 had already given up waiting"
                                                   : "group rank(s) 0 did not arrive within 1500 ms";
                       check(error.find(expected) != std::string::npos,
                             "rank " + std::to_string(ctx.rank) + "'s batch did not fail with '" + expected +
                                 "': " + error);
                       auto bound = late ? std::chrono::milliseconds(500)
                                         : timeout + backends::kMeetingAnswerGrace + std::chrono::milliseconds(500);
                       check(took < bound, "rank " + std::to_string(ctx.rank) + " failed after " +
                                               std::to_string(secondsOf(took)) + " s");
                     },
                     std::chrono::seconds(30)),
            "");
}

// Under TORCH_NCCL_ASYNC_ERROR_HANDLING=0 a failed op leaves its group standing, so the job may
// try the same send and receive again: both meet at the place's next try then, and the verdict
// of the member that gave up on the first try turns neither away from the second.
TEST(BatchConnect, ATryAfterAFailedConnectMeetingMeetsAfreshWhenTheGroupStands) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "0", 1);
                       auto timeout = std::chrono::milliseconds(1000);
                       auto pg = simBackend(ctx, rewritten(), timeout);
                       bool sender = ctx.rank == 0;
                       auto sendOrReceive = [&](at::Tensor t) {
                         std::vector<at::Tensor> tensors{t};
                         auto work = sender ? pg->send(tensors, 1, 0) : pg->recv(tensors, 0, 0);
                         work->wait(std::chrono::seconds(10));
                       };
                       if (sender) std::this_thread::sleep_for(timeout + std::chrono::milliseconds(1000));
                       std::string first;
                       try {
                         sendOrReceive(sender ? at::ones({4}) : at::zeros({4}));
                       } catch (const c10::DistBackendError& e) {
                         first = e.what();
                       }
                       check(!first.empty(), "rank " + std::to_string(ctx.rank) + "'s first try did not fail");
                       ctx.store->set("tried " + std::to_string(ctx.rank), std::vector<uint8_t>{1});
                       ctx.store->wait({"tried 0", "tried 1"});
                       at::Tensor t = sender ? at::full({4}, 5.0) : at::zeros({4});
                       std::string second;
                       try {
                         sendOrReceive(t);
                       } catch (const c10::DistBackendError& e) {
                         second = e.what();
                       }
                       check(second.empty(), "rank " + std::to_string(ctx.rank) + "'s second try failed: " + second);
                       if (!sender) expectEqual(t, at::full({4}, 5.0), "the second try's receive");
                     },
                     std::chrono::seconds(30)),
            "");
}

// The campaign's finding (stop, nccl2, nonblocking): a ring's survivor whose send had failed went
// on to its receive, whose meeting waited for the stopped peer a whole timeout though the
// group was aborted a moment later; the job's wait on the failed send came only after that. A
// meeting ends as its communicator is aborted: the op fails at once, naming the abort, and the
// meeting leaves, so the peer arriving later fails at once too instead of taking it for present.
TEST(BatchConnect, AMeetingStopsWaitingWhenItsGroupIsAbortedMeanwhileAndLeaves) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       auto timeout = std::chrono::milliseconds(5000);
                       auto pg = simBackend(ctx, rewritten(), timeout);
                       if (ctx.rank == 1) {  // comes only once rank 0's meeting was abandoned
                         ctx.store->wait({"rank 0 done"}, std::chrono::seconds(25));
                         auto started = std::chrono::steady_clock::now();
                         std::string error;
                         try {
                           std::vector<at::Tensor> t{at::zeros({4})};
                           pg->recv(t, 0, 0)->wait(std::chrono::seconds(20));
                         } catch (const c10::DistBackendError& e) {
                           error = e.what();
                         }
                         auto took = std::chrono::steady_clock::now() - started;
                         check(error.find("group rank 0 had already given up") != std::string::npos,
                               "rank 1's recv did not fail naming rank 0's leaving: " + error);
                         check(took < std::chrono::milliseconds(1000),
                               "rank 1's recv failed " + std::to_string(secondsOf(took)) + " s after its issue");
                         return;
                       }
                       // Aborted once the send is in its meeting (its key is in the store), not before.
                       int64_t keysBefore = ctx.store->getNumKeys();
                       std::thread aborter([&] {
                         auto giveUp = std::chrono::steady_clock::now() + std::chrono::seconds(10);
                         while (ctx.store->getNumKeys() == keysBefore && std::chrono::steady_clock::now() < giveUp) {
                           std::this_thread::sleep_for(std::chrono::milliseconds(5));
                         }
                         std::this_thread::sleep_for(std::chrono::milliseconds(100));
                         pg->abort();
                       });
                       auto started = std::chrono::steady_clock::now();
                       std::string error;
                       try {
                         std::vector<at::Tensor> t{at::ones({4})};
                         pg->send(t, 1, 0)->wait(std::chrono::seconds(20));
                       } catch (const c10::DistBackendError& e) {
                         error = e.what();
                       }
                       auto took = std::chrono::steady_clock::now() - started;
                       aborter.join();
                       check(error.find("it was aborted meanwhile") != std::string::npos,
                             "the send did not fail naming the abort: " + error);
                       check(took < std::chrono::milliseconds(1500),
                             "the send failed " + std::to_string(secondsOf(took)) + " s after its issue");
                       // The abandoned meeting leaves within a slice of the store's wait: 1 s, which
                       // FileStore's whole-second clock makes 2 s; the rest is room for a loaded machine.
                       std::this_thread::sleep_for(std::chrono::milliseconds(4000));
                       ctx.store->set("rank 0 done", std::vector<uint8_t>{1});
                     },
                     std::chrono::seconds(40)),
            "");
}

// The simulated NCCL's connect to a peer whose process is gone fails with ncclRemoteError once
// NCCL's socket retries are spent (NCCL_SOCKET_RETRY_CNT, NCCL_SOCKET_RETRY_SLEEP_MSEC), as
// NCCL's bootstrap send to a listener that is gone does (docs/simulated-nccl.md); not before.
void aConnectToAPeerThatIsNotListeningFails(bool peerProcessLives) {
  EXPECT_EQ(runRanks(2,
                     [peerProcessLives](RankContext& ctx) {
                       setenv("NCCL_SOCKET_RETRY_CNT", "3", 1);
                       setenv("NCCL_SOCKET_RETRY_SLEEP_MSEC", "200", 1);  // 200 + 400 + 600 ms
                       auto seams = simulatedSeams(ctx.store);
                       backends::nccl::NcclApi& api = *seams->api;
                       ncclUniqueId id;
                       std::memset(&id, 0, sizeof(id));
                       std::strcpy(id.internal, "gone-peer");
                       ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
                       ncclComm_t comm = nullptr;
                       check(api.commInitRankConfig(&comm, 2, id, ctx.rank, &config) == ncclSuccess, "init");
                       if (ctx.rank == 1) {
                         if (!peerProcessLives) return;  // its process ends without connecting
                         check(api.commAbort(comm) == ncclSuccess, "abort");  // its listener closes
                         ctx.store->wait({"rank 0 done"}, std::chrono::seconds(25));
                         return;
                       }
                       auto stream = SimRuntime::instance()->makeWorkerStream("comm");
                       at::Tensor t = at::ones({4});
                       auto started = std::chrono::steady_clock::now();
                       ncclResult_t result = api.allReduce(t.data_ptr(), t.data_ptr(), 4, ncclFloat32, ncclSum, comm,
                                                           static_cast<cudaStream_t>(static_cast<void*>(stream.get())));
                       auto took = std::chrono::steady_clock::now() - started;
                       ctx.store->set("rank 0 done", std::vector<uint8_t>{1});
                       check(result == ncclRemoteError, "the connect returned " + std::to_string(result));
                       check(took >= std::chrono::milliseconds(1200), "failed after " + std::to_string(secondsOf(took)) +
                                                                          " s, before the socket retries were spent");
                       check(took < std::chrono::seconds(5), "failed after " + std::to_string(secondsOf(took)) + " s");
                       (void)api.commAbort(comm);
                     },
                     std::chrono::seconds(30)),
            "");
}

TEST(SimulatedConnect, AConnectToAPeerWhoseProcessIsGoneFailsAfterTheSocketRetries) {
  aConnectToAPeerThatIsNotListeningFails(false);
}

// A peer that aborted its communicator closed its bootstrap listener: refused the same way.
TEST(SimulatedConnect, AConnectToAPeerThatAbortedItsCommunicatorFailsAfterTheSocketRetries) {
  aConnectToAPeerThatIsNotListeningFails(true);
}

#if NCCL_MIGRATE_TORCH_HAS_SHRINK
// A batch whose member raised on the aborted group is never ended by torch's coalescing manager
// (the body raised); shrink drops it rather than refusing, so the survivors can go on.
TEST(BatchConnect, ShrinkDropsABatchLeftOpenOnAnAbortedGroup) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       auto pg = simBackend(ctx, rewritten(), std::chrono::seconds(5));
                       std::vector<at::Tensor> t{at::ones({4})};
                       pg->allreduce(t, allreduceWith(c10d::ReduceOp::SUM))->wait(std::chrono::seconds(10));
                       if (ctx.rank == 1) return;
                       pg->abort();
                       std::vector<at::Tensor> out{at::ones({4})};
                       pg->startCoalescing();
                       bool raised = false;
                       try {
                         pg->send(out, 1, 0);
                       } catch (const c10::DistBackendError&) {
                         raised = true;  // the job's coalescing manager now leaves the batch open
                       }
                       check(raised, "a send on the aborted group did not raise");
                       auto child = pg->shrink({1}, /*SHRINK_ABORT*/ 1, nullptr);
                       check(child != nullptr, "shrink gave no group");
                       std::vector<at::Tensor> u{at::full({4}, 3.0)};
                       child->allreduce(u, allreduceWith(c10d::ReduceOp::SUM))->wait(std::chrono::seconds(10));
                       expectEqual(u[0], at::full({4}, 3.0), "the shrunk group's all_reduce");
                     },
                     std::chrono::seconds(30)),
            "");
}
#endif

// A FileStore's own wait returns on a whole second past its timeout (a wait of 1000 ms takes
// 2 s), past the meeting's grace: the meeting keeps its own time, so a member that never comes is
// named as missing, not taken for a store that stopped answering.
TEST(MemberMeeting, AMissingMemberIsNamedAtAWholeSecondTimeoutOverAFileStore) {
  char path[] = "/tmp/nm-meeting-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  auto store = c10::make_intrusive<c10d::FileStore>(path, 2);
  backends::CommunicatorInfo info;
  info.key = "cpu:0";
  info.size = 2;
  info.groupRanks = {0, 1};
  auto timeout = std::chrono::milliseconds(1000);
  auto started = std::chrono::steady_clock::now();
  std::string error;
  try {
    backends::meetMembers(store, "meeting", info, "0", timeout);
  } catch (const c10::DistBackendError& e) {
    error = e.what();
  }
  auto took = std::chrono::steady_clock::now() - started;
  std::remove(path);
  EXPECT_NE(error.find("group rank(s) 1 did not arrive within 1000 ms"), std::string::npos) << error;
  EXPECT_GE(took, timeout);
  EXPECT_LT(took, timeout + backends::kMeetingAnswerGrace) << secondsOf(took) << " s";
}

// A nonblocking simulated communicator of two ranks named `name`: init answers ncclInProgress.
ncclComm_t nonblockingInit(SimNcclApi& api, const char* name, int rank) {
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  std::strcpy(id.internal, name);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  check(api.commInitRankConfig(&comm, 2, id, rank, &config) == ncclInProgress,
        "a nonblocking init answers ncclInProgress");
  return comm;
}

// Polls `comm` until its init is no longer in progress (10 s at most); NCCL's state then.
ncclResult_t initOutcome(SimNcclApi& api, ncclComm_t comm) {
  ncclResult_t state = ncclInProgress;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (state == ncclInProgress && std::chrono::steady_clock::now() < until) {
    check(api.commGetAsyncError(comm, &state) == ncclSuccess, "ncclCommGetAsyncError");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return state;
}

// An abort that finds another thread holding the communicator (here, waiting for a nonblocking
// init that rank 1 would complete late) leaves the freeing to that thread, which stops waiting at
// the abort (NCCL's abort ends an init still running) and lets go: ncclCommAbort is called once,
// as the wait returns (the handle's lock keeps it from running beside the wait), and not only
// when the handle is destroyed.
TEST(CommHandleAbort, AnAbortLeftToAThreadWaitingForInitIsDoneWhenItLetsGo) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       auto seams = simulatedSeams(ctx.store);
                       auto* api = dynamic_cast<SimNcclApi*>(seams->api.get());
                       if (ctx.rank == 1) {
                         ctx.store->wait({"aborted"}, std::chrono::seconds(25));
                         ncclComm_t late = nonblockingInit(*api, "late-init", 1);
                         check(initOutcome(*api, late) == ncclSuccess, "rank 1's init did not complete");
                         return;
                       }
                       ncclComm_t comm = nonblockingInit(*api, "late-init", 0);
                       auto handle = std::make_shared<backends::nccl::CommHandle>(seams->api, comm, "pg", 0, "sim:0",
                                                                                  /*nonblocking=*/true);
                       std::atomic<bool> waitReturned{false};
                       std::thread waiter([&] {
                         try {
                           handle->waitUntilReady(std::chrono::seconds(20));
                         } catch (const std::exception&) {
                           // a wait ended by the abort is as good: the freeing is what is checked
                         }
                         waitReturned = true;
                       });
                       std::this_thread::sleep_for(std::chrono::milliseconds(200));  // inside the wait
                       auto aborted = std::chrono::steady_clock::now();
                       handle->abort();  // the waiter holds the communicator: left to it
                       while (!waitReturned && std::chrono::steady_clock::now() - aborted < std::chrono::seconds(5)) {
                         std::this_thread::sleep_for(std::chrono::milliseconds(5));
                       }
                       check(waitReturned.load(), "the waiter did not stop waiting at the abort (rank 1 never came)");
                       ctx.store->set("aborted", std::vector<uint8_t>{1});
                       waiter.join();
                       auto calls = api->calls();
                       check(std::count(calls.begin(), calls.end(), "ncclCommAbort") == 1,
                             "the waiter let go without the abort left to it");
                       // Any call after it would have ended the process (a use after free).
                       check(calls.back() == "ncclCommAbort", "a call followed ncclCommAbort");
                     },
                     std::chrono::seconds(30)),
            "");
}

// A poll of NCCL's asynchronous error never waits behind a call inside NCCL, also once an abort
// was left to that call's thread.
TEST(CommHandleAbort, APollDoesNotWaitBehindAHolderAnAbortWasLeftTo) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       auto seams = simulatedSeams(ctx.store);
                       auto* api = dynamic_cast<SimNcclApi*>(seams->api.get());
                       if (ctx.rank == 1) {
                         ctx.store->wait({"polled"}, std::chrono::seconds(25));
                         (void)initOutcome(*api, nonblockingInit(*api, "late-init-poll", 1));
                         return;
                       }
                       ncclComm_t comm = nonblockingInit(*api, "late-init-poll", 0);
                       auto handle = std::make_shared<backends::nccl::CommHandle>(seams->api, comm, "pg", 0, "sim:0",
                                                                                  /*nonblocking=*/true);
                       std::thread waiter([&] {
                         try {
                           handle->waitUntilReady(std::chrono::seconds(20));
                         } catch (const std::exception&) {
                         }
                       });
                       std::this_thread::sleep_for(std::chrono::milliseconds(200));  // inside the wait
                       handle->abort();                                              // left to the waiter
                       auto started = std::chrono::steady_clock::now();
                       ncclResult_t polled = handle->asyncError();
                       auto took = std::chrono::steady_clock::now() - started;
                       ctx.store->set("polled", std::vector<uint8_t>{1});
                       waiter.join();
                       check(took < std::chrono::milliseconds(500),
                             "the poll waited " + std::to_string(secondsOf(took)) + " s behind the waiter");
                       check(polled != ncclSuccess, "an aborted communicator polled as healthy");
                     },
                     std::chrono::seconds(30)),
            "");
}

// A store whose every call fails once armed, as a TCPStore's do once its host died: under the
// simulated NCCL, the bootstrap network lost.
class DyingStore final : public c10d::Store {
 public:
  explicit DyingStore(c10::intrusive_ptr<c10d::Store> inner) : inner_(std::move(inner)) {}
  std::atomic<bool> dead{false};

  c10::intrusive_ptr<c10d::Store> clone() { return inner_->clone(); }
  void set(const std::string& key, const std::vector<uint8_t>& value) override { alive().set(key, value); }
  std::vector<uint8_t> get(const std::string& key) override { return alive().get(key); }
  int64_t add(const std::string& key, int64_t value) override { return alive().add(key, value); }
  bool deleteKey(const std::string& key) override { return alive().deleteKey(key); }
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override {
    return alive().compareSet(key, expected, desired);
  }
  bool check(const std::vector<std::string>& keys) override { return alive().check(keys); }
  int64_t getNumKeys() override { return alive().getNumKeys(); }
  void wait(const std::vector<std::string>& keys) override { alive().wait(keys); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    alive().wait(keys, timeout);
  }

 private:
  c10d::Store& alive() {
    if (dead.load()) C10_THROW_ERROR(DistNetworkError, "the store's host is gone");
    return *inner_;
  }
  c10::intrusive_ptr<c10d::Store> inner_;
};

// The members met, then NCCL's connect on first use fails (the bootstrap network to the peer is
// lost: ncclSystemError from the send's own group end). The op fails through its work, as any
// op a lost peer ends: a DistBackendError from wait(), the abort hooks run, the group's error
// set; not an exception of the call that skips all of that.
void aPeerLostAtFirstConnectFailsTheOpThroughItsWork(bool inABatch) {
  EXPECT_EQ(runRanks(2,
                     [inABatch](RankContext& ctx) {
                       auto transfers = c10::make_intrusive<DyingStore>(ctx.store);
                       auto pg = simBackend(ctx, rewritten(), std::chrono::seconds(5), {}, {},
                                            backends::EngineServices::process(), transfers);
                       auto hooks = std::make_shared<std::atomic<int>>(0);  // the watchdog may outlive this scope
                       pg->registerAbortHook(1, [hooks] { ++*hooks; });
                       transfers->dead = true;  // after init: the members can still meet in the group's store
                       std::vector<at::Tensor> t{at::ones({4})};
                       c10::intrusive_ptr<c10d::Work> work;
                       try {
                         if (inABatch) pg->startCoalescing();
                         work = ctx.rank == 0 ? pg->send(t, 1, 0) : pg->recv(t, 0, 0);
                         if (inABatch) work = pg->endCoalescing();
                       } catch (const std::exception& e) {
                         check(false, std::string("the call itself threw: ") + e.what());
                       }
                       std::string error;
                       try {
                         work->wait(std::chrono::seconds(10));
                       } catch (const c10::DistBackendError& e) {
                         error = e.what();
                       }
                       // In a batch NCCL connects in the group's end, outside in the call's own group.
                       std::string call = inABatch ? "ncclGroupEnd" : ctx.rank == 0 ? "ncclSend" : "ncclRecv";
                       check(error.find(call) != std::string::npos,
                             "the work did not fail with NCCL's error: " + error);
                       auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
                       while (hooks->load() == 0 && std::chrono::steady_clock::now() < until) {
                         std::this_thread::sleep_for(std::chrono::milliseconds(10));  // the watchdog runs them
                       }
                       check(hooks->load() == 1, "abort hooks ran " + std::to_string(hooks->load()) + " times");
                       check(pg->getError() == c10d::ErrorType::COMM_ERROR, "the group's error is not COMM_ERROR");
                     },
                     std::chrono::seconds(30)),
            "");
}

TEST(BatchConnect, APeerLostAtFirstConnectFailsTheOpThroughItsWork) {
  aPeerLostAtFirstConnectFailsTheOpThroughItsWork(false);
}

TEST(BatchConnect, APeerLostAtABatchsFirstConnectFailsTheBatchThroughItsWork) {
  aPeerLostAtFirstConnectFailsTheOpThroughItsWork(true);
}

}  // namespace
}  // namespace nccl_migrate::sim
