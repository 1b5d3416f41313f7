#include "ch10_gpt2/checkpoint.h"

#include <cinttypes>
#include <cstdio>

#include "common/io/files.h"
#include "common/io/safetensors.h"
#include "common/nn/gpt2_weights.h"

namespace lab {

namespace {

constexpr const char* kFormat = "gpt2-labs-checkpoint";
constexpr int kVersion = 1;

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

void save_checkpoint(const std::string& dir, const GPT2& model, const AdamW& optimizer, const TrainState& state) {
  AtomicDirectory out(dir, kCheckpointKind);
  save_gpt2_weights(model, out.path_of("model.safetensors"));
  const ParameterStore& params = model.parameters();
  write_safetensors(out.path_of("optimizer.safetensors"), {{"adamw.m", optimizer.m()}, {"adamw.v", optimizer.v()}},
                    {{"steps_taken", std::to_string(optimizer.steps_taken())},
                     {"flat_numel", std::to_string(params.numel())},
                     {"decay_numel", std::to_string(params.decay_numel())}});
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
  layout.set("world_size", 1);
  layout.set("dp", 1);
  layout.set("tp", 1);
  layout.set("pp", 1);
  j.set("parallel", layout);
  out.write_file("state.json", j.dump(2) + "\n");
  out.commit();
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
    LAB_CHECK(j.at("parallel").at("world_size").as_int() == 1, Unsupported,
              "checkpoint was written by a parallel run; this trainer resumes single-process runs");
    return s;
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Format && e.kind() != ErrorKind::InvalidArgument) throw;
    fail(ErrorKind::Format, path, ": ", e.what());
  }
}

void load_checkpoint(const std::string& dir, GPT2& model, AdamW& optimizer) {
  load_gpt2_weights(model, dir + "/model.safetensors");
  const SafetensorsReader opt(dir + "/optimizer.safetensors");
  const ParameterStore& params = model.parameters();
  LAB_CHECK(opt.metadata_value("flat_numel") == std::to_string(params.numel()) &&
                opt.metadata_value("decay_numel") == std::to_string(params.decay_numel()),
            Format, opt.path(), ": optimizer state was written for a different parameter layout");
  opt.load_into("adamw.m", optimizer.m());
  opt.load_into("adamw.v", optimizer.v());
  optimizer.set_steps_taken(std::stoll(opt.metadata_value("steps_taken")));
}

}  // namespace lab
