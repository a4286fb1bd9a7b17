// The device memory NCCL allocates for a communicator, as a function of what NCCL knows at init:
// what the simulated NCCL charges the simulated device at init and at each connect on first use.
// Every constant is NCCL's own, cited where it is used (sim_nccl_memory.cc) and in
// docs/simulated-nccl.md; the derivation of each test figure is in sim_nccl_memory_test.cc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <tuple>

namespace nccl_migrate::sim {

// The bytes of one step FIFO per protocol (comm->buffSizes): NCCL's defaults unless the
// environment's NCCL_LL_BUFFSIZE, NCCL_LL128_BUFFSIZE or NCCL_BUFFSIZE set one.
struct ProtocolBuffers {
  int64_t ll = 0;
  int64_t ll128 = 0;
  int64_t simple = 0;
};
ProtocolBuffers defaultProtocolBuffers();
// The defaults with the environment's overrides applied, read as NCCL reads them (strtoll in base
// 0; a value that sets errno, or -2, leaves the default).
ProtocolBuffers protocolBuffersFromEnvironment();

// What NCCL knows at init that decides its device memory, for one rank of one communicator.
struct CommunicatorShape {
  int nRanks = 1;
  // Ranks of the communicator on this rank's node (0: all of them). Init's figure holds for any
  // layout; connects are modelled on one node only (across nodes NCCL's NET transport connects,
  // whose buffers depend on the network plugin and GPUDirect support).
  int ranksPerNode = 0;
  // This rank's place in the ring (and in the one-node tree chain, which NCCL builds in the same
  // order on one node): the simulation's ranks are their own ring positions.
  int ringIndex = 0;
  // Channels NCCL's topology search found for the ring graph (graph->nChannels): hardware's, not
  // NCCL's; NCCL runs twice as many ("N coll channels" in NCCL's INFO log is twice this).
  int searchChannels = 1;
  // Channels ncclTopoGetNchannels gives a p2p peer on the node: 2 over PCIe, 2 per NVLink's worth
  // of bandwidth over NVLink.
  int peerChannels = 2;
  // P2P read mode (NVLink between two compute-capability-8.0 GPUs): the SIMPLE buffer sits on the
  // sender instead of the receiver.
  bool p2pRead = false;
  // ncclConfig_t maxCTAs and minCTAs: MAXCHANNELS and 1 unless set.
  int maxCtas = 64;
  int minCtas = 1;
  // NCCL_RUNTIME_CONNECT (default 1, with cuMem): connect each algorithm at its first use rather
  // than at init.
  bool runtimeConnect = true;
  ProtocolBuffers buffers = defaultProtocolBuffers();
};

// The simulated device's node, as NCCL would see it: ranks on one node whose GPUs NVSwitch
// connects with 18 NVLinks each, on which NCCL runs 32 channels (its search finds 16) and gives a
// p2p peer 2 * 18 = 36 channels. `maxCtas`, `minCtas`: the communicator's config.maxCTAs and
// minCTAs when set (NCCL caps both at MAXCHANNELS). Protocol buffers and NCCL_RUNTIME_CONNECT come
// from the environment, read as NCCL reads them.
CommunicatorShape simulatedNodeShape(int nRanks, int rank, std::optional<int> maxCtas = std::nullopt,
                                     std::optional<int> minCtas = std::nullopt);

// The collective algorithms whose connects the model knows. NVLS, CollNet and PAT need hardware
// or plugins the simulation never has (NVSwitch multicast, a CollNet plugin, one GPU per node).
enum class Algorithm { Ring, Tree };

// One rank's NCCL device memory for one communicator: init's, then what each connect on first use
// adds. A connector already made (by init, the ring, or an earlier p2p op) costs nothing again.
class NcclMemoryModel {
 public:
  // Throws std::invalid_argument naming the field for a shape NCCL would not make (NCCL refuses
  // such a config with ncclInvalidArgument). With runtimeConnect off across nodes:
  // std::logic_error, as connect().
  explicit NcclMemoryModel(const CommunicatorShape& shape);

  int collChannels() const { return collChannels_; }
  int p2pChannels() const { return p2pChannels_; }
  int p2pChannelsPerPeer() const { return p2pChannelsPerPeer_; }
  // The device bytes of one connector's own allocation, each rounded up to whole granules.
  size_t sendConnectorBytes() const;
  size_t recvConnectorBytes() const;

  // What ncclCommInitRankConfig allocates on the device (with runtimeConnect off, the ring and
  // tree connects too). Charged once, by the constructor's caller.
  size_t initBytes() const { return initBytes_; }
  // What the first collective that runs `algorithm` adds; 0 when already connected. Across
  // nodes: std::logic_error (not modelled).
  size_t connect(Algorithm algorithm);
  // What the first send to `peer` (receive from `peer`) adds; 0 when already connected or when
  // `peer` is this rank (NCCL copies locally). Across nodes: std::logic_error (not modelled).
  size_t connectSend(int peer);
  size_t connectRecv(int peer);

 private:
  enum Direction { Send, Recv };
  // A connector: (channel, peer, connIndex, direction), connIndex 0 for collectives, 1 for p2p.
  using Connector = std::tuple<int, int, int, int>;
  size_t add(int channel, int peer, int connIndex, Direction direction);
  size_t connectRing();
  size_t connectTree();

  CommunicatorShape shape_;
  int collChannels_ = 0;
  int p2pChannels_ = 0;
  int p2pChannelsPerPeer_ = 0;
  size_t initBytes_ = 0;
  std::set<Connector> connected_;
};

}  // namespace nccl_migrate::sim
