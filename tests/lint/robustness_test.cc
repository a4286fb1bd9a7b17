// Inputs that must never cost a run its findings: nesting deep enough to overflow any recursive
// walk, a file whose frontend crashes, hangs or vanishes, and bytes that are not UTF-8.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "nccl_migrate/lint/linter.h"

namespace nccl_migrate::lint {
namespace {
namespace fs = std::filesystem;

constexpr int kDepth = 100'000;
constexpr const char* kPythonHazard = "import torch.distributed as dist\nisinstance(pg, dist.ProcessGroupNCCL)\n";
constexpr const char* kCppHazard = "auto* p = dynamic_cast<c10d::ProcessGroupNCCL*>(backend);\n";

std::string repeated(const std::string& piece, int times) {
  std::string out;
  out.reserve(piece.size() * times);
  for (int i = 0; i < times; ++i) out += piece;
  return out;
}

class Robustness : public testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("nccl-migrate-robust-" + std::to_string(::getpid()) + "-" +
                                         testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  fs::path write(const std::string& name, const std::string& text) {
    fs::path p = root_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }

  // "name:line:code" of each finding.
  static std::vector<std::string> findings(const LintReport& report) {
    std::vector<std::string> out;
    for (const Finding& f : report.findings)
      out.push_back(fs::path(f.path).filename().string() + ":" + std::to_string(f.where.line) + ":" + f.code);
    return out;
  }
  static std::string warnings(const LintReport& report) {
    std::string all;
    for (const std::string& w : report.warnings) all += w + "\n";
    return all;
  }

  fs::path root_;
};

// Each shape nests 100,000 levels deep in the syntax tree; the hazard after it is still found.
TEST_F(Robustness, DeeplyNestedPythonIsLinted) {
  write("brackets.py", "x = " + repeated("(", kDepth) + "1" + repeated(")", kDepth) + "\n" + kPythonHazard);
  write("lists.py", "x = " + repeated("[", kDepth) + repeated("]", kDepth) + "\n" + kPythonHazard);
  write("unclosed.py", std::string(kPythonHazard) + "x = " + repeated("f(", kDepth) + "\n");
  write("concatenation.py", "x = \"a\"" + repeated(" + \"a\"", kDepth) + "\n" + kPythonHazard);
  write("attributes.py", "x = a" + repeated(".b", kDepth) + "\n" + kPythonHazard);
  write("calls.py", "x = " + repeated("f(", kDepth) + "1" + repeated(")", kDepth) + "\n" + kPythonHazard);
  write("arguments.py", "x = " + repeated("f([", kDepth) + repeated("])", kDepth) + "\n" + kPythonHazard);
  write("strings.py", "x = " + repeated("(", kDepth) + "\"s\"" + repeated(")", kDepth) + "\n" + kPythonHazard);
  LintOptions options;
  options.jobs = 1;
  LintReport report = lintPaths({root_}, options);
  EXPECT_EQ(findings(report), (std::vector<std::string>{"arguments.py:3:NM201", "attributes.py:3:NM201",
                                                        "brackets.py:3:NM201", "calls.py:3:NM201",
                                                        "concatenation.py:3:NM201", "lists.py:3:NM201",
                                                        "strings.py:3:NM201", "unclosed.py:2:NM201"}))
      << warnings(report);
  EXPECT_EQ(warnings(report), "");
}

TEST_F(Robustness, DeeplyNestedCppIsLinted) {
  write("brackets.cc", "int x = " + repeated("(", kDepth) + "1" + repeated(")", kDepth) + ";\n" + kCppHazard);
  write("braces.cc", "void f() " + repeated("{", kDepth) + repeated("}", kDepth) + "\n" + kCppHazard);
  write("templates.cc", "X" + repeated("<A", kDepth) + repeated(">", kDepth) + " y;\n" + kCppHazard);
  // Openers the scanner looks ahead from, repeated without an end.
  write("setenv.cc", repeated("setenv(", kDepth) + "\n" + kCppHazard);
  write("casts.cc", repeated("static_cast<", kDepth) + "\n" + kCppHazard);
  write("classes.cc", repeated("class A : B, ", kDepth) + "\n" + kCppHazard);
  LintOptions options;
  options.jobs = 1;
  LintReport report = lintPaths({root_}, options);
  EXPECT_EQ(findings(report),
            (std::vector<std::string>{"braces.cc:2:NM201", "brackets.cc:2:NM201", "casts.cc:2:NM201",
                                      "classes.cc:2:NM201", "setenv.cc:2:NM201", "templates.cc:2:NM201"}))
      << warnings(report);
}

// The Clang AST tier meets the same nesting and stops at its own bracket limit.
TEST_F(Robustness, DeeplyNestedCppUnderTheAstIsLinted) {
  write("brackets.cc", "int x = " + repeated("(", kDepth) + "1" + repeated(")", kDepth) + ";\n" + kCppHazard);
  LintOptions options;
  options.jobs = 1;
  options.cppAst.extraFlags = {"-std=c++17"};
  LintReport report = lintPaths({root_}, options);
  EXPECT_EQ(findings(report), (std::vector<std::string>{"brackets.cc:2:NM201"})) << warnings(report);
}

// A frontend that crashes on one file: the other files' findings arrive, the file is named with
// the signal.
TEST_F(Robustness, AFileThatCrashesItsWorkerLosesOnlyItself) {
  for (const char* name : {"a.py", "b.py", "crash.py", "d.py", "e.py"}) write(name, kPythonHazard);
  LintOptions options;
  options.jobs = 2;
  options.onFileStart = [](const fs::path& path) {
    if (path.filename() == "crash.py") ::raise(SIGSEGV);
  };
  LintReport report = lintPaths({root_}, options);
  EXPECT_EQ(findings(report), (std::vector<std::string>{"a.py:2:NM201", "b.py:2:NM201", "d.py:2:NM201", "e.py:2:NM201"}));
  ASSERT_EQ(report.warnings.size(), 1u) << warnings(report);
  EXPECT_NE(report.warnings[0].find("crash.py: skipped: the linter crashed on it (SIGSEGV"), std::string::npos)
      << report.warnings[0];
}

// Crashes in the middle of workers' batches: the rest of each batch goes to a fresh worker.
TEST_F(Robustness, CrashesInsideBatchesLoseOnlyTheirFiles) {
  for (int i = 0; i < 60; ++i) write("f" + std::to_string(100 + i) + ".py", kPythonHazard);
  LintOptions options;
  options.jobs = 2;
  options.onFileStart = [](const fs::path& path) {
    std::string name = path.filename().string();
    if (name == "f110.py" || name == "f111.py" || name == "f150.py") ::abort();
  };
  LintReport report = lintPaths({root_}, options);
  EXPECT_EQ(report.findings.size(), 57u) << warnings(report);
  ASSERT_EQ(report.warnings.size(), 3u) << warnings(report);
  for (const char* name : {"f110.py: skipped: the linter crashed on it (SIGABRT", "f111.py: skipped", "f150.py: skipped"})
    EXPECT_NE(warnings(report).find(name), std::string::npos) << warnings(report);
}

TEST_F(Robustness, AFileThatOutlivesItsTimeLimitLosesOnlyItself) {
  for (const char* name : {"a.py", "slow.py", "c.py"}) write(name, kPythonHazard);
  LintOptions options;
  options.jobs = 1;
  options.fileTimeout = std::chrono::milliseconds(300);
  options.onFileStart = [](const fs::path& path) {
    if (path.filename() == "slow.py") std::this_thread::sleep_for(std::chrono::hours(1));
  };
  auto start = std::chrono::steady_clock::now();
  LintReport report = lintPaths({root_}, options);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_EQ(findings(report), (std::vector<std::string>{"a.py:2:NM201", "c.py:2:NM201"}));
  ASSERT_EQ(report.warnings.size(), 1u) << warnings(report);
  EXPECT_NE(report.warnings[0].find("slow.py: skipped: linting it took longer than 300 ms"), std::string::npos)
      << report.warnings[0];
}

// C++ sources: the run reads Python files once before linting (for its project tables), so a C++
// file is what its worker reads only when its turn comes.
TEST_F(Robustness, AFileThatVanishesLosesOnlyItself) {
  for (const char* name : {"a.cc", "gone.cc", "c.cc"}) write(name, kCppHazard);
  LintOptions options;
  options.jobs = 1;
  options.onFileStart = [](const fs::path& path) {
    if (path.filename() == "gone.cc") fs::remove(path);
  };
  LintReport report = lintPaths({root_}, options);
  EXPECT_EQ(findings(report), (std::vector<std::string>{"a.cc:1:NM201", "c.cc:1:NM201"}));
  ASSERT_EQ(report.warnings.size(), 1u) << warnings(report);
  EXPECT_NE(report.warnings[0].find("gone.cc: skipped: cannot be read"), std::string::npos) << report.warnings[0];
}

// Invalid bytes in a comment, a string and an identifier position: linted, with one warning.
TEST_F(Robustness, InvalidUtf8IsLintedWithReplacementCharacters) {
  write("latin1.py", "# caf\xe9\nimport torch.distributed as dist\nname = \"\xff\xfe\"\nisinstance(pg, dist.ProcessGroupNCCL)\n");
  write("truncated.cc", "// \xe2\x82\n" + std::string(kCppHazard));
  write("overlong.sh", "echo \xc0\xaf\nexport PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync\n");
  LintReport report = lintPaths({root_});
  EXPECT_EQ(findings(report), (std::vector<std::string>{"latin1.py:4:NM201", "overlong.sh:2:NM301", "truncated.cc:2:NM201"}));
  std::string all = warnings(report);
  EXPECT_NE(all.find("latin1.py: 3 byte(s) of invalid UTF-8 read as U+FFFD"), std::string::npos) << all;
  EXPECT_NE(all.find("truncated.cc: 2 byte(s) of invalid UTF-8"), std::string::npos) << all;
  EXPECT_NE(all.find("overlong.sh: 2 byte(s) of invalid UTF-8"), std::string::npos) << all;
}

// A bare TOML key with a non-ASCII character reached a case toml++ 3.3 marks unreachable
// (undefined behaviour; UBSan stops there, so the sanitizer build saw the worker crash): it is a
// TOML error now, which leaves the file without settings, and nothing else.
TEST_F(Robustness, NonAsciiBareTomlKeysAreTomlErrors) {
  write("job.toml", "[env]\nPYTOR\xc3\xb7_CUDA_ALLOC_CONF = \"backend:cudaMallocAsync\"\n");
  write("ok.toml", "[env]\nPYTORCH_CUDA_ALLOC_CONF = \"backend:cudaMallocAsync\"\n");
  LintReport report = lintPaths({root_});
  EXPECT_EQ(findings(report), (std::vector<std::string>{"ok.toml:2:NM301"}));
  EXPECT_EQ(warnings(report), "");
}

}  // namespace
}  // namespace nccl_migrate::lint
