// torch's NCCL environment variables as the toolkit's backends read them.
#include <gtest/gtest.h>

#include "nccl_migrate/shim/nccl_environment.h"

namespace nccl_migrate::shim {
namespace {

TEST(NcclEnvironment, DefaultsAreTorchs) {
  auto env = ncclEnvironment({});
  ASSERT_TRUE(env.ok());
  EXPECT_FALSE(env.value().blockingWait);
  EXPECT_FALSE(env.value().commNonblocking);
  EXPECT_EQ(env.value().asyncErrorHandling, 3);
}

TEST(NcclEnvironment, ReadsEachVariable) {
  JobSettings s;
  s.blockingWait = "1";
  s.commNonblocking = "true";
  s.asyncErrorHandling = "0";
  auto env = ncclEnvironment(s);
  ASSERT_TRUE(env.ok()) << env.error();
  EXPECT_TRUE(env.value().blockingWait);
  EXPECT_TRUE(env.value().commNonblocking);
  EXPECT_EQ(env.value().asyncErrorHandling, 0);
}

TEST(NcclEnvironment, TakesTorchsBooleanSpellings) {
  for (const char* yes : {"1", "true", "TRUE", "t", "yes", "Y"}) {
    JobSettings s;
    s.blockingWait = yes;
    EXPECT_TRUE(ncclEnvironment(s).value().blockingWait) << yes;
  }
  for (const char* no : {"0", "false", "F", "no", "n"}) {
    JobSettings s;
    s.blockingWait = no;
    EXPECT_FALSE(ncclEnvironment(s).value().blockingWait) << no;
  }
}

TEST(NcclEnvironment, TheOlderBlockingWaitSpellingCountsWhenTheNewOneIsUnset) {
  JobSettings s;
  s.legacyBlockingWait = "1";
  EXPECT_TRUE(ncclEnvironment(s).value().blockingWait);
  s.blockingWait = "0";
  EXPECT_FALSE(ncclEnvironment(s).value().blockingWait);
}

TEST(NcclEnvironment, BadValuesAreNamedWithTheFix) {
  JobSettings s;
  s.blockingWait = "yes please";
  auto env = ncclEnvironment(s);
  ASSERT_FALSE(env.ok());
  EXPECT_EQ(env.error(), "TORCH_NCCL_BLOCKING_WAIT='yes please' is not a boolean: set 1 or 0");
  JobSettings m;
  m.asyncErrorHandling = "7";
  ASSERT_FALSE(ncclEnvironment(m).ok());
  EXPECT_NE(ncclEnvironment(m).error().find("set 0, 1, 2 or 3"), std::string::npos);
}

}  // namespace
}  // namespace nccl_migrate::shim
