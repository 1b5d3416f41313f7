// CPU reference of common/ops/gelu.h (being written).
