// CUDA kernels of common/ops/attention.h (being written).
