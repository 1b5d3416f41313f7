// CUDA kernels of common/ops/classifier.h (being written).
