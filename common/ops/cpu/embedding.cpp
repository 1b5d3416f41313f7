// CPU reference of common/ops/embedding.h (being written).
