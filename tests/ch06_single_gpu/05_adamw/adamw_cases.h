// What the AdamW lab's CPU and GPU tests share: the layouts and problems the lab is validated on, and checks of
// ch06::flat_adamw_bf16 that hold on either device.
#pragma once

#include <string>
#include <vector>

#include "ch06_single_gpu/kernels/05_adamw/adamw_lab.h"
#include "common/core/device.h"
#include "common/nn/parameters.h"

namespace lab::test {

// A parameter layout, allocated on the CPU (only its layout is used).
struct NamedLayout {
  std::string name;
  ParameterStore store;
};

// GPT-2 "tiny" (its 26 tensors, the padded embedding among them), and an odd one: tensors of 1, 3, 31, 33 and
// 4097 elements and 2-D weights of odd shapes, decayed and not, so that no tensor ends on a multiple of 4; laid
// out in backward order (the decayed ranges alternate with the rest) and with the decayed tensors first.
std::vector<NamedLayout> adamw_layouts();

// The lab's problems: fp32, bf16 with f32 and with bf16 gradients, each at GPT-2's hyperparameters (step 10) and
// at ones that make every term large (lr 1e-2, weight decay 0.5, step 1, where the bias corrections are largest).
struct NamedProblem {
  std::string name;
  ch06::AdamWProblem problem;
};
std::vector<NamedProblem> adamw_problems();

// ch06::flat_adamw on `device` against the core's CPU op (ops::cpu::adamw_update) with no decay range, one over
// everything, and a hundred ranges with odd bounds and with bounds on multiples of 4 (more than one launch's
// table of ranges).
void expect_decay_ranges_match_the_core(Device device);

// bf16 parameters without master weights, a constant gradient, updates of lr = 1e-4 per step at weights of 1.0
// (a bf16 step there is 2^-8): rounded to nearest, every step rounds back and the weights never move; rounded
// stochastically, their mean follows the fp32 weights (flat_adamw on the same problem).
void expect_tiny_updates_survive_stochastic_rounding(Device device);

// The same step with the same seed gives the same bf16 bits; another seed gives other bits.
void expect_stochastic_rounding_repeatable(Device device);

}  // namespace lab::test
