// cuBLAS and cuBLASLt are opened by the first call that needs them (common/cuda/cublas_library.cpp), so a
// program that does no GEMM does not pay the 0.45 s of loading them. Needs no GPU: the calls below are answered
// by the libraries on the host.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>

namespace {

// Whether a shared object whose file name contains `name` is mapped into this process.
bool mapped(const std::string& name) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find(name) != std::string::npos) return true;
  }
  return false;
}

TEST(CublasLibrary, IsOpenedByTheFirstCallAndForwardsToIt) {
  ASSERT_FALSE(mapped("libcublas.so")) << "cuBLAS was loaded before any call";
  ASSERT_FALSE(mapped("libcublasLt.so")) << "cuBLASLt was loaded before any call";

  EXPECT_STREQ(cublasGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED), "CUBLAS_STATUS_NOT_SUPPORTED");
  EXPECT_TRUE(mapped("libcublas.so"));

  cublasLtMatmulPreference_t preference = nullptr;
  ASSERT_EQ(cublasLtMatmulPreferenceCreate(&preference), CUBLAS_STATUS_SUCCESS);
  const uint64_t bytes = 1 << 20;
  EXPECT_EQ(
      cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes, sizeof(bytes)),
      CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmulPreferenceDestroy(preference), CUBLAS_STATUS_SUCCESS);
  EXPECT_TRUE(mapped("libcublasLt.so"));
}

}  // namespace
