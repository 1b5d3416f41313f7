// How a backward op writes the gradient of an input: ops::GradWrite.
//
// Backward ops add (+=) into an input's gradient, so that an input read twice receives both contributions. The
// first contribution need not: written over a buffer that nothing has written yet, it saves the zero-fill before
// and the read of those zeros in the op (for a 16-bit [N, C] gradient, 4 bytes an element). The autograd layer
// knows which contribution comes first (ag::gradient_target in common/autograd/function_support.h).
#pragma once

namespace lab::ops {

enum class GradWrite {
  Add,        // gradient += contribution: the buffer holds earlier contributions (or zeros)
  Overwrite,  // gradient = contribution: every element is written, none is read
};

}  // namespace lab::ops
