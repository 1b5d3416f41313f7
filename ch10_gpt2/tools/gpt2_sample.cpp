// gpt2_sample: generates text from a trained GPT-2, streaming each token as it is drawn.
//
//   gpt2_sample --load runs/20261125-031500 --prompt "ROMEO:" --tokens 200
//   gpt2_sample --load gpt2/model.safetensors --prompt "The meaning of life is" --temperature 0.8 --top-k 50
//
// --load takes a checkpoint directory that gpt2_train wrote (--save, or the default run's runs/<date>-<time>)
// or a weights file in Hugging Face's GPT-2 safetensors layout (OpenAI's GPT-2 124M model.safetensors reads as
// is). The prompt is encoded with the bundled GPT-2 vocabulary; without one, generation starts from the
// end-of-text token, as a new document. The same flags and --seed give the same text on the same machine.
//
// Exit status: 0 after the text; 1 with one line on stderr for a bad flag, a missing or corrupt model, or a
// prompt longer than the model's block size.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "ch10_gpt2/checkpoint.h"
#include "ch10_gpt2/sampler.h"
#include "common/core/device.h"
#include "common/core/error.h"
#include "common/core/parallel.h"
#include "common/nn/gpt2.h"
#include "common/nn/gpt2_weights.h"
#include "common/text/tokenizer.h"
#include "common/util/flags.h"
#include "common/util/main.h"
#include "common/util/rng.h"

namespace {

// The model a --load path holds: a checkpoint directory's weights, or a weights file.
std::unique_ptr<lab::GPT2> load_model(const std::string& path, lab::Device device) {
  namespace fs = std::filesystem;
  LAB_CHECK(fs::exists(path), Io, "--load: '", path,
            "' does not exist (give a checkpoint directory or a .safetensors file)");
  const bool checkpoint = fs::is_directory(path);
  const std::string weights = checkpoint ? (fs::path(path) / "model.safetensors").string() : path;
  const lab::GPT2Config config = checkpoint ? lab::read_checkpoint_state(path).config : lab::read_gpt2_config(weights);
  auto model = std::make_unique<lab::GPT2>(config, device);
  lab::load_gpt2_weights(*model, weights);
  return model;
}

int sample(int argc, char** argv) {
  std::string load, prompt, device_name = "auto";
  int64_t tokens = 200, top_k = 40, seed = 1337, threads = 0;
  double temperature = 1.0;
  lab::Flags flags("gpt2_sample", "Generate text from a trained GPT-2, streaming each token as it is drawn.");
  flags.add_string("load", &load, "a checkpoint directory (gpt2_train --save) or a GPT-2 .safetensors weights file");
  flags.add_string("prompt", &prompt, "the text to continue (empty: start a new document)");
  flags.add_int("tokens", &tokens, "tokens to generate", 1, 1 << 20);
  flags.add_float("temperature", &temperature, "softmax temperature: below 1 sharper, above 1 more varied", 1e-3,
                  100.0);
  flags.add_int("top-k", &top_k, "draw among the k most likely tokens (0: the whole vocabulary)", 0, 1 << 20);
  flags.add_int("seed", &seed, "seed of the draws", 0);
  flags.add_string("device", &device_name, "auto, cpu, cuda or cuda:N");
  flags.add_int("threads", &threads, "CPU threads (0: all cores)", 0, 4096);
  if (!flags.parse(argc, argv)) return 0;
  LAB_CHECK(!load.empty(), InvalidArgument, "--load is required: a checkpoint directory or a .safetensors file");
  if (threads > 0) lab::set_num_threads(static_cast<int>(threads));
  lab::Device device;
  try {
    device = lab::parse_device_or_auto(device_name);
  } catch (const lab::Error& e) {
    throw lab::Error(e.kind(), std::string("--device: ") + e.what());
  }
  LAB_CHECK(!device.is_cuda() || lab::cuda_available(), Unsupported, "--device ", device_name,
            ": no CUDA GPU is available");

  const lab::GPT2Tokenizer tokenizer = lab::GPT2Tokenizer::load_default();
  std::vector<int32_t> context =
      prompt.empty() ? std::vector<int32_t>{lab::GPT2Tokenizer::kEndOfText} : tokenizer.encode(prompt);
  const std::unique_ptr<lab::GPT2> model = load_model(load, device);
  LAB_CHECK(static_cast<int64_t>(context.size()) <= model->config().block_size, InvalidArgument, "--prompt is ",
            context.size(), " tokens, more than the model's block size ", model->config().block_size);

  lab::SampleOptions options;
  options.max_new_tokens = tokens;
  options.temperature = static_cast<float>(temperature);
  options.top_k = static_cast<int>(top_k);
  options.on_token = [&](int32_t id) {
    const std::string text = lab::sampled_text(tokenizer, id);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  };
  std::fputs(prompt.c_str(), stdout);
  lab::Rng rng(static_cast<uint64_t>(seed));
  lab::sample_tokens(*model, context, options, rng);
  std::fputs("\n", stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return lab::run_main(argc, argv, sample);
}
