// How often the members meet before a collective connects: once per shape at the grain of
// NCCL's algorithm choice (kind, reduction, element type, the power of two at or above the op's
// bytes), so many sizes between two powers of two meet once; and never more than
// NcclCommunicator::kMostCollectiveMeetings times per communicator, whatever the job's shapes.
// The group's store is wrapped to count the meeting places a rank writes its key at.
#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "forwarding_store.h"
#include "nccl/nccl_communicator.h"
#include "ranks.h"
#include "sim_backend.h"

namespace nccl_migrate::sim {
namespace {

using namespace std::chrono_literals;

// The group's store, noting each place under `<prefix>/connect/collectives/` that a member of
// this process wrote its key at (a meeting's key is `<place>/try-N/<rank>`).
class MeetingCountingStore final : public ForwardingStore {
 public:
  explicit MeetingCountingStore(c10::intrusive_ptr<c10d::Store> inner) : ForwardingStore(std::move(inner)) {}

  std::set<std::string> places() {
    std::lock_guard<std::mutex> lock(mutex_);
    return places_;
  }

 private:
  void seeSet(const std::string& key) override {
    size_t at = key.find("/connect/collectives/"), tryAt = key.rfind("/try-");
    if (at != std::string::npos && tryAt != std::string::npos && tryAt > at) {
      std::lock_guard<std::mutex> lock(mutex_);
      places_.insert(key.substr(0, tryAt));
    }
  }

  std::mutex mutex_;
  std::set<std::string> places_;
};

// A backend whose group store counts its collective meetings; the simulated NCCL moves its data
// through the rank's own store, so only the backend's meetings are counted.
struct CountedBackend {
  c10::intrusive_ptr<MeetingCountingStore> store;
  c10::intrusive_ptr<backends::MigrateBackend> pg;
};

CountedBackend countedBackend(RankContext& ctx) {
  auto store = c10::make_intrusive<MeetingCountingStore>(ctx.store);
  RankContext counted{ctx.rank, ctx.size, store};
  auto pg = simBackend(counted, rewritten(), 20s, {}, {}, backends::EngineServices::process(), ctx.store);
  return {store, pg};
}

std::string placesText(const std::set<std::string>& places) {
  std::string text;
  for (const auto& place : places) text += "\n  " + place;
  return text;
}

// 32 all_reduce sizes of 132 to 256 bytes (33 to 64 floats), all in the bucket 2^8: one meeting.
TEST(SimulatedCollectiveMeetings, ManySizesBetweenTwoPowersOfTwoMeetOnce) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       CountedBackend b = countedBackend(ctx);
                       for (int64_t n = 33; n <= 64; ++n) {
                         std::vector<at::Tensor> t{at::ones({n})};
                         b.pg->allreduce(t, allreduceWith(c10d::ReduceOp::SUM))->wait(10000ms);
                         expectEqual(t[0], at::full({n}, 2.0), "the all_reduce of " + std::to_string(n) + " floats");
                       }
                       std::set<std::string> places = b.store->places();
                       check(places.size() == 1, "32 all_reduce sizes of one power of two met at " +
                                                     std::to_string(places.size()) + " places, not 1:" +
                                                     placesText(places));
                     },
                     120s),
            "");
}

// 4 reductions x 4 element types x 5 sizes a power of two apart: 80 shapes, more than the cap.
// The members meet for the first kMostCollectiveMeetings of them only; the rest still run.
TEST(SimulatedCollectiveMeetings, MeetingsStayWithinTheCap) {
  EXPECT_EQ(runRanks(2,
                     [](RankContext& ctx) {
                       CountedBackend b = countedBackend(ctx);
                       size_t shapes = 0;
                       for (auto op : {c10d::ReduceOp::SUM, c10d::ReduceOp::PRODUCT, c10d::ReduceOp::MIN,
                                       c10d::ReduceOp::MAX}) {
                         for (auto type : {at::kFloat, at::kDouble, at::kInt, at::kLong}) {
                           for (int64_t n : {1, 4, 16, 64, 256}) {
                             std::vector<at::Tensor> t{at::full({n}, 2, at::TensorOptions().dtype(type))};
                             b.pg->allreduce(t, allreduceWith(op))->wait(10000ms);
                             double expected = op == c10d::ReduceOp::SUM || op == c10d::ReduceOp::PRODUCT ? 4 : 2;
                             expectEqual(t[0], at::full({n}, expected), "an all_reduce past or within the cap");
                             ++shapes;
                           }
                         }
                       }
                       std::set<std::string> places = b.store->places();
                       check(shapes > backends::NcclCommunicator::kMostCollectiveMeetings, "the test's shapes");
                       check(places.size() == backends::NcclCommunicator::kMostCollectiveMeetings,
                             std::to_string(shapes) + " collective shapes met at " + std::to_string(places.size()) +
                                 " places, not at the cap of " +
                                 std::to_string(backends::NcclCommunicator::kMostCollectiveMeetings));
                     },
                     240s),
            "");
}

}  // namespace
}  // namespace nccl_migrate::sim
