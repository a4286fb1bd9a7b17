// Runs each file's linting in worker processes, so that a file which crashes a frontend, or takes
// longer than its time limit, loses only its own result: the run says which file failed and why,
// and every other file's result arrives.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>

namespace nccl_migrate::lint {

struct IsolatedWork {
  size_t count = 0;      // items 0..count-1
  unsigned workers = 1;  // processes working at once
  std::chrono::milliseconds timeout{0};  // per item; 0: none
  // In a worker: the result of item i as bytes.
  std::function<std::string(size_t)> run;
  // In the calling process, once per item: its bytes, or why it has none ("crashed (SIGSEGV ...)",
  // "took longer than 60 s").
  std::function<void(size_t, std::string)> done;
  std::function<void(size_t, const std::string&)> failed;
};

// Returns when every item is done or failed. Must be called while the process has no other
// threads (workers are forked). Throws std::system_error when no worker can be started.
void runIsolated(const IsolatedWork& work);

}  // namespace nccl_migrate::lint
