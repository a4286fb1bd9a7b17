// runRanks: see ranks.h.
#include "ranks.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <thread>
#include <vector>

#include <torch/csrc/distributed/c10d/FileStore.hpp>

namespace nccl_migrate::sim {

std::string runRanks(int size, const std::function<void(RankContext&)>& body, std::chrono::seconds limit,
                     std::vector<int> expectDeath) {
  char path[] = "/tmp/nccl_migrate_sim_store_XXXXXX";
  int fd = mkstemp(path);
  close(fd);
  unlink(path);
  std::vector<pid_t> children;
  for (int rank = 0; rank < size; ++rank) {
    pid_t pid = fork();
    if (pid == 0) {
      int code = 0;
      try {
        RankContext context{rank, size, c10::make_intrusive<c10d::FileStore>(path, size)};
        context.store->setTimeout(std::chrono::seconds(30));
        body(context);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "[rank %d] %s\n", rank, e.what());
        code = 1;
      }
      std::fflush(stderr);
      std::fflush(stdout);
      _exit(code);  // no static destructors: simulated streams may still be parked on peers
    }
    children.push_back(pid);
  }
  std::string failures;
  auto deadline = std::chrono::steady_clock::now() + limit;
  std::vector<bool> finished(size, false);
  int left = size;
  while (left > 0) {
    for (int rank = 0; rank < size; ++rank) {
      if (finished[rank]) continue;
      int status = 0;
      if (waitpid(children[rank], &status, WNOHANG) != children[rank]) continue;
      finished[rank] = true;
      --left;
      bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      bool mustDie = std::find(expectDeath.begin(), expectDeath.end(), rank) != expectDeath.end();
      if (clean && mustDie) failures += "rank " + std::to_string(rank) + " exited normally but should have died; ";
      if (!clean && !mustDie) {
        failures += "rank " + std::to_string(rank) +
                    (WIFSIGNALED(status) ? " died of signal " + std::to_string(WTERMSIG(status))
                                         : " exited with " + std::to_string(WEXITSTATUS(status))) +
                    "; ";
      }
    }
    if (left > 0 && std::chrono::steady_clock::now() > deadline) {
      for (int rank = 0; rank < size; ++rank) {
        if (finished[rank]) continue;
        kill(children[rank], SIGKILL);
        waitpid(children[rank], nullptr, 0);
        failures += "rank " + std::to_string(rank) + " did not finish within " + std::to_string(limit.count()) + " s; ";
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  unlink(path);
  return failures;
}

}  // namespace nccl_migrate::sim
