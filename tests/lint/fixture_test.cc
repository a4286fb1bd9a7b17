// Every file in tests/lint/fixtures/ is linted through the real engine (config discovery,
// frontends, rules, suppressions) and checked against its inline expectations:
//   `# ruleid: CODE` (or `// ruleid: CODE`): CODE reports on the next code line;
//   `# ok: CODE`: CODE does not report there.
// Only codes a file annotates are compared, so a fixture tests exactly what it names.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include "nccl_migrate/lint/linter.h"

namespace nccl_migrate::lint {
namespace {
namespace fs = std::filesystem;

using Expectation = std::pair<int, std::string>;  // line, code

struct Annotations {
  std::set<Expectation> expected;
  std::set<std::string> codes;
};

Annotations readAnnotations(const fs::path& file) {
  static const std::regex kMark(R"((#|//)\s*(ruleid|ok):\s*(NM[0-9]{3}))");
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  Annotations out;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::smatch m;
    if (!std::regex_search(lines[i], m, kMark)) continue;
    out.codes.insert(m[3].str());
    if (m[2].str() != "ruleid") continue;
    size_t target = i + 1;  // the next line that is not itself an annotation
    while (target < lines.size() && std::regex_search(lines[target], kMark) &&
           lines[target].find_first_not_of(" \t") == lines[target].find_first_of("#/")) {
      ++target;
    }
    out.expected.insert({static_cast<int>(target) + 1, m[3].str()});
  }
  return out;
}

std::vector<fs::path> fixtures() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(NCCL_MIGRATE_LINT_FIXTURES)) {
    std::string name = entry.path().filename().string();
    if (name.starts_with("NM")) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

class Fixture : public testing::TestWithParam<fs::path> {};

TEST_P(Fixture, FindingsMatchInlineExpectations) {
  const fs::path& file = GetParam();
  Annotations annotations = readAnnotations(file);
  ASSERT_FALSE(annotations.codes.empty()) << file << " has no ruleid/ok annotations";
  LintOptions options;
  options.config = discoverConfig(file);
  LintReport report = lintPaths({file}, options);
  EXPECT_TRUE(report.warnings.empty()) << report.warnings.front();
  std::set<Expectation> actual;
  for (const Finding& f : report.findings) {
    if (annotations.codes.contains(f.code)) actual.insert({f.where.line, f.code});
  }
  for (const auto& [line, code] : annotations.expected) {
    EXPECT_TRUE(actual.contains({line, code})) << file.filename() << ":" << line << ": expected " << code;
  }
  for (const auto& [line, code] : actual) {
    EXPECT_TRUE(annotations.expected.contains({line, code})) << file.filename() << ":" << line << ": unexpected " << code;
  }
}

INSTANTIATE_TEST_SUITE_P(Rules, Fixture, testing::ValuesIn(fixtures()), [](const auto& info) {
  std::string name = info.param.filename().string();
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
});

// Every rule that reports something has at least one fixture that expects it.
TEST(Fixtures, CoverEveryRule) {
  std::set<std::string> covered;
  for (const fs::path& f : fixtures()) {
    for (const auto& e : readAnnotations(f).expected) covered.insert(e.second);
  }
  for (const Rule* rule : allRules()) EXPECT_TRUE(covered.contains(rule->info().code)) << rule->info().code;
}

}  // namespace
}  // namespace nccl_migrate::lint
