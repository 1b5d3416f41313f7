// CUDA kernels of common/ops/embedding.h (being written).
