#include "common/core/parallel.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace lab {

int num_threads() {
  return omp_get_max_threads();
}

void set_num_threads(int n) {
  omp_set_num_threads(std::max(1, n));
}

namespace {

// Calls piece(begin, length) over [0, bytes) in chunks of a few MiB spread over the threads, or once for the whole
// range below that: below a few MiB the fork/join costs more than it saves.
template <typename Piece>
void in_parallel_chunks(size_t bytes, const Piece& piece) {
  constexpr size_t kSerialBelow = size_t{4} << 20;
  if (bytes < kSerialBelow) {
    piece(size_t{0}, bytes);
    return;
  }
  const int64_t chunks = static_cast<int64_t>((bytes + kSerialBelow - 1) / kSerialBelow);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const size_t begin = static_cast<size_t>(c) * kSerialBelow;
    piece(begin, std::min(kSerialBelow, bytes - begin));
  }
}

}  // namespace

void parallel_memset_zero(void* dst, size_t bytes) {
  auto* p = static_cast<uint8_t*>(dst);
  in_parallel_chunks(bytes, [&](size_t begin, size_t length) { std::memset(p + begin, 0, length); });
}

void parallel_memcpy(void* dst, const void* src, size_t bytes) {
  auto* to = static_cast<uint8_t*>(dst);
  const auto* from = static_cast<const uint8_t*>(src);
  in_parallel_chunks(bytes, [&](size_t begin, size_t length) { std::memcpy(to + begin, from + begin, length); });
}

}  // namespace lab
