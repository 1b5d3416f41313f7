// CUDA kernels of common/ops/linear.h (being written).
