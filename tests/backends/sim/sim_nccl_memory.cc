// NcclMemoryModel: see sim_nccl_memory.h. Sources are NVIDIA/nccl at tags v2.28.9-1 / v2.30.7-1,
// "file:line / line" giving the line at each tag; the two agree on every figure used here.
#include "sim_nccl_memory.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace nccl_migrate::sim {
namespace {

// src/include/device.h:24 / 26: NCCL_STEPS 8, the steps of every connector's FIFO.
constexpr int64_t kSteps = 8;
// LL: NCCL_LL_LINES_PER_THREAD (8) * NCCL_LL_MAX_NTHREADS (512) * NCCL_STEPS * sizeof(union
// ncclLLFifoLine) (16): DEFAULT_LL_BUFFSIZE, src/init.cc:697 / 810; device.h:92-93 / 97-98.
constexpr int64_t kDefaultLlBytes = 8 * 512 * kSteps * 16;  // 524288
// LL128: NCCL_LL128_ELEMS_PER_THREAD (120) * NCCL_LL128_MAX_NTHREADS (640) * NCCL_STEPS *
// sizeof(uint64_t): DEFAULT_LL128_BUFFSIZE, src/init.cc:698 / 812; device.h:109-110 / 114-115.
constexpr int64_t kDefaultLl128Bytes = 120 * 640 * kSteps * 8;  // 4915200
// SIMPLE: DEFAULT_BUFFSIZE (1 << 22), src/init.cc:699 / 813.
constexpr int64_t kDefaultSimpleBytes = int64_t(1) << 22;  // 4194304

// struct ncclSendMem and ncclRecvMem are each padded to MEM_ALIGN (4096): src/include/comm.h:37,
// 45-69 / 45, 53-77. They head every p2p-transport connector's allocation.
constexpr size_t kConnectorHeaderBytes = 4096;
// Every connector allocation is rounded up to CUDA_IPC_MIN (2097152), src/include/comm.h:38 / 46,
// applied in p2pSendSetup / p2pRecvSetup (src/transport/p2p.cc:380, 448 / 410, 491); every device
// allocation through ncclCuMemAlloc (cuMem is on by default) is rounded up to the driver's minimum
// granularity (src/include/alloc.h:225-226 / 317-318), 2 MiB on NVIDIA's GPUs. So one granule is
// the least any device allocation of NCCL's costs.
constexpr size_t kGranule = size_t(2) << 20;

// MAXCHANNELS, src/include/device.h:86 / 91: the most channels a communicator has.
constexpr int kMaxChannels = 64;
// Init's small device allocations cost one granule each while they stay below it: a channel's
// shared peer array holds one ncclDevChannelPeer (2 send and 2 receive ncclConnInfo, well under
// 1 KiB) per rank, so one granule holds it up to this many ranks.
constexpr int kMostRanksOneGranuleHolds = 2048;

size_t granules(size_t bytes) { return (bytes + kGranule - 1) / kGranule * kGranule; }

int pow2Up(int x) {
  int p = 1;
  while (p < x) p <<= 1;
  return p;
}

// ncclLoadParam (src/misc/param.cc:76-94 / 78-106): strtoll in base 0; a value that sets errno
// keeps the default; computeBuffSizes (src/init.cc:708-714 / 822-828) takes -2 for "the default".
int64_t parameterFromEnvironment(const char* name, int64_t fallback) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  errno = 0;
  long long value = std::strtoll(text, nullptr, 0);
  if (errno != 0 || value == -2) return fallback;
  return value;
}

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("NCCL memory model: " + what);
}

}  // namespace

ProtocolBuffers defaultProtocolBuffers() { return {kDefaultLlBytes, kDefaultLl128Bytes, kDefaultSimpleBytes}; }

ProtocolBuffers protocolBuffersFromEnvironment() {
  return {parameterFromEnvironment("NCCL_LL_BUFFSIZE", kDefaultLlBytes),
          parameterFromEnvironment("NCCL_LL128_BUFFSIZE", kDefaultLl128Bytes),
          parameterFromEnvironment("NCCL_BUFFSIZE", kDefaultSimpleBytes)};
}

// The simulated node's hardware. Channel counts are the topology's, not NCCL's constants: 16
// search channels make NCCL run 32 (ncclTopoPostset doubles them), the count that makes this model
// meet the reported per-group figures of 2-GPU jobs (docs/simulated-nccl.md); 18 NVLinks give a
// peer 2 * 18 channels (ncclTopoGetNchannels, src/graph/paths.cc:829-831 / 934-936), capped at
// the 32 p2p channels.
constexpr int kSimulatedSearchChannels = 16;
constexpr int kSimulatedPeerChannels = 2 * 18;

CommunicatorShape simulatedNodeShape(int nRanks, int rank, std::optional<int> maxCtas, std::optional<int> minCtas) {
  CommunicatorShape shape;
  shape.nRanks = nRanks;
  shape.ringIndex = rank;
  shape.searchChannels = kSimulatedSearchChannels;
  shape.peerChannels = kSimulatedPeerChannels;
  // Above MAXCHANNELS both are capped (envConfigOverride, src/init.cc:1759-1767 /
  // 2179-2187).
  if (maxCtas) shape.maxCtas = std::min(*maxCtas, kMaxChannels);
  if (minCtas) shape.minCtas = std::min(*minCtas, kMaxChannels);
  // NCCL_RUNTIME_CONNECT, default 1 (src/init.cc:57 / 61), read by ncclLoadParam.
  shape.runtimeConnect = parameterFromEnvironment("NCCL_RUNTIME_CONNECT", 1) != 0;
  shape.buffers = protocolBuffersFromEnvironment();
  return shape;
}

NcclMemoryModel::NcclMemoryModel(const CommunicatorShape& shape) : shape_(shape) {
  require(shape.nRanks >= 1, "nRanks is " + std::to_string(shape.nRanks) + "; a communicator has at least 1 rank");
  require(shape.nRanks <= kMostRanksOneGranuleHolds,
          "nRanks is " + std::to_string(shape.nRanks) + "; the model holds up to " +
              std::to_string(kMostRanksOneGranuleHolds) + " ranks");
  require(shape.ringIndex >= 0 && shape.ringIndex < shape.nRanks,
          "ringIndex " + std::to_string(shape.ringIndex) + " is not a rank of " + std::to_string(shape.nRanks));
  require(shape.ranksPerNode >= 0 && shape.ranksPerNode <= shape.nRanks,
          "ranksPerNode " + std::to_string(shape.ranksPerNode) + " is not between 0 (all) and nRanks");
  require(shape.searchChannels >= 1 && shape.searchChannels <= kMaxChannels,
          "searchChannels is " + std::to_string(shape.searchChannels) + "; NCCL's search finds 1 to 64");
  require(shape.peerChannels >= 1, "peerChannels is " + std::to_string(shape.peerChannels) + "; at least 1");
  // NCCL refuses a config whose maxCTAs is not positive or below its minCTAs with
  // ncclInvalidArgument (parseCommConfig, src/init.cc:1865-1871 / 2324-2330).
  require(shape.maxCtas >= 1 && shape.maxCtas <= kMaxChannels,
          "maxCtas is " + std::to_string(shape.maxCtas) + "; NCCL takes 1 to 64");
  require(shape.minCtas >= 1 && shape.minCtas <= shape.maxCtas,
          "minCtas is " + std::to_string(shape.minCtas) + "; NCCL takes 1 to maxCtas (" +
              std::to_string(shape.maxCtas) + ")");
  require(shape.buffers.ll > 0 && shape.buffers.ll128 > 0 && shape.buffers.simple > 0,
          "a protocol buffer size is not positive (NCCL_LL_BUFFSIZE, NCCL_LL128_BUFFSIZE, NCCL_BUFFSIZE)");

  // Channels: ncclTopoPostset runs each channel the search found twice, at most MAXCHANNELS
  // (src/graph/connect.cc:452 / 460), then at most maxCTAs and at least minCTAs, copying channels
  // up to it (490-491 / 503-505; maxCTAs is MAXCHANNELS unless set, src/init.cc:1767 / 2187).
  collChannels_ = std::max(std::min({kMaxChannels, 2 * shape.searchChannels, shape.maxCtas}), shape.minCtas);
  // P2P channels: min(nChannels, NCCL_MAX_P2P_NCHANNELS = 64), at least NCCL_MIN_P2P_NCHANNELS
  // = 1, rounded up to a power of 2; per peer the least channel count any peer gets
  // (ncclTopoGetNchannels), a power of 2 and at most p2pnChannels
  // (ncclTopoComputeP2pChannels, src/graph/paths.cc:856-886 / 957-1003).
  p2pChannels_ = std::min(pow2Up(std::max(std::min(collChannels_, kMaxChannels), 1)), kMaxChannels);
  p2pChannelsPerPeer_ = std::min(pow2Up(std::min(p2pChannels_, shape.peerChannels)), p2pChannels_);

  // Init: initChannel for channels [0, nChannels) (setupChannel, src/init.cc:1271-1273 /
  // 1552-1556) and [nChannels, p2pnChannels) (src/graph/paths.cc:889 / 1007) makes three device
  // allocations per channel, one granule each: the shared peer array, the channel's peer pointers
  // and its ring's user ranks (src/channel.cc:42, 45, 56 / 44, 48, 60). devCommSetup adds the
  // device communicator with its channels and rankToLocalRank (src/init.cc:512, 514 / 587, 589).
  // The work FIFO (NCCL_WORK_FIFO_BYTES, 1 MiB, src/init.cc:347 / 394) is host memory unless
  // GDRCopy is on (NCCL_GDRCOPY_ENABLE, default 0, src/init.cc:69 / 130; ncclCudaHostCalloc at
  // 556 / 640), and the proxy's state is host memory: neither costs the device.
  int initChannels = std::max(collChannels_, p2pChannels_);
  initBytes_ = size_t(initChannels) * 3 * kGranule + 2 * kGranule;
  // Without runtime connect init connects the rings and the trees (src/init.cc:1282-1285 /
  // 1565-1568), what connect() charges otherwise.
  if (!shape.runtimeConnect && shape.nRanks > 1) {
    initBytes_ += connect(Algorithm::Ring);
    initBytes_ += connect(Algorithm::Tree);
  }
}

// A sender's allocation: ncclSendMem, plus the SIMPLE buffer in read mode (p2pSendSetup,
// src/transport/p2p.cc:377-380 / 407-410).
size_t NcclMemoryModel::sendConnectorBytes() const {
  size_t bytes = kConnectorHeaderBytes + (shape_.p2pRead ? size_t(shape_.buffers.simple) : 0);
  return granules(bytes);
}

// A receiver's allocation: ncclRecvMem and every protocol's buffer, SIMPLE's only in write mode
// (p2pRecvSetup, src/transport/p2p.cc:445-448 / 486-491). Collectives and p2p ops alike size it
// from buffSizes: p2pChunkSize sets a p2p op's step, no allocation of its own over this transport.
size_t NcclMemoryModel::recvConnectorBytes() const {
  size_t bytes = kConnectorHeaderBytes + size_t(shape_.buffers.ll) + size_t(shape_.buffers.ll128) +
                 (shape_.p2pRead ? 0 : size_t(shape_.buffers.simple));
  return granules(bytes);
}

size_t NcclMemoryModel::add(int channel, int peer, int connIndex, Direction direction) {
  if (peer < 0 || peer == shape_.ringIndex) return 0;
  if (!connected_.insert({channel, peer, connIndex, direction}).second) return 0;
  return direction == Send ? sendConnectorBytes() : recvConnectorBytes();
}

// Per channel, a send connector to ring.next and a receive connector from ring.prev, connIndex 0
// (ncclTransportRingConnect, src/transport/generic.cc:21-24 / 24-27).
size_t NcclMemoryModel::connectRing() {
  int n = shape_.nRanks, me = shape_.ringIndex;
  int next = (me + 1) % n, prev = (me + n - 1) % n;
  size_t bytes = 0;
  for (int c = 0; c < collChannels_; ++c) {
    bytes += add(c, next, 0, Send);
    bytes += add(c, prev, 0, Recv);
  }
  return bytes;
}

// Per channel, send and receive connectors to tree.up and each tree.down, connIndex 0
// (ncclTransportTreeConnect, src/transport/generic.cc:50-54 / 53-58); those the ring made are
// not made again (ncclTransportP2pConnect marks only unconnected peers, src/transport.cc:44-57 /
// 44-62). On one node the tree is a chain in ring order: up is the previous rank, down the next.
size_t NcclMemoryModel::connectTree() {
  int n = shape_.nRanks, me = shape_.ringIndex;
  int up = me > 0 ? me - 1 : -1, down = me + 1 < n ? me + 1 : -1;
  size_t bytes = 0;
  for (int c = 0; c < collChannels_; ++c) {
    for (int peer : {up, down}) {
      bytes += add(c, peer, 0, Send);
      bytes += add(c, peer, 0, Recv);
    }
  }
  return bytes;
}

size_t NcclMemoryModel::connect(Algorithm algorithm) {
  if (shape_.nRanks == 1) return 0;  // the rings and trees of one rank connect nothing
  if (shape_.ranksPerNode != 0 && shape_.ranksPerNode != shape_.nRanks) {
    throw std::logic_error("NCCL memory model: connects across nodes are not modelled");
  }
  return algorithm == Algorithm::Ring ? connectRing() : connectTree();
}

// A p2p direction connects p2pnChannelsPerPeer channels, connIndex 1, the first time an op uses
// it (p2pTaskAppend marks connectSend / connectRecv, src/enqueue.cc:2415-2445 / 2650-2682).
size_t NcclMemoryModel::connectSend(int peer) {
  if (shape_.ranksPerNode != 0 && shape_.ranksPerNode != shape_.nRanks) {
    throw std::logic_error("NCCL memory model: connects across nodes are not modelled");
  }
  size_t bytes = 0;
  for (int c = 0; c < p2pChannelsPerPeer_; ++c) bytes += add(c, peer, 1, Send);
  return bytes;
}

size_t NcclMemoryModel::connectRecv(int peer) {
  if (shape_.ranksPerNode != 0 && shape_.ranksPerNode != shape_.nRanks) {
    throw std::logic_error("NCCL memory model: connects across nodes are not modelled");
  }
  size_t bytes = 0;
  for (int c = 0; c < p2pChannelsPerPeer_; ++c) bytes += add(c, peer, 1, Recv);
  return bytes;
}

}  // namespace nccl_migrate::sim
