// CPU reference of common/ops/reduce.h (being written).
