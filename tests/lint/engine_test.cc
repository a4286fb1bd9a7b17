// The engine's central parts through the public API: configuration, selection, per-file
// ignores, .gitignore and excludes, bad files, baselines, fixes and output formats.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <unistd.h>

#include "nccl_migrate/lint/baseline.h"
#include "nccl_migrate/lint/fixes.h"
#include "nccl_migrate/lint/linter.h"
#include "nccl_migrate/lint/report_format.h"

namespace nccl_migrate::lint {
namespace {
namespace fs = std::filesystem;

constexpr const char* kHazard = "import torch.distributed as dist\nisinstance(pg, dist.ProcessGroupNCCL)\n";

class TempTree : public testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("nccl-migrate-test-" + std::to_string(::getpid()) + "-" +
                                         testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override {
    fs::permissions(root_, fs::perms::owner_all, fs::perm_options::add);
    fs::remove_all(root_);
  }
  fs::path write(const std::string& rel, const std::string& text) {
    fs::path p = root_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  std::vector<std::string> codes(const LintReport& r) {
    std::vector<std::string> out;
    for (const Finding& f : r.findings) out.push_back(fs::path(f.path).filename().string() + ":" + f.code);
    return out;
  }
  fs::path root_;
};

TEST_F(TempTree, PyprojectSelectAndPerFileIgnores) {
  write("pyproject.toml", "[tool.nccl-migrate]\nselect = [\"NM2\"]\nper-file-ignores = { \"tests/*\" = [\"NM201\"] }\n");
  write("src/a.py", kHazard);
  write("tests/b.py", kHazard);
  write("src/env.py", "import os\nos.environ['PYTORCH_CUDA_ALLOC_CONF'] = 'backend:cudaMallocAsync'\n");
  LintOptions options;
  options.config = discoverConfig(root_ / "src");
  EXPECT_EQ(options.config.source, root_ / "pyproject.toml");
  EXPECT_EQ(codes(lintPaths({root_}, options)), (std::vector<std::string>{"a.py:NM201"}));
}

TEST_F(TempTree, ConfigErrorsNameFileLineAndKey) {
  write(".nccl-migrate.toml", "select = [\"NM2\"]\nselcet = [\"NM1\"]\n");
  try {
    discoverConfig(root_);
    FAIL() << "unknown key accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(".nccl-migrate.toml:2: unknown or mistyped key 'selcet'"), std::string::npos) << e.what();
  }
  write(".nccl-migrate.toml", "select = [\n");
  EXPECT_THROW(discoverConfig(root_), ConfigError);
  LintOptions options;
  options.config.select = {"NM999"};
  EXPECT_THROW(lintPaths({root_}, options), ConfigError);
}

TEST_F(TempTree, GitignoreAndExcludeSkipFiles) {
  write(".gitignore", "generated/\n*_pb2.py\n!keep_pb2.py\n");
  write("generated/a.py", kHazard);
  write("x_pb2.py", kHazard);
  write("keep_pb2.py", kHazard);
  write("vendor/c.py", kHazard);
  write("main.py", kHazard);
  LintOptions options;
  options.config.exclude = {"vendor"};
  EXPECT_EQ(codes(lintPaths({root_}, options)), (std::vector<std::string>{"keep_pb2.py:NM201", "main.py:NM201"}));
  options.config.respectGitignore = false;
  options.config.exclude.clear();
  EXPECT_EQ(lintPaths({root_}, options).findings.size(), 5u);
}

TEST_F(TempTree, BadFilesWarnAndTheRunGoesOn) {
  write("binary.py", std::string("import torch\0\1\2", 15));
  write("latin1.py", "# caf\xe9\nimport torch.distributed as dist\nisinstance(pg, dist.ProcessGroupNCCL)\n");
  write("huge.py", std::string(64 * 1024, '#') + "\n" + kHazard);
  fs::path locked = write("locked.py", kHazard);
  fs::permissions(locked, fs::perms::none);
  write("good.py", kHazard);
  LintOptions options;
  options.config.maxFileBytes = 32 * 1024;
  LintReport report = lintPaths({root_}, options);
  // root reads any file, so the unreadable one only stays unread for other users.
  // An invalid byte is read as U+FFFD: the file is linted, with a warning.
  std::vector<std::string> expected = {"good.py:NM201", "latin1.py:NM201"};
  if (::geteuid() == 0) expected.push_back("locked.py:NM201");
  EXPECT_EQ(codes(report), expected);
  std::string all;
  for (const auto& w : report.warnings) all += w + "\n";
  EXPECT_NE(all.find("binary.py: skipped: binary file"), std::string::npos) << all;
  EXPECT_NE(all.find("latin1.py: 1 byte(s) of invalid UTF-8 read as U+FFFD"), std::string::npos) << all;
  EXPECT_NE(all.find("huge.py: skipped"), std::string::npos) << all;
  if (::geteuid() != 0) EXPECT_NE(all.find("locked.py: skipped: cannot be read"), std::string::npos) << all;
}

TEST_F(TempTree, BaselineReportsOnlyNewFindingsAndSurvivesLineMoves) {
  fs::path file = write("a.py", kHazard);
  LintReport first = lintPaths({root_});
  ASSERT_EQ(first.findings.size(), 1u);
  std::ostringstream json;
  writeJson(first, json);
  fs::path baseline = write("baseline.json", json.str());
  // The old finding moves down two lines; a new one is added.
  write("a.py", std::string("\n\n") + kHazard + "isinstance(other, dist.ProcessGroupNCCL)\n");
  LintReport second = lintPaths({file});
  ASSERT_EQ(second.findings.size(), 2u);
  EXPECT_EQ(applyBaseline(second, baseline), 1);
  ASSERT_EQ(second.findings.size(), 1u);
  EXPECT_EQ(second.findings[0].where.line, 5);
  write("bad.json", "{\"findings\": 3}");
  EXPECT_THROW(applyBaseline(second, root_ / "bad.json"), ConfigError);
  EXPECT_THROW(applyBaseline(second, root_ / "missing.json"), ConfigError);
}

// With the run's options, the diff shows the later rounds' fixes too (the second check of a line,
// whose finding the engine keeps for the next round), and a round that changes nothing ends it.
TEST_F(TempTree, TheDiffShowsEveryRoundOfFixes) {
  const std::string before =
      "import torch.distributed as dist\n"
      "ok = isinstance(a, dist.ProcessGroupNCCL) and isinstance(b, dist.ProcessGroupNCCL)\n";
  fs::path file = write("two.py", before);
  LintOptions options;
  LintReport report = lintPaths({file}, options);
  auto fixes = applicableFixes(report, FixSafety::Unsafe);
  ASSERT_EQ(fixes.size(), 1u);  // one finding per line and rule
  std::ostringstream oneRound, everyRound;
  EXPECT_EQ(diffFiles(fixes, oneRound), 1);
  EXPECT_EQ(diffFiles(fixes, everyRound, &options, FixSafety::Unsafe), 2);
  auto twice = [](const std::string& diff) {
    size_t added = diff.find("\n+ok = ");
    std::string line = added == std::string::npos ? "" : diff.substr(added, diff.find('\n', added + 1) - added);
    size_t n = 0;
    // Each fixed check calls the module's helper (one round fixes one check per line).
    for (size_t at = line.find("_is_nccl_backend("); at != std::string::npos; at = line.find("_is_nccl_backend(", at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(twice(oneRound.str()), 1u) << oneRound.str();
  EXPECT_EQ(twice(everyRound.str()), 2u) << everyRound.str();
  std::ifstream in(file);
  std::stringstream after;
  after << in.rdbuf();
  EXPECT_EQ(after.str(), before) << "--diff wrote the file";
}

TEST_F(TempTree, SafeFixRewritesNameComparisons) {
  const std::string before = "b = pg._get_backend(dev)\nif b.name() == \"nccl\":\n    pass\nif b.name() != 'nccl': pass\n";
  fs::path file = write("a.py", before);
  LintReport report = lintPaths({file});
  auto fixes = applicableFixes(report, FixSafety::Safe);
  ASSERT_EQ(fixes.size(), 2u);
  std::ostringstream diff;
  EXPECT_EQ(diffFiles(fixes, diff), 2);
  EXPECT_NE(diff.str().find("-if b.name() == \"nccl\":\n+if b.name() in (\"nccl\", \"nccl2\", \"nccl-lazy\"):"), std::string::npos) << diff.str();
  std::ostringstream problems;
  EXPECT_EQ(fixFiles(fixes, problems), 2);
  std::ifstream in(file);
  std::stringstream after;
  after << in.rdbuf();
  EXPECT_EQ(after.str(), "b = pg._get_backend(dev)\nif b.name() in (\"nccl\", \"nccl2\", \"nccl-lazy\"):\n    pass\n"
                         "if b.name() not in (\"nccl\", \"nccl2\", \"nccl-lazy\"): pass\n");
  EXPECT_TRUE(lintPaths({file}).findings.empty());
}

TEST_F(TempTree, ParallelRunsGiveTheSameSortedResult) {
  for (int i = 0; i < 40; ++i) write("m" + std::to_string(i) + ".py", kHazard);
  LintOptions one, many;
  one.jobs = 1;
  many.jobs = 4;
  size_t calls = 0;
  many.progress = [&](size_t done, size_t total) {
    ++calls;
    EXPECT_LE(done, total);
  };
  EXPECT_EQ(codes(lintPaths({root_}, one)), codes(lintPaths({root_}, many)));
  EXPECT_EQ(calls, 40u);
}

TEST(Formats, TextHasTheConciseFormAndSummary) {
  LintReport report = lintSource("job.py", kHazard);
  std::ostringstream out, summary;
  writeText(report, false, out, summary);
  EXPECT_EQ(out.str().substr(0, 21), "job.py:2:16: NM201 is");
  EXPECT_NE(summary.str().find("Found 1 migration hazard in 1 file."), std::string::npos);
}

TEST(Formats, SarifCarriesRulesAndFingerprints) {
  LintReport report = lintSource("job.py", kHazard);
  std::ostringstream out;
  writeSarif(report, "1.2.3", out);
  std::string s = out.str();
  EXPECT_NE(s.find("\"version\": \"2.1.0\""), std::string::npos);
  EXPECT_NE(s.find("\"ruleId\": \"NM201\""), std::string::npos);
  EXPECT_NE(s.find("\"nccl-migrate/v1\": \"" + report.findings[0].fingerprint + "\""), std::string::npos);
}

TEST(Rules, MetadataIsCompleteAndCodesAreUnique) {
  std::set<std::string> codes, slugs;
  for (const Rule* rule : allRules()) {
    const RuleInfo& info = rule->info();
    EXPECT_TRUE(codes.insert(info.code).second) << info.code;
    EXPECT_TRUE(slugs.insert(info.slug).second) << info.slug;
    EXPECT_TRUE(std::regex_match(info.code, std::regex("NM[0-9]{3}"))) << info.code;
    for (const std::string* field : {&info.summary, &info.rationale, &info.example, &info.fix}) {
      EXPECT_FALSE(field->empty()) << info.code;
    }
    EXPECT_FALSE(info.languages.empty()) << info.code;
    EXPECT_EQ(findRule(info.slug), rule);
  }
}

// deepspeed.comm mirrors torch.distributed without any configuration, in its usual spellings.
TEST(BuiltInEquivalents, DeepspeedCommIsTorchDistributed) {
  const std::string source =
      "from deepspeed import comm as dist\n"
      "import deepspeed.comm as ds\n"
      "for ranks in layout:\n"
      "    dist.new_group(ranks)\n"
      "    ds.new_group(ranks)\n"
      "    dist.new_group(ranks, backend=\"gloo\")\n";
  std::vector<int> lines;
  for (const Finding& f : lintSource("ds.py", source).findings) {
    EXPECT_EQ(f.code, "NM401");
    lines.push_back(f.where.line);
  }
  EXPECT_EQ(lines, (std::vector<int>{4, 5}));
}

}  // namespace
}  // namespace nccl_migrate::lint
