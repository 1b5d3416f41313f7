#include "common/util/rng.h"

#include <cmath>

namespace lab {

namespace {
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}
}  // namespace

void Rng::reseed(uint64_t seed) {
  for (auto& w : s_) w = splitmix64(seed);
  has_spare_ = false;
}

uint64_t Rng::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

float Rng::uniform() {
  return static_cast<float>(next_u64() >> 40) * (1.0f / 16777216.0f);
}

uint64_t Rng::below(uint64_t n) {
  if (n <= 1) return 0;
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;  // reject the biased tail
  uint64_t x;
  do {
    x = next_u64();
  } while (x >= limit);
  return x % n;
}

float Rng::normal(float mean, float std) {
  if (has_spare_) {
    has_spare_ = false;
    return mean + std * static_cast<float>(spare_);
  }
  // Box-Muller with u1 in (0, 1] so log() is finite.
  const double u1 = (static_cast<double>(next_u64() >> 11) + 1.0) * (1.0 / 9007199254740992.0);
  const double u2 = static_cast<double>(next_u64() >> 11) * (1.0 / 9007199254740992.0);
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double angle = 6.283185307179586 * u2;
  spare_ = r * std::sin(angle);
  has_spare_ = true;
  return mean + std * static_cast<float>(r * std::cos(angle));
}

}  // namespace lab
