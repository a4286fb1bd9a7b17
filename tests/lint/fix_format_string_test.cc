// Fixes never write into an f-string's interpolation: what they write holds double quotes, which
// end an f-string delimited by them before Python 3.12 (PEP 701), so the fixed file would not
// parse there. The findings stay; only their fixes are left out.
#include <gtest/gtest.h>

#include <string>

#include "nccl_migrate/lint/fixes.h"
#include "nccl_migrate/lint/linter.h"

namespace nccl_migrate::lint {
namespace {

TEST(FixFormatString, InterpolationsAreReportedButNotRewritten) {
  const std::string source =
      "import torch\n"
      "import torch.distributed as dist\n"
      "\n"
      "def describe(pg, b):\n"
      "    print(f\"runs nccl: {pg._get_backend(torch.device('cuda')).name() == 'nccl'}\")\n"
      "    s = f\"{isinstance(b, dist.ProcessGroupNCCL)}\"\n"
      "    t = f\"{b.perform_nocolor_split(0)}\"\n"
      "    return s, t\n";
  LintReport report = lintSource("job.py", source);
  int found = 0;
  for (const Finding& f : report.findings) {
    found += f.code == "NM201" || f.code == "NM202" || f.code == "NM203";
    EXPECT_FALSE(f.fix.has_value()) << f.code << " at line " << f.where.line << " offers a fix inside an f-string";
  }
  EXPECT_EQ(found, 3);
  EXPECT_EQ(applyFixes(source, applicableFixes(report, FixSafety::Unsafe)), source);
}

TEST(FixFormatString, CodeAfterAnFStringIsRewrittenAsUsual) {
  const std::string source =
      "import torch.distributed as dist\n"
      "label = f\"{dist.get_rank()}\"\n"
      "ok = pg.name() == \"nccl\"\n";
  LintReport report = lintSource("job.py", source);
  EXPECT_EQ(applyFixes(source, applicableFixes(report, FixSafety::Safe)),
            "import torch.distributed as dist\n"
            "label = f\"{dist.get_rank()}\"\n"
            "ok = pg.name() in (\"nccl\", \"nccl2\", \"nccl-lazy\")\n");
}

}  // namespace
}  // namespace nccl_migrate::lint
