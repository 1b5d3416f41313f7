// CPU reference of common/ops/adamw.h (being written).
