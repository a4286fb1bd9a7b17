// `nccl-migrate lint`: option parsing, configuration, baselines, fixes and exit codes around the
// lint engine.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include "commands.h"
#include "nccl_migrate/lint/baseline.h"
#include "nccl_migrate/lint/config.h"
#include "nccl_migrate/lint/fixes.h"
#include "nccl_migrate/lint/linter.h"
#include "nccl_migrate/lint/report_format.h"

namespace nccl_migrate::cli {
namespace {

constexpr const char* kLintUsage = R"(usage: nccl-migrate lint [options] PATH... [-- COMPILER-FLAGS...]

Finds code and configuration that breaks or gets expensive under torch 2.15's rewritten NCCL
backend: Python (.py, .pyi, .ipynb), C/C++/CUDA, shell scripts, Dockerfiles, YAML/TOML/JSON/.env.
PATH may be files or directories (searched recursively; hidden, build, .gitignore'd and excluded
paths skipped). Settings come from [tool.nccl-migrate] in pyproject.toml or .nccl-migrate.toml,
found upward from the first PATH; options below override them.

options:
  --output-format FORMAT    how findings are written (--format is the same option):
                              full     the default, as in ruff: path:line:col: CODE message with
                                       the whole message, the source line with a caret and the
                                       fix on offer; only a finding's message says what its code
                                       does under torch 2.15 and what to do, so it is shown where
                                       you first meet it
                              concise  one line a finding, the message cut to 100 characters
                                       (first clause): for long lists, editors and CI logs
                              json, sarif, gitlab (GitLab Code Quality JSON)
                            (text is the older name of full)
  --select CODES            only these rules (codes, prefixes such as NM2, or slugs; comma-separated)
  --extend-select CODES     add rules to the selection (e.g. rules that are off by default)
  --ignore CODES            leave these rules out
  --exclude GLOB            skip matching paths (repeatable)
  --config FILE             read settings from FILE instead of searching for one
  --baseline FILE           report only findings not in FILE (a saved --output-format json report)
  --fix                     apply safe fixes to the files, then report what is left
  --unsafe-fixes            with --fix or --diff, also apply unsafe fixes
  --diff                    print the fixes as a unified diff; change nothing
  --exit-zero               exit 0 even when there are findings
  -p DIR                    parse C/C++/CUDA with Clang's AST using DIR/compile_commands.json
  -- FLAGS                  parse C/C++/CUDA with Clang's AST using these compiler flags
  --python PATH             resolve imports of installed packages through this interpreter's
                            sys.path (default: python3 on PATH), so that their group-creating
                            wrappers count like the tree's own
  --no-environment          resolve no imports outside the tree (the built-in catalogue of
                            libraries' wrappers still applies)
  -j, --jobs N              worker processes (default: every core)
  --file-timeout SECONDS    give up on a file that takes longer, with a warning (default 60)
  --list-rules              same as `nccl-migrate rules`
  -h, --help                show this help

exit status: 0 no findings, 1 findings (or fixes shown by --diff), 2 usage or configuration error
)";

std::vector<std::string> splitList(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t a = item.find_first_not_of(' '), b = item.find_last_not_of(' ');
    if (a != std::string::npos) out.push_back(item.substr(a, b - a + 1));
  }
  return out;
}

// The output formats, by the names --output-format (and its older spelling --format) takes.
enum class OutputFormat { Full, Concise, Json, Sarif, Gitlab };

struct LintArgs {
  std::optional<OutputFormat> format;  // unset: the configuration's, else full
  std::vector<std::filesystem::path> paths;
  std::optional<std::vector<std::string>> select;
  std::vector<std::string> extendSelect, ignore, exclude;
  std::filesystem::path configFile, baseline;
  bool fix = false, unsafeFixes = false, diff = false, exitZero = false;
  lint::CppAstOptions cppAst;
  unsigned jobs = 0;
  std::optional<double> fileTimeoutSeconds;
  std::optional<std::string> python;
  bool noEnvironment = false;
};

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Value of `--name VALUE` or `--name=VALUE`; advances i.
std::string valueOf(const std::vector<std::string>& args, size_t& i, const std::string& name) {
  const std::string& a = args[i];
  if (a.size() > name.size() && a[name.size()] == '=') return a.substr(name.size() + 1);
  if (i + 1 >= args.size()) throw UsageError(name + " needs a value");
  return args[++i];
}

bool isOption(const std::string& a, const std::string& name) { return a == name || a.starts_with(name + "="); }

OutputFormat formatNamed(const std::string& value, const std::string& option) {
  static const std::vector<std::pair<std::string, OutputFormat>> names = {
      {"full", OutputFormat::Full},   {"text", OutputFormat::Full},   {"concise", OutputFormat::Concise},
      {"json", OutputFormat::Json},   {"sarif", OutputFormat::Sarif}, {"gitlab", OutputFormat::Gitlab},
  };
  for (const auto& [name, format] : names) {
    if (name == value) return format;
  }
  throw UsageError("unknown format '" + value + "' for " + option +
                   "; use full (the default), concise, json, sarif or gitlab");
}

LintArgs parseArgs(const std::vector<std::string>& args) {
  LintArgs out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      out.cppAst.extraFlags.assign(args.begin() + static_cast<long>(i) + 1, args.end());
      if (out.cppAst.extraFlags.empty()) out.cppAst.extraFlags.push_back("-std=c++17");
      break;
    }
    if (isOption(a, "--output-format") || isOption(a, "--format")) {
      std::string name = isOption(a, "--format") ? "--format" : "--output-format";
      out.format = formatNamed(valueOf(args, i, name), name);
    } else if (isOption(a, "--select")) out.select = splitList(valueOf(args, i, "--select"));
    else if (isOption(a, "--extend-select")) out.extendSelect = splitList(valueOf(args, i, "--extend-select"));
    else if (isOption(a, "--ignore")) {
      auto codes = splitList(valueOf(args, i, "--ignore"));
      out.ignore.insert(out.ignore.end(), codes.begin(), codes.end());
    } else if (isOption(a, "--exclude")) out.exclude.push_back(valueOf(args, i, "--exclude"));
    else if (isOption(a, "--config")) out.configFile = valueOf(args, i, "--config");
    else if (isOption(a, "--baseline")) out.baseline = valueOf(args, i, "--baseline");
    else if (a == "--fix") out.fix = true;
    else if (a == "--unsafe-fixes") out.unsafeFixes = true;
    else if (a == "--diff") out.diff = true;
    else if (a == "--exit-zero") out.exitZero = true;
    else if (isOption(a, "--python")) out.python = valueOf(args, i, "--python");
    else if (a == "--no-environment") out.noEnvironment = true;
    else if (a == "-p" || a.starts_with("-p=") || isOption(a, "--compile-commands")) {
      std::string dir = a.starts_with("-p=") ? a.substr(3) : valueOf(args, i, a == "-p" ? "-p" : "--compile-commands");
      out.cppAst.compileCommandsDir = dir;
      if (!std::filesystem::exists(out.cppAst.compileCommandsDir / "compile_commands.json")) {
        throw UsageError("-p " + dir + ": no compile_commands.json there; configure with "
                         "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON or pass compiler flags after --");
      }
    } else if (a == "-j" || isOption(a, "--jobs")) {
      std::string n = valueOf(args, i, a == "-j" ? "-j" : "--jobs");
      try {
        out.jobs = static_cast<unsigned>(std::stoul(n));
      } catch (const std::exception&) {
        throw UsageError("--jobs needs a number, got '" + n + "'");
      }
    } else if (isOption(a, "--file-timeout")) {
      std::string n = valueOf(args, i, "--file-timeout");
      try {
        size_t used = 0;
        double seconds = std::stod(n, &used);
        if (used != n.size() || !(seconds > 0)) throw std::invalid_argument(n);
        out.fileTimeoutSeconds = seconds;
      } catch (const std::exception&) {
        throw UsageError("--file-timeout needs a number of seconds above 0, got '" + n + "'");
      }
    } else if (a.starts_with("-") && a != "-") {
      throw UsageError("unknown option '" + a + "'");
    } else {
      out.paths.emplace_back(a);
    }
  }
  if (out.paths.empty()) throw UsageError("no PATH given");
  return out;
}

lint::LintConfig configFor(const LintArgs& args) {
  if (!args.configFile.empty() && !std::filesystem::exists(args.configFile)) {
    throw lint::ConfigError(args.configFile.string() + ": no such configuration file; check the path given to --config");
  }
  lint::LintConfig config = args.configFile.empty() ? lint::discoverConfig(args.paths.front())
                                                    : lint::loadConfigFile(args.configFile);
  if (args.select) config.select = *args.select;
  config.extendSelect.insert(config.extendSelect.end(), args.extendSelect.begin(), args.extendSelect.end());
  config.ignore.insert(config.ignore.end(), args.ignore.begin(), args.ignore.end());
  config.exclude.insert(config.exclude.end(), args.exclude.begin(), args.exclude.end());
  if (args.python) config.python = *args.python;
  if (args.noEnvironment) config.environment = false;
  return config;
}

// A progress line on a terminal, redrawn at most once per percent.
std::function<void(size_t, size_t)> progressLine() {
  if (!isatty(STDERR_FILENO)) return nullptr;
  return [last = size_t(0)](size_t done, size_t total) mutable {
    if (total < 200) return;
    size_t percent = done * 100 / total;
    if (percent == last && done != total) return;
    last = percent;
    std::fprintf(stderr, "\rnccl-migrate lint: %zu/%zu files (%zu%%)%s", done, total, percent, done == total ? "\r\033[K" : "");
    std::fflush(stderr);
  };
}

}  // namespace

int runLint(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (a == "--") break;
    if (a == "-h" || a == "--help") {
      std::cout << kLintUsage;
      return 0;
    }
    if (a == "--list-rules") return runRules({});
  }
  LintArgs parsed;
  lint::LintOptions options;
  lint::LintReport report;
  try {
    parsed = parseArgs(args);
    options.config = configFor(parsed);
    if (!parsed.format) {
      try {  // a bad value in a file is the file's error, not the command line's: no usage text
        parsed.format = options.config.outputFormat.empty()
                            ? OutputFormat::Full
                            : formatNamed(options.config.outputFormat, "output-format at " + options.config.outputFormatSource);
      } catch (const UsageError& e) {
        throw lint::ConfigError(e.what());
      }
    }
    options.cppAst = parsed.cppAst;
    options.jobs = parsed.jobs;
    if (parsed.fileTimeoutSeconds) {
      options.fileTimeout = std::chrono::milliseconds(static_cast<long long>(*parsed.fileTimeoutSeconds * 1000));
    }
    options.progress = progressLine();
    report = lint::lintPaths(parsed.paths, options);
    if (!parsed.baseline.empty()) lint::applyBaseline(report, parsed.baseline);
  } catch (const UsageError& e) {
    // The mistake, the usage line and where the rest is: the whole help would bury the one line
    // that says what to change.
    std::string_view usage(kLintUsage);
    std::cerr << "nccl-migrate lint: " << e.what() << '\n'
              << usage.substr(0, usage.find('\n') + 1) << "`nccl-migrate lint --help` lists the options\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "nccl-migrate lint: " << e.what() << '\n';
    return 2;
  }
  auto most = parsed.unsafeFixes ? lint::FixSafety::Unsafe : lint::FixSafety::Safe;
  if (parsed.diff) {
    int shown = lint::diffFiles(lint::applicableFixes(report, most), std::cout, &options, most);
    lint::writeDiffSummary(report, shown, most, std::cerr);
    return shown && !parsed.exitZero ? 1 : 0;
  }
  if (parsed.fix) {
    // Until nothing more applies (kMaxFixRounds): a fix held back because it overlapped another is
    // offered again from the fixed text, so one --fix leaves what a second would change.
    int fixed = 0;
    for (int round = 0; round < lint::kMaxFixRounds; ++round) {
      int applied = lint::fixFiles(lint::applicableFixes(report, most), std::cerr);
      if (applied == 0) break;
      fixed += applied;
      report = lint::lintPaths(parsed.paths, options);  // report what is left, from the new text
      if (!parsed.baseline.empty()) lint::applyBaseline(report, parsed.baseline);
    }
    if (fixed) std::cerr << "Fixed " << fixed << (fixed == 1 ? " finding.\n" : " findings.\n");
  }
  switch (*parsed.format) {
    case OutputFormat::Full: lint::writeText(report, true, std::cout, std::cerr); break;
    case OutputFormat::Concise: lint::writeConcise(report, std::cout, std::cerr); break;
    case OutputFormat::Json: lint::writeJson(report, std::cout); break;
    case OutputFormat::Sarif: lint::writeSarif(report, NCCL_MIGRATE_VERSION, std::cout); break;
    case OutputFormat::Gitlab: lint::writeGitlab(report, std::cout); break;
  }
  return report.findings.empty() || parsed.exitZero ? 0 : 1;
}

}  // namespace nccl_migrate::cli
