// A small deterministic random generator (xoshiro256**, seeded by splitmix64) whose whole state is
// four integers, so checkpoints can save and restore it exactly.
#pragma once

#include <array>
#include <cstdint>

namespace lab {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) { reseed(seed); }
  void reseed(uint64_t seed);

  uint64_t next_u64();
  uint32_t next_u32() { return static_cast<uint32_t>(next_u64() >> 32); }
  float uniform();                                  // [0, 1) with 24 random bits
  uint64_t below(uint64_t n);                       // uniform in [0, n), unbiased
  float normal(float mean = 0.f, float std = 1.f);  // Box-Muller; each pair of draws shares one transform

  // The generator's state. A normal() pair half consumed is dropped: a restored generator starts a new pair.
  std::array<uint64_t, 4> state() const { return s_; }
  void set_state(const std::array<uint64_t, 4>& s) {
    s_ = s;
    has_spare_ = false;
  }

 private:
  std::array<uint64_t, 4> s_{};
  bool has_spare_ = false;  // Box-Muller makes two normals; the second waits here
  double spare_ = 0.0;
};

}  // namespace lab
