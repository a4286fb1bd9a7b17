// The NCCL memory model's figures at a few shapes, each derived below from NCCL's constants
// (sim_nccl_memory.cc cites where NCCL sets each one). MiB = 1048576 bytes; a granule is 2 MiB.
// One connector's allocation, in NCCL's default write mode:
//   receiver: ncclRecvMem 4096 + LL 524288 + LL128 4915200 + SIMPLE 4194304 = 9637888 B,
//             rounded up to granules: 5 granules = 10 MiB;
//   sender:   ncclSendMem 4096 B, rounded up: 1 granule = 2 MiB.
// In read mode: receiver 4096 + 524288 + 4915200 = 5443584 B -> 3 granules = 6 MiB;
//               sender 4096 + 4194304 = 4198400 B -> 3 granules = 6 MiB.
#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>

#include "sim_nccl_memory.h"

namespace nccl_migrate::sim {
namespace {

constexpr size_t MiB = size_t(1) << 20;

CommunicatorShape shape(int nRanks, int ringIndex, int searchChannels) {
  CommunicatorShape s;
  s.nRanks = nRanks;
  s.ringIndex = ringIndex;
  s.searchChannels = searchChannels;
  return s;
}

TEST(NcclMemoryModel, ProtocolBuffersAreNcclsDefaults) {
  ProtocolBuffers b = defaultProtocolBuffers();
  EXPECT_EQ(b.ll, 8 * 512 * 8 * 16);        // lines per thread * threads * steps * 16 B line
  EXPECT_EQ(b.ll128, 120 * 640 * 8 * 8);    // elements per thread * threads * steps * 8 B
  EXPECT_EQ(b.simple, 4 * 1024 * 1024);     // 1 << 22
}

TEST(NcclMemoryModel, ConnectorsAreRoundedUpToWholeGranules) {
  NcclMemoryModel write(shape(2, 0, 1));
  EXPECT_EQ(write.recvConnectorBytes(), 10 * MiB);
  EXPECT_EQ(write.sendConnectorBytes(), 2 * MiB);
  CommunicatorShape readShape = shape(2, 0, 1);
  readShape.p2pRead = true;
  NcclMemoryModel read(readShape);
  EXPECT_EQ(read.recvConnectorBytes(), 6 * MiB);
  EXPECT_EQ(read.sendConnectorBytes(), 6 * MiB);
}

// Two ranks whose search found 16 channels (NCCL logs "32 coll channels"), as on an NVLink pair.
// Channels: min(64, 2 * 16) = 32 collective; p2p pow2Up(32) = 32.
// Init: 32 channels * 3 allocations * 2 MiB + devComm 2 MiB + rankToLocalRank 2 MiB = 196 MiB.
// Ring connect: 32 channels * (send 2 MiB + receive 10 MiB) = 384 MiB. The tree of two ranks
// needs the same peer both ways on each channel, which the ring connected: 0.
TEST(NcclMemoryModel, TwoRanksOf32Channels) {
  NcclMemoryModel model(shape(2, 1, 16));
  EXPECT_EQ(model.collChannels(), 32);
  EXPECT_EQ(model.p2pChannels(), 32);
  EXPECT_EQ(model.initBytes(), 196 * MiB);
  EXPECT_EQ(model.connect(Algorithm::Ring), 384 * MiB);
  EXPECT_EQ(model.connect(Algorithm::Tree), 0u);
  EXPECT_EQ(model.connect(Algorithm::Ring), 0u) << "a connected ring costs nothing again";
}

// The same in read mode: per channel send 6 MiB + receive 6 MiB = 12 MiB, as in write mode.
TEST(NcclMemoryModel, ReadModeMovesTheSimpleBufferWithoutChangingTheTotal) {
  CommunicatorShape s = shape(2, 0, 16);
  s.p2pRead = true;
  NcclMemoryModel model(s);
  EXPECT_EQ(model.connect(Algorithm::Ring), 32 * 12 * MiB);
}

// Without runtime connect init connects ring and tree: 196 MiB + 384 MiB = 580 MiB, and the
// first collective connects nothing more.
TEST(NcclMemoryModel, WithoutRuntimeConnectInitConnectsRingAndTree) {
  CommunicatorShape s = shape(2, 0, 16);
  s.runtimeConnect = false;
  NcclMemoryModel model(s);
  EXPECT_EQ(model.initBytes(), 580 * MiB);
  EXPECT_EQ(model.connect(Algorithm::Ring), 0u);
  EXPECT_EQ(model.connect(Algorithm::Tree), 0u);
}

// Eight ranks on one node, 16 search channels: 32 channels; init 196 MiB as above (init does not
// depend on the rank count below 2048 ranks). The one-node tree is a chain in ring order.
// A middle rank (index 3): ring 384 MiB; the tree adds a send to the previous rank (2 MiB) and
// a receive from the next (10 MiB) per channel: 32 * 12 = 384 MiB.
// The chain's head (index 0) only adds a receive from rank 1: 32 * 10 = 320 MiB.
// Its tail (index 7) only adds a send to rank 6: 32 * 2 = 64 MiB.
TEST(NcclMemoryModel, EightRanksTreeAddsWhatTheRingLacks) {
  NcclMemoryModel middle(shape(8, 3, 16));
  EXPECT_EQ(middle.initBytes(), 196 * MiB);
  EXPECT_EQ(middle.connect(Algorithm::Ring), 384 * MiB);
  EXPECT_EQ(middle.connect(Algorithm::Tree), 384 * MiB);
  NcclMemoryModel head(shape(8, 0, 16));
  head.connect(Algorithm::Ring);
  EXPECT_EQ(head.connect(Algorithm::Tree), 320 * MiB);
  NcclMemoryModel tail(shape(8, 7, 16));
  tail.connect(Algorithm::Ring);
  EXPECT_EQ(tail.connect(Algorithm::Tree), 64 * MiB);
}

// P2P over NVSwitch: a peer gets 2 * 18 = 36 channels from ncclTopoGetNchannels; per peer
// min(pow2Up(min(32, 36)), 32) = 32. A send direction: 32 * 2 MiB = 64 MiB, a receive one:
// 32 * 10 MiB = 320 MiB; once each, on connIndex 1 (the ring's connectors are not reused).
// To itself a rank connects nothing.
TEST(NcclMemoryModel, EachP2pDirectionConnectsOnce) {
  CommunicatorShape s = shape(8, 0, 16);
  s.peerChannels = 36;
  NcclMemoryModel model(s);
  EXPECT_EQ(model.p2pChannelsPerPeer(), 32);
  EXPECT_EQ(model.connect(Algorithm::Ring), 384 * MiB);
  EXPECT_EQ(model.connectSend(1), 64 * MiB);
  EXPECT_EQ(model.connectRecv(1), 320 * MiB);
  EXPECT_EQ(model.connectSend(1), 0u);
  EXPECT_EQ(model.connectRecv(0), 0u);
}

// Over PCIe a peer gets 2 channels: per peer pow2Up(min(p2p channels, 2)) = 2. A pair of
// ranks with a search of 2 channels: 4 collective channels, 4 p2p channels;
// init 4 * 3 * 2 MiB + 4 MiB = 28 MiB; a send direction 2 * 2 MiB = 4 MiB, a receive 2 * 10 MiB.
TEST(NcclMemoryModel, PciePairOfFourChannels) {
  NcclMemoryModel model(shape(2, 0, 2));
  EXPECT_EQ(model.collChannels(), 4);
  EXPECT_EQ(model.p2pChannelsPerPeer(), 2);
  EXPECT_EQ(model.initBytes(), 28 * MiB);
  EXPECT_EQ(model.connectSend(1), 4 * MiB);
  EXPECT_EQ(model.connectRecv(1), 20 * MiB);
}

// maxCTAs 8 caps the 32 channels at 8: init 8 * 6 MiB + 4 MiB = 52 MiB; ring 8 * 12 = 96 MiB.
TEST(NcclMemoryModel, MaxCtasCapsTheChannels) {
  CommunicatorShape s = shape(2, 0, 16);
  s.maxCtas = 8;
  NcclMemoryModel model(s);
  EXPECT_EQ(model.collChannels(), 8);
  EXPECT_EQ(model.initBytes(), 52 * MiB);
  EXPECT_EQ(model.connect(Algorithm::Ring), 96 * MiB);
}

// minCTAs 48 raises the 32 channels to 48 (copied); p2p channels pow2Up(48) = 64, so init makes
// 64 channels: 64 * 6 MiB + 4 MiB = 388 MiB; the ring 48 * 12 MiB = 576 MiB.
TEST(NcclMemoryModel, MinCtasRaisesTheChannels) {
  CommunicatorShape s = shape(2, 0, 16);
  s.minCtas = 48;
  NcclMemoryModel model(s);
  EXPECT_EQ(model.collChannels(), 48);
  EXPECT_EQ(model.p2pChannels(), 64);
  EXPECT_EQ(model.initBytes(), 388 * MiB);
  EXPECT_EQ(model.connect(Algorithm::Ring), 576 * MiB);
}

// The simulated node: 16 search channels, 36 per peer; config limits above 64 are capped, and
// NCCL_RUNTIME_CONNECT=0 moves the ring and tree connects into init (196 + 384 = 580 MiB).
TEST(NcclMemoryModel, TheSimulatedNode) {
  NcclMemoryModel model(simulatedNodeShape(2, 1));
  EXPECT_EQ(model.collChannels(), 32);
  EXPECT_EQ(model.p2pChannelsPerPeer(), 32);
  EXPECT_EQ(model.initBytes(), 196 * MiB);
  EXPECT_EQ(simulatedNodeShape(2, 1, 100, 100).maxCtas, 64);
  EXPECT_EQ(NcclMemoryModel(simulatedNodeShape(2, 1, 4)).initBytes(), 4 * 6 * MiB + 4 * MiB);
  ::setenv("NCCL_RUNTIME_CONNECT", "0", 1);
  CommunicatorShape eager = simulatedNodeShape(2, 1);
  ::unsetenv("NCCL_RUNTIME_CONNECT");
  EXPECT_EQ(NcclMemoryModel(eager).initBytes(), 580 * MiB);
}

// A one-rank communicator: a search of 1 channel runs 2; init 2 * 6 MiB + 4 MiB = 16 MiB; it
// connects nothing.
TEST(NcclMemoryModel, OneRankConnectsNothing) {
  NcclMemoryModel model(shape(1, 0, 1));
  EXPECT_EQ(model.initBytes(), 16 * MiB);
  EXPECT_EQ(model.connect(Algorithm::Ring), 0u);
  EXPECT_EQ(model.connect(Algorithm::Tree), 0u);
}

// NCCL_BUFFSIZE=1048576: receiver 4096 + 524288 + 4915200 + 1048576 = 6492160 B -> 4 granules.
// A value strtoll rejects with errno (out of range) keeps NCCL's default, as does -2.
TEST(NcclMemoryModel, BufferSizesFollowTheEnvironmentAsNcclReadsIt) {
  ::setenv("NCCL_BUFFSIZE", "0x100000", 1);
  ::setenv("NCCL_LL_BUFFSIZE", "-2", 1);
  ::setenv("NCCL_LL128_BUFFSIZE", "99999999999999999999999", 1);
  ProtocolBuffers b = protocolBuffersFromEnvironment();
  ::unsetenv("NCCL_BUFFSIZE");
  ::unsetenv("NCCL_LL_BUFFSIZE");
  ::unsetenv("NCCL_LL128_BUFFSIZE");
  EXPECT_EQ(b.simple, 1048576);
  EXPECT_EQ(b.ll, defaultProtocolBuffers().ll);
  EXPECT_EQ(b.ll128, defaultProtocolBuffers().ll128);
  CommunicatorShape s = shape(2, 0, 1);
  s.buffers = b;
  EXPECT_EQ(NcclMemoryModel(s).recvConnectorBytes(), 8 * MiB);
}

TEST(NcclMemoryModel, ShapesNcclWouldNotMakeAreRefusedByName) {
  auto refusal = [](const CommunicatorShape& s) -> std::string {
    try {
      NcclMemoryModel model(s);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(refusal(shape(0, 0, 1)).find("nRanks is 0"), std::string::npos);
  EXPECT_NE(refusal(shape(2, 2, 1)).find("ringIndex 2"), std::string::npos);
  EXPECT_NE(refusal(shape(2, 0, 65)).find("searchChannels is 65"), std::string::npos);
  CommunicatorShape noBuffer = shape(2, 0, 1);
  noBuffer.buffers.simple = 0;
  EXPECT_NE(refusal(noBuffer).find("NCCL_BUFFSIZE"), std::string::npos);
  CommunicatorShape minAboveMax = shape(2, 0, 1);
  minAboveMax.maxCtas = 4;
  minAboveMax.minCtas = 8;
  EXPECT_NE(refusal(minAboveMax).find("minCtas is 8"), std::string::npos);
  CommunicatorShape noCtas = shape(2, 0, 1);
  noCtas.maxCtas = 0;
  EXPECT_NE(refusal(noCtas).find("maxCtas is 0"), std::string::npos);
}

TEST(NcclMemoryModel, ConnectsAcrossNodesAreNotModelled) {
  CommunicatorShape s = shape(4, 0, 2);
  s.ranksPerNode = 2;
  NcclMemoryModel model(s);
  EXPECT_EQ(model.initBytes(), 28 * MiB);  // init does not depend on the layout
  EXPECT_THROW(model.connect(Algorithm::Ring), std::logic_error);
  EXPECT_THROW(model.connectSend(1), std::logic_error);
}

}  // namespace
}  // namespace nccl_migrate::sim
