// Runs work that may block for good (a library call waiting on a device or on a peer) without
// letting it hold the caller: the one bound every teardown and abort of a transport keeps.
#pragma once

#include <chrono>
#include <functional>
#include <vector>

namespace nccl_migrate::backends {

// Starts every task on a thread of its own, all of them before waiting for any, and waits until
// all returned or `bound` passed. Returns the positions (in `tasks`) of those still running then:
// they go on in the background, so each task must own what it uses. Started together, a task
// that can only return once another has run (an abort waiting on a kernel that only a second
// abort ends) never waits behind it.
std::vector<size_t> runTogetherWithin(std::vector<std::function<void()>> tasks, std::chrono::milliseconds bound);

}  // namespace nccl_migrate::backends
