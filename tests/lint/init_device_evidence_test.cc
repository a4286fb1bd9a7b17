// NM102's messages state what the file showed and nothing more: a multiple of a count names the
// count (and, where the count is not a number, that it agrees only when that count is 1), and an
// init whose backend the file does not show says so and carries no fix.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nccl_migrate/lint/linter.h"

namespace nccl_migrate::lint {
namespace {

std::vector<Finding> deviceFindings(const std::string& text) {
  std::vector<Finding> out;
  for (Finding& f : lintSource("job.py", text).findings)
    if (f.code == "NM102") out.push_back(std::move(f));
  return out;
}

const std::string kHeader = "import os\nimport torch\nimport torch.distributed as dist\n";

TEST(InitDeviceEvidence, AMultipleOfACountNamesTheCount) {
  auto found = deviceFindings(kHeader +
                              "def worker(gpus_per_worker):\n"
                              "    first = int(os.environ[\"LOCAL_RANK\"]) * gpus_per_worker\n"
                              "    torch.cuda.set_device(first)\n"
                              "    dist.init_process_group(\"nccl\")\n");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_NE(found[0].message.find("selects cuda:(LOCAL_RANK * gpus_per_worker)"), std::string::npos) << found[0].message;
  EXPECT_NE(found[0].message.find("a rank whose global rank % device_count() is 1 gets cuda:1, no multiple of "
                                  "gpus_per_worker unless gpus_per_worker is 1"),
            std::string::npos)
      << found[0].message;
}

TEST(InitDeviceEvidence, AMultipleOfANumberHasNoCondition) {
  auto found = deviceFindings(kHeader +
                              "torch.cuda.set_device(2 * int(os.environ[\"LOCAL_RANK\"]))\n"
                              "dist.init_process_group(\"nccl\")\n");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_NE(found[0].message.find("selects cuda:(2 * LOCAL_RANK)"), std::string::npos) << found[0].message;
  EXPECT_NE(found[0].message.find("no multiple of 2. "), std::string::npos) << found[0].message;
  EXPECT_EQ(found[0].message.find("unless"), std::string::npos) << found[0].message;
}

TEST(InitDeviceEvidence, TimesOneIsTheIndexItself) {
  EXPECT_TRUE(deviceFindings(kHeader +
                             "torch.cuda.set_device(int(os.environ[\"LOCAL_RANK\"]) * 1)\n"
                             "dist.init_process_group(\"nccl\")\n")
                  .empty());
}

TEST(InitDeviceEvidence, ABackendNotShownIsNamedAndGetsNoFix) {
  std::string selection = "    torch.cuda.set_device(int(os.environ[\"RANK\"]) % 8)\n";
  auto unread = deviceFindings(kHeader + "def setup(cfg):\n" + selection + "    dist.init_process_group(backend=cfg.backend)\n");
  ASSERT_EQ(unread.size(), 1u);
  EXPECT_NE(unread[0].message.find("init_process_group() without device_id and backend=cfg.backend, which this file "
                                   "does not show to be nccl (what follows holds where it is); "),
            std::string::npos)
      << unread[0].message;
  EXPECT_FALSE(unread[0].fix.has_value());

  auto nccl = deviceFindings(kHeader + "def setup(cfg):\n" + selection + "    dist.init_process_group(backend=\"nccl\")\n");
  ASSERT_EQ(nccl.size(), 1u);
  EXPECT_EQ(nccl[0].message.find("does not show"), std::string::npos) << nccl[0].message;
  EXPECT_TRUE(nccl[0].fix.has_value());
}

TEST(InitDeviceEvidence, NamesNoneOfWhichIsNcclAreNotReported) {
  EXPECT_TRUE(deviceFindings(kHeader +
                             "def setup(cpu):\n"
                             "    backend = \"gloo\" if cpu else \"mpi\"\n"
                             "    torch.cuda.set_device(0)\n"
                             "    dist.init_process_group(backend)\n")
                  .empty());
}

}  // namespace
}  // namespace nccl_migrate::lint
