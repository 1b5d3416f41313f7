// CPU reference of common/ops/linear.h (being written).
