// A CPython installed under its own prefix (pyenv's, a python.org build) outside any virtual
// environment keeps its installed modules in lib/python3.N/site-packages, inside the standard
// library's folder: the search path keeps that folder and leaves the rest of the standard library
// out, whether the files decide the path or the interpreter prints it.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "nccl_migrate/lint/linter.h"
#include "python/python_environment.h"
#include "python/python_site_paths.h"

namespace nccl_migrate::lint {
namespace {
namespace fs = std::filesystem;

// A wrapper of new_group, installed (in site-packages) or placed in the standard library's folder.
constexpr const char* kWrapper =
    "import torch.distributed as dist\n"
    "def make_group(ranks):\n"
    "    return dist.new_group(ranks)\n";

class PrefixSitePackages : public testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::temp_directory_path() / ("nccl-migrate-prefix-site-" + std::to_string(::getpid()));
    fs::remove_all(base_);
    prefix_ = base_ / "prefix";
    stdlib_ = prefix_ / "lib" / "python3.11";
    site_ = stdlib_ / "site-packages";
    // The landmarks that make it a CPython under its own prefix (python_site_paths.cc).
    write(stdlib_ / "os.py", "\n");
    write(stdlib_ / "site.py", "def venv(known_paths): pass\n");
    fs::create_directories(stdlib_ / "lib-dynload");
    write(site_ / "grouplib" / "__init__.py", "");
    write(site_ / "grouplib" / "groups.py", kWrapper);
    write(stdlib_ / "stdwrap" / "__init__.py", "");
    write(stdlib_ / "stdwrap" / "groups.py", kWrapper);
    python_ = prefix_ / "bin" / "python3.11";
    // Run only when the files cannot decide: prints what the real interpreter would.
    write(python_, "#!/bin/sh\necho '" + printedPath() + "'\n");
    fs::permissions(python_, fs::perms::owner_all);
    root_ = base_ / "tree";
    if (const char* home = std::getenv("HOME")) home_ = home;
    ::setenv("HOME", (base_ / "home").c_str(), 1);  // no user site folder of this machine's
  }
  void TearDown() override {
    if (home_) ::setenv("HOME", home_->c_str(), 1);
    else ::unsetenv("HOME");
    fs::remove_all(base_);
  }
  static void write(const fs::path& file, const std::string& text) {
    fs::create_directories(file.parent_path());
    std::ofstream(file) << text;
  }
  std::string printedPath() const {
    return "{\"path\": [\"\", \"" + (prefix_ / "lib" / "python311.zip").string() + "\", \"" + stdlib_.string() + "\", \"" +
           (stdlib_ / "lib-dynload").string() + "\", \"" + site_.string() + "\"], \"stdlib\": [\"" + stdlib_.string() +
           "\", \"" + stdlib_.string() + "\"]}";
  }
  // "file:line:code" of each finding of the tree, resolved through `python`.
  std::vector<std::string> findings(const std::string& python) {
    LintOptions options;
    options.jobs = 2;
    options.config.python = python;
    LintReport report = lintPaths({root_}, options);
    EXPECT_TRUE(report.warnings.empty()) << report.warnings.front();
    std::vector<std::string> found;
    for (const Finding& f : report.findings)
      found.push_back(fs::path(f.path).filename().string() + ":" + std::to_string(f.where.line) + ":" + f.code);
    return found;
  }
  fs::path base_, prefix_, stdlib_, site_, python_, root_;
  std::optional<std::string> home_;
};

TEST_F(PrefixSitePackages, TheSearchPathKeepsSitePackagesAndLeavesTheStandardLibraryOut) {
  std::optional<SitePaths> files = sitePathsFromFiles(python_.string());
  ASSERT_TRUE(files);
  EXPECT_EQ(keptSearchPath(files->path, files->stdlib), (std::vector<fs::path>{site_}));
  EXPECT_EQ(searchPathFromJson(printedPath()), (std::vector<fs::path>{site_}));
  // A folder a .pth file names inside site-packages stays; one beside the standard library's
  // modules does not.
  fs::create_directories(site_ / "extra");
  std::vector<std::string> path = {stdlib_.string(), (stdlib_ / "lib-dynload").string(), site_.string(),
                                   (site_ / "extra").string(), (stdlib_ / "stdwrap").string()};
  EXPECT_EQ(keptSearchPath(path, {stdlib_.string()}), (std::vector<fs::path>{site_, site_ / "extra"}));
}

TEST_F(PrefixSitePackages, AWrapperInstalledInThePrefixIsFoundInALoop) {
  write(root_ / "train.py",
        "from grouplib.groups import make_group\n"
        "def build(layout):\n"
        "    for ranks in layout:\n"
        "        make_group(ranks)\n");
  // Read from the files, then printed by the interpreter (a name the files do not decide).
  EXPECT_EQ(findings(python_.string()), (std::vector<std::string>{"train.py:4:NM401"}));
  fs::path asked = prefix_ / "bin" / "python";
  fs::copy_file(python_, asked);
  ASSERT_FALSE(sitePathsFromFiles(asked.string()));
  EXPECT_EQ(findings(asked.string()), (std::vector<std::string>{"train.py:4:NM401"}));
}

TEST_F(PrefixSitePackages, AModuleOfTheStandardLibraryFolderIsNotRead) {
  write(root_ / "train.py",
        "from stdwrap.groups import make_group\n"
        "def build(layout):\n"
        "    for ranks in layout:\n"
        "        make_group(ranks)\n");
  EXPECT_TRUE(findings(python_.string()).empty());
}

}  // namespace
}  // namespace nccl_migrate::lint
