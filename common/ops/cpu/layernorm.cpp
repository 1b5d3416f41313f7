// CPU reference of common/ops/layernorm.h (being written).
