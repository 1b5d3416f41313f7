// CUDA kernels of common/ops/layernorm.h (being written).
