// A store whose set of the keys ending in `suffix` waits `lag` first. As the store the simulated
// NCCL moves its data through, it makes a simulated NCCL call lag inside NCCL (an init's
// announcement, a connect's): after the backend's member meetings, which use the group's own store.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

namespace nccl_migrate::sim {

class LaggingStore final : public c10d::Store {
 public:
  LaggingStore(c10::intrusive_ptr<c10d::Store> inner, std::string suffix, std::chrono::milliseconds lag)
      : inner_(std::move(inner)), suffix_(std::move(suffix)), lag_(lag) {}

  c10::intrusive_ptr<c10d::Store> clone() { return inner_->clone(); }  // pure only on newer torch
  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    if (key.size() >= suffix_.size() && key.compare(key.size() - suffix_.size(), suffix_.size(), suffix_) == 0) {
      std::this_thread::sleep_for(lag_);
    }
    inner_->set(key, value);
  }
  std::vector<uint8_t> get(const std::string& key) override { return inner_->get(key); }
  int64_t add(const std::string& key, int64_t value) override { return inner_->add(key, value); }
  bool deleteKey(const std::string& key) override { return inner_->deleteKey(key); }
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override {
    return inner_->compareSet(key, expected, desired);
  }
  bool check(const std::vector<std::string>& keys) override { return inner_->check(keys); }
  int64_t getNumKeys() override { return inner_->getNumKeys(); }
  void wait(const std::vector<std::string>& keys) override { inner_->wait(keys); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    inner_->wait(keys, timeout);
  }

 private:
  c10::intrusive_ptr<c10d::Store> inner_;
  std::string suffix_;
  std::chrono::milliseconds lag_;
};

}  // namespace nccl_migrate::sim
