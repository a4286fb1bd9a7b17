// Asking an interpreter for its sys.path and reading installed modules (python_environment.h).
#include "python/python_environment.h"

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string_view>

#include <nlohmann/json.hpp>

#include "python/python_site_paths.h"

namespace nccl_migrate::lint {
namespace fs = std::filesystem;
namespace {

// The standard library never creates process groups: it is left out of the path.
// `-c` puts the working directory first on sys.path; it is dropped, and the interpreter runs
// from /, so no file of the linted tree (a json.py) is ever run. `-S` keeps `site` from running
// the .pth files' imports, sitecustomize and usercustomize: the site folders and the folders their
// .pth files name are added here in the order `site.main` adds them: a virtual environment's first
// (site.venv adds it before the user's, so that it takes precedence), then the user's when enabled,
// then those of `site.PREFIXES`. site.venv is run for what it decides (the prefixes, whether the
// user's folder counts) with its own addsitepackages replaced by one that only notes the prefixes
// it is given, so that no .pth file of the environment runs. python_site_paths.cc gives the same
// answer from files, without the interpreter, wherever files decide it.
constexpr const char* kAskPath =
    "import sys, os, site, sysconfig, json\n"
    "path = sys.path[1:]\n"
    "def add(d):\n"
    "    if not os.path.isdir(d) or d in path: return\n"
    "    path.append(d)\n"
    "    try: pths = sorted(n for n in os.listdir(d) if n.endswith('.pth'))\n"
    "    except OSError: return\n"
    "    for n in pths:\n"
    "        try: lines = open(os.path.join(d, n), encoding='utf-8', errors='replace').read().splitlines()\n"
    "        except OSError: continue\n"
    "        for l in lines:\n"
    "            l = l.rstrip()\n"
    "            if l and not l.startswith(('#', 'import ', 'import\\t')):\n"
    "                q = os.path.abspath(os.path.join(d, l))\n"
    "                if os.path.isdir(q) and q not in path: path.append(q)\n"
    "venv = []\n"
    "real, site.addsitepackages = site.addsitepackages, lambda known, prefixes=None: venv.extend(prefixes or []) or known\n"
    "try: getattr(site, 'venv', lambda k: k)(None)\n"
    "finally: site.addsitepackages = real\n"
    "if venv:\n"
    "    for d in site.getsitepackages(venv): add(d)\n"
    "if site.ENABLE_USER_SITE is None: site.ENABLE_USER_SITE = site.check_enableusersite()\n"
    "if site.ENABLE_USER_SITE: add(site.getusersitepackages())\n"
    "for d in site.getsitepackages(): add(d)\n"
    "p = sysconfig.get_paths()\n"
    "print(json.dumps({'path': path, 'stdlib': [p['stdlib'], p['platstdlib']]}))\n";

// Python 3.11's sys.stdlib_module_names, public names (and __future__, _thread).
constexpr std::string_view kStandardLibrary[] = {
    "__future__", "_thread", "abc", "aifc", "antigravity", "argparse", "array", "ast", "asynchat", "asyncio",
    "asyncore", "atexit", "audioop", "base64", "bdb", "binascii", "bisect", "builtins", "bz2", "cProfile",
    "calendar", "cgi", "cgitb", "chunk", "cmath", "cmd", "code", "codecs", "codeop", "collections", "colorsys",
    "compileall", "concurrent", "configparser", "contextlib", "contextvars", "copy", "copyreg", "crypt", "csv",
    "ctypes", "curses", "dataclasses", "datetime", "dbm", "decimal", "difflib", "dis", "distutils", "doctest",
    "email", "encodings", "ensurepip", "enum", "errno", "faulthandler", "fcntl", "filecmp", "fileinput",
    "fnmatch", "fractions", "ftplib", "functools", "gc", "genericpath", "getopt", "getpass", "gettext", "glob",
    "graphlib", "grp", "gzip", "hashlib", "heapq", "hmac", "html", "http", "idlelib", "imaplib", "imghdr", "imp",
    "importlib", "inspect", "io", "ipaddress", "itertools", "json", "keyword", "lib2to3", "linecache", "locale",
    "logging", "lzma", "mailbox", "mailcap", "marshal", "math", "mimetypes", "mmap", "modulefinder", "msilib",
    "msvcrt", "multiprocessing", "netrc", "nis", "nntplib", "nt", "ntpath", "nturl2path", "numbers", "opcode",
    "operator", "optparse", "os", "ossaudiodev", "pathlib", "pdb", "pickle", "pickletools", "pipes", "pkgutil",
    "platform", "plistlib", "poplib", "posix", "posixpath", "pprint", "profile", "pstats", "pty", "pwd",
    "py_compile", "pyclbr", "pydoc", "pydoc_data", "pyexpat", "queue", "quopri", "random", "re", "readline",
    "reprlib", "resource", "rlcompleter", "runpy", "sched", "secrets", "select", "selectors", "shelve", "shlex",
    "shutil", "signal", "site", "smtpd", "smtplib", "sndhdr", "socket", "socketserver", "spwd", "sqlite3",
    "sre_compile", "sre_constants", "sre_parse", "ssl", "stat", "statistics", "string", "stringprep", "struct",
    "subprocess", "sunau", "symtable", "sys", "sysconfig", "syslog", "tabnanny", "tarfile", "telnetlib",
    "tempfile", "termios", "textwrap", "this", "threading", "time", "timeit", "tkinter", "token", "tokenize",
    "tomllib", "trace", "traceback", "tracemalloc", "tty", "turtle", "turtledemo", "types", "typing",
    "unicodedata", "unittest", "urllib", "uu", "uuid", "venv", "warnings", "wave", "weakref", "webbrowser",
    "winreg", "winsound", "wsgiref", "xdrlib", "xml", "xmlrpc", "zipapp", "zipfile", "zipimport", "zlib",
    "zoneinfo",
};

constexpr std::uintmax_t kLargestModule = 2u << 20;
constexpr int kAskSeconds = 10;

std::string shellQuoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The program to run (empty: python3 on PATH); a path named from here keeps naming it after the
// `cd /` the interpreter runs under.
std::string absoluteProgram(const std::string& interpreter) {
  std::string program = interpreter.empty() ? "python3" : interpreter;
  if (fs::path(program).has_parent_path() && fs::path(program).is_relative()) program = fs::absolute(program).string();
  return program;
}

}  // namespace

std::vector<fs::path> searchPathFromJson(const std::string& printed) {
  nlohmann::json parsed = nlohmann::json::parse(printed, nullptr, false);
  const nlohmann::json* path = parsed.is_array() ? &parsed : parsed.is_object() && parsed.contains("path") ? &parsed["path"] : nullptr;
  if (!path || !path->is_array()) return {};
  std::vector<std::string> stdlib, entries;
  if (parsed.is_object() && parsed.contains("stdlib") && parsed["stdlib"].is_array())
    for (const nlohmann::json& s : parsed["stdlib"])
      if (s.is_string()) stdlib.push_back(s.get<std::string>());
  for (const nlohmann::json& entry : *path)
    if (entry.is_string()) entries.push_back(entry.get<std::string>());
  return keptSearchPath(entries, stdlib);
}

PythonEnvironment PythonEnvironment::ask(const std::string& interpreter, std::string& note) {
  // Where the files decide the path, the interpreter is not started (python_site_paths.h).
  if (std::optional<SitePaths> fromFiles = sitePathsFromFiles(absoluteProgram(interpreter)))
    return PythonEnvironment(keptSearchPath(fromFiles->path, fromFiles->stdlib));
  return askInterpreter(interpreter, note);
}

std::optional<std::string> printedSysPath(const std::string& interpreter, int& status) {
  std::string program = absoluteProgram(interpreter);
  // Bounded: an interpreter that hangs (a broken .pth) must not hang the lint.
  std::string command = "cd / && timeout " + std::to_string(kAskSeconds) + " " + shellQuoted(program) + " -S -c " +
                        shellQuoted(kAskPath) + " 2>/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return std::nullopt;
  std::string printed;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) printed.append(buffer, n);
  status = pclose(pipe);
  return printed;
}

PythonEnvironment PythonEnvironment::askInterpreter(const std::string& interpreter, std::string& note) {
  std::string program = absoluteProgram(interpreter);
  int status = 0;
  std::optional<std::string> asked = printedSysPath(interpreter, status);
  if (!asked) {
    note = "no Python environment read (" + program + " could not be started): imports from installed packages are not resolved";
    return {};
  }
  const std::string& printed = *asked;
  if (status != 0 || printed.empty()) {
    if (!interpreter.empty())
      note = "no Python environment read (" + program + " did not print its sys.path): imports from installed packages are "
             "not resolved; check --python or `python` in the configuration";
    return {};
  }
  return PythonEnvironment(searchPathFromJson(printed));
}

std::optional<std::string> PythonEnvironment::moduleSource(const std::string& dotted) const {
  fs::path relative;
  for (size_t b = 0; b <= dotted.size();) {
    size_t e = dotted.find('.', b);
    if (e == std::string::npos) e = dotted.size();
    if (e == b) return std::nullopt;
    relative /= dotted.substr(b, e - b);
    b = e + 1;
  }
  for (const fs::path& folder : searchPath_) {
    for (const fs::path& candidate : {folder / relative.string().append(".py"), folder / relative / "__init__.py"}) {
      std::error_code ec;
      std::uintmax_t size = fs::file_size(candidate, ec);
      if (ec) continue;
      if (size > kLargestModule) return std::nullopt;
      std::ifstream in(candidate, std::ios::binary);
      std::ostringstream text;
      text << in.rdbuf();
      return text.str();
    }
  }
  return std::nullopt;
}

std::optional<std::string> PythonEnvironmentOnDemand::moduleSource(const std::string& dotted) {
  if (!environment_) environment_ = PythonEnvironment::ask(interpreter_, note_);
  if (environment_->searchPath().empty()) return std::nullopt;
  return environment_->moduleSource(dotted);
}

bool isStandardLibraryModule(std::string_view topLevel) {
  return std::binary_search(std::begin(kStandardLibrary), std::end(kStandardLibrary), topLevel);
}

}  // namespace nccl_migrate::lint
