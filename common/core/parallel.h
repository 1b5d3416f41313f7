// Host threading: OpenMP everywhere, one pool shared with OpenBLAS (its OpenMP build).
#pragma once

#include <cstddef>

namespace lab {

int num_threads();            // threads an OpenMP parallel region uses
void set_num_threads(int n);  // also applies to BLAS (same OpenMP pool)
// memset to zero and memcpy, split over the threads for a few MiB and more.
void parallel_memset_zero(void* dst, size_t bytes);
void parallel_memcpy(void* dst, const void* src, size_t bytes);

}  // namespace lab
