#include "ch09_advanced/attention_choice.h"

#include "common/autograd/functions.h"
#include "common/core/error.h"

namespace lab::ch09 {

std::vector<std::string> attention_names() {
  return {"materialized", "batched", "flash", "flash-one-pass", "flash-tuned"};
}

Attention parse_attention(const std::string& name) {
  if (name == "materialized") return Attention::Materialized;
  if (name == "batched") return Attention::Batched;
  if (name == "flash") return Attention::Flash;
  if (name == "flash-one-pass") return Attention::FlashOnePass;
  if (name == "flash-tuned") return Attention::FlashTuned;
  fail(ErrorKind::InvalidArgument, "attention '", name,
       "' is not one of materialized|batched|flash|flash-one-pass|flash-tuned");
}

const char* attention_name(Attention attention) {
  switch (attention) {
    case Attention::Batched: return "batched";
    case Attention::Flash: return "flash";
    case Attention::FlashOnePass: return "flash-one-pass";
    case Attention::FlashTuned: return "flash-tuned";
    case Attention::Materialized: break;
  }
  return "materialized";
}

bool is_flash(Attention attention) {
  return attention == Attention::Flash || attention == Attention::FlashOnePass || attention == Attention::FlashTuned;
}

void use_attention(ModelOptions& options, Attention attention, DType storage) {
  LAB_CHECK(storage == DType::F32 || storage == DType::BF16 || storage == DType::F16, InvalidArgument,
            "--attention: storage ", dtype_name(storage), " is not f32, bf16 or f16");
  if (is_flash(attention)) {
    const ops::FlashBackward passes =
        attention == Attention::FlashOnePass ? ops::FlashBackward::OnePass : ops::FlashBackward::TwoPasses;
    const ops::FlashTiles tiles = attention == Attention::FlashTuned ? ops::FlashTiles::Timed : ops::FlashTiles::Rows64;
    options.attention = [storage, passes, tiles](Tape& tape, const Var& qkv, int n_head) {
      return ag::flash_attention(tape, qkv, n_head, storage, passes, tiles);
    };
  }
  if (attention == Attention::Batched && storage != DType::F32)  // in f32 it is the core's attention itself
    options.attention = [storage](Tape& tape, const Var& qkv, int n_head) {
      return ag::batched_attention(tape, qkv, n_head, storage);
    };
}

ch07::AttentionKept attention_kept(Attention attention, DType storage, DType activations) {
  if (is_flash(attention)) return ch07::AttentionKept::LogSumExp;
  if (attention == Attention::Batched && storage != DType::F32) return ch07::AttentionKept::HalfProbabilities;
  return activations == DType::F32 ? ch07::AttentionKept::Probabilities : ch07::AttentionKept::F32Probabilities;
}

std::string attention_note(Attention attention, Device device, DType storage) {
  if (attention == Attention::FlashTuned && !device.is_cuda())
    return "--attention flash-tuned: on the CPU it is flash itself (one set of loops, nothing to time)";
  if (storage != DType::F32) {
    if (attention == Attention::FlashOnePass && device.is_cuda())
      return "--attention flash-one-pass: on a GPU dQ is summed by f32 atomics, whose order varies: the losses of two "
             "runs (and of a resumed run against the uninterrupted one) agree to rounding, not bit for bit";
    return "";
  }
  if (attention == Attention::Batched)
    return "--attention batched: in fp32 it is the materialised attention itself (its 16-bit path needs --dtype "
           "bf16 or fp16)";
  if (is_flash(attention) && device.is_cuda())
    return std::string("--attention ") + attention_name(attention) +
           ": fp32 on a GPU runs the materialised kernels inside the op (flash attention's "
           "tensor-core kernels take bf16 or fp16: --dtype bf16); the probabilities live for the call only";
  return "";
}

}  // namespace lab::ch09
