// Factories that make communicators real: Gloo for CPU devices, NCCL for CUDA devices.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "nccl_migrate/backends/communicator.h"

namespace nccl_migrate::backends {

// Creates one torch Gloo backend over `store` under `storePrefix`. The toolkit does not write its
// own transport: the Python package supplies this from torch's public ProcessGroupGloo, since
// the wheel ships no Gloo headers.
using GlooBackendMaker = std::function<c10::intrusive_ptr<c10d::Backend>(
    const c10::intrusive_ptr<c10d::Store>& store, const std::string& storePrefix, int rank, int size,
    std::chrono::milliseconds timeout)>;

// Every communicator of one group, whatever its device; picks the implementation by device type.
std::shared_ptr<CommunicatorFactory> makeCommunicatorFactory(c10::intrusive_ptr<c10d::Store> store,
                                                             GlooBackendMaker makeGloo,
                                                             std::string groupName,
                                                             std::chrono::milliseconds timeout,
                                                             DeviceCommOptions deviceOptions = {});

struct NcclSeams;  // src/nccl/nccl_communicator.h: the NCCL API and device runtime

// The same over other seams: communicators on `seamsDevice` devices are NCCL communicators
// over `seams` (how the tests' simulated device serves CPU tensors; CUDA in production).
std::shared_ptr<CommunicatorFactory> makeCommunicatorFactory(c10::intrusive_ptr<c10d::Store> store,
                                                             GlooBackendMaker makeGloo, std::string groupName,
                                                             std::chrono::milliseconds timeout,
                                                             std::shared_ptr<const NcclSeams> seams,
                                                             c10::DeviceType seamsDevice,
                                                             DeviceCommOptions deviceOptions = {});

// Whether this build compiled the NCCL communicator (it always does when NCCL was found).
bool ncclCompiled();
// NCCL version this build was compiled against, "2.30.7", or "" without NCCL.
std::string ncclBuildVersion();

}  // namespace nccl_migrate::backends
