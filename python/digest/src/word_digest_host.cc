// The word digest on the host: the reference the GPU kernel must agree with, word for word.
#include <cstring>

#include "nccl_migrate/digest/word_digest.h"

namespace nccl_migrate::digest {

WordDigest wordDigestOnHost(const void* data, std::size_t bytes) {
  const auto* in = static_cast<const unsigned char*>(data);
  const std::size_t whole = bytes / 8;
  std::uint64_t a = 0, b = 0;
  for (std::size_t i = 0; i < whole; ++i) {
    std::uint64_t word;
    std::memcpy(&word, in + i * 8, 8);  // any alignment; x86 and every CUDA host are little-endian
    a += termA(word, i);
    b += termB(word, i);
  }
  if (const std::size_t tail = bytes % 8) {
    std::uint64_t word = 0;
    std::memcpy(&word, in + whole * 8, tail);  // the missing high bytes stay zero
    a += termA(word, whole);
    b += termB(word, whole);
  }
  return finish(a, b, bytes);
}

}  // namespace nccl_migrate::digest
