// CUDA kernels of common/ops/residual.h (being written).
