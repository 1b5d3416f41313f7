// How a backward op writes the gradient of an input: ops::GradWrite.
//
// Backward ops add (+=) into an input's gradient, so that an input read twice receives both contributions. The
// first contribution need not: written over a buffer that nothing has written yet, it saves the zero-fill before
// and the read of those zeros in the op (for a 16-bit [N, C] gradient, 4 bytes an element). The autograd layer
// knows which contribution comes first (ag::gradient_target in common/autograd/function_support.h).
#pragma once

#include <initializer_list>

#include "common/core/tensor.h"

namespace lab::ops {

enum class GradWrite {
  Add,        // gradient += contribution: the buffer holds earlier contributions (or zeros)
  Overwrite,  // gradient = contribution: every element is written, none is read
};

// For a backward op over no rows: its parameters' gradients are sums over nothing, so an Overwrite owes them their
// zeros, which the backends (returning before any launch when there are no rows) would not write. A dispatcher calls
// it with the gradients it was given (undefined ones are skipped).
inline void zero_when_no_rows(bool no_rows, GradWrite write, std::initializer_list<const Tensor*> gradients) {
  if (!no_rows || write != GradWrite::Overwrite) return;
  for (const Tensor* gradient : gradients)
    if (gradient->defined()) gradient->zero_();
}

}  // namespace lab::ops
