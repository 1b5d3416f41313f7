// CPU reference of common/ops/residual.h (being written).
