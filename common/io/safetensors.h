// Safetensors: the tensor file format of the Hugging Face ecosystem, used here for model weights and
// checkpoints.
//
// Layout of a file:
//   8 bytes      N, the header length, little-endian uint64
//   N bytes      a JSON object: {"<name>": {"dtype": "F32", "shape": [768, 2304], "data_offsets": [b, e]},
//                                 ..., "__metadata__": {"<key>": "<value>", ...}}
//   the rest     the data block; tensor <name> occupies bytes [b, e) of it, row-major, little-endian
//
// The reader validates everything before anything is loaded: the header length against the file size,
// the JSON, each dtype, each shape against its byte range, every range inside the data block, and no two
// ranges overlapping. A violation is Error(Format) naming the file and the tensor. Tensors are then read
// one at a time with positioned reads, so loading one tensor of a large file reads only that tensor.
//
// The writer pads the header with spaces so that the data block starts at a multiple of 8 bytes (as the
// format recommends) and lays the tensors out back to back, which is what other readers require.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/core/tensor.h"
#include "common/io/files.h"

namespace lab {

// The dtype names the format uses ("F32", "BF16", "F16", "I32", "U16") for the dtypes this project has.
const char* safetensors_dtype_name(DType dtype);
// The project's DType for a safetensors dtype name; nullopt for a valid safetensors dtype this project
// does not compute with (F64, I64, U8, BOOL, ...). Error(Format) for a name the format does not define.
std::optional<DType> dtype_from_safetensors(const std::string& name);

// One tensor as described by the header.
struct SafetensorsEntry {
  std::string name;
  std::string dtype_name;  // as written in the file
  Shape shape;
  int64_t begin = 0;  // byte range [begin, end) relative to the start of the data block
  int64_t end = 0;
};

class SafetensorsReader {
 public:
  // Opens and validates the whole header; Error(Io) when the file cannot be read, Error(Format) when
  // its contents are wrong.
  explicit SafetensorsReader(const std::string& path);

  const std::string& path() const { return file_.path(); }
  // Tensor names in the order of the header.
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const { return index_.count(name) > 0; }
  // Error(Format) naming the file and the tensor when there is no such tensor.
  const SafetensorsEntry& entry(const std::string& name) const;
  const Shape& shape(const std::string& name) const { return entry(name).shape; }
  // Error(Unsupported) for a dtype this project has no DType for.
  DType dtype(const std::string& name) const;

  // The tensor as a new CPU tensor of its stored dtype.
  Tensor load(const std::string& name) const;
  // Reads the tensor into `dst` (any device). The shapes must match exactly (Error(Format) naming the
  // tensor, the expected and the found shape). The dtypes must match too, except that the floating
  // dtypes f32 / bf16 / f16 convert into each other (so bf16 weights load into an f32 model).
  void load_into(const std::string& name, const Tensor& dst) const;

  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // The value of one metadata key; Error(Format) naming the file and the key when it is absent.
  const std::string& metadata_value(const std::string& key) const;

 private:
  void parse_header(const std::string& header, int64_t data_bytes);

  InputFile file_;
  int64_t data_start_ = 0;  // file offset of the data block
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, size_t> index_;  // name -> position in entries_
  std::map<std::string, std::string> metadata_;
};

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

// Writes `tensors` (in this order, from any device) and `metadata` to `path` atomically (temporary file +
// fsync + rename). Names must be unique, non-empty and not "__metadata__" (Error(InvalidArgument)).
void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace lab
