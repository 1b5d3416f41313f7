#include "ch09_advanced/attention_choice.h"

#include "common/autograd/functions.h"
#include "common/core/error.h"

namespace lab::ch09 {

std::vector<std::string> attention_names() {
  return {"materialized", "flash"};
}

Attention parse_attention(const std::string& name) {
  if (name == "materialized") return Attention::Materialized;
  if (name == "flash") return Attention::Flash;
  fail(ErrorKind::InvalidArgument, "attention '", name, "' is not one of materialized|flash");
}

const char* attention_name(Attention attention) {
  return attention == Attention::Flash ? "flash" : "materialized";
}

void use_attention(ModelOptions& options, Attention attention, DType storage) {
  LAB_CHECK(storage == DType::F32 || storage == DType::BF16 || storage == DType::F16, InvalidArgument,
            "--attention: storage ", dtype_name(storage), " is not f32, bf16 or f16");
  if (attention == Attention::Flash)
    options.attention = [storage](Tape& tape, const Var& qkv, int n_head) {
      return ag::flash_attention(tape, qkv, n_head, storage);
    };
}

std::string flash_note(Attention attention, Device device, DType storage) {
  if (attention != Attention::Flash || !device.is_cuda() || storage != DType::F32) return "";
  return "--attention flash: fp32 on a GPU runs the materialised kernels inside the op (flash attention's "
         "tensor-core kernels take bf16 or fp16: --dtype bf16); the probabilities live for the call only";
}

}  // namespace lab::ch09
