// NM102's fix: init_process_group gets device_id= with the device the process selected, where
// that expression means the same at the init call; elsewhere the finding carries no fix.
#include <gtest/gtest.h>

#include <string>

#include "nccl_migrate/lint/fixes.h"
#include "nccl_migrate/lint/linter.h"

namespace nccl_migrate::lint {
namespace {

std::string fixed(const std::string& text) {
  LintReport report = lintSource("job.py", text);
  return applyFixes(text, applicableFixes(report, FixSafety::Unsafe));
}

int findings(const std::string& text) {
  int n = 0;
  for (const Finding& f : lintSource("job.py", text).findings) n += f.code == "NM102";
  return n;
}

const std::string kHeader = "import torch\nimport torch.distributed as dist\n";

TEST(FixInitDeviceId, AddsTheSelectedDevice) {
  std::string source = kHeader + "gpu = rank % 4\ntorch.cuda.set_device(gpu)\ndist.init_process_group(\"nccl\")\n";
  std::string once = fixed(source);
  EXPECT_EQ(once, kHeader + "gpu = rank % 4\ntorch.cuda.set_device(gpu)\n"
                            "dist.init_process_group(\"nccl\", device_id=torch.device(\"cuda\", gpu))\n");
  EXPECT_EQ(findings(once), 0);
  EXPECT_EQ(fixed(once), once) << "a second --fix changed the file";
}

TEST(FixInitDeviceId, KeepsAMultiLineCallsLayoutAndComments) {
  std::string source = kHeader +
                       "def main(args):\n"
                       "    torch.cuda.set_device(args.gpu)\n"
                       "    dist.init_process_group(\n"
                       "        backend=\"nccl\",  # the GPUs' backend\n"
                       "        world_size=args.world_size,\n"
                       "    )\n";
  EXPECT_EQ(fixed(source), kHeader +
                               "def main(args):\n"
                               "    torch.cuda.set_device(args.gpu)\n"
                               "    dist.init_process_group(\n"
                               "        backend=\"nccl\",  # the GPUs' backend\n"
                               "        world_size=args.world_size, device_id=torch.device(\"cuda\", args.gpu),\n"
                               "    )\n");
}

TEST(FixInitDeviceId, AnEmptyArgumentListGetsTheArgumentAlone) {
  std::string source = kHeader + "torch.cuda.set_device(dev)\ndist.init_process_group()\n";
  EXPECT_EQ(fixed(source), kHeader + "torch.cuda.set_device(dev)\n"
                                     "dist.init_process_group(device_id=torch.device(\"cuda\", dev))\n");
}

// Each of these is still a finding, but writing the device again at the init call could mean
// something else there, so no fix is offered.
TEST(FixInitDeviceId, NoFixWhereTheExpressionMayMeanSomethingElse) {
  const std::string cases[] = {
      // a call, which may answer differently the second time
      kHeader + "torch.cuda.set_device(pick_gpu())\ndist.init_process_group(\"nccl\")\n",
      // selected on one path only
      kHeader + "if args.gpu is not None:\n    torch.cuda.set_device(args.gpu)\ndist.init_process_group(\"nccl\")\n",
      // selected in another function
      kHeader + "def pick(d):\n    torch.cuda.set_device(d)\n\ndef main():\n    dist.init_process_group(\"nccl\")\n",
      // `torch` may not name the module where the device would be written
      "import torch.distributed as dist\nfrom torch.cuda import set_device\nset_device(dev)\n"
      "dist.init_process_group(\"nccl\")\n",
  };
  for (const std::string& source : cases) {
    EXPECT_EQ(findings(source), 1) << source;
    EXPECT_EQ(fixed(source), source) << source;
  }
}

}  // namespace
}  // namespace nccl_migrate::lint
