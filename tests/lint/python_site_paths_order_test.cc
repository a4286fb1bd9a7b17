// The order of the site folders in the sys.path lint computes is the interpreter's: `site` adds a
// virtual environment's own folder before the user's (site.venv, so that the environment takes
// precedence), then the user's, then the base interpreter's. Checked on a layout built here (read
// from files) and against a real CPython 3.11's full start (both the files and the interpreter
// script), with a user site folder present.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "python/python_environment.h"
#include "python/python_site_paths.h"

namespace nccl_migrate::lint {
namespace {
namespace fs = std::filesystem;

// HOME pointed at a folder for one scope, then put back.
class ScopedHome {
 public:
  explicit ScopedHome(const fs::path& home) {
    if (const char* old = std::getenv("HOME")) old_ = old;
    ::setenv("HOME", home.c_str(), 1);
  }
  ~ScopedHome() {
    if (old_) ::setenv("HOME", old_->c_str(), 1);
    else ::unsetenv("HOME");
  }

 private:
  std::optional<std::string> old_;
};

fs::path freshFolder(const std::string& name) {
  fs::path tmp = fs::temp_directory_path() / ("nccl-migrate-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  return tmp;
}

// A CPython 3.11 layout (bin/python3.11 beside lib/python3.11) whose program never runs, a virtual
// environment of it that includes the system site packages, and a HOME with a user site folder.
TEST(PythonSitePathsOrder, AVirtualEnvironmentsFolderComesBeforeTheUsersOnALayout) {
  fs::path tmp = freshFolder("site-order-layout");
  fs::path stdlib = tmp / "base" / "lib" / "python3.11";
  fs::create_directories(tmp / "base" / "bin");
  fs::create_directories(stdlib / "lib-dynload");
  fs::create_directories(stdlib / "site-packages");
  std::ofstream(stdlib / "os.py") << "\n";
  std::ofstream(stdlib / "site.py") << "def venv(known_paths): pass\n";
  fs::path python = tmp / "base" / "bin" / "python3.11";
  std::ofstream(python) << "#!/bin/sh\nexit 1\n";
  fs::permissions(python, fs::perms::owner_all);
  fs::create_directories(tmp / "venv" / "bin");
  fs::create_symlink(python, tmp / "venv" / "bin" / "python");
  std::ofstream(tmp / "venv" / "pyvenv.cfg") << "home = " << (tmp / "base" / "bin").string()
                                             << "\ninclude-system-site-packages = true\n";
  fs::path venvSite = tmp / "venv" / "lib" / "python3.11" / "site-packages";
  fs::path userSite = tmp / "home" / ".local" / "lib" / "python3.11" / "site-packages";
  fs::create_directories(venvSite);
  fs::create_directories(userSite);
  ScopedHome home(tmp / "home");
  if (::getuid() != ::geteuid() || ::getgid() != ::getegid()) GTEST_SKIP() << "the user site folder is off for a setuid run";

  std::optional<SitePaths> paths = sitePathsFromFiles((tmp / "venv" / "bin" / "python").string());
  ASSERT_TRUE(paths);
  EXPECT_EQ(paths->path, (std::vector<std::string>{(tmp / "base" / "lib" / "python311.zip").string(), stdlib.string(),
                                                   (stdlib / "lib-dynload").string(), venvSite.string(),
                                                   userSite.string(), (stdlib / "site-packages").string()}));
  fs::remove_all(tmp);
}

// A macOS framework build keeps its user site folder under ~/Library: the files do not follow it.
TEST(PythonSitePathsOrder, AFrameworkBuildIsLeftToTheInterpreter) {
  fs::path tmp = freshFolder("site-order-framework");
  fs::path prefix = tmp / "Python.framework" / "Versions" / "3.11";
  fs::create_directories(prefix / "bin");
  fs::create_directories(prefix / "lib" / "python3.11" / "lib-dynload");
  std::ofstream(prefix / "lib" / "python3.11" / "os.py") << "\n";
  std::ofstream(prefix / "lib" / "python3.11" / "site.py") << "\n";
  fs::path python = prefix / "bin" / "python3.11";
  std::ofstream(python) << "#!/bin/sh\nexit 1\n";
  fs::permissions(python, fs::perms::owner_all);
  EXPECT_FALSE(sitePathsFromFiles(python.string()));
  // The same layout under a folder that is no framework is read from the files.
  fs::path plain = tmp / "plain";
  fs::create_directories(plain);
  fs::copy(prefix, plain, fs::copy_options::recursive);
  EXPECT_TRUE(sitePathsFromFiles((plain / "bin" / "python3.11").string()));
  fs::remove_all(tmp);
}

std::string pyenvPython311() {
  fs::path root;
  if (const char* r = std::getenv("PYENV_ROOT")) root = r;
  else if (const char* h = std::getenv("HOME")) root = fs::path(h) / ".pyenv";
  std::error_code ec;
  for (const fs::directory_entry& version : fs::directory_iterator(root / "versions", ec))
    if (version.path().filename().string().starts_with("3.11")) return (version.path() / "bin" / "python3").string();
  return {};
}

// What `python` prints for sys.path after a full start from / (site and all), the `-c` entry dropped.
std::vector<std::string> fullStartPath(const std::string& python) {
  std::string command = "cd / && '" + python + "' -c 'import sys, json; print(json.dumps(sys.path[1:]))'";
  FILE* pipe = popen(command.c_str(), "r");
  std::string printed;
  char buffer[4096];
  for (size_t n; pipe && (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) printed.append(buffer, n);
  if (pipe) pclose(pipe);
  nlohmann::json parsed = nlohmann::json::parse(printed, nullptr, false);
  return parsed.is_array() ? parsed.get<std::vector<std::string>>() : std::vector<std::string>{};
}

TEST(PythonSitePathsOrder, TheSameOrderAsARealInterpretersFullStart) {
  std::string base = pyenvPython311();
  if (base.empty()) GTEST_SKIP() << "no CPython 3.11 under pyenv here";
  fs::path tmp = freshFolder("site-order-real");
  fs::path userSite = tmp / "home" / ".local" / "lib" / "python3.11" / "site-packages";
  fs::create_directories(userSite);
  ASSERT_EQ(std::system((base + " -m venv --without-pip --system-site-packages " + (tmp / "venv").string()).c_str()), 0);
  ScopedHome home(tmp / "home");
  std::string python = (tmp / "venv" / "bin" / "python").string();
  std::vector<std::string> interpreter = fullStartPath(python);
  ASSERT_FALSE(interpreter.empty());
  fs::path venvSite = tmp / "venv" / "lib" / "python3.11" / "site-packages";
  auto at = [&](const fs::path& p) { return std::find(interpreter.begin(), interpreter.end(), p.string()) - interpreter.begin(); };
  ASSERT_LT(at(venvSite), at(userSite)) << "the interpreter itself puts the environment first";
  ASSERT_LT(at(userSite), static_cast<long>(interpreter.size()));

  std::optional<SitePaths> files = sitePathsFromFiles(python);
  ASSERT_TRUE(files) << "a virtual environment of pyenv's 3.11 is read from files";
  EXPECT_EQ(files->path, interpreter);
  int status = 0;
  std::optional<std::string> printed = printedSysPath(python, status);
  ASSERT_TRUE(printed && status == 0);
  EXPECT_EQ(nlohmann::json::parse(*printed)["path"], nlohmann::json(interpreter));
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace nccl_migrate::lint
