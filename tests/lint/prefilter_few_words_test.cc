// A prefilter of a few long words (a JSON file's) searches them one by one with memmem; it finds the
// same words, at the same places, as the automaton. And a JSON file, which holds no comments and so
// no suppressions, is not scanned for NM001's words.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "engine/prefilter.h"
#include "nccl_migrate/lint/linter.h"
#include "lint_test_support.h"

namespace nccl_migrate::lint {
namespace {
namespace fs = std::filesystem;

using testing::StubRule;

TEST(LintPrefilterFewWords, FindsWhatTheAutomatonFinds) {
  StubRule a("A"), b("B");
  Trigger words, shortWord;
  words.anyOf = {"cudaMallocAsync*", "nccl-legacy", "TORCH_DIST_USE_NCCL2"};
  shortWord.anyOf = {"xy"};
  Prefilter few({{&a, {words}}}, {});
  // The same words and a short one: too many, too short for memmem, so the automaton runs.
  Prefilter automaton({{&a, {words}}, {&b, {shortWord}}}, {});
  const std::vector<std::string> pieces = {"cudaMallocAsync", "nccl-legacy", "TORCH_DIST_USE_NCCL2", "nccl-", "legacy",
                                           "_", "a", " ", "\n", "\"", ":", "cudaMalloc", "TORCH_DIST_USE_NCCL2_", "é"};
  std::mt19937 random(7);
  for (int round = 0; round < 2000; ++round) {
    std::string text;
    for (int n = static_cast<int>(random() % 12); n > 0; --n) text += pieces[random() % pieces.size()];
    PrefilterMatches expected = automaton.scan(text), got = few.scan(text);
    std::vector<std::pair<size_t, uint32_t>> kept;
    for (const auto& m : expected.ends)
      if (m.second < 3) kept.push_back(m);  // the words the two share have the same ids (0-2)
    std::sort(kept.begin(), kept.end());
    EXPECT_EQ(got.ends, kept) << text;
    EXPECT_EQ(few.triggeredRules(got).empty(), kept.empty()) << text;
  }
}

TEST(LintPrefilterFewWords, AJsonFileIsNotParsedForSuppressionsItCannotHold) {
  fs::path root = fs::temp_directory_path() / ("nccl-migrate-json-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root);
  // Rule codes and slugs in data (a report, a changelog) are no suppression comments.
  std::ofstream(root / "report.json") << "{\"rule\": \"NM301\", \"slug\": \"eager-group-creation\"}\n";
  // A YAML comment is one: unused, it is reported.
  std::ofstream(root / "job.yaml") << "image: base  # noqa: NM301\n";
  LintOptions options;
  options.jobs = 1;
  LintReport report = lintPaths({root}, options);
  ASSERT_EQ(report.findings.size(), 1u);
  EXPECT_EQ(report.findings[0].code, "NM001");
  EXPECT_EQ(fs::path(report.findings[0].path).filename(), "job.yaml");
  EXPECT_EQ(report.filesParsed, 1);  // job.yaml only
  fs::remove_all(root);
}

}  // namespace
}  // namespace nccl_migrate::lint
