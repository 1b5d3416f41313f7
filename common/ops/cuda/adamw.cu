// CUDA kernels of common/ops/adamw.h (being written).
