// CUDA kernels of common/ops/reduce.h (being written).
