// The word digest's host reference: what makes it a bitwise digest (every single-bit change is
// seen, moved words are seen, length is seen) and what lets the GPU compute the same value
// (any order of summation, any alignment of the buffer).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "nccl_migrate/digest/word_digest.h"

namespace nccl_migrate::digest {
namespace {

std::vector<unsigned char> randomBytes(std::size_t n, unsigned seed) {
  std::mt19937 random(seed);
  std::vector<unsigned char> bytes(n);
  for (auto& b : bytes) b = static_cast<unsigned char>(random());
  return bytes;
}

TEST(WordDigest, EveryFlippedBitChangesBothLanes) {
  auto bytes = randomBytes(203, 1);  // a partial last word too
  const WordDigest original = wordDigestOnHost(bytes.data(), bytes.size());
  for (std::size_t bit = 0; bit < bytes.size() * 8; ++bit) {
    bytes[bit / 8] ^= static_cast<unsigned char>(1u << (bit % 8));
    const WordDigest flipped = wordDigestOnHost(bytes.data(), bytes.size());
    bytes[bit / 8] ^= static_cast<unsigned char>(1u << (bit % 8));
    ASSERT_NE(flipped.a, original.a) << "bit " << bit;
    ASSERT_NE(flipped.b, original.b) << "bit " << bit;
  }
}

TEST(WordDigest, SwappedWordsAndSignFlipsInTwoPlacesAreSeen) {
  auto bytes = randomBytes(64, 2);
  const WordDigest original = wordDigestOnHost(bytes.data(), bytes.size());
  auto swapped = bytes;
  std::swap_ranges(swapped.begin(), swapped.begin() + 8, swapped.begin() + 32);
  EXPECT_FALSE(wordDigestOnHost(swapped.data(), swapped.size()) == original);
  // The top bit of two words: the change a plain sum of words modulo 2^64 would cancel out.
  auto signs = bytes;
  signs[7] ^= 0x80;
  signs[15] ^= 0x80;
  EXPECT_FALSE(wordDigestOnHost(signs.data(), signs.size()) == original);
}

TEST(WordDigest, TrailingZeroBytesChangeTheDigest) {
  std::vector<unsigned char> zeros(17, 0);
  const WordDigest empty = wordDigestOnHost(zeros.data(), 0);
  for (std::size_t n = 1; n <= zeros.size(); ++n) {
    EXPECT_FALSE(wordDigestOnHost(zeros.data(), n) == wordDigestOnHost(zeros.data(), n - 1)) << n;
    EXPECT_FALSE(wordDigestOnHost(zeros.data(), n) == empty) << n;
  }
}

TEST(WordDigest, TheBufferAlignmentDoesNotMatter) {
  const auto bytes = randomBytes(100, 3);
  const WordDigest aligned = wordDigestOnHost(bytes.data(), bytes.size());
  std::vector<unsigned char> shifted(bytes.size() + 8);
  for (std::size_t offset = 1; offset < 8; ++offset) {
    std::memcpy(shifted.data() + offset, bytes.data(), bytes.size());
    EXPECT_TRUE(wordDigestOnHost(shifted.data() + offset, bytes.size()) == aligned) << offset;
  }
}

// What the GPU does: partial sums over any partition of the words, added in any order.
TEST(WordDigest, AnyOrderOfSummationGivesTheReferenceValue) {
  const auto bytes = randomBytes(8 * 1000 + 5, 4);
  const std::size_t words = (bytes.size() + 7) / 8;
  std::vector<std::size_t> order(words);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(5));
  std::uint64_t a = 0, b = 0;
  for (std::size_t index : order) {
    std::uint64_t word = 0;
    std::memcpy(&word, bytes.data() + index * 8, std::min<std::size_t>(8, bytes.size() - index * 8));
    a += termA(word, index);
    b += termB(word, index);
  }
  EXPECT_TRUE(finish(a, b, bytes.size()) == wordDigestOnHost(bytes.data(), bytes.size()));
}

}  // namespace
}  // namespace nccl_migrate::digest
