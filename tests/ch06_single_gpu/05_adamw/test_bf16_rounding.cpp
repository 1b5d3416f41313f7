// The bf16 rounding of the mixed-precision AdamW (ch06_single_gpu/kernels/05_adamw/adamw_element.h), which the
// CPU loop and the CUDA kernel share: to nearest agrees with the project's host conversion everywhere; the
// stochastic rounding lands on one of the two neighbours, is exact on average over many draws, and depends on
// nothing but the seed and the element's index. Label ch06.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <ios>
#include <limits>
#include <vector>

#include "ch06_single_gpu/kernels/05_adamw/adamw_element.h"
#include "common/core/dtype.h"
#include "common/util/rng.h"

namespace lab {
namespace {

using ch06::adamw::bf16_round_nearest;
using ch06::adamw::bf16_round_stochastic;
using ch06::adamw::bf16_to_float;
using ch06::adamw::random_bits;

float from_bits(uint32_t u) {
  return std::bit_cast<float>(u);
}

// Floats of every kind: random bit patterns (every exponent, subnormals, NaNs), exact ties with odd and even
// kept halves, signed zeros, infinities, the largest finite values.
std::vector<float> awkward_floats() {
  std::vector<float> x;
  Rng rng(3);
  for (int i = 0; i < 200000; ++i) x.push_back(from_bits(rng.next_u32()));
  for (const uint32_t kept : {0x3f80u, 0x3f81u, 0xbf80u, 0xbf81u, 0x0001u, 0x7f7fu, 0xff7eu})
    for (const uint32_t low : {0x0000u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) x.push_back(from_bits(kept << 16 | low));
  for (const float f : {0.0f, -0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                        std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min(),
                        std::numeric_limits<float>::quiet_NaN()})
    x.push_back(f);
  return x;
}

TEST(Bf16Rounding, ToNearestMatchesTheHostConversion) {
  for (const float f : awkward_floats())
    ASSERT_EQ(bf16_round_nearest(f), float_to_bf16_bits(f))
        << "float bits 0x" << std::hex << std::bit_cast<uint32_t>(f);
}

TEST(Bf16Rounding, StochasticLandsOnANeighbourAndKeepsExactValues) {
  Rng rng(5);
  for (const float f : awkward_floats()) {
    const uint32_t u = std::bit_cast<uint32_t>(f);
    const uint16_t r = bf16_round_stochastic(f, rng.next_u32());
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_to_float(r)));
      continue;
    }
    const uint16_t down = static_cast<uint16_t>(u >> 16);  // toward zero
    if ((u & 0xffffu) == 0)
      ASSERT_EQ(r, down) << "a value exact in bf16 stays itself";
    else
      ASSERT_TRUE(r == down || r == down + 1) << "float bits 0x" << std::hex << u << " gave 0x" << r;
  }
}

// Over 2^20 draws (one per element index) the mean of the rounded values sits within 5 standard deviations of x
// (the standard deviation of one draw is a bf16 step times sqrt(p (1 - p)), p the probability of rounding up);
// rounding to nearest is off by p or 1 - p steps for these values, hundreds of deviations.
TEST(Bf16Rounding, StochasticIsUnbiasedOverManyDraws) {
  const int64_t draws = int64_t{1} << 20;
  for (const float x : {1.0f + 0.3f * 0x1p-7f, -3.7f, 0.1f, 1e-30f, -65504.123f, 1.0f + 0.9f * 0x1p-7f}) {
    const uint32_t u = std::bit_cast<uint32_t>(x);
    const double down = bf16_to_float(static_cast<uint16_t>(u >> 16));
    const double up = bf16_to_float(static_cast<uint16_t>((u >> 16) + 1));
    const double p = (static_cast<double>(x) - down) / (up - down);  // where x lies between its neighbours
    double sum = 0.0;
    for (int64_t i = 0; i < draws; ++i) sum += bf16_to_float(bf16_round_stochastic(x, random_bits(11, i)));
    const double mean = sum / static_cast<double>(draws);
    const double sigma = std::fabs(up - down) * std::sqrt(p * (1.0 - p) / static_cast<double>(draws));
    EXPECT_NEAR(mean, x, 5.0 * sigma) << "x = " << x << ", p = " << p;
    EXPECT_GT(std::fabs(bf16_to_float(bf16_round_nearest(x)) - x), 100.0 * sigma) << "x = " << x;
  }
}

TEST(Bf16Rounding, RandomBitsDependOnlyOnSeedAndIndex) {
  std::vector<uint32_t> first;
  for (uint64_t i = 0; i < 1000; ++i) first.push_back(random_bits(99, i));
  for (uint64_t i = 1000; i-- > 0;) EXPECT_EQ(random_bits(99, i), first[i]) << "drawn in another order";
  int same_as_other_seed = 0, same_as_neighbour = 0;
  for (uint64_t i = 0; i < 1000; ++i) {
    same_as_other_seed += random_bits(100, i) == first[i];
    same_as_neighbour += i > 0 && first[i] == first[i - 1];
  }
  EXPECT_LT(same_as_other_seed, 3);
  EXPECT_LT(same_as_neighbour, 3);
}

}  // namespace
}  // namespace lab
