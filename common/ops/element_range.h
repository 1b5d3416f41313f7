// A range of elements of a flat buffer, [begin, end): how the parameter store names the parameters that get
// weight decay (common/nn/parameters.h), and how the AdamW op receives them (common/ops/adamw.h).
#pragma once

#include <cstdint>

namespace lab {

struct ElementRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
  bool operator==(const ElementRange&) const = default;
};

}  // namespace lab
