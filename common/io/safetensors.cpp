// Safetensors reader and writer (format and guarantees in safetensors.h).
#include "common/io/safetensors.h"

#include <algorithm>
#include <bit>
#include <set>

#include "common/util/json.h"

namespace lab {

// Tensor bytes go between memory and file unchanged, which is only right on a little-endian host.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

constexpr int64_t kHeaderLengthBytes = 8;
// The reference implementation refuses headers above 100 MB; a larger length is a corrupt file, and
// refusing it early avoids allocating whatever a damaged length field says.
constexpr int64_t kMaxHeaderBytes = 100'000'000;
constexpr const char* kMetadataKey = "__metadata__";

struct DTypeName {
  const char* name;
  int64_t bytes;
  std::optional<DType> dtype;
};

// Every dtype the format defines, with its element size; the ones this project computes with map to a DType.
constexpr DTypeName kDTypeNames[] = {
    {"F32", 4, DType::F32},    {"BF16", 2, DType::BF16},     {"F16", 2, DType::F16},       {"I32", 4, DType::I32},
    {"U16", 2, DType::U16},    {"F64", 8, std::nullopt},     {"I64", 8, std::nullopt},     {"U64", 8, std::nullopt},
    {"U32", 4, std::nullopt},  {"I16", 2, std::nullopt},     {"I8", 1, std::nullopt},      {"U8", 1, std::nullopt},
    {"BOOL", 1, std::nullopt}, {"F8_E4M3", 1, std::nullopt}, {"F8_E5M2", 1, std::nullopt},
};

const DTypeName* find_dtype_name(const std::string& name) {
  for (const DTypeName& d : kDTypeNames)
    if (name == d.name) return &d;
  return nullptr;
}

bool is_floating(DType t) {
  return t == DType::F32 || t == DType::BF16 || t == DType::F16;
}

// Bytes of a tensor of `shape` with `element_bytes` per element, or nullopt when that overflows int64.
std::optional<int64_t> checked_nbytes(const Shape& shape, int64_t element_bytes) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  int64_t bytes = element_bytes;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(bytes, d, &bytes)) return std::nullopt;
  return bytes;
}

uint64_t read_le_u64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string le_u64_bytes(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xffu);
  return out;
}

}  // namespace

const char* safetensors_dtype_name(DType dtype) {
  for (const DTypeName& d : kDTypeNames)
    if (d.dtype == dtype) return d.name;
  fail(ErrorKind::Internal, "no safetensors name for dtype ", dtype_name(dtype));
}

std::optional<DType> dtype_from_safetensors(const std::string& name) {
  const DTypeName* d = find_dtype_name(name);
  LAB_CHECK(d != nullptr, Format, "unknown safetensors dtype '", name, "'");
  return d->dtype;
}

// ---------------------------------------------------------------- reader

SafetensorsReader::SafetensorsReader(const std::string& path) : file_(path) {
  const int64_t size = file_.size();
  LAB_CHECK(size >= kHeaderLengthBytes, Format, path, ": file of ", size,
            " bytes is too short for the 8-byte header length of a safetensors file");
  unsigned char length_bytes[kHeaderLengthBytes];
  file_.read_at(0, length_bytes, sizeof length_bytes);
  const uint64_t header_bytes = read_le_u64(length_bytes);
  LAB_CHECK(header_bytes <= static_cast<uint64_t>(size - kHeaderLengthBytes), Format, path, ": header length ",
            header_bytes, " exceeds the ", size - kHeaderLengthBytes,
            " bytes that follow it (truncated or not a safetensors file)");
  LAB_CHECK(header_bytes <= static_cast<uint64_t>(kMaxHeaderBytes), Format, path, ": header length ", header_bytes,
            " is larger than the format allows (", kMaxHeaderBytes, ")");
  std::string header(header_bytes, '\0');
  file_.read_at(kHeaderLengthBytes, header.data(), header.size());
  data_start_ = kHeaderLengthBytes + static_cast<int64_t>(header_bytes);
  parse_header(header, size - data_start_);
}

void SafetensorsReader::parse_header(const std::string& header, int64_t data_bytes) {
  const std::string& file = path();
  Json root;
  try {
    root = Json::parse(header);
  } catch (const Error& e) {
    fail(ErrorKind::Format, file, ": header is not valid JSON: ", e.what());
  }
  LAB_CHECK(root.is_object(), Format, file, ": header is not a JSON object");

  for (const auto& [name, value] : root.as_object()) {
    if (name == kMetadataKey) {
      LAB_CHECK(value.is_object(), Format, file, ": __metadata__ is not an object");
      for (const auto& [key, v] : value.as_object()) {
        LAB_CHECK(v.is_string(), Format, file, ": __metadata__ value of '", key, "' is not a string");
        LAB_CHECK(metadata_.emplace(key, v.as_string()).second, Format, file, ": __metadata__ key '", key,
                  "' appears twice");
      }
      continue;
    }
    const std::string where = cat(file, ": tensor '", name, "'");
    LAB_CHECK(index_.count(name) == 0, Format, where, " appears twice in the header");
    LAB_CHECK(value.is_object(), Format, where, ": entry is not an object");
    SafetensorsEntry entry;
    entry.name = name;
    int64_t element_bytes = 0;
    try {  // any type error of the JSON accessors is rethrown with the file and tensor in front
      entry.dtype_name = value.at("dtype").as_string();
      const DTypeName* d = find_dtype_name(entry.dtype_name);
      LAB_CHECK(d != nullptr, Format, "unknown dtype '", entry.dtype_name, "'");
      element_bytes = d->bytes;
      for (const Json& dim : value.at("shape").as_array()) {
        entry.shape.push_back(dim.as_int());
        LAB_CHECK(entry.shape.back() >= 0, Format, "negative dimension in shape");
      }
      const Json::Array& offsets = value.at("data_offsets").as_array();
      LAB_CHECK(offsets.size() == 2, Format, "data_offsets must be [begin, end]");
      entry.begin = offsets[0].as_int();
      entry.end = offsets[1].as_int();
    } catch (const Error& e) {
      fail(ErrorKind::Format, where, ": ", e.what());
    }
    LAB_CHECK(0 <= entry.begin && entry.begin <= entry.end, Format, where, ": data_offsets [", entry.begin, ", ",
              entry.end, "] are not an ordered range");
    const std::optional<int64_t> needed = checked_nbytes(entry.shape, element_bytes);
    LAB_CHECK(needed && *needed == entry.end - entry.begin, Format, where, ": shape ", shape_str(entry.shape), " of ",
              entry.dtype_name, " needs ", needed ? std::to_string(*needed) : std::string("more than 2^63"),
              " bytes but data_offsets [", entry.begin, ", ", entry.end, "] hold ", entry.end - entry.begin);
    LAB_CHECK(entry.end <= data_bytes, Format, where, ": data_offsets [", entry.begin, ", ", entry.end,
              "] run past the end of the data block (", data_bytes, " bytes; truncated file?)");
    index_.emplace(name, entries_.size());
    entries_.push_back(std::move(entry));
  }

  // Overlaps: after sorting by start, each range must begin at or after the end of the one before it.
  std::vector<const SafetensorsEntry*> by_offset;
  for (const SafetensorsEntry& e : entries_) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const SafetensorsEntry* a, const SafetensorsEntry* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const SafetensorsEntry& prev = *by_offset[i - 1];
    const SafetensorsEntry& cur = *by_offset[i];
    LAB_CHECK(cur.begin >= prev.end, Format, file, ": tensor '", cur.name, "' (bytes [", cur.begin, ", ", cur.end,
              ")) overlaps tensor '", prev.name, "' (bytes [", prev.begin, ", ", prev.end, "))");
  }
}

std::vector<std::string> SafetensorsReader::names() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const SafetensorsEntry& e : entries_) out.push_back(e.name);
  return out;
}

const SafetensorsEntry& SafetensorsReader::entry(const std::string& name) const {
  const auto it = index_.find(name);
  LAB_CHECK(it != index_.end(), Format, path(), ": no tensor named '", name, "'");
  return entries_[it->second];
}

DType SafetensorsReader::dtype(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  const std::optional<DType> d = dtype_from_safetensors(e.dtype_name);
  LAB_CHECK(d.has_value(), Unsupported, path(), ": tensor '", name, "' has dtype ", e.dtype_name,
            ", which this project does not compute with");
  return *d;
}

Tensor SafetensorsReader::load(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  Tensor t = Tensor::empty(e.shape, dtype(name));
  file_.read_at(data_start_ + e.begin, t.raw(), t.nbytes());
  return t;
}

void SafetensorsReader::load_into(const std::string& name, const Tensor& dst) const {
  dst.check_defined("safetensors load_into destination");
  const SafetensorsEntry& e = entry(name);
  const DType stored = dtype(name);
  LAB_CHECK(e.shape == dst.shape(), Format, path(), ": tensor '", name, "' has shape ", shape_str(e.shape),
            ", expected ", shape_str(dst.shape()));
  LAB_CHECK(stored == dst.dtype() || (is_floating(stored) && is_floating(dst.dtype())), Format, path(), ": tensor '",
            name, "' has dtype ", dtype_name(stored), ", expected ", dtype_name(dst.dtype()));
  if (stored == dst.dtype() && dst.is_cpu()) {
    file_.read_at(data_start_ + e.begin, dst.raw(), dst.nbytes());
    return;
  }
  // Through a host tensor: a dtype conversion (host only) and/or a copy to the device.
  Tensor host = load(name);
  if (stored != dst.dtype()) host = host.to_dtype(dst.dtype());
  dst.copy_from(host);
}

const std::string& SafetensorsReader::metadata_value(const std::string& key) const {
  const auto it = metadata_.find(key);
  LAB_CHECK(it != metadata_.end(), Format, path(), ": no metadata key '", key, "'");
  return it->second;
}

// ---------------------------------------------------------------- writer

void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  // The header is assembled by hand rather than through Json::dump so that offsets and shapes are always
  // written as plain integers (a double printer may choose "1e+06"), which strict readers require.
  // Json is still used to quote names, keys and values with correct escapes.
  std::string header = "{";
  if (!metadata.empty()) {
    header += Json(kMetadataKey).dump();
    header += ":{";
    for (const auto& [key, value] : metadata) {
      if (header.back() != '{') header += ',';
      header += Json(key).dump();
      header += ':';
      header += Json(value).dump();
    }
    header += '}';
  }
  std::set<std::string> seen;
  int64_t offset = 0;
  for (const NamedTensor& nt : tensors) {
    LAB_CHECK(!nt.name.empty() && nt.name != kMetadataKey, InvalidArgument, path, ": invalid tensor name '", nt.name,
              "'");
    LAB_CHECK(seen.insert(nt.name).second, InvalidArgument, path, ": tensor name '", nt.name, "' given twice");
    nt.tensor.check_defined(nt.name.c_str());
    const int64_t end = offset + static_cast<int64_t>(nt.tensor.nbytes());
    if (header.size() > 1) header += ',';
    header += Json(nt.name).dump();
    header += cat(":{\"dtype\":\"", safetensors_dtype_name(nt.tensor.dtype()), "\",\"shape\":[");
    for (size_t i = 0; i < nt.tensor.shape().size(); ++i) header += cat(i ? "," : "", nt.tensor.shape()[i]);
    header += cat("],\"data_offsets\":[", offset, ",", end, "]}");
    offset = end;
  }
  header += '}';
  // Spaces after the JSON are valid whitespace; they make the data block start 8-byte aligned.
  while ((kHeaderLengthBytes + static_cast<int64_t>(header.size())) % 8 != 0) header += ' ';

  AtomicOutputFile out(path);
  out.write(le_u64_bytes(header.size()));
  out.write(header);
  for (const NamedTensor& nt : tensors) {
    // One tensor at a time, so a device tensor costs host memory for itself only.
    const Tensor host = nt.tensor.is_cpu() ? nt.tensor : nt.tensor.to(Device::cpu());
    out.write(host.raw(), host.nbytes());
  }
  out.commit();
}

}  // namespace lab
