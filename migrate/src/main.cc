// nccl-migrate: the command-line entry point. Subcommands that need torch (run, doctor, ab, fr)
// run in a separate Python process with the nccl_migrate package, so this binary never loads
// torch and lint stays fast.
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "commands.h"
#include "nccl_migrate/lint/own_executable.h"

namespace {

constexpr std::string_view kUsage = R"(nccl-migrate: move PyTorch jobs across torch's NCCL backend change safely

usage: nccl-migrate [--version] [--help] <command> [<args>]

commands:
  lint PATH...        find migration hazards in Python, C/C++/CUDA, shell, Docker and config files
  rules               list the lint rules; `rules --explain CODE` documents one
  run [opts] -- CMD   run a job with the toolkit's backends registered (CPU or GPU)
  doctor              show torch, NCCL and GPUs, and what each backend name resolves to here
  ab [opts] -- CMD    run a job under two backends and compare every collective's results
  fr [opts] DUMP...   read flight-recorder dumps

Run `nccl-migrate <command> --help` for a command's options.
exit status: 0 success or nothing found, 1 findings/divergence/conflict, 2 usage or run error
)";

}  // namespace

int main(int argc, char** argv) {
  nccl_migrate::lint::rememberInvocation(argc > 0 ? argv[0] : nullptr);
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::cout << kUsage;
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version" || args[0] == "-V") {
    std::cout << nccl_migrate::cli::versionText();
    return 0;
  }
  std::string command = args[0];
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (command == "lint") return nccl_migrate::cli::runLint(rest);
  if (command == "rules") return nccl_migrate::cli::runRules(rest);
  if (command == "run" || command == "doctor" || command == "ab" || command == "fr") {
    return nccl_migrate::cli::runInPython(command, rest);
  }
  std::cerr << "nccl-migrate: unknown command '" << command << "'\n\n" << kUsage;
  return 2;
}
