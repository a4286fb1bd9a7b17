// The word digest on the GPU: one pass over a device buffer, enqueued on a stream, so it reads
// the bytes after everything the stream already holds (the collective that wrote them) and
// before anything enqueued later (the job's next kernel that may overwrite them).
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>

namespace nccl_migrate::digest {

// Zeroes `sums` (two 64-bit words of device memory) and adds the two lane sums of the `bytes`
// bytes at device address `data` into them, all on `stream`. Once the stream has run them, the
// digest is finish(sums[0], sums[1], bytes).
cudaError_t enqueueWordDigestSums(const void* data, std::size_t bytes, unsigned long long* sums, cudaStream_t stream);

}  // namespace nccl_migrate::digest
