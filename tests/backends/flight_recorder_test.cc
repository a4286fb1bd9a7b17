// Where the flight recorder writes a dump before it is in place, and what a failed write leaves.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <ctime>
#include <fstream>

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <c10/util/Exception.h>

#include "nccl_migrate/backends/flight_recorder.h"

namespace nccl_migrate::backends {
namespace {

namespace fs = std::filesystem;

// Removes a test's folder with POSIX calls: torch 2.11's libtorch.so carries its own copy of
// std::filesystem, whose remove_all, bound in place of libstdc++'s, jumps to a null function.
void removeTree(const fs::path& dir) {
  ::nftw(dir.c_str(), [](const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }, 8,
         FTW_DEPTH | FTW_PHYS);
}

// torchfrtrace reads every file whose name contains the prefix, anywhere in it, and takes what
// follows as the rank: a half-written dump (its process exited mid-write, or a reader came while
// it was written) must be named after neither the prefix nor the rank.
TEST(FlightRecorderDump, ItsTemporaryFileIsNoRanksDumpToTorchfrtrace) {
  for (const fs::path target : {fs::path("/jobs/run/fr_rank_3"), fs::path("/root/.cache/torch/comm_lib_trace_rank_12")}) {
    fs::path tmp = dumpTemporaryPath(target);
    EXPECT_EQ(tmp.parent_path(), target.parent_path()) << tmp;  // a rename within one file system
    std::string name = tmp.filename().string();
    std::string prefix = target.filename().string();
    prefix.erase(prefix.find_last_not_of("0123456789") + 1);
    EXPECT_EQ(name.find(prefix), std::string::npos) << name << " contains the prefix " << prefix;
  }
  EXPECT_NE(dumpTemporaryPath("/d/fr_1"), dumpTemporaryPath("/d/fr_1"));  // two dumps at once
}

// A dump that cannot be moved into place fails with the path and leaves no temporary file.
TEST(FlightRecorderDump, AFailedDumpLeavesNothingBehind) {
  fs::path dir = fs::temp_directory_path() / ("nccl-migrate-fr-test-" + std::to_string(::getpid()));
  removeTree(dir);
  fs::create_directories(dir / "fr_0");
  std::ofstream(dir / "fr_0" / "keep") << "a directory where the dump would go";
  setenv("TORCH_FR_DUMP_TEMP_FILE", (dir / "fr_").string().c_str(), 1);
  FlightRecorder recorder(16);
  try {
    recorder.dumpToFile(0);
    ADD_FAILURE() << "a dump onto a directory succeeded";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find((dir / "fr_0").string()), std::string::npos) << e.what();
  }
  unsetenv("TORCH_FR_DUMP_TEMP_FILE");
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(dir)) left.push_back(entry.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"fr_0"});
  removeTree(dir);
  EXPECT_FALSE(fs::exists(dir));
}

// A pid no process holds any more: a child's, once it has been reaped.
pid_t goneProcess() {
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return child;
}

std::string thisHost() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

// A writer killed before it renamed its dump leaves a partial file; the next dump into that
// folder removes it, and leaves alone what a live writer, or a writer on another host sharing the
// folder, may still be writing.
TEST(FlightRecorderDump, ADumpRemovesThePartialDumpsOfWritersThatDied) {
  fs::path dir = fs::temp_directory_path() / ("nccl-migrate-fr-partials-" + std::to_string(::getpid()));
  removeTree(dir);
  fs::create_directories(dir);
  std::string host = thisHost();
  pid_t gone = goneProcess();
  auto partial = [&](const std::string& writer, int count = 0) {
    fs::path p = dir / (".nccl-migrate-dump-" + writer + "-" + std::to_string(count) + ".partial");
    std::ofstream(p) << "half a dump";
    return p;
  };
  auto age = [](const fs::path& p) {  // untouched for an hour
    struct timespec times[2] = {{::time(nullptr) - 3600, 0}, {::time(nullptr) - 3600, 0}};
    ::utimensat(AT_FDCWD, p.c_str(), times, 0);
    return p;
  };
  fs::path deadHere = age(partial(host + "-" + std::to_string(gone)));
  fs::path deadHereRecent = partial(host + "-" + std::to_string(gone), 1);  // may be another PID namespace's
  fs::path liveHere = age(partial(host + "-" + std::to_string(::getppid())));
  fs::path deadElsewhere = age(partial("another-host-" + std::to_string(gone)));
  fs::path unnamedOld = age(partial(std::to_string(gone)));  // the name before hosts were in it
  fs::path unnamedRecent = partial(std::to_string(gone), 2);
  fs::path hugePid = age(partial(host + "-99999999999999999999"));  // read as no writer, never thrown on
  // A user's file that only ends like a partial dump (same length of start, this host, a gone pid).
  fs::path notOurs = dir / (std::string(19, 'x') + host + "-" + std::to_string(gone) + "-0.partial");
  std::ofstream(notOurs) << "the user's";
  age(notOurs);
  setenv("TORCH_FR_DUMP_TEMP_FILE", (dir / "fr_").string().c_str(), 1);
  FlightRecorder recorder(16);
  recorder.dumpToFile(0);
  unsetenv("TORCH_FR_DUMP_TEMP_FILE");
  EXPECT_TRUE(fs::exists(notOurs));
  EXPECT_FALSE(fs::exists(deadHere));
  EXPECT_FALSE(fs::exists(unnamedOld));
  EXPECT_TRUE(fs::exists(deadHereRecent));
  EXPECT_TRUE(fs::exists(liveHere));
  EXPECT_TRUE(fs::exists(deadElsewhere));
  EXPECT_TRUE(fs::exists(unnamedRecent));
  EXPECT_TRUE(fs::exists(hugePid));
  EXPECT_TRUE(fs::exists(dir / "fr_0"));
  removeTree(dir);
}

// The temporary name says who writes it, so a later dump can tell an abandoned file.
TEST(FlightRecorderDump, ItsTemporaryFileNamesItsHostAndProcess) {
  std::string name = dumpTemporaryPath("/d/fr_1").filename().string();
  EXPECT_NE(name.find("-" + thisHost() + "-" + std::to_string(::getpid()) + "-"), std::string::npos) << name;
}

}  // namespace
}  // namespace nccl_migrate::backends
