#include "common/cuda/emulation/blas_operands.h"

#include <sstream>

#include "common/cuda/emulation/device.h"
#include "common/cuda/emulation/memory.h"

namespace lab::cuda::emu {

namespace {

bool readable(const void* start, size_t bytes) {
  const std::optional<Allocation> allocation = find_allocation(start);
  return allocation && inside(*allocation, start, bytes);
}

}  // namespace

bool check_operand(int device, const char* call, const char* operand, const void* data, size_t element_bytes,
                   int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t stride) {
  if (rows <= 0 || cols <= 0 || batch <= 0) return true;  // nothing is read
  const size_t extent = static_cast<size_t>((cols - 1) * ld + rows) * element_bytes;
  const auto* base = static_cast<const std::byte*>(data);
  const auto* last = base + (batch - 1) * stride * static_cast<int64_t>(element_bytes);
  if (data != nullptr && readable(base, extent) && readable(last, extent)) return true;
  std::ostringstream out;
  out << call << ": operand " << operand << " (" << data << ", " << rows << " x " << cols << ", ld " << ld;
  if (batch > 1) out << ", " << batch << " matrices " << stride << " elements apart";
  out << ") is not inside device memory or pinned host memory";
  raise_fault(device, cudaErrorIllegalAddress, out.str());
  return false;
}

}  // namespace lab::cuda::emu
