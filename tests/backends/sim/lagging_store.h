// A store whose set of the keys ending in `suffix` waits `lag` first. As the store the simulated
// NCCL moves its data through, it makes a simulated NCCL call lag inside NCCL (an init's
// announcement, a connect's): after the backend's member meetings, which use the group's own store.
#pragma once

#include <chrono>
#include <string>
#include <thread>
#include <utility>

#include "forwarding_store.h"

namespace nccl_migrate::sim {

class LaggingStore final : public ForwardingStore {
 public:
  LaggingStore(c10::intrusive_ptr<c10d::Store> inner, std::string suffix, std::chrono::milliseconds lag)
      : ForwardingStore(std::move(inner)), suffix_(std::move(suffix)), lag_(lag) {}

 private:
  void seeSet(const std::string& key) override {
    if (key.size() >= suffix_.size() && key.compare(key.size() - suffix_.size(), suffix_.size(), suffix_) == 0) {
      std::this_thread::sleep_for(lag_);
    }
  }

  std::string suffix_;
  std::chrono::milliseconds lag_;
};

}  // namespace nccl_migrate::sim
