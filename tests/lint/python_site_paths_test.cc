// An interpreter's sys.path read from files (python_site_paths.h) is the one the interpreter prints:
// compared with the real interpreters this machine has (the project's virtual environment, python3
// on PATH, pyenv's versions through their shim), and, on a layout built here, read without starting
// the interpreter at all; layouts the files cannot decide are left to the interpreter.
#include "python/python_site_paths.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "python/python_environment.h"

namespace nccl_migrate::lint {
namespace {
namespace fs = std::filesystem;

// Sets an environment variable for one scope, then puts back what was there.
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const std::optional<std::string>& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) ::setenv(name, value->c_str(), 1);
    else ::unsetenv(name);
  }
  ~ScopedVariable() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// Whether the files answered; where they did, their answer must be the interpreter's.
bool compareWithInterpreter(const std::string& interpreter) {
  std::optional<SitePaths> files = sitePathsFromFiles(interpreter);
  std::cout << (files ? "read from files: " : "left to the interpreter: ") << (interpreter.empty() ? "python3" : interpreter)
            << "\n";
  if (!files) return false;
  int status = 0;
  std::optional<std::string> printed = printedSysPath(interpreter, status);
  EXPECT_TRUE(printed && status == 0) << interpreter;
  if (!printed) return true;
  nlohmann::json asked = nlohmann::json::parse(*printed, nullptr, false);
  EXPECT_EQ(nlohmann::json(files->path), asked["path"]) << interpreter;
  EXPECT_EQ(nlohmann::json(files->stdlib), asked["stdlib"]) << interpreter;
  EXPECT_EQ(keptSearchPath(files->path, files->stdlib), searchPathFromJson(*printed)) << interpreter;
  return true;
}

fs::path projectRoot() { return fs::path(NCCL_MIGRATE_PYTHON_LINT_TESTS).parent_path().parent_path().parent_path(); }

fs::path pyenvRoot() {
  if (const char* root = std::getenv("PYENV_ROOT")) return root;
  if (const char* home = std::getenv("HOME")) return fs::path(home) / ".pyenv";
  return {};
}

TEST(PythonSitePaths, SameAsTheInterpretersOfThisMachine) {
  fs::path venv = projectRoot() / ".venv" / "bin" / "python";
  if (fs::exists(venv)) compareWithInterpreter(venv.string());
  compareWithInterpreter("");  // python3 on PATH, a pyenv shim on the development machine
  compareWithInterpreter("/usr/bin/python3");
  std::error_code ec;
  for (const fs::directory_entry& version : fs::directory_iterator(pyenvRoot() / "versions", ec)) {
    fs::path python = version.path() / "bin" / "python3";
    if (!fs::exists(python)) continue;
    compareWithInterpreter(python.string());
    // The same version through pyenv's shim, chosen by PYENV_VERSION.
    fs::path shim = pyenvRoot() / "shims" / "python3";
    if (!fs::exists(shim)) continue;
    ScopedVariable chosen("PYENV_VERSION", version.path().filename().string());
    compareWithInterpreter(shim.string());
  }
}

TEST(PythonSitePaths, AVirtualEnvironmentAndItsPthFilesAsTheInterpreterReadsThem) {
  fs::path base = pyenvRoot() / "versions";
  std::string python;
  std::error_code ec;
  for (const fs::directory_entry& version : fs::directory_iterator(base, ec)) {
    if (version.path().filename().string().starts_with("3.11")) python = (version.path() / "bin" / "python3").string();
  }
  if (python.empty() || !sitePathsFromFiles(python)) GTEST_SKIP() << "no CPython 3.11 under pyenv here";
  fs::path tmp = fs::temp_directory_path() / ("nccl-migrate-site-paths-" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  for (const char* systemSite : {"", " --system-site-packages"}) {
    fs::path venv = tmp / (std::string("venv") + (*systemSite ? "-system" : ""));
    ASSERT_EQ(std::system((python + " -m venv --without-pip" + systemSite + " " + venv.string()).c_str()), 0);
    fs::path site = venv / "lib" / "python3.11" / "site-packages";
    fs::create_directories(tmp / "absolute");
    fs::create_directories(site / "relative");
    fs::create_directories(site / "sub" / "deeper");
    std::ofstream(site / "b.pth") << "# a comment\nrelative\n\nimport os\n" << (tmp / "absolute").string()
                                  << "   \r\nsub/./deeper/../deeper\nmissing\nrelative\n";
    std::ofstream(site / "a.pth") << "sub\n";
    std::string interpreter = (venv / "bin" / "python").string();
    EXPECT_TRUE(compareWithInterpreter(interpreter)) << interpreter;
  }
  fs::remove_all(tmp);
}

// A CPython layout: bin/python3.11 beside lib/python3.11 (os.py, site.py, lib-dynload), whose
// "interpreter" is a script that leaves a mark when it runs, and a virtual environment of it.
class PythonSiteLayout : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = fs::temp_directory_path() / ("nccl-migrate-layout-" + std::to_string(::getpid()));
    fs::remove_all(tmp_);
    fs::create_directories(tmp_ / "base" / "bin");
    fs::create_directories(tmp_ / "base" / "lib" / "python3.11" / "lib-dynload");
    std::ofstream(tmp_ / "base" / "lib" / "python3.11" / "os.py") << "\n";
    std::ofstream(tmp_ / "base" / "lib" / "python3.11" / "site.py") << "def venv(known_paths): pass\n";
    fs::path python = tmp_ / "base" / "bin" / "python3.11";
    std::ofstream(python) << "#!/bin/sh\ntouch " << (tmp_ / "ran").string() << "\necho '[]'\n";
    fs::permissions(python, fs::perms::owner_all);
    fs::create_directories(tmp_ / "venv" / "bin");
    fs::create_symlink(python, tmp_ / "venv" / "bin" / "python");
    std::ofstream(tmp_ / "venv" / "pyvenv.cfg") << "home = " << (tmp_ / "base" / "bin").string()
                                                << "\ninclude-system-site-packages = false\n";
    site_ = tmp_ / "venv" / "lib" / "python3.11" / "site-packages";
    fs::create_directories(site_ / "pkg");
    std::ofstream(site_ / "x.pth") << "pkg\n";
  }
  void TearDown() override { fs::remove_all(tmp_); }
  fs::path tmp_, site_;
};

TEST_F(PythonSiteLayout, AVirtualEnvironmentIsReadWithoutStartingItsInterpreter) {
  std::string note;
  PythonEnvironment environment = PythonEnvironment::ask((tmp_ / "venv" / "bin" / "python").string(), note);
  EXPECT_FALSE(fs::exists(tmp_ / "ran"));
  EXPECT_EQ(environment.searchPath(), (std::vector<fs::path>{site_, site_ / "pkg"}));
  EXPECT_TRUE(note.empty()) << note;
}

TEST_F(PythonSiteLayout, WhatTheFilesCannotDecideIsLeftToTheInterpreter) {
  std::string venvPython = (tmp_ / "venv" / "bin" / "python").string();
  {
    ScopedVariable moved("PYTHONPATH", "/somewhere");
    EXPECT_FALSE(sitePathsFromFiles(venvPython));
  }
  {
    // A .pth file with a form feed: Python splits its lines there too.
    std::ofstream(site_ / "y.pth") << "pkg\fother\n";
    EXPECT_FALSE(sitePathsFromFiles(venvPython));
    fs::remove(site_ / "y.pth");
  }
  {
    // A distribution's site.py (Debian's puts packages in dist-packages).
    std::ofstream(tmp_ / "base" / "lib" / "python3.11" / "site.py") << "# dist-packages\n";
    EXPECT_FALSE(sitePathsFromFiles(venvPython));
    std::ofstream(tmp_ / "base" / "lib" / "python3.11" / "site.py") << "\n";
  }
  {
    // A `home` that is not the interpreter the environment links to.
    std::ofstream(tmp_ / "venv" / "pyvenv.cfg") << "home = /elsewhere/bin\n";
    EXPECT_FALSE(sitePathsFromFiles(venvPython));
  }
  // A program that is no CPython's python3.N.
  EXPECT_FALSE(sitePathsFromFiles("/bin/sh"));
  EXPECT_TRUE(sitePathsFromFiles((tmp_ / "base" / "bin" / "python3.11").string()));
  std::string note;
  PythonEnvironment::ask(venvPython, note);
  EXPECT_TRUE(fs::exists(tmp_ / "ran"));
}

// A pyenv root whose shim chooses among versions by PYENV_VERSION, /.python-version and
// <root>/version, as pyenv does; `system`, several versions or a missing one go to pyenv itself.
TEST_F(PythonSiteLayout, APyenvShimResolvesToTheVersionPyenvWouldRun) {
  fs::path root = tmp_ / "pyenv";
  fs::create_directories(root / "shims");
  fs::create_directories(root / "libexec");
  std::ofstream(root / "libexec" / "pyenv") << "#!/bin/sh\nexit 1\n";
  fs::create_directories(root / "versions");
  fs::create_directory_symlink(tmp_ / "base", root / "versions" / "3.11.9");
  fs::create_symlink(tmp_ / "base" / "bin" / "python3.11", tmp_ / "base" / "bin" / "python3");
  std::string r = root.string();
  fs::path shim = root / "shims" / "python3";
  std::ofstream(shim) << "#!/usr/bin/env bash\nset -e\n[ -n \"$PYENV_DEBUG\" ] && set -x\n\nprogram=\"${0##*/}\"\n\n"
                         "export PYENV_ROOT=\"" << r << "\"\nSHIM_PATH=${0%/*}\nif [[ $SHIM_PATH != \"" << r
                      << "/shims\" ]]; then\n  export _PYENV_SHIM_PATH=\"$SHIM_PATH\"\nfi\nexec \"" << r
                      << "/libexec/pyenv\" exec \"$program\" \"$@\"\n";
  fs::permissions(shim, fs::perms::owner_all);
  ScopedVariable home("HOME", tmp_.string());
  fs::create_directories(tmp_ / ".local" / "lib" / "python3.11" / "site-packages");
  std::vector<std::string> expected = {(tmp_ / "base" / "lib" / "python311.zip").string(),
                                       (tmp_ / "base" / "lib" / "python3.11").string(),
                                       (tmp_ / "base" / "lib" / "python3.11" / "lib-dynload").string(),
                                       (tmp_ / ".local" / "lib" / "python3.11" / "site-packages").string()};
  if (fs::exists("/.python-version")) GTEST_SKIP() << "/.python-version chooses the version on this machine";
  {
    ScopedVariable version("PYENV_VERSION", "3.11.9");
    std::optional<SitePaths> paths = sitePathsFromFiles(shim.string());
    ASSERT_TRUE(paths);
    EXPECT_EQ(paths->path, expected);
  }
  ScopedVariable unset("PYENV_VERSION", std::nullopt);
  EXPECT_FALSE(sitePathsFromFiles(shim.string()));  // no version file: `system`
  std::ofstream(root / "version") << "# chosen\n\n3.11.9 extra words\n";
  ASSERT_TRUE(sitePathsFromFiles(shim.string()));
  EXPECT_EQ(sitePathsFromFiles(shim.string())->path, expected);
  std::ofstream(root / "version") << "3.11.9\n3.10.1\n";
  EXPECT_FALSE(sitePathsFromFiles(shim.string()));  // several versions
  std::ofstream(root / "version") << "3.12\n";
  EXPECT_FALSE(sitePathsFromFiles(shim.string()));  // a prefix pyenv completes
  std::ofstream(root / "version") << "3.11.9\n";
  fs::create_directories(root / "pyenv.d" / "exec");
  std::ofstream(root / "pyenv.d" / "exec" / "custom.bash") << "PYENV_COMMAND_PATH=/bin/true\n";
  EXPECT_FALSE(sitePathsFromFiles(shim.string()));  // a hook that may run another program
}

}  // namespace
}  // namespace nccl_migrate::lint
