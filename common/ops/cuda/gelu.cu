// CUDA kernels of common/ops/gelu.h (being written).
