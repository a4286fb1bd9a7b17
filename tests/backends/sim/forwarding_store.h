// A c10d store that passes every call to another and lets a test see each key set before it is
// (seeSet): the base of the tests' stores that lag or count what the code under test writes.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

namespace nccl_migrate::sim {

class ForwardingStore : public c10d::Store {
 public:
  explicit ForwardingStore(c10::intrusive_ptr<c10d::Store> inner) : inner_(std::move(inner)) {}

  c10::intrusive_ptr<c10d::Store> clone() { return inner_->clone(); }  // pure only on newer torch
  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    seeSet(key);
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

 protected:
  virtual void seeSet(const std::string& /*key*/) {}

 private:
  c10::intrusive_ptr<c10d::Store> inner_;
};

}  // namespace nccl_migrate::sim
