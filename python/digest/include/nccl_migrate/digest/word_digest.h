// The word digest: a 128-bit bitwise digest of a byte string, designed to be computed by a GPU
// in one parallel pass over the bytes (the A/B recorder's digest of CUDA tensors, which then
// never travel to the host), with a host reference that gives the same value for the same bytes.
//
// Definition (docs/ab.md states it too). The n bytes are read as m = ceil(n / 8) little-endian
// 64-bit words w_0 .. w_{m-1}, the last one padded with zero bytes. Two lanes, each a sum
// modulo 2^64 of a bijective mix of each word keyed by its position:
//     a = sum_i mixA(w_i ^ (i * kPositionA))        b = sum_i mixB(w_i + (i + 1) * kPositionB)
// and the digest is (mixA(a ^ n), mixB(b + n * kLength)).
//   - A sum modulo 2^64 does not depend on the order of its terms, so every parallel reduction
//     (any grid, any atomics order) gives the same value: the digest is deterministic.
//   - A mix is a bijection, so changing any one word changes both lanes, always; keying by
//     position makes moved words count; n in the last step tells trailing zero bytes apart.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define NCCL_MIGRATE_HOST_DEVICE __host__ __device__
#else
#define NCCL_MIGRATE_HOST_DEVICE
#endif

namespace nccl_migrate::digest {

struct WordDigest {
  std::uint64_t a = 0;
  std::uint64_t b = 0;
};

// Spelled out: the CUDA side of the build compiles as C++17, without defaulted comparisons.
inline bool operator==(const WordDigest& x, const WordDigest& y) { return x.a == y.a && x.b == y.b; }

inline constexpr std::uint64_t kPositionA = 0x9e3779b97f4a7c15ULL;  // 2^64 / golden ratio, odd
inline constexpr std::uint64_t kPositionB = 0xd6e8feb86659fd93ULL;
inline constexpr std::uint64_t kLength = 0xa0761d6478bd642fULL;

// x ^= x >> s1; x *= m1; x ^= x >> s2; x *= m2; x ^= x >> s3: with odd multipliers each step is
// invertible, so the whole is a bijection of 64-bit words.
template <unsigned S1, std::uint64_t M1, unsigned S2, std::uint64_t M2, unsigned S3>
NCCL_MIGRATE_HOST_DEVICE inline std::uint64_t xorShiftMultiply(std::uint64_t x) {
  x ^= x >> S1;
  x *= M1;
  x ^= x >> S2;
  x *= M2;
  x ^= x >> S3;
  return x;
}

// MurmurHash3's 64-bit finalizer, with full avalanche.
NCCL_MIGRATE_HOST_DEVICE inline std::uint64_t mixA(std::uint64_t x) {
  return xorShiftMultiply<33, 0xff51afd7ed558ccdULL, 33, 0xc4ceb9fe1a85ec53ULL, 33>(x);
}

// SplitMix64's finalizer: constants independent of mixA's.
NCCL_MIGRATE_HOST_DEVICE inline std::uint64_t mixB(std::uint64_t x) {
  return xorShiftMultiply<30, 0xbf58476d1ce4e5b9ULL, 27, 0x94d049bb133111ebULL, 31>(x);
}

// One word's terms in the two sums.
NCCL_MIGRATE_HOST_DEVICE inline std::uint64_t termA(std::uint64_t word, std::uint64_t index) {
  return mixA(word ^ (index * kPositionA));
}
NCCL_MIGRATE_HOST_DEVICE inline std::uint64_t termB(std::uint64_t word, std::uint64_t index) {
  return mixB(word + (index + 1) * kPositionB);
}

// The digest of n bytes whose lane sums are (a, b).
NCCL_MIGRATE_HOST_DEVICE inline WordDigest finish(std::uint64_t a, std::uint64_t b, std::uint64_t n) {
  return {mixA(a ^ n), mixB(b + n * kLength)};
}

// The host reference: the digest of `bytes` bytes at `data` (any alignment).
WordDigest wordDigestOnHost(const void* data, std::size_t bytes);

}  // namespace nccl_migrate::digest
