// NM502 across files, along the routes benchmarks and models take to a single transfer: an object
// whose class a local chooses before it is kept on self, a method a class inherits, a table of an
// object's methods called by name, and a model's forward, which torch runs once per step
// (python/group_wrappers.h, pointToPointInLoops and describeLoopedCall).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "nccl_migrate/lint/linter.h"
#include "nm502_tree.h"
#include "python/group_wrappers.h"

namespace nccl_migrate::lint {
namespace {

class PointToPointRoutes : public Nm502Tree {};

// A benchmark's backend: each wrapper issues one transfer of the arguments it is given.
const char* kDistBackend =
    "import torch.distributed as dist\n"
    "\n"
    "\n"
    "class BackendBase:\n"
    "    def barrier(self, args):\n"
    "        raise NotImplementedError\n"
    "\n"
    "\n"
    "class DistBackend(BackendBase):\n"
    "    def send(self, args, tag=0):\n"
    "        dist.send(args.tensor, dst=args.peer, tag=tag)\n"
    "\n"
    "    def recv(self, args, tag=0):\n"
    "        dist.recv(args.tensor, src=args.peer, tag=tag)\n"
    "\n"
    "    def barrier(self, args):\n"
    "        dist.barrier()\n";

// The benchmark picks its backend in one method, constructors imported there, and times the
// transfers in another.
const char* kPingBench =
    "import time\n"
    "\n"
    "\n"
    "class PingBench:\n"
    "    def __init__(self):\n"
    "        self.backend = None\n"
    "\n"
    "    def init_backend(self, params):\n"
    "        backend = None\n"
    "        if params.stack == \"dist\":\n"
    "            from pingbench.dist_backend import DistBackend\n"
    "            from pingbench.shmem_backend import ShmemBackend\n"
    "\n"
    "            backend = (\n"
    "                ShmemBackend(params)\n"
    "                if params.use_shmem\n"
    "                else DistBackend(params)\n"
    "            )\n"
    "        elif params.stack == \"sockets\":\n"
    "            from pingbench.socket_backend import SocketBackend\n"
    "\n"
    "            backend = SocketBackend(params)\n"
    "        self.backend = backend\n"
    "\n"
    "    def ping(self, args, iters):\n"
    "        latencies = []\n"
    "        for _ in range(iters):\n"
    "            self.backend.barrier(args)\n"
    "            start = time.monotonic()\n"
    "            if args.rank == 0:\n"
    "                self.backend.send(args=args)\n"
    "            else:\n"
    "                self.backend.recv(args=args)\n"
    "            latencies.append(time.monotonic() - start)\n"
    "        return latencies\n";

TEST_F(PointToPointRoutes, AnObjectWhoseClassALocalChoosesBeforeSelfKeepsIt) {
  write("pingbench/__init__.py", "");
  write("pingbench/dist_backend.py", kDistBackend);
  write("pingbench/shmem_backend.py", "class ShmemBackend:\n    def send(self, args):\n        pass\n");
  write("pingbench/bench.py", kPingBench);
  EXPECT_EQ(findings(), (std::vector<std::string>{"dist_backend.py:11", "dist_backend.py:14"}));
}

// The same benchmark constructing a subclass that inherits the transfers, chosen in if/elif arms.
TEST_F(PointToPointRoutes, AMethodTheObjectsClassInherits) {
  write("pingbench/__init__.py", "");
  write("pingbench/dist_backend.py", kDistBackend);
  write("pingbench/nccl_backend.py",
        "from pingbench.dist_backend import DistBackend\n"
        "\n"
        "\n"
        "class NcclBackend(DistBackend):\n"
        "    def barrier(self, args):\n"
        "        pass\n");
  write("pingbench/bench.py",
        "class PingBench:\n"
        "    def init_backend(self, params):\n"
        "        backend = None\n"
        "        if params.stack == \"nccl\":\n"
        "            from pingbench.nccl_backend import NcclBackend\n"
        "            backend = NcclBackend(params)\n"
        "        elif params.stack == \"tpu\":\n"
        "            from pingbench.tpu_backend import TpuBackend\n"
        "            backend = TpuBackend(params)\n"
        "        self.backend = backend\n"
        "\n"
        "    def pong(self, args, iters):\n"
        "        for _ in range(iters):\n"
        "            self.backend.recv(args)\n");
  EXPECT_EQ(findings(), (std::vector<std::string>{"dist_backend.py:14"}));
}

// A replayer's backend maps recorded op names to its methods; the replay loop calls them by name.
const char* kReplayBackend =
    "import torch.distributed as dist\n"
    "\n"
    "\n"
    "class ReplayBackend:\n"
    "    def __init__(self):\n"
    "        self.op_table = {\"all_reduce\": self.all_reduce, \"barrier\": self.barrier}\n"
    "        self.op_table[\"send\"] = self.isend\n"
    "        self.op_table[\"recv\"] = self.irecv\n"
    "\n"
    "    def all_reduce(self, args):\n"
    "        dist.all_reduce(args.tensor)\n"
    "\n"
    "    def barrier(self, args):\n"
    "        dist.barrier()\n"
    "\n"
    "    def isend(self, args):\n"
    "        return dist.isend(args.tensor, args.peer)\n"
    "\n"
    "    def irecv(self, args):\n"
    "        return dist.irecv(args.tensor, args.peer)\n"
    "\n"
    "    def replay_local(self, trace):\n"
    "        for op in trace:\n"
    "            self.op_table[op.name](op.args)\n";

TEST_F(PointToPointRoutes, ATableOfMethodsCalledByNameInALoop) {
  write("replay/__init__.py", "");
  write("replay/backend.py", kReplayBackend);
  EXPECT_EQ(findings(), (std::vector<std::string>{"backend.py:17", "backend.py:20"}));
}

TEST_F(PointToPointRoutes, ATableOfAnObjectsMethodsCalledFromAnotherFile) {
  write("replay/__init__.py", "");
  std::string backend = kReplayBackend;
  backend.resize(backend.find("\n    def replay_local"));  // no loop of its own
  write("replay/backend.py", backend + "\n");
  write("replay/replayer.py",
        "from replay.backend import ReplayBackend\n"
        "\n"
        "\n"
        "class Replayer:\n"
        "    def setup(self):\n"
        "        self.backend_funcs = ReplayBackend()\n"
        "\n"
        "    def run(self, trace):\n"
        "        results = []\n"
        "        for op in trace:\n"
        "            results.append(\n"
        "                self.backend_funcs.op_table[op.name](op.args)\n"
        "            )\n"
        "        return results\n");
  EXPECT_EQ(findings(), (std::vector<std::string>{"backend.py:17", "backend.py:20"}));
}

// The replayer's loop calls a method of its own that calls the table's entry.
TEST_F(PointToPointRoutes, ATableCallInAMethodTheLoopCalls) {
  write("replay/__init__.py", "");
  std::string backend = kReplayBackend;
  backend.resize(backend.find("\n    def replay_local"));
  write("replay/backend.py", backend + "\n");
  write("replay/replayer.py",
        "class Replayer:\n"
        "    def setup(self, params):\n"
        "        from replay.backend import ReplayBackend\n"
        "        self.backend_funcs = ReplayBackend()\n"
        "\n"
        "    def run_op(self, op):\n"
        "        return self.backend_funcs.op_table[op.name](op.args)\n"
        "\n"
        "    def replay(self, trace):\n"
        "        for op in trace:\n"
        "            self.run_op(op)\n");
  EXPECT_EQ(findings(), (std::vector<std::string>{"backend.py:17", "backend.py:20"}));
}

// A benchmark checked out under its folder's name imports itself under its package's
// (`benchkit.comms.pt.dist_backend` for comms/pt/dist_backend.py).
TEST_F(PointToPointRoutes, AClassImportedUnderItsInstalledPackagesName) {
  write("comms/pt/dist_backend.py", kDistBackend);
  std::string bench = kPingBench;
  for (std::string from : {"from pingbench.dist_backend", "from pingbench.shmem_backend"})
    bench.replace(bench.find(from), from.size(), "from benchkit.comms.pt." + from.substr(from.find('.') + 1));
  write("comms/pt/bench.py", bench);
  EXPECT_EQ(findings(), (std::vector<std::string>{"dist_backend.py:11", "dist_backend.py:14"}));
}

// A table filled with methods that issue no transfer: nothing to report.
TEST_F(PointToPointRoutes, ATableWithoutTransfersIsNotReported) {
  write("replay/__init__.py", "");
  std::string backend = kReplayBackend;
  for (const char* entry : {"        self.op_table[\"send\"] = self.isend\n", "        self.op_table[\"recv\"] = self.irecv\n"})
    backend.erase(backend.find(entry), std::string(entry).size());
  write("replay/backend.py", backend);
  EXPECT_TRUE(findings().empty());
}

// A context-parallel convolution passes its boundary frames to the next rank in a helper of
// another file, which every layer's forward calls: once per step.
const char* kHaloExchange =
    "import torch\n"
    "import torch.distributed as dist\n"
    "\n"
    "\n"
    "def pass_halo(x, frames, group, rank, world):\n"
    "    if rank < world - 1:\n"
    "        dist.send(x[:, :, -frames:].contiguous(), rank + 1, group=group)\n"
    "    if rank > 0:\n"
    "        halo = torch.empty_like(x[:, :, :frames])\n"
    "        dist.recv(halo, rank - 1, group=group)\n"
    "        x = torch.cat([halo, x], dim=2)\n"
    "    return x\n";

TEST_F(PointToPointRoutes, AHelperAModelsForwardCalls) {
  write("cpvae/__init__.py", "");
  write("cpvae/halo.py", kHaloExchange);
  write("cpvae/layers.py",
        "import torch.nn as nn\n"
        "\n"
        "from cpvae.halo import pass_halo\n"
        "\n"
        "\n"
        "class CausalConv3d(nn.Conv3d):\n"
        "    def forward(self, x):\n"
        "        x = pass_halo(x, self.kernel_size[0] - 1, self.group, self.rank, self.world)\n"
        "        return super().forward(x)\n");
  EXPECT_EQ(findings(), (std::vector<std::string>{"halo.py:7", "halo.py:10"}));
}

// The head of a pipeline op written as an autograd Function, up to its forward's body.
const char* kSendForwardHeader =
    "import torch\n"
    "import torch.distributed as dist\n"
    "\n"
    "\n"
    "class SendForward(torch.autograd.Function):\n"
    "    @staticmethod\n"
    "    def forward(ctx, t, peer):\n";

TEST_F(PointToPointRoutes, ATransferInAnAutogradFunctionsForward) {
  write("pp/__init__.py", "");
  write("pp/ops.py", std::string(kSendForwardHeader) +
        "        ctx.peer = peer\n"
        "        dist.send(t, peer)\n"
        "        return t\n"
        "\n"
        "    @staticmethod\n"
        "    def backward(ctx, grad):\n"
        "        dist.recv(grad, ctx.peer)\n"
        "        return grad, None\n");
  EXPECT_EQ(findings(), (std::vector<std::string>{"ops.py:9", "ops.py:14"}));
}

// A `forward` that is no model's (a module function, a class without a base) runs when called.
TEST_F(PointToPointRoutes, AForwardOfNoModelIsNotReported) {
  write("relay/__init__.py", "");
  write("relay/ops.py",
        "import torch.distributed as dist\n"
        "\n"
        "\n"
        "def forward(t, peer):\n"
        "    dist.send(t, peer)\n"
        "\n"
        "\n"
        "class Relay:\n"
        "    def forward(self, t, peer):\n"
        "        dist.send(t, peer)\n");
  EXPECT_TRUE(findings().empty());
}

// A class without a base beside a model in one module: its `forward` runs when it is called, and
// the model's is its own class's, each named in the message.
TEST_F(PointToPointRoutes, AForwardOfNoModelBesideAModel) {
  write("relay/__init__.py", "");
  write("relay/ops.py",
        "import torch\n"
        "import torch.distributed as dist\n"
        "\n"
        "\n"
        "class Handshake:\n"
        "    def forward(self, t, peer):\n"
        "        dist.send(t, peer)\n"
        "\n"
        "\n"
        "class SendStage(torch.nn.Module):\n"
        "    def forward(self, t):\n"
        "        dist.send(t, 1)\n"
        "        return t\n");
  EXPECT_EQ(findings(), (std::vector<std::string>{"ops.py:12"}));
  ASSERT_EQ(messages_.size(), 1u);
  EXPECT_NE(messages_[0].find("a model's SendStage.forward()"), std::string::npos) << messages_[0];
}

// A forward's transfer of a tensor the file shows on the CPU stays on gloo: not reported.
TEST_F(PointToPointRoutes, AForwardsCpuTransferIsNotReported) {
  write("pp/__init__.py", "");
  write("pp/ops.py", std::string(kSendForwardHeader) +
        "        dist.send(t.cpu(), peer)\n"
        "        return t\n");
  EXPECT_TRUE(findings().empty());
}

// The table's entries say what repeats each function and through what.
TEST(PointToPointRoutesTable, SaysWhatRepeatsEachFunction) {
  std::vector<std::string_view> texts = {kDistBackend, kPingBench, kHaloExchange,
                                         "import torch.nn as nn\n"
                                         "from cpvae.halo import pass_halo\n"
                                         "class CausalConv3d(nn.Conv3d):\n"
                                         "    def forward(self, x):\n"
                                         "        return pass_halo(x, 2, None, 0, 1)\n"};
  std::vector<std::string> modules = {"pingbench.dist_backend", "pingbench.bench", "cpvae.halo", "cpvae.layers"};
  std::map<std::string, LoopedCall> looped = pointToPointInLoops(texts, modules, 1);
  ASSERT_TRUE(looped.contains("pingbench.dist_backend#self:send"));
  const LoopedCall& send = looped["pingbench.dist_backend#self:send"];
  EXPECT_EQ(send.source, 1u);
  EXPECT_EQ(send.row, 30u);
  EXPECT_EQ(describeLoopedCall(send, "bench.py:31"), "which PingBench.ping calls in a loop at bench.py:31, through self.backend");
  ASSERT_TRUE(looped.contains("cpvae.halo:pass_halo"));
  EXPECT_EQ(describeLoopedCall(looped["cpvae.halo:pass_halo"], "layers.py:5"),
            "which CausalConv3d.forward calls at layers.py:5, once per step of the model");
  LoopedCall own{0, 8, LoopedCall::Repeat::IsForward, "SendForward.forward", ""};
  EXPECT_EQ(describeLoopedCall(own, "ops.py:9"), "a model's SendForward.forward(), which runs once per step");
}

}  // namespace

// A serving engine's executors: the base class's step dispatches to methods a pipelined subclass
// overrides with single transfers to the next stage, and adds one of its own after super().step().
const char* kExecutors =
    "import torch\n"
    "\n"
    "\n"
    "class Executor:\n"
    "    @staticmethod\n"
    "    def build(args):\n"
    "        if args.pp_size > 1:\n"
    "            return PipeExecutor(args)\n"
    "        return LocalExecutor(args)\n"
    "\n"
    "    def __init__(self, args):\n"
    "        self.rank = torch.distributed.get_rank()\n"
    "\n"
    "\n"
    "class LocalExecutor(Executor):\n"
    "    def receive_tasks(self, tasks):\n"
    "        return tasks\n"
    "\n"
    "    def prefill(self, tasks):\n"
    "        return tasks\n"
    "\n"
    "    def step(self, tasks):\n"
    "        tasks = self.receive_tasks(tasks)\n"
    "        return self.prefill(tasks)\n"
    "\n"
    "\n"
    "class PipeExecutor(LocalExecutor):\n"
    "    def receive_tasks(self, tasks):\n"
    "        buf = torch.empty(64, device=\"cuda\")\n"
    "        torch.distributed.recv(buf, src=self.rank - 1)\n"
    "        return buf\n"
    "\n"
    "    def prefill(self, tasks):\n"
    "        out = torch.empty(64, device=\"cuda\")\n"
    "        torch.distributed.isend(out, dst=self.rank + 1)\n"
    "        return out\n"
    "\n"
    "    def collect_logits(self, tasks):\n"
    "        logits = torch.empty(64, device=\"cuda\")\n"
    "        torch.distributed.irecv(logits, src=0)\n"
    "\n"
    "    def step(self, tasks):\n"
    "        super().step(tasks)\n"
    "        self.collect_logits(tasks)\n";

// The subclass overrides a method of the base class that reaches transfers too: its objects still
// reach their own class's step, and through it the base's.
TEST_F(PointToPointRoutes, AnOverrideOfAMethodTheBaseClassHasToo) {
  write("engine/executor.py", kExecutors);
  write("bench.py",
        "from engine.executor import PipeExecutor\n"
        "\n"
        "\n"
        "def run(args, batches):\n"
        "    executor = PipeExecutor(args)\n"
        "    for tasks in batches:\n"
        "        executor.step(tasks)\n");
  EXPECT_EQ(findings(), (std::vector<std::string>{"executor.py:30", "executor.py:35", "executor.py:40"}));
}

// A static factory method chooses the class by the arguments: its call makes any of them.
TEST_F(PointToPointRoutes, AStaticFactoryMethodOfTheBaseClass) {
  write("engine/executor.py", kExecutors);
  write("bench.py",
        "from engine.executor import Executor\n"
        "\n"
        "\n"
        "def run(args, batches):\n"
        "    executor = Executor.build(args)\n"
        "    for tasks in batches:\n"
        "        executor.step(tasks)\n");
  EXPECT_EQ(findings(), (std::vector<std::string>{"executor.py:30", "executor.py:35", "executor.py:40"}));
}

// A class kept as a registry of the engine's parts: one function of the module stores the
// executor there through a local, another calls it, and the server calls that in its loop.
TEST_F(PointToPointRoutes, AnObjectKeptOnARegistryClassThroughALocal) {
  write("engine/executor.py", kExecutors);
  write("engine/registry.py",
        "class Registry:\n"
        "    executor = None\n");
  write("engine/main.py",
        "import torch\n"
        "\n"
        "from engine.executor import Executor\n"
        "from engine.registry import Registry\n"
        "\n"
        "\n"
        "def engine_init(args):\n"
        "    torch.distributed.init_process_group(\"nccl\")\n"
        "    executor = Executor.build(args)\n"
        "    Registry.executor = executor\n"
        "\n"
        "\n"
        "def engine_step(tasks):\n"
        "    Registry.executor.step(tasks)\n");
  write("serve.py",
        "from engine.main import engine_init, engine_step\n"
        "\n"
        "\n"
        "def serve(args, queue):\n"
        "    engine_init(args)\n"
        "    while True:\n"
        "        engine_step(queue.get())\n");
  EXPECT_EQ(findings(), (std::vector<std::string>{"executor.py:30", "executor.py:35", "executor.py:40"}));
}

// A classmethod's `cls.runner` is its own class's: another class of the module keeping an executor
// under the same attribute text says nothing of it. Nor does a parameter's attribute (`ctx.engine`)
// in one function tell what another function's parameter of that name holds.
TEST_F(PointToPointRoutes, AnAttributeOfClsOrAParameterIsItsOwnFunctionsOrClasss) {
  write("engine/executor.py", kExecutors);
  write("engine/jobs.py",
        "from engine.executor import PipeExecutor\n"
        "\n"
        "\n"
        "class Trace:\n"
        "    def step(self, tasks):\n"
        "        return tasks\n"
        "\n"
        "\n"
        "class Serving:\n"
        "    @classmethod\n"
        "    def setup(cls, args):\n"
        "        cls.runner = PipeExecutor(args)\n"
        "\n"
        "\n"
        "class Replay:\n"
        "    @classmethod\n"
        "    def setup(cls, args):\n"
        "        cls.runner = Trace()\n"
        "\n"
        "    @classmethod\n"
        "    def run(cls, events):\n"
        "        for tasks in events:\n"
        "            cls.runner.step(tasks)\n"
        "\n"
        "\n"
        "def prepare(ctx, args):\n"
        "    ctx.engine = PipeExecutor(args)\n"
        "\n"
        "\n"
        "def replay(ctx, events):\n"
        "    for tasks in events:\n"
        "        ctx.engine.step(tasks)\n");
  EXPECT_TRUE(findings().empty());
}

// A factory method called on an object, or a method of another class of the same name, makes no
// executor: a same-named `build` elsewhere is not the factory.
TEST_F(PointToPointRoutes, AnotherClassesBuildIsNotTheFactory) {
  write("engine/executor.py", kExecutors);
  write("tools/replay.py",
        "class Trace:\n"
        "    @staticmethod\n"
        "    def build(args):\n"
        "        return Trace()\n"
        "\n"
        "    def step(self, tasks):\n"
        "        return tasks\n"
        "\n"
        "\n"
        "def replay(args, events):\n"
        "    trace = Trace.build(args)\n"
        "    for tasks in events:\n"
        "        trace.step(tasks)\n");
  EXPECT_TRUE(findings().empty());
}

}  // namespace nccl_migrate::lint
