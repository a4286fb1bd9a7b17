// The word digest's lane sums on the GPU. Each thread sums the terms of a grid-strided run of
// words; warps, then blocks, add their partial sums; blocks add theirs into the result with
// atomics. Integer addition modulo 2^64 is associative and commutative, so the order in which
// any of that happens never changes the value: it is the host reference's, word for word.
#include <cstdint>

#include "nccl_migrate/digest/word_digest.h"
#include "nccl_migrate/digest/word_digest_cuda.h"

namespace nccl_migrate::digest {
namespace {

constexpr unsigned kThreads = 256;
constexpr unsigned kWarps = kThreads / 32;
// Enough blocks to fill any current GPU several times over; past it threads take more words.
constexpr std::size_t kMaxBlocks = 4096;

// Word `index` of the buffer; a word past its end is padded with zero bytes, as on the host. A
// buffer that does not start on an 8-byte boundary (a view at an odd offset) is read bytewise.
__device__ std::uint64_t loadWord(const unsigned char* in, std::size_t bytes, std::size_t index, bool aligned) {
  const std::size_t at = index * 8;
  if (aligned && at + 8 <= bytes) return reinterpret_cast<const std::uint64_t*>(in)[index];
  std::uint64_t word = 0;
  for (unsigned k = 0; k < 8 && at + k < bytes; ++k) word |= std::uint64_t{in[at + k]} << (8 * k);
  return word;
}

__global__ void sumTerms(const unsigned char* in, std::size_t bytes, std::size_t words, bool aligned,
                         unsigned long long* sums) {
  unsigned long long a = 0, b = 0;
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  for (std::size_t i = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < words; i += stride) {
    const std::uint64_t word = loadWord(in, bytes, i, aligned);
    a += termA(word, i);
    b += termB(word, i);
  }
  for (unsigned offset = 16; offset > 0; offset /= 2) {
    a += __shfl_down_sync(0xffffffffu, a, offset);
    b += __shfl_down_sync(0xffffffffu, b, offset);
  }
  __shared__ unsigned long long warpA[kWarps], warpB[kWarps];
  if (threadIdx.x % 32 == 0) {
    warpA[threadIdx.x / 32] = a;
    warpB[threadIdx.x / 32] = b;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned long long blockA = 0, blockB = 0;
    for (unsigned w = 0; w < kWarps; ++w) {
      blockA += warpA[w];
      blockB += warpB[w];
    }
    atomicAdd(&sums[0], blockA);
    atomicAdd(&sums[1], blockB);
  }
}

}  // namespace

cudaError_t enqueueWordDigestSums(const void* data, std::size_t bytes, unsigned long long* sums, cudaStream_t stream) {
  if (cudaError_t zeroed = cudaMemsetAsync(sums, 0, 2 * sizeof(unsigned long long), stream); zeroed != cudaSuccess) {
    return zeroed;
  }
  const std::size_t words = (bytes + 7) / 8;
  if (words == 0) return cudaSuccess;
  const std::size_t wanted = (words + kThreads - 1) / kThreads;
  const auto blocks = static_cast<unsigned>(wanted < kMaxBlocks ? wanted : kMaxBlocks);
  const bool aligned = reinterpret_cast<std::uintptr_t>(data) % 8 == 0;
  sumTerms<<<blocks, kThreads, 0, stream>>>(static_cast<const unsigned char*>(data), bytes, words, aligned, sums);
  return cudaGetLastError();
}

}  // namespace nccl_migrate::digest
