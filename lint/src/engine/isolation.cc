// Worker processes for linting (see isolation.h). The parent hands each worker a batch of item
// numbers over a pipe and reads back one framed result per item, in order, so when a worker dies
// or overruns, the item it was on is the first of its batch without a result; the rest of the
// batch goes back to the queue and a fresh worker takes over.
#include "isolation.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <deque>
#include <optional>
#include <system_error>
#include <vector>

namespace nccl_migrate::lint {
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void throwErrno(const char* what) { throw std::system_error(errno, std::generic_category(), what); }

bool writeAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool readAll(int fd, char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::read(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// A worker's life: read a batch (count, then item numbers), answer each item with
// (item, length, bytes); end when the parent closes the batch pipe.
[[noreturn]] void workerMain(int batches, int results, const IsolatedWork& work) {
  signal(SIGPIPE, SIG_DFL);  // the parent is gone: nobody wants the results
  while (true) {
    uint64_t count = 0;
    if (!readAll(batches, reinterpret_cast<char*>(&count), sizeof count)) _exit(0);
    std::vector<uint64_t> items(count);
    if (!readAll(batches, reinterpret_cast<char*>(items.data()), count * sizeof(uint64_t))) _exit(0);
    for (uint64_t item : items) {
      std::string bytes = work.run(static_cast<size_t>(item));
      uint64_t header[2] = {item, bytes.size()};
      if (!writeAll(results, reinterpret_cast<const char*>(header), sizeof header) ||
          !writeAll(results, bytes.data(), bytes.size())) {
        _exit(0);
      }
    }
  }
}

std::string describeExit(int status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char* name = sigabbrev_np(sig);
    return std::string("the linter crashed on it (SIG") + (name ? name : std::to_string(sig).c_str()) + ": " +
           strsignal(sig) + ")";
  }
  if (WIFEXITED(status)) return "the linter's worker exited with status " + std::to_string(WEXITSTATUS(status)) + " on it";
  return "the linter's worker stopped on it";
}

struct Worker {
  pid_t pid = -1;
  int batches = -1;  // write end
  int results = -1;  // read end
  std::deque<size_t> assigned;
  std::string buffer;
  Clock::time_point deadline;
};

class Pool {
 public:
  explicit Pool(const IsolatedWork& work) : work_(work) {
    for (size_t i = 0; i < work.count; ++i) queue_.push_back(i);
  }

  ~Pool() {
    for (Worker& w : workers_) stop(w, SIGKILL);
  }

  void run() {
    size_t wanted = std::min<size_t>(std::max(1u, work_.workers), work_.count);
    for (size_t i = 0; i < wanted; ++i) {
      workers_.push_back(start());
      dispatch(workers_.back());
    }
    while (true) {
      std::vector<pollfd> fds;
      std::vector<size_t> owner;
      std::optional<Clock::time_point> soonest;
      for (size_t i = 0; i < workers_.size(); ++i) {
        Worker& w = workers_[i];
        if (w.assigned.empty()) continue;
        fds.push_back({w.results, POLLIN, 0});
        owner.push_back(i);
        if (work_.timeout.count() > 0 && (!soonest || w.deadline < *soonest)) soonest = w.deadline;
      }
      if (fds.empty()) break;
      int waitMs = -1;
      if (soonest) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*soonest - Clock::now()).count();
        waitMs = static_cast<int>(std::clamp<long long>(left + 1, 0, 60'000));
      }
      int ready = ::poll(fds.data(), fds.size(), waitMs);
      if (ready < 0 && errno != EINTR) throwErrno("poll");
      for (size_t k = 0; ready > 0 && k < fds.size(); ++k) {
        if (fds[k].revents) receive(workers_[owner[k]]);
      }
      if (work_.timeout.count() > 0) {
        Clock::time_point now = Clock::now();
        for (Worker& w : workers_) {
          if (!w.assigned.empty() && now >= w.deadline) overran(w);
        }
      }
    }
    for (Worker& w : workers_) stop(w, 0);
  }

 private:
  Worker start() {
    int batches[2], results[2];
    if (::pipe2(batches, O_CLOEXEC) != 0) throwErrno("pipe");
    if (::pipe2(results, O_CLOEXEC) != 0) {
      ::close(batches[0]);
      ::close(batches[1]);
      throwErrno("pipe");
    }
    pid_t pid = ::fork();
    if (pid < 0) throwErrno("fork");
    if (pid == 0) {
      // Another worker's pipe ends held here would hide that worker's death from the parent.
      for (const Worker& other : workers_) {
        ::close(other.batches);
        ::close(other.results);
      }
      ::close(batches[1]);
      ::close(results[0]);
      workerMain(batches[0], results[1], work_);
    }
    ::close(batches[0]);
    ::close(results[1]);
    Worker w;
    w.pid = pid;
    w.batches = batches[1];
    w.results = results[0];
    return w;
  }

  // Small batches keep every worker busy to the end; a batch is a round trip saved per item.
  void dispatch(Worker& w) {
    if (queue_.empty()) return;
    size_t batch = std::clamp<size_t>(queue_.size() / (8 * std::max<size_t>(workers_.size(), 1)), 1, 8);
    std::vector<uint64_t> message{batch};
    for (size_t i = 0; i < batch; ++i) {
      message.push_back(queue_.front());
      w.assigned.push_back(queue_.front());
      queue_.pop_front();
    }
    w.deadline = Clock::now() + work_.timeout;
    // A worker that died before reading shows as EOF on its results; the poll loop handles it.
    writeAll(w.batches, reinterpret_cast<const char*>(message.data()), message.size() * sizeof(uint64_t));
  }

  void receive(Worker& w) {
    char chunk[65536];
    ssize_t n = ::read(w.results, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) return;
    if (n <= 0) return died(w);
    w.buffer.append(chunk, static_cast<size_t>(n));
    while (w.buffer.size() >= 2 * sizeof(uint64_t)) {
      uint64_t header[2];
      std::memcpy(header, w.buffer.data(), sizeof header);
      if (w.buffer.size() < sizeof header + header[1]) break;
      size_t item = w.assigned.front();
      w.assigned.pop_front();
      work_.done(item, w.buffer.substr(sizeof header, header[1]));
      w.buffer.erase(0, sizeof header + header[1]);
      w.deadline = Clock::now() + work_.timeout;
    }
    // The next batch is queued before the worker finishes this one, so that it never waits on the
    // parent between batches.
    while (w.assigned.size() < 2 && !queue_.empty()) dispatch(w);
  }

  void died(Worker& w) {
    int status = 0;
    while (::waitpid(w.pid, &status, 0) < 0 && errno == EINTR) {
    }
    w.pid = -1;
    replace(w, describeExit(status));
  }

  void overran(Worker& w) {
    stop(w, SIGKILL);
    auto ms = work_.timeout.count();
    std::string limit = ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms";
    replace(w, "linting it took longer than " + limit);
  }

  // The worker's current item failed; the rest of its batch goes back to the queue, and a fresh
  // worker takes its place while work is left.
  void replace(Worker& w, const std::string& why) {
    size_t failedItem = w.assigned.front();
    w.assigned.pop_front();
    queue_.insert(queue_.begin(), w.assigned.begin(), w.assigned.end());
    w.assigned.clear();
    stop(w, SIGKILL);
    work_.failed(failedItem, why);
    if (queue_.empty()) return;
    w = start();
    dispatch(w);
  }

  void stop(Worker& w, int sig) {
    if (w.batches >= 0) ::close(w.batches);
    if (w.results >= 0) ::close(w.results);
    w.batches = w.results = -1;
    if (w.pid > 0) {
      if (sig) ::kill(w.pid, sig);
      while (::waitpid(w.pid, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
    w.pid = -1;
    w.buffer.clear();
  }

  const IsolatedWork& work_;
  std::deque<size_t> queue_;
  std::vector<Worker> workers_;
};

}  // namespace

void runIsolated(const IsolatedWork& work) {
  if (work.count == 0) return;
  // A batch written to a worker that just died must fail as EPIPE, not end the run by SIGPIPE.
  struct sigaction ignore {}, previous {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGPIPE, &ignore, &previous);
  struct Restore {
    struct sigaction& previous;
    ~Restore() { sigaction(SIGPIPE, &previous, nullptr); }
  } restore{previous};
  Pool(work).run();
}

}  // namespace nccl_migrate::lint
