#include "common/ops/loss_scale.h"

#include "common/ops/dispatch.h"

namespace lab::ops {

void update_loss_scale(const Tensor& norm_and_scale, const Tensor& scaler, double growth_factor, double backoff_factor,
                       int64_t growth_interval) {
  norm_and_scale.check_dtype(DType::F32, "update_loss_scale norm and scale");
  scaler.check_dtype(DType::F32, "update_loss_scale scaler");
  LAB_CHECK(norm_and_scale.numel() >= 2, InvalidArgument, "update_loss_scale: the norm and scale hold ",
            norm_and_scale.numel(), " elements, not 2");
  LAB_CHECK(scaler.numel() >= kLossScaleSlots, InvalidArgument, "update_loss_scale: the scaler's state holds ",
            scaler.numel(), " elements, not ", int64_t{kLossScaleSlots});
  LAB_CHECK(growth_factor > 1 && backoff_factor > 0 && backoff_factor < 1, InvalidArgument,
            "update_loss_scale: growth_factor ", growth_factor, " must be > 1 and backoff_factor ", backoff_factor,
            " in (0, 1)");
  LAB_CHECK(growth_interval >= 1 && growth_interval <= kMaxGrowthInterval, InvalidArgument,
            "update_loss_scale: growth_interval ", growth_interval, " outside [1, 2^24]");
  check_same_device({&norm_and_scale, &scaler}, "update_loss_scale");
  LAB_DISPATCH(scaler.device(), update_loss_scale, norm_and_scale, scaler, growth_factor, backoff_factor,
               growth_interval);
}

}  // namespace lab::ops
