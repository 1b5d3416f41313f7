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

void parallel_memset_zero(void* dst, size_t bytes) {
  // Below a few MiB the fork/join costs more than it saves.
  constexpr size_t kSerialBelow = size_t{4} << 20;
  if (bytes < kSerialBelow) {
    std::memset(dst, 0, bytes);
    return;
  }
  auto* p = static_cast<uint8_t*>(dst);
  const int64_t chunks = static_cast<int64_t>((bytes + kSerialBelow - 1) / kSerialBelow);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const size_t begin = static_cast<size_t>(c) * kSerialBelow;
    std::memset(p + begin, 0, std::min(kSerialBelow, bytes - begin));
  }
}

}  // namespace lab
