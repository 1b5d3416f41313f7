// CPU reference of common/ops/attention.h (being written).
