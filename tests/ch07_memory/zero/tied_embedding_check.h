// The check the tied embedding's chunked gradient runs on each device (test_tied_embedding_gradient*.cpp): the
// LM head and the lookup of zero/tied_embedding_gradient.h, over 3 simulated ranks whose chunks are reassembled
// in one process, against ag::linear and ag::embedding on the same inputs.
#pragma once

#include "common/core/device.h"

namespace lab::ch07::testing {

struct TiedGradientErrors {
  double head_wte = 0, head_x = 0;        // the LM head's gradients of wte and of its input
  double lookup_wte = 0, lookup_wpe = 0;  // the lookup's of wte and wpe
  int chunks = 0;                         // chunks reduced by both functions together
};

// Largest absolute differences from the plain functions, on `device`, for a vocabulary of 100 rows (not a
// multiple of the 3 ranks: the last rank's block ends in padding) in chunks of `chunk_rows` rows per rank.
TiedGradientErrors tied_gradient_errors(Device device, int64_t chunk_rows);

}  // namespace lab::ch07::testing
