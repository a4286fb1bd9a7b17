// The prefilter on its own (token matching, conjunctions, module mentions) and through the engine
// (which files get parsed, and that skipping them changes no finding).
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/prefilter.h"
#include "nccl_migrate/lint/linter.h"
#include "lint_test_support.h"

namespace nccl_migrate::lint {
namespace {

using testing::StubRule;

// Codes of the rules triggered in `text`, one rule per trigger.
std::vector<std::string> triggered(const std::vector<Trigger>& triggers, const std::string& text,
                                   const std::map<std::string, std::string>& equivalents = {}) {
  std::vector<StubRule> rules;
  rules.reserve(triggers.size());
  std::vector<RuleTriggers> plan;
  for (size_t i = 0; i < triggers.size(); ++i) {
    rules.emplace_back("R" + std::to_string(i));
    plan.push_back({&rules.back(), {triggers[i]}});
  }
  std::vector<std::string> codes;
  for (const Rule* rule : Prefilter(plan, equivalents).triggeredRules(text)) codes.push_back(rule->info().code);
  return codes;
}

bool matches(const std::string& word, const std::string& text) {
  return !triggered({{.anyOf = {word}}}, text).empty();
}

TEST(Prefilter, WordsMatchAsTokens) {
  EXPECT_TRUE(matches("send(", "dist.send(t, 1)"));
  EXPECT_FALSE(matches("send(", "self.resend(t)"));
  EXPECT_FALSE(matches("send(", "dist.isend(t, 1)"));
  EXPECT_TRUE(matches("isend(", "dist.isend(t, 1)"));
  EXPECT_TRUE(matches("new_group", "g = dist.new_group(r)"));
  EXPECT_FALSE(matches("new_group", "n = new_groups + 1"));
  EXPECT_FALSE(matches("new_group", "renew_group()"));
  EXPECT_TRUE(matches("\"nccl\"", "backend=\"nccl\")"));
  EXPECT_FALSE(matches("\"nccl\"", "backend=\"nccl2\")"));
  EXPECT_TRUE(matches("ProcessGroupNCCL", "ProcessGroupNCCL"));  // at both ends of the text
  EXPECT_FALSE(matches("ProcessGroupNCCL", "ProcessGroupNCCL2"));
}

TEST(Prefilter, StarsLetIdentifiersContinueAndHashesStandForDigits) {
  EXPECT_TRUE(matches("*_multigpu", "dist.all_reduce_multigpu(ts)"));
  EXPECT_FALSE(matches("*_multigpu", "all_reduce_multigpus"));
  EXPECT_TRUE(matches("set_device*", "torch.accelerator.set_device_index(i)"));
  EXPECT_FALSE(matches("set_device*", "reset_device(i)"));
  EXPECT_TRUE(matches("*cuda:#", "\"cuda:1\""));
  EXPECT_TRUE(matches("*cuda:#", "\"cuda:10\""));
  EXPECT_FALSE(matches("*cuda:#", "\"cuda:\" + str(i)"));
  EXPECT_TRUE(matches("\"cuda\", #", "torch.device(\"cuda\", 3)"));
}

TEST(Prefilter, AllPartsOfATriggerMustMatch) {
  Trigger nm102{.anyOf = {"init_process_group"}, .andAnyOf = {"set_device*"}, .module = "torch.distributed"};
  EXPECT_TRUE(triggered({nm102}, "import torch.distributed as d\ntorch.cuda.set_device(r)\nd.init_process_group()").size());
  EXPECT_TRUE(triggered({nm102}, "import torch.distributed as d\nd.init_process_group()").empty());
  EXPECT_TRUE(triggered({nm102}, "import torch.cuda\ntorch.cuda.set_device(r)\nmine.init_process_group()").empty());
}

TEST(Prefilter, ModuleMentionsIncludeInnerNamesAndEquivalentModules) {
  Trigger p2p{.anyOf = {"send("}, .module = "torch.distributed"};
  EXPECT_FALSE(triggered({p2p}, "from torch._C._distributed_c10d import send\nsend(t, 1)").empty());
  EXPECT_TRUE(triggered({p2p}, "import socket\nsock.send(data)").empty());
  std::map<std::string, std::string> equivalents = {{"deepspeed.comm", "torch.distributed"}};
  EXPECT_FALSE(triggered({p2p}, "from deepspeed import comm\ncomm.send(t, 1)", equivalents).empty());
  // A module equivalent to something else does not stand for torch.distributed.
  std::map<std::string, std::string> other = {{"apex.parallel", "torch.nn.parallel"}};
  EXPECT_TRUE(triggered({p2p}, "import apex.parallel\nsock.send(data)", other).empty());
}

TEST(Prefilter, ReportsEveryTriggeredRuleInTheOrderGiven) {
  std::vector<Trigger> triggers = {{.anyOf = {"b_word"}}, {.anyOf = {"a_word", "c_word"}}, {.anyOf = {"absent"}}};
  EXPECT_EQ(triggered(triggers, "c_word then b_word"), (std::vector<std::string>{"R0", "R1"}));
  EXPECT_TRUE(triggered(triggers, "").empty());
}

// The scan runs a text as four stretches side by side: a word is found once wherever it lies
// against their borders, with its token boundaries checked across them, and its end is reported
// in text order.
TEST(Prefilter, WordsAcrossTheScansStretchesAreFoundOnce) {
  StubRule rule("R0");
  Prefilter prefilter({{&rule, {{.anyOf = {"new_group", "ProcessGroupNCCL"}}}}}, {});
  // Each word swept over every place, across the borders: the longest word too, since the
  // stretches' warm-up is sized by it.
  for (std::string word : {"new_group", "ProcessGroupNCCL"}) {
    for (size_t size : {word.size(), size_t{37}, size_t{400}}) {
      for (size_t at = 0; at + word.size() <= size; ++at) {
        std::string text = std::string(size, ' ');
        text.replace(at, word.size(), word);
        if (at >= 1) text[at - 1] = '.';
        EXPECT_EQ(prefilter.wordEnds(prefilter.scan(text), {&rule}), (std::vector<size_t>{at + word.size()}))
            << word << " " << size << " " << at;
        // Glued to an identifier character on either side it is no word.
        std::string glued = text;
        if (at + word.size() < size) glued[at + word.size()] = 's';
        else if (at >= 1) glued[at - 1] = 'x';
        else continue;
        EXPECT_TRUE(prefilter.wordEnds(prefilter.scan(glued), {&rule}).empty()) << word << " " << size << " " << at;
      }
    }
  }
  std::string many = "ProcessGroupNCCL new_group ";
  for (int i = 0; i < 6; ++i) many += many;
  std::vector<size_t> ends = prefilter.wordEnds(prefilter.scan(many), {&rule});
  EXPECT_EQ(ends.size(), 128u);
  EXPECT_TRUE(std::is_sorted(ends.begin(), ends.end()));
}

TEST(PrefilterInTheEngine, FilesNoRuleCanReportInAreNotParsed) {
  // Point-to-point calls that are not torch.distributed's, device strings in a file that never
  // names torch.distributed, a word that only contains a trigger.
  for (const char* source : {"import socket\nfor c in chunks:\n    sock.send(c)\n",
                             "import torch\nx = torch.zeros(2, device=\"cuda:1\")\ny = torch.zeros(2, device=\"cuda:0\")\n",
                             "renew_group(ranks)\n"}) {
    LintReport report = lintSource("job.py", source);
    EXPECT_EQ(report.filesScanned, 1);
    EXPECT_EQ(report.filesParsed, 0) << source;
  }
}

TEST(PrefilterInTheEngine, ASuppressionNamingARuleBySlugIsSeen) {
  LintReport report = lintSource("job.py", "x = 1  # noqa: legacy-class-check\n");
  EXPECT_EQ(report.filesParsed, 1);
  ASSERT_EQ(report.findings.size(), 1u);
  EXPECT_EQ(report.findings[0].code, "NM001");
}

TEST(PrefilterInTheEngine, GroupWrappersNeedNoTorchDistributedMention) {
  LintOptions options;
  options.config.groupWrappers = {"myproject.comm.create_group"};
  LintReport report = lintSource("job.py", "from myproject.comm import create_group\ngs = [create_group(r) for r in layout]\n",
                                 options);
  ASSERT_EQ(report.findings.size(), 1u);
  EXPECT_EQ(report.findings[0].code, "NM401");
  // Without NM401 selected, the wrapper's name parses nothing.
  options.config.select = {"NM2"};
  EXPECT_EQ(lintSource("job.py", "create_group(r)\n", options).filesParsed, 0);
}

}  // namespace
}  // namespace nccl_migrate::lint
