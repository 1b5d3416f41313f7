// GEMM
