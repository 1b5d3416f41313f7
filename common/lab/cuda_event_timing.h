// CUDA-event timing of one call (the CUDA half of device_timing.h; compiled only with LAB_WITH_CUDA).
#pragma once

#include <memory>

#include "common/bench/timer.h"

namespace lab::kernel_lab {

std::unique_ptr<bench::TimingBackend> make_cuda_event_timing(int device, bool flush_l2);

}  // namespace lab::kernel_lab
