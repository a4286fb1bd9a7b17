// How nccl-migrate finds its own binary where /proc is not mounted (a bare chroot): argv[0], then
// PATH, and an answer that lists every way it tried.
#include "nccl_migrate/lint/own_executable.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace nccl_migrate::lint {
namespace {
namespace fs = std::filesystem;

const fs::path kNoProc = "/nonexistent-proc/self/exe";

class OwnExecutableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("own-exe-" + std::to_string(::getpid()));
    fs::create_directories(dir_ / "bin");
    binary_ = dir_ / "bin" / "nccl-migrate";
    std::ofstream(binary_) << "#!/bin/sh\n";
    ::chmod(binary_.c_str(), 0755);
    if (const char* p = std::getenv("PATH")) savedPath_ = p;
  }
  void TearDown() override {
    ::setenv("PATH", savedPath_.c_str(), 1);
    fs::remove_all(dir_);
  }
  fs::path dir_, binary_;
  std::string savedPath_;
};

TEST_F(OwnExecutableTest, ProcSelfExeAnswersFirstWhereItIsMounted) {
  rememberInvocation("some-other-name");
  OwnExecutable self = findOwnExecutable();
  EXPECT_TRUE(self.tried.empty()) << self.tried;
  EXPECT_TRUE(fs::exists(self.path)) << self.path;
}

TEST_F(OwnExecutableTest, WithoutProcAnArgv0PathIsReadFromTheStartDirectory) {
  fs::path before = fs::current_path();
  fs::current_path(dir_);
  rememberInvocation("bin/nccl-migrate");
  fs::current_path(before);  // later changes of directory do not move the answer
  OwnExecutable self = findOwnExecutableVia(kNoProc);
  EXPECT_EQ(self.path, fs::canonical(binary_)) << self.tried;
}

TEST_F(OwnExecutableTest, WithoutProcABareArgv0IsSearchedOnPath) {
  ::setenv("PATH", ("/nonexistent-bin:" + (dir_ / "bin").string()).c_str(), 1);
  rememberInvocation("nccl-migrate");
  OwnExecutable self = findOwnExecutableVia(kNoProc);
  EXPECT_EQ(self.path, fs::canonical(binary_)) << self.tried;
}

TEST_F(OwnExecutableTest, ALinkOnPathLeadsToTheRealInstall) {
  fs::create_directories(dir_ / "links");
  fs::create_symlink(binary_, dir_ / "links" / "nccl-migrate");
  ::setenv("PATH", (dir_ / "links").c_str(), 1);
  rememberInvocation("nccl-migrate");
  EXPECT_EQ(findOwnExecutableVia(kNoProc).path.parent_path(), fs::canonical(dir_ / "bin"));
}

TEST_F(OwnExecutableTest, WhenNothingFindsItTheAnswerListsEveryWayTried) {
  ::setenv("PATH", "/nonexistent-bin", 1);
  rememberInvocation("nccl-migrate-nowhere");
  OwnExecutable self = findOwnExecutableVia(kNoProc);
  EXPECT_TRUE(self.path.empty());
  EXPECT_NE(self.tried.find(kNoProc.string() + ": "), std::string::npos) << self.tried;
  EXPECT_NE(self.tried.find("PATH: no executable 'nccl-migrate-nowhere' in /nonexistent-bin"), std::string::npos)
      << self.tried;
}

TEST_F(OwnExecutableTest, AnArgv0PathWithNoFileThereSaysSo) {
  rememberInvocation("/nonexistent-bin/nccl-migrate");
  OwnExecutable self = findOwnExecutableVia(kNoProc);
  EXPECT_TRUE(self.path.empty());
  EXPECT_NE(self.tried.find("argv[0] '/nonexistent-bin/nccl-migrate': no executable file there"), std::string::npos)
      << self.tried;
}

}  // namespace
}  // namespace nccl_migrate::lint
