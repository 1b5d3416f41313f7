// The shape checks every version of the matmul lab shares (matmul_versions.h).
#include "ch06_single_gpu/kernels/01_matmul/matmul_versions.h"

namespace lab::ch06::matmul {

Dims check_dims(const Tensor& c, const Tensor& a, const Tensor& b, DType input_dtype, const char* version) {
  a.check_ndim(2, version);
  b.check_ndim(2, version);
  c.check_ndim(2, version);
  a.check_dtype(input_dtype, version);
  b.check_dtype(input_dtype, version);
  c.check_dtype(DType::F32, version);
  const Dims d{a.dim(0), b.dim(1), a.dim(1)};
  LAB_CHECK(b.dim(0) == d.K && c.dim(0) == d.M && c.dim(1) == d.N, InvalidArgument, version, ": c ",
            shape_str(c.shape()), " = a ", shape_str(a.shape()), " @ b ", shape_str(b.shape()),
            ": the shapes do not agree (c[M,N] = a[M,K] @ b[K,N])");
  return d;
}

}  // namespace lab::ch06::matmul
