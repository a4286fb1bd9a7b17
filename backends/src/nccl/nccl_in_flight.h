// An op on a device communicator's stream, observed through its end event. It holds the
// communicator's handle (so NCCL is never asked about a freed communicator) and every tensor the
// op uses until the stream has passed it.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm_handle.h"
#include "device_runtime.h"
#include "nccl_migrate/backends/communicator.h"

namespace nccl_migrate::backends {

class NcclInFlight final : public InFlight {
 public:
  struct Parts {
    std::shared_ptr<nccl::CommHandle> handle;
    std::shared_ptr<nccl::DeviceRuntime> runtime;
    std::unique_ptr<nccl::DeviceEvent> end;
    c10::Device device;
    nccl::StreamRef stream;  // the communicator's
    FutureOrder futureOrder;
    std::vector<at::Tensor> stash;
    bool captured;  // issued during graph capture: it runs on each replay, never now
    std::string op;
  };
  explicit NcclInFlight(Parts parts) : p_(std::move(parts)) {}

  bool isDone() override;
  std::exception_ptr failure() override;
  void wait(std::chrono::milliseconds timeout) override;
  bool waitOnDevice() override;
  bool onDevice() const override { return true; }
  void giveUp() override { p_.handle->markBroken(); }
  void onDone(std::function<void(std::exception_ptr)> callback) override;

 private:
  void orderCaller();

  Parts p_;
  std::mutex mutex_;  // the watchdog and the job both poll
  bool done_ = false;
  std::exception_ptr deviceError_;
};

}  // namespace nccl_migrate::backends
