// A store whose calls hang once armed: a store call stuck inside the library, as torch's
// TCPStore's are while it names the peer of a failed call by a reverse DNS lookup (the
// resolver's timeout where none answers). For tests of what bounds such a call.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include <torch/csrc/distributed/c10d/Store.hpp>

namespace nccl_migrate::sim {

class StuckStore final : public c10d::Store {
 public:
  static constexpr std::chrono::seconds kStuckFor{8};
  explicit StuckStore(c10::intrusive_ptr<c10d::Store> inner) : inner_(std::move(inner)) {}

  std::atomic<bool> armed{false};  // from now on, every call hangs kStuckFor first...
  void release() {                   // ...or until this
    {
      std::lock_guard<std::mutex> lock(mutex_);
      released_ = true;
    }
    releasedCv_.notify_all();
  }

  c10::intrusive_ptr<c10d::Store> clone() { return inner_->clone(); }  // pure only on newer torch
  void set(const std::string& key, const std::vector<uint8_t>& value) override { inner_->set(key, hang(value)); }
  std::vector<uint8_t> get(const std::string& key) override { return inner_->get(hang(key)); }
  int64_t add(const std::string& key, int64_t value) override { return inner_->add(hang(key), value); }
  bool deleteKey(const std::string& key) override { return inner_->deleteKey(hang(key)); }
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override {
    return inner_->compareSet(hang(key), expected, desired);
  }
  bool check(const std::vector<std::string>& keys) override { return inner_->check(hang(keys)); }
  int64_t getNumKeys() override { return inner_->getNumKeys(); }
  void wait(const std::vector<std::string>& keys) override { inner_->wait(hang(keys)); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    inner_->wait(hang(keys), timeout);
  }

 private:
  template <typename T>
  const T& hang(const T& argument) {
    if (armed.load()) {
      std::unique_lock<std::mutex> lock(mutex_);
      releasedCv_.wait_for(lock, kStuckFor, [&] { return released_; });
    }
    return argument;
  }
  c10::intrusive_ptr<c10d::Store> inner_;
  std::mutex mutex_;
  std::condition_variable releasedCv_;
  bool released_ = false;
};

}  // namespace nccl_migrate::sim
