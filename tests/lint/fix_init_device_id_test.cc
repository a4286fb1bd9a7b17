// NM102's fix: init_process_group gets device_id= with the device the process selected (the
// current CUDA device, which the selection set), where the selection runs before the init on every
// path of the same function; elsewhere the finding carries no fix.
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

// Every selection here is read from the global rank, which NM102 reports; a value it cannot read is no finding.
const std::string kHeader = "import os\nimport torch\nimport torch.distributed as dist\nRANK = int(os.environ[\"RANK\"])\n";

TEST(FixInitDeviceId, AddsTheSelectedDevice) {
  std::string source = kHeader + "gpu = RANK % 4\ntorch.cuda.set_device(gpu)\ndist.init_process_group(\"nccl\")\n";
  std::string once = fixed(source);
  EXPECT_EQ(once, kHeader + "gpu = RANK % 4\ntorch.cuda.set_device(gpu)\n"
                            "dist.init_process_group(\"nccl\", device_id=torch.device(\"cuda\", torch.cuda.current_device()))\n");
  EXPECT_EQ(findings(once), 0);
  EXPECT_EQ(fixed(once), once) << "a second --fix changed the file";
}

TEST(FixInitDeviceId, KeepsAMultiLineCallsLayoutAndComments) {
  std::string source = kHeader +
                       "def main(args):\n"
                       "    torch.cuda.set_device(RANK % 8)\n"
                       "    dist.init_process_group(\n"
                       "        backend=\"nccl\",  # the GPUs' backend\n"
                       "        world_size=args.world_size,\n"
                       "    )\n";
  EXPECT_EQ(fixed(source), kHeader +
                               "def main(args):\n"
                               "    torch.cuda.set_device(RANK % 8)\n"
                               "    dist.init_process_group(\n"
                               "        backend=\"nccl\",  # the GPUs' backend\n"
                               "        world_size=args.world_size, device_id=torch.device(\"cuda\", torch.cuda.current_device()),\n"
                               "    )\n");
}

TEST(FixInitDeviceId, AnEmptyArgumentListGetsTheArgumentAlone) {
  std::string source = kHeader + "torch.cuda.set_device(RANK)\ndist.init_process_group()\n";
  EXPECT_EQ(fixed(source), kHeader + "torch.cuda.set_device(RANK)\n"
                                     "dist.init_process_group(device_id=torch.device(\"cuda\", torch.cuda.current_device()))\n");
}

// Whatever the selection was given (an index from a call, a "cuda:N" string, a torch.device), the
// device written is the one it set: torch.device("cuda", "cuda:1") would raise TypeError.
TEST(FixInitDeviceId, AnyFormOfTheSelectedDeviceIsWrittenAsTheCurrentOne) {
  for (const std::string selection : {"RANK % 8", "\"cuda:1\"", "torch.device(\"cuda\", 1)", "\"cuda:%d\" % RANK"}) {
    std::string source = kHeader + "torch.cuda.set_device(" + selection + ")\ndist.init_process_group(\"nccl\")\n";
    EXPECT_EQ(fixed(source), kHeader + "torch.cuda.set_device(" + selection + ")\n"
                                       "dist.init_process_group(\"nccl\", device_id=torch.device(\"cuda\", "
                                       "torch.cuda.current_device()))\n")
        << selection;
  }
}

// Each of these is still a finding, but the device current at the init call may not be the one
// selected, or the fix could not be written safely, so no fix is offered.
TEST(FixInitDeviceId, NoFixWhereTheSelectionMayNotHaveRun) {
  const std::string cases[] = {
      // two methods of one name in two classes: the selection is not in the init's function
      kHeader + "class Worker:\n    def setup(self, gpu):\n        torch.cuda.set_device(RANK % 8)\n"
                "class Trainer:\n    def setup(self):\n        dist.init_process_group(\"nccl\")\n",
      // the arguments unpacked: they may hold a device_id already
      kHeader + "torch.cuda.set_device(RANK)\ndist.init_process_group(\"nccl\", **options)\n",
      // selected on one path only
      kHeader + "if args.gpu is not None:\n    torch.cuda.set_device(RANK % 8)\ndist.init_process_group(\"nccl\")\n",
      // selected in another function
      kHeader + "def pick(d):\n    torch.cuda.set_device(RANK % 8)\n\ndef main():\n    dist.init_process_group(\"nccl\")\n",
      // `torch` may not name the module where the device would be written
      "import os\nimport torch.distributed as dist\nfrom torch.cuda import set_device\nset_device(int(os.environ[\"RANK\"]))\n"
      "dist.init_process_group(\"nccl\")\n",
  };
  for (const std::string& source : cases) {
    EXPECT_EQ(findings(source), 1) << source;
    EXPECT_EQ(fixed(source), source) << source;
  }
}

}  // namespace
}  // namespace nccl_migrate::lint
