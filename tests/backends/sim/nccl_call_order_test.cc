// The order of the NCCL communicator's calls into NCCL, checked against a mock of the NCCL API
// (the simulated device's streams stand in for CUDA): every NCCL group opened is closed, with
// the batch's calls inside it; no call names a communicator after it was aborted; every
// PREMUL_SUM op created is destroyed, also when the call that used it failed.
#include <chrono>
#include <cstring>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "nccl/nccl_communicator.h"
#include "nccl_migrate/backends/communicator_factories.h"
#include "nccl_migrate/backends/communicator_policy.h"
#include "nccl_migrate/backends/migrate_backend.h"
#include "sim_device.h"

namespace nccl_migrate::sim {
namespace {

using ::testing::_;
using ::testing::DoAll;
using ::testing::InSequence;
using ::testing::NiceMock;
using ::testing::Return;
using ::testing::SetArgPointee;

class MockNcclApi : public backends::nccl::NcclApi {
 public:
  MOCK_METHOD(const char*, errorString, (ncclResult_t), (override));
  MOCK_METHOD(ncclResult_t, getUniqueId, (ncclUniqueId*), (override));
  MOCK_METHOD(ncclResult_t, commInitRankConfig, (ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*), (override));
  MOCK_METHOD(ncclResult_t, commGetAsyncError, (ncclComm_t, ncclResult_t*), (override));
  MOCK_METHOD(ncclResult_t, commAbort, (ncclComm_t), (override));
  MOCK_METHOD(ncclResult_t, commDestroy, (ncclComm_t), (override));
  MOCK_METHOD(ncclResult_t, allReduce,
              (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t), (override));
  MOCK_METHOD(ncclResult_t, broadcast, (const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t),
              (override));
  MOCK_METHOD(ncclResult_t, reduce,
              (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t, cudaStream_t), (override));
  MOCK_METHOD(ncclResult_t, allGather, (const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t),
              (override));
  MOCK_METHOD(ncclResult_t, reduceScatter,
              (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t), (override));
  MOCK_METHOD(ncclResult_t, send, (const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t), (override));
  MOCK_METHOD(ncclResult_t, recv, (void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t), (override));
  MOCK_METHOD(ncclResult_t, groupStart, (), (override));
  MOCK_METHOD(ncclResult_t, groupEnd, (), (override));
  MOCK_METHOD(ncclResult_t, redOpCreatePreMulSum,
              (ncclRedOp_t*, void*, ncclDataType_t, ncclScalarResidence_t, ncclComm_t), (override));
  MOCK_METHOD(ncclResult_t, redOpDestroy, (ncclRedOp_t, ncclComm_t), (override));
};

const ncclComm_t kComm = reinterpret_cast<ncclComm_t>(0x5eed);

// A one-rank group of the rewritten behaviour bound to simulated device 0, whose communicator
// talks to `api`. Unless a test says otherwise, every NCCL call succeeds.
class CallOrder : public ::testing::Test {
 protected:
  void SetUp() override {
    ON_CALL(*api, errorString(_)).WillByDefault(Return("mocked NCCL error"));
    ON_CALL(*api, commInitRankConfig(_, _, _, _, _)).WillByDefault(DoAll(SetArgPointee<0>(kComm), Return(ncclSuccess)));
    ON_CALL(*api, commGetAsyncError(_, _)).WillByDefault(DoAll(SetArgPointee<1>(ncclSuccess), Return(ncclSuccess)));
    ON_CALL(*api, groupStart()).WillByDefault(Return(ncclSuccess));
    ON_CALL(*api, groupEnd()).WillByDefault(Return(ncclSuccess));
    ON_CALL(*api, allReduce(_, _, _, _, _, _, _)).WillByDefault(Return(ncclSuccess));
    ON_CALL(*api, allGather(_, _, _, _, _, _)).WillByDefault(Return(ncclSuccess));
  }

  c10::intrusive_ptr<backends::MigrateBackend> group() {
    auto seams = std::make_shared<const backends::NcclSeams>(backends::NcclSeams{api, SimRuntime::instance()});
    backends::GroupOptions options{"0", "default_pg", std::chrono::seconds(10), {}, c10::Device(c10::kCPU, 0)};
    backends::FactoryMaker factory = [seams](const c10::intrusive_ptr<c10d::Store>& store,
                                             const backends::GroupOptions& o) {
      return backends::makeCommunicatorFactory(store, nullptr, o.groupName, o.connectTimeout(), seams, c10::kCPU,
                                               o.deviceComms);
    };
    backends::PolicyMaker rewritten = [](int rank, int size) { return backends::makeRewrittenPolicy(rank, size, false); };
    return c10::make_intrusive<backends::MigrateBackend>(c10::make_intrusive<c10d::HashStore>(), 0, 1, options,
                                                         rewritten, factory, backends::EngineServices::fresh(8));
  }

  // Once the group and its ops are gone, nothing holds the NCCL API: the communicator's handle
  // (which every op in flight shares) was freed, and the mock's expectations are checked now.
  void TearDown() override {
    for (int i = 0; i < 200 && api.use_count() > 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(api.use_count(), 1) << "the communicator's handle outlived its group and ops";
  }

  static c10d::AllreduceOptions sumOf() { return {}; }

  std::shared_ptr<NiceMock<MockNcclApi>> api = std::make_shared<NiceMock<MockNcclApi>>();
};

TEST_F(CallOrder, ABatchIsOneGroupWithItsCallsInside) {
  auto pg = group();
  {
    InSequence order;
    EXPECT_CALL(*api, groupStart());
    EXPECT_CALL(*api, allReduce(_, _, _, _, _, kComm, _)).Times(2);
    EXPECT_CALL(*api, groupEnd());
  }
  std::vector<at::Tensor> a{at::ones({2})}, b{at::ones({3})};
  pg->startCoalescing();
  (void)pg->allreduce(a, sumOf());
  (void)pg->allreduce(b, sumOf());
  pg->endCoalescing()->wait();
}

TEST_F(CallOrder, ALoweredListFormIsOneGroup) {
  auto pg = group();
  {
    InSequence order;
    EXPECT_CALL(*api, groupStart());
    // One rank: gathering is copying the input into the staging buffer.
    EXPECT_CALL(*api, allGather(_, _, 4, ncclFloat32, kComm, _))
        .WillOnce([](const void* send, void* recv, size_t count, ncclDataType_t, ncclComm_t, cudaStream_t) {
          std::memcpy(recv, send, count * sizeof(float));
          return ncclSuccess;
        });
    EXPECT_CALL(*api, groupEnd());
  }
  std::vector<std::vector<at::Tensor>> outputs{{at::zeros({4})}};
  std::vector<at::Tensor> inputs{at::ones({4})};
  pg->allgather(outputs, inputs, {})->wait();
  EXPECT_TRUE(at::equal(outputs[0][0], at::ones({4})));  // copied out of the staging buffer
}

TEST_F(CallOrder, AFailedCallInsideABatchStillClosesTheGroup) {
  auto pg = group();
  EXPECT_CALL(*api, allReduce(_, _, _, _, _, _, _)).WillOnce(Return(ncclInternalError));
  EXPECT_CALL(*api, groupStart()).Times(1);
  EXPECT_CALL(*api, groupEnd()).Times(1);
  std::vector<at::Tensor> a{at::ones({2})};
  pg->startCoalescing();
  EXPECT_THROW((void)pg->allreduce(a, sumOf()), c10::Error);
  try {
    pg->endCoalescing();
  } catch (const c10::Error&) {
    // the batch holds a failed op; what matters is that NCCL's group is closed
  }
}

// A batch whose op lost its peer, and whose group was then aborted under it (the watchdog, on
// another thread, saw the failure) before the batch ended: the batch fails with the peer's
// failure, through its work, as a batch that was not aborted does. The abort's own refusal
// ("the communicator was aborted") would hide what failed.
TEST_F(CallOrder, ABatchThatFailedKeepsItsOwnFailureWhenItsGroupIsAbortedBeforeItEnds) {
  auto pg = group();
  ON_CALL(*api, errorString(ncclRemoteError)).WillByDefault(Return("the peer went away"));
  EXPECT_CALL(*api, allReduce(_, _, _, _, _, _, _)).WillOnce(Return(ncclRemoteError));
  std::vector<at::Tensor> a{at::ones({2})};
  pg->startCoalescing();
  (void)pg->allreduce(a, sumOf());
  pg->abort();
  c10::intrusive_ptr<c10d::Work> work;
  try {
    work = pg->endCoalescing();
  } catch (const c10::Error& e) {
    FAIL() << "the batch's end threw instead of failing its work: " << e.what_without_backtrace();
  }
  try {
    work->wait();
    FAIL() << "a batch whose op failed completed";
  } catch (const c10::DistBackendError& e) {
    std::string error = e.what_without_backtrace();
    EXPECT_NE(error.find("the peer went away"), std::string::npos) << error;
    EXPECT_EQ(error.find("was aborted"), std::string::npos) << error;
  }
}

TEST_F(CallOrder, NoCallNamesTheCommunicatorAfterItsAbort) {
  auto pg = group();
  std::vector<at::Tensor> a{at::ones({2})};
  pg->allreduce(a, sumOf())->wait();
  ::testing::Mock::VerifyAndClearExpectations(api.get());
  EXPECT_CALL(*api, commAbort(kComm)).Times(1);
  EXPECT_CALL(*api, commDestroy(_)).Times(0);
  EXPECT_CALL(*api, allReduce(_, _, _, _, _, _, _)).Times(0);
  EXPECT_CALL(*api, commGetAsyncError(_, _)).Times(0);
  pg->abort();
  EXPECT_THROW((void)pg->allreduce(a, sumOf()), c10::Error);
  pg.reset();  // the last owner must not free it again
}

TEST_F(CallOrder, EveryPreMulSumOpIsDestroyedAlsoWhenItsCallFails) {
  auto pg = group();
  const auto premul = static_cast<ncclRedOp_t>(ncclNumOps);
  {
    InSequence order;
    EXPECT_CALL(*api, redOpCreatePreMulSum(_, _, ncclFloat32, ncclScalarHostImmediate, kComm))
        .WillOnce(DoAll(SetArgPointee<0>(premul), Return(ncclSuccess)));
    EXPECT_CALL(*api, allReduce(_, _, _, _, premul, kComm, _)).WillOnce(Return(ncclInternalError));
    EXPECT_CALL(*api, redOpDestroy(premul, kComm)).WillOnce(Return(ncclSuccess));
  }
  std::vector<at::Tensor> a{at::ones({2})};
  c10d::AllreduceOptions opts;
  opts.reduceOp = c10d::makePreMulSum(2.0);
  EXPECT_THROW((void)pg->allreduce(a, opts), c10::Error);
}

}  // namespace
}  // namespace nccl_migrate::sim
