// NM502 across files: a function that issues point-to-point transfers is reported where its
// transfer stands when the tree calls it in a loop, from its own file or another, directly, through
// a function that calls it, or through an object's method (python/group_wrappers.h,
// pointToPointInLoops).
#include "python/group_wrappers.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "nccl_migrate/lint/linter.h"
#include "nm502_tree.h"

namespace nccl_migrate::lint {
namespace {

class PointToPointLoopsTree : public Nm502Tree {};

// A pipeline stage's exchange with its neighbours, in its own module: two single transfers.
const char* kStageComm =
    "import torch\n"
    "import torch.distributed as dist\n"
    "\n"
    "\n"
    "def exchange_activations(send_buf, recv_shape, peer, *, dtype=torch.bfloat16):\n"
    "    recv_buf = torch.empty(recv_shape, dtype=dtype, device=\"cuda\")\n"
    "    outgoing = dist.isend(send_buf, peer)\n"
    "    incoming = dist.irecv(recv_buf, peer)\n"
    "    outgoing.wait()\n"
    "    incoming.wait()\n"
    "    return recv_buf\n";

// The same exchange as one batch, which ran on the group's communicator under the legacy
// ProcessGroupNCCL too.
const char* kBatchedStageComm =
    "import torch\n"
    "import torch.distributed as dist\n"
    "\n"
    "\n"
    "def exchange_activations(send_buf, recv_shape, peer, *, dtype=torch.bfloat16):\n"
    "    recv_buf = torch.empty(recv_shape, dtype=dtype, device=\"cuda\")\n"
    "    ops = [\n"
    "        dist.P2POp(dist.isend, send_buf, peer),\n"
    "        dist.P2POp(dist.irecv, recv_buf, peer),\n"
    "    ]\n"
    "    for work in dist.batch_isend_irecv(ops):\n"
    "        work.wait()\n"
    "    return recv_buf\n";

const char* kOneForwardOneBackward =
    "from stagepipe.comm import exchange_activations\n"
    "\n"
    "\n"
    "def one_forward_one_backward(stage, microbatches, next_rank):\n"
    "    grads = []\n"
    "    for mb in microbatches:\n"
    "        out = stage(mb)\n"
    "        grads.append(\n"
    "            exchange_activations(out, out.shape, next_rank)\n"
    "        )\n"
    "    return grads\n";

TEST_F(PointToPointLoopsTree, ABatchedHelperCalledInALoopIsNotReported) {
  write("stagepipe/comm.py", kBatchedStageComm);
  write("stagepipe/schedule.py", kOneForwardOneBackward);
  EXPECT_TRUE(findings().empty());
}

TEST_F(PointToPointLoopsTree, AHelperInAnotherFileCalledInAForLoop) {
  write("stagepipe/comm.py", kStageComm);
  write("stagepipe/schedule.py", kOneForwardOneBackward);
  EXPECT_EQ(findings(), (std::vector<std::string>{"comm.py:7", "comm.py:8"}));
  ASSERT_EQ(messages_.size(), 2u);
  EXPECT_NE(messages_[0].find("dist.isend() in exchange_activations(), which "), std::string::npos) << messages_[0];
  EXPECT_NE(messages_[0].find("stagepipe/schedule.py:9"), std::string::npos);
  EXPECT_NE(messages_[0].find("calls in a loop at "), std::string::npos) << messages_[0];
}

TEST_F(PointToPointLoopsTree, AHelperCalledOnceOutsideLoopsIsNotReported) {
  write("stagepipe/comm.py", kStageComm);
  write("stagepipe/warmup.py",
        "from .comm import exchange_activations\n"
        "\n"
        "\n"
        "def handshake(stage, sample, next_rank):\n"
        "    if stage.is_first:\n"
        "        return None\n"
        "    return exchange_activations(stage(sample), sample.shape, next_rank)\n");
  EXPECT_TRUE(findings().empty());
}

// A relative import from the schedule's package, and a loop two calls away: the step function is
// called once per microbatch, and calls the exchange once.
TEST_F(PointToPointLoopsTree, ALoopAroundACallerOfTheHelperCounts) {
  write("stagepipe/comm.py", kStageComm);
  write("stagepipe/schedule.py",
        "from . import comm\n"
        "\n"
        "\n"
        "def _step(stage, mb, peer):\n"
        "    out = stage(mb)\n"
        "    return comm.exchange_activations(out, out.shape, peer)\n"
        "\n"
        "\n"
        "def run_schedule(stage, microbatches, peer):\n"
        "    return [_step(stage, mb, peer) for mb in microbatches]\n");
  EXPECT_EQ(findings(), (std::vector<std::string>{"comm.py:7", "comm.py:8"}));
  ASSERT_EQ(messages_.size(), 2u);
  EXPECT_NE(messages_[0].find("stagepipe/schedule.py:10"), std::string::npos);
  EXPECT_NE(messages_[0].find("calls in a loop at "), std::string::npos) << messages_[0];
}

const char* kRingAttention =
    "import torch\n"
    "from ringattn.ring_comm import RingComm\n"
    "\n"
    "\n"
    "def ring_attention(q, k, v, group, world_size, src, dst):\n"
    "    comm = RingComm(group)\n"
    "    out = torch.zeros_like(q)\n"
    "    for step in range(world_size):\n"
    "        if step + 1 != world_size:\n"
    "            next_k, next_v = torch.empty_like(k), torch.empty_like(v)\n"
    "            comm.send_recv(k, next_k, src, dst)\n"
    "            comm.send_recv(v, next_v, src, dst)\n"
    "            comm.commit()\n"
    "        out += torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ v\n"
    "        if step + 1 != world_size:\n"
    "            comm.wait()\n"
    "            k, v = next_k, next_v\n"
    "    return out\n";

// Context parallelism's ring: a class collects the step's sends and receives and commits them in
// one batch; the attention loop commits once per ring step through an instance. A batch ran on the
// group's communicator under the legacy backend too: not reported.
TEST_F(PointToPointLoopsTree, ABatchCommittedThroughAnObjectInALoopIsNotReported) {
  write("ringattn/ring_comm.py",
        "import torch.distributed as dist\n"
        "\n"
        "\n"
        "class RingComm:\n"
        "    def __init__(self, group):\n"
        "        self.group = group\n"
        "        self.ops = []\n"
        "        self.reqs = None\n"
        "\n"
        "    def send_recv(self, to_send, recv_buf, src, dst):\n"
        "        self.ops.append(dist.P2POp(dist.isend, to_send, dst, group=self.group))\n"
        "        self.ops.append(dist.P2POp(dist.irecv, recv_buf, src, group=self.group))\n"
        "\n"
        "    def commit(self):\n"
        "        self.reqs = dist.batch_isend_irecv(self.ops)\n"
        "\n"
        "    def wait(self):\n"
        "        for r in self.reqs:\n"
        "            r.wait()\n"
        "        self.ops, self.reqs = [], None\n");
  write("ringattn/attention.py", kRingAttention);
  EXPECT_TRUE(findings().empty());
}

// The ring class issuing single transfers: each is reported where it stands, reached through the
// instance the attention loop calls.
TEST_F(PointToPointLoopsTree, AnObjectsMethodCalledInALoop) {
  write("ringattn/ring_comm.py",
        "import torch.distributed as dist\n"
        "\n"
        "\n"
        "class RingComm:\n"
        "    def __init__(self, group):\n"
        "        self.group = group\n"
        "        self.reqs = []\n"
        "\n"
        "    def send_recv(self, to_send, recv_buf, src, dst):\n"
        "        self.reqs.append(dist.isend(to_send, dst, group=self.group))\n"
        "        self.reqs.append(dist.irecv(recv_buf, src, group=self.group))\n"
        "\n"
        "    def commit(self):\n"
        "        pass\n"
        "\n"
        "    def wait(self):\n"
        "        for r in self.reqs:\n"
        "            r.wait()\n"
        "        self.reqs = []\n");
  write("ringattn/attention.py", kRingAttention);
  EXPECT_EQ(findings(), (std::vector<std::string>{"ring_comm.py:10", "ring_comm.py:11"}));
  ASSERT_EQ(messages_.size(), 2u);
  EXPECT_NE(messages_[0].find("dist.isend() in send_recv(), which "), std::string::npos) << messages_[0];
  EXPECT_NE(messages_[0].find("ringattn/attention.py:11"), std::string::npos);
  EXPECT_NE(messages_[0].find("calls in a loop at "), std::string::npos) << messages_[0];
}

// The ring class as libraries write it: the attention loop calls `send_recv_kv`, a method that
// calls `self.queue()`, which issues a send and a receive. The loop reaches the transfers through
// two methods of the object, and the object is made before the loop.
TEST_F(PointToPointLoopsTree, AMethodReachedThroughAnotherMethodOfTheObject) {
  write("ringlib/__init__.py", "");
  write("ringlib/comm.py",
        "import torch\n"
        "import torch.distributed as dist\n"
        "\n"
        "\n"
        "class RingExchange:\n"
        "    def __init__(self, group):\n"
        "        self.group = group\n"
        "        rank, world = dist.get_rank(group), dist.get_world_size(group)\n"
        "        self.next_rank = dist.get_global_rank(group, (rank + 1) % world)\n"
        "        self.prev_rank = dist.get_global_rank(group, (rank - 1) % world)\n"
        "        self.pending = []\n"
        "\n"
        "    def queue(self, outgoing):\n"
        "        incoming = torch.empty_like(outgoing)\n"
        "        self.pending.append(dist.isend(outgoing, self.next_rank, group=self.group))\n"
        "        self.pending.append(dist.irecv(incoming, self.prev_rank, group=self.group))\n"
        "        return incoming\n"
        "\n"
        "    def wait(self):\n"
        "        for request in self.pending:\n"
        "            request.wait()\n"
        "        self.pending = []\n"
        "\n"
        "    def send_recv_kv(self, k, v):\n"
        "        next_k, next_v = self.queue(k), self.queue(v)\n"
        "        return next_k, next_v\n");
  write("ringlib/attention.py",
        "import torch\n"
        "from .comm import RingExchange\n"
        "\n"
        "\n"
        "def ring_forward(group, q, k, v, world_size):\n"
        "    ring = RingExchange(group)\n"
        "    out = torch.zeros_like(q)\n"
        "    for step in range(world_size):\n"
        "        if step + 1 != world_size:\n"
        "            next_k, next_v = ring.send_recv_kv(k, v)\n"
        "        out += torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ v\n"
        "        if step + 1 != world_size:\n"
        "            ring.wait()\n"
        "            k, v = next_k, next_v\n"
        "    return out\n");
  EXPECT_EQ(findings(), (std::vector<std::string>{"comm.py:15", "comm.py:16"}));
  ASSERT_EQ(messages_.size(), 2u);
  EXPECT_NE(messages_[0].find("dist.isend() in queue(), which "), std::string::npos) << messages_[0];
  EXPECT_NE(messages_[0].find("ringlib/attention.py:10"), std::string::npos);
  EXPECT_NE(messages_[0].find("calls in a loop at "), std::string::npos) << messages_[0];
}

// A benchmark outside the package makes the ring object through the name the package's
// __init__.py re-exports.
TEST_F(PointToPointLoopsTree, AClassReExportedByItsPackage) {
  write("ringlib/__init__.py", "from .neighbours import RingComm\n");
  write("ringlib/neighbours.py",
        "import torch.distributed as dist\n"
        "\n"
        "\n"
        "class RingComm:\n"
        "    def __init__(self, group):\n"
        "        self.group = group\n"
        "        self.ops = []\n"
        "\n"
        "    def commit(self, outgoing, peer):\n"
        "        self.ops.append(dist.isend(outgoing, peer, group=self.group))\n");
  write("bench/ring_bench.py",
        "from ringlib import RingComm\n"
        "\n"
        "\n"
        "def bench(group, iters, buf, peer):\n"
        "    ring = RingComm(group)\n"
        "    for _ in range(iters):\n"
        "        ring.commit(buf, peer)\n");
  EXPECT_EQ(findings(), (std::vector<std::string>{"neighbours.py:10"}));
  ASSERT_EQ(messages_.size(), 1u);
  EXPECT_NE(messages_[0].find("bench/ring_bench.py:7"), std::string::npos);
  EXPECT_NE(messages_[0].find("calls in a loop at "), std::string::npos) << messages_[0];
}

// Each transfer of a helper called in a loop is its own site; the P2POps it builds are not.
TEST_F(PointToPointLoopsTree, EachTransferOfAHelperCalledInALoop) {
  write("stagepipe/p2p.py",
        "import torch\n"
        "import torch.distributed as dist\n"
        "\n"
        "\n"
        "def swap_with(peer, outgoing, rank):\n"
        "    incoming = torch.empty_like(outgoing)\n"
        "    if rank < peer:\n"
        "        dist.send(outgoing, peer)\n"
        "        dist.recv(incoming, peer)\n"
        "    else:\n"
        "        dist.recv(incoming, peer)\n"
        "        dist.send(outgoing, peer)\n"
        "    return incoming\n");
  write("stagepipe/run.py",
        "from stagepipe.p2p import swap_with\n"
        "\n"
        "\n"
        "def run(chunks, peer, rank):\n"
        "    return [swap_with(peer, chunk, rank) for chunk in chunks]\n");
  EXPECT_EQ(findings(), (std::vector<std::string>{"p2p.py:8", "p2p.py:9", "p2p.py:11", "p2p.py:12"}));
  for (const std::string& m : messages_) EXPECT_NE(m.find("in swap_with(), which "), std::string::npos) << m;
}

// The schedule runs on a gloo group (a CPU test of the pipeline): its loop is no NCCL loop.
TEST_F(PointToPointLoopsTree, ALoopInAFileOnGlooIsNotReported) {
  write("stagepipe/comm.py", kStageComm);
  write("stagepipe/cpu_check.py",
        "import torch.distributed as dist\n"
        "from stagepipe.comm import exchange_activations\n"
        "\n"
        "\n"
        "def check_pipeline(stage, microbatches, next_rank):\n"
        "    dist.init_process_group(backend=\"gloo\")\n"
        "    for mb in microbatches:\n"
        "        exchange_activations(stage(mb), mb.shape, next_rank)\n");
  EXPECT_TRUE(findings().empty());
}

// A same-named function of another module, called in a loop, is not the helper.
TEST_F(PointToPointLoopsTree, ASameNamedFunctionElsewhereIsNotTheHelper) {
  write("stagepipe/comm.py", kStageComm);
  write("tools/replay.py",
        "from tools.fake_comm import exchange_activations\n"
        "\n"
        "\n"
        "def replay(trace):\n"
        "    for event in trace:\n"
        "        exchange_activations(event.tensor, event.shape, event.peer)\n");
  write("tools/fake_comm.py",
        "def exchange_activations(send_buf, recv_shape, peer):\n"
        "    return send_buf\n");
  EXPECT_TRUE(findings().empty());
}

// The table itself: the helper's key and the loop's source and row.
TEST(PointToPointInLoops, KeysEachHelperWithItsLoop) {
  std::vector<std::string_view> texts = {kStageComm,
                                         "from stagepipe.comm import exchange_activations\n"
                                         "def drain(bufs, peer):\n"
                                         "    while bufs:\n"
                                         "        exchange_activations(bufs.pop(), (4,), peer)\n"};
  std::vector<std::string> modules = {"stagepipe.comm", "stagepipe.drain"};
  std::map<std::string, LoopedCall> looped = pointToPointInLoops(texts, modules, 1);
  ASSERT_EQ(looped.size(), 1u);
  EXPECT_EQ(looped.begin()->first, "stagepipe.comm:exchange_activations");
  EXPECT_EQ(looped.begin()->second.source, 1u);
  EXPECT_EQ(looped.begin()->second.row, 3u);
  // Its loop in a source that does not count: none.
  EXPECT_TRUE(pointToPointInLoops(texts, modules, 1, [](size_t source) { return source != 1; }).empty());
}

}  // namespace
}  // namespace nccl_migrate::lint
