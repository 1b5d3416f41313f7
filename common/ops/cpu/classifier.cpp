// CPU reference of common/ops/classifier.h (being written).
