// A temporary project tree for NM502's tests across files: write sources into it, lint it with
// NM502 alone through the real engine, and read the findings as "file:line" (their messages kept
// in messages_). A warning fails the test: these trees are all well-formed.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "nccl_migrate/lint/linter.h"

namespace nccl_migrate::lint {

class Nm502Tree : public testing::Test {
 protected:
  void SetUp() override {
    std::string suite = testing::UnitTest::GetInstance()->current_test_info()->test_suite_name();
    root_ = std::filesystem::temp_directory_path() / ("nccl-migrate-" + suite + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  void write(const std::string& file, const std::string& text) {
    std::filesystem::create_directories((root_ / file).parent_path());
    std::ofstream(root_ / file) << text;
  }

  std::vector<std::string> findings() {
    LintOptions options;
    options.jobs = 2;
    options.config.select = {"NM502"};
    LintReport report = lintPaths({root_}, options);
    EXPECT_TRUE(report.warnings.empty()) << report.warnings.front();
    std::vector<std::string> found;
    messages_.clear();
    for (const Finding& f : report.findings) {
      found.push_back(std::filesystem::path(f.path).filename().string() + ":" + std::to_string(f.where.line));
      messages_.push_back(f.message);
    }
    return found;
  }

  std::filesystem::path root_;
  std::vector<std::string> messages_;
};

}  // namespace nccl_migrate::lint
