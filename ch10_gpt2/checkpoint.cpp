// Writing and reading training checkpoints (see checkpoint.h).
#include "ch10_gpt2/checkpoint.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <optional>

#include "ch08_distributed/tp/whole_tensors.h"
#include "common/io/files.h"
#include "common/io/safetensors.h"
#include "common/nn/gpt2_weights.h"

namespace lab {

namespace {

constexpr const char* kFormat = "gpt2-labs-checkpoint";
constexpr int kVersion = 1;

// The optimizer state's format versions (see checkpoint.h): the metadata key "moments" marks version 2.
constexpr const char* kMomentsPerParameter = "per-parameter";

// The whole model's tensors of `flat` (the parameters, or a moment laid out like them) on the rank that writes:
// the model's own views when it is whole (one process, or data-parallel replicas, whose rank 0 writes), or
// else gathered to world rank 0 from the shards of the run's tensor- or pipeline-parallel layout. Empty on the
// other ranks.
std::vector<NamedTensor> whole_tensors(const GPT2& model, const Tensor& flat, const comm::ParallelContext* context) {
  if (!model.shard().whole(model.config())) {
    LAB_CHECK(context, InvalidArgument, "save_checkpoint: the model is a shard (", model.shard().str(model.config()),
              "); pass the run's parallel context so that the ranks gather it");
    return ch08::tp::gather_whole_tensors(model, flat, *context);
  }
  std::vector<NamedTensor> out;
  if (context && context->world().rank() != 0) return out;
  for (const ParamInfo& p : model.parameters().infos()) out.push_back({p.name, flat.view(p.offset, p.shape)});
  return out;
}

// Version 1: the whole model's two flat buffers, laid out decay-first in the model's declaration order.
void load_flat_optimizer_state(const SafetensorsReader& file, const GPT2& model, const AdamW& optimizer) {
  const ParameterStore& params = model.parameters();
  int64_t numel = 0;
  const std::vector<ParamInfo> v1 = lay_out(params.infos(), ParameterOrder::DecayFirst, numel);
  int64_t decay_numel = 0;
  for (const ParamInfo& p : v1)
    if (p.decay) decay_numel = std::max(decay_numel, (p.offset + p.numel() + 31) / 32 * 32);
  LAB_CHECK(file.metadata_value("flat_numel") == std::to_string(numel) &&
                file.metadata_value("decay_numel") == std::to_string(decay_numel),
            Format, file.path(), ": optimizer state was written for a different parameter layout");
  const Tensor m = file.load("adamw.m"), v = file.load("adamw.v");
  LAB_CHECK(m.numel() == numel && v.numel() == numel && m.dtype() == DType::F32 && v.dtype() == DType::F32, Format,
            file.path(), ": adamw.m and adamw.v must be f32 buffers of ", numel, " elements");
  for (const ParamInfo& p : v1) {
    optimizer.m(p.name).copy_from(m.view(p.offset, p.shape));
    optimizer.v(p.name).copy_from(v.view(p.offset, p.shape));
  }
}

std::string hex64(uint64_t v) {
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

uint64_t parse_hex64(const std::string& s, const std::string& file) {
  LAB_CHECK(s.size() == 16 && s.find_first_not_of("0123456789abcdef") == std::string::npos, Format, file,
            ": malformed RNG word '", s, "'");
  return std::stoull(s, nullptr, 16);
}

}  // namespace

std::vector<std::string> prepare_checkpoint_destination(const std::string& dir) {
  return AtomicDirectory::prepare(dir, kCheckpointKind);
}

void save_checkpoint(const std::string& dir, const GPT2& model, const AdamW& optimizer, const TrainState& state,
                     const comm::ParallelContext* context) {
  const bool writer = !context || context->world().rank() == 0;
  std::optional<AtomicDirectory> out;
  if (writer) out.emplace(dir, kCheckpointKind);
  const GPT2Config& config = model.config();
  {  // the weights are written, and let go, before the moments are gathered
    const std::vector<NamedTensor> weights = whole_tensors(model, model.parameters().params(), context);
    if (writer) write_gpt2_weights(config, weights, out->path_of("model.safetensors"));
  }
  std::vector<NamedTensor> moments;
  for (const auto& [prefix, flat] : {std::pair{"m.", optimizer.m()}, std::pair{"v.", optimizer.v()}})
    for (const NamedTensor& t : whole_tensors(model, flat, context))
      moments.push_back({prefix + t.name, to_stored_layout(config, t.name, t.tensor, StoredLayout::Model)});
  if (!writer) return;
  write_safetensors(out->path_of("optimizer.safetensors"), moments,
                    {{"steps_taken", std::to_string(optimizer.steps_taken())}, {"moments", kMomentsPerParameter}});
  Json j = Json::object();
  j.set("format", kFormat);
  j.set("version", kVersion);
  j.set("step", state.step);
  j.set("loader_position", state.loader_position);
  Json rng = Json::array();
  for (uint64_t w : state.rng) rng.push_back(hex64(w));
  j.set("rng", rng);
  j.set("config", state.config.to_json());
  j.set("options", state.options);
  Json layout = Json::object();
  layout.set("world_size", state.parallel.ranks());
  layout.set("dp", state.parallel.dp);
  layout.set("tp", state.parallel.tp);
  layout.set("pp", state.parallel.pp);
  j.set("parallel", layout);
  if (state.loss_scaler) {
    Json scaler = Json::object();
    scaler.set("scale", state.loss_scaler->scale);
    scaler.set("clean_steps", state.loss_scaler->clean_steps);
    scaler.set("skipped_steps", state.loss_scaler->skipped_steps);
    j.set("loss_scaler", scaler);
  }
  out->write_file("state.json", j.dump(2) + "\n");
  out->commit();
}

TrainState read_checkpoint_state(const std::string& dir) {
  LAB_CHECK(!file_exists(dir) || directory_exists(dir), Io, "'", dir,
            "' is a file, not a checkpoint directory (a weights file is read with --init)");
  LAB_CHECK(AtomicDirectory::recover(dir, kCheckpointKind), Io, "checkpoint directory '", dir, "' does not exist");
  const std::string path = dir + "/state.json";
  Json j;
  try {
    j = Json::parse(read_file(path));
    LAB_CHECK(j.is_object() && j.contains("format") && j.at("format").as_string() == kFormat, Format,
              "not a checkpoint state file");
    LAB_CHECK(j.at("version").as_int() == kVersion, Format, "unsupported checkpoint version ",
              j.at("version").as_int());
    TrainState s;
    s.step = j.at("step").as_int();
    s.loader_position = j.at("loader_position").as_int();
    LAB_CHECK(s.step >= 0 && s.loader_position >= 0, Format, "negative step or data position");
    const Json::Array& rng = j.at("rng").as_array();
    LAB_CHECK(rng.size() == 4, Format, "rng must hold 4 words");
    for (size_t i = 0; i < 4; ++i) s.rng[i] = parse_hex64(rng[i].as_string(), path);
    s.config = GPT2Config::from_json(j.at("config"));
    s.options = j.at("options");
    const Json& layout = j.at("parallel");
    s.parallel = {static_cast<int>(layout.at("dp").as_int()), static_cast<int>(layout.at("tp").as_int()),
                  static_cast<int>(layout.at("pp").as_int())};
    LAB_CHECK(s.parallel.dp >= 1 && s.parallel.tp >= 1 && s.parallel.pp >= 1 &&
                  layout.at("world_size").as_int() == s.parallel.ranks(),
              Format, "the parallel layout ", layout.dump(), " is not dp x tp x pp = world_size");
    if (const Json* scaler = j.find("loss_scaler")) {  // absent without loss scaling and in older checkpoints
      s.loss_scaler = LossScalerState{scaler->at("scale").as_number(), scaler->at("clean_steps").as_int(),
                                      scaler->at("skipped_steps").as_int()};
      LAB_CHECK(std::isfinite(s.loss_scaler->scale) && s.loss_scaler->scale > 0 && s.loss_scaler->clean_steps >= 0 &&
                    s.loss_scaler->skipped_steps >= 0,
                Format, "bad loss_scaler ", scaler->dump());
    }
    return s;
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Format && e.kind() != ErrorKind::InvalidArgument) throw;
    fail(ErrorKind::Format, path, ": ", e.what());
  }
}

void load_checkpoint(const std::string& dir, GPT2& model, AdamW& optimizer) {
  load_gpt2_weights(model, dir + "/model.safetensors");
  const SafetensorsReader opt(dir + "/optimizer.safetensors");
  if (opt.metadata().count("moments") != 0 && opt.metadata_value("moments") == kMomentsPerParameter) {
    load_gpt2_tensors(opt, model, optimizer.m(), "m.", StoredLayout::Model);
    load_gpt2_tensors(opt, model, optimizer.v(), "v.", StoredLayout::Model);
  } else {
    LAB_CHECK(model.shard().whole(model.config()), Unsupported, opt.path(),
              ": optimizer state of format version 1 (flat buffers) resumes in one process only");
    load_flat_optimizer_state(opt, model, optimizer);
  }
  optimizer.set_steps_taken(std::stoll(opt.metadata_value("steps_taken")));
}

}  // namespace lab
