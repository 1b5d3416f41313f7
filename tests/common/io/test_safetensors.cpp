// Safetensors: round trips of every dtype with metadata, a file laid out by hand as other writers lay it
// out, and one clear Error(Format) for each kind of damaged file.
#include <gtest/gtest.h>

#include <cstring>

#include "common/io/files.h"
#include "common/io/safetensors.h"
#include "tests/common/expect_error.h"

namespace lab {
namespace {

using testing::expect_error;
using testing::scratch_directory;

// A safetensors file from its parts: the little-endian header length, the header text, the data bytes.
std::string safetensors_bytes(const std::string& header, const std::string& data) {
  std::string out;
  for (int i = 0; i < 8; ++i) out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + data;
}

std::string write_bytes(const std::string& name, const std::string& bytes) {
  const std::string path = scratch_directory() + "/" + name;
  write_file_atomic(path, bytes);
  return path;
}

// A file with one F32 tensor "w" of shape [2, 2] (16 bytes of data), whose header is `header`.
std::string write_with_header(const std::string& header) {
  return write_bytes("bad.safetensors", safetensors_bytes(header, std::string(16, '\0')));
}

TEST(Safetensors, RoundTripOfEveryDtypeWithMetadata) {
  const std::string path = scratch_directory() + "/model.safetensors";
  const Tensor f32 = Tensor::from_floats(std::vector<float>{1.5f, -2.25f, 3.f, 1e-7f, 0.f, 65504.f}, {2, 3});
  const Tensor bf16 = f32.to_dtype(DType::BF16);
  const Tensor f16 = f32.to_dtype(DType::F16);
  const Tensor i32 = Tensor::from_ints(std::vector<int32_t>{7, -8, 2147483647}, {3});
  Tensor u16 = Tensor::empty({5}, DType::U16);
  for (uint16_t i = 0; i < 5; ++i) u16.data<uint16_t>()[i] = static_cast<uint16_t>(50256 + i);
  const Tensor scalar = Tensor::from_floats(std::vector<float>{42.f}, {});
  const Tensor empty = Tensor::empty({0, 4}, DType::F32);
  write_safetensors(path,
                    {{"h.0.attn.c_attn.weight", f32},
                     {"bf16", bf16},
                     {"f16", f16},
                     {"i32", i32},
                     {"tokens", u16},
                     {"scalar", scalar},
                     {"empty", empty}},
                    {{"format", "pt"}, {"note", "quotes \" and \\ and\nnewlines survive"}});

  SafetensorsReader reader(path);
  EXPECT_EQ(reader.names(),
            (std::vector<std::string>{"h.0.attn.c_attn.weight", "bf16", "f16", "i32", "tokens", "scalar", "empty"}));
  EXPECT_EQ(reader.metadata_value("format"), "pt");
  EXPECT_EQ(reader.metadata_value("note"), "quotes \" and \\ and\nnewlines survive");
  EXPECT_EQ(reader.metadata().size(), 2u);

  EXPECT_EQ(reader.dtype("h.0.attn.c_attn.weight"), DType::F32);
  EXPECT_EQ(reader.shape("h.0.attn.c_attn.weight"), (Shape{2, 3}));
  EXPECT_EQ(reader.load("h.0.attn.c_attn.weight").to_floats(), f32.to_floats());
  EXPECT_EQ(reader.entry("bf16").dtype_name, "BF16");
  EXPECT_EQ(reader.load("bf16").to_floats(), bf16.to_floats());
  EXPECT_EQ(reader.load("f16").to_floats(), f16.to_floats());
  EXPECT_EQ(reader.load("i32").to_ints(), (std::vector<int32_t>{7, -8, 2147483647}));
  EXPECT_EQ(reader.load("tokens").to_ints(), (std::vector<int32_t>{50256, 50257, 50258, 50259, 50260}));
  EXPECT_EQ(reader.load("scalar").item(), 42.f);
  EXPECT_EQ(reader.load("empty").shape(), (Shape{0, 4}));

  // Layout: the data block starts 8-byte aligned and the tensors are back to back.
  const std::string bytes = read_file(path);
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  EXPECT_EQ((8 + header_len) % 8, 0u);
  const int64_t data_bytes = 24 + 12 + 12 + 12 + 10 + 4 + 0;
  EXPECT_EQ(static_cast<int64_t>(bytes.size()), 8 + static_cast<int64_t>(header_len) + data_bytes);
  EXPECT_EQ(reader.entry("bf16").begin, 24);
  EXPECT_EQ(reader.entry("bf16").end, 36);
}

TEST(Safetensors, ReadsAFileLaidOutByHand) {
  // The layout another writer produces: sorted keys, metadata last, no alignment padding.
  const float values[3] = {0.5f, -1.f, 2.f};
  const int32_t ids[2] = {3, 4};
  std::string data(reinterpret_cast<const char*>(ids), 8);
  data += std::string(reinterpret_cast<const char*>(values), 12);
  const std::string header =
      R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[8,20]},"b":{"dtype":"I32","shape":[1,2],)"
      R"("data_offsets":[0,8]},"__metadata__":{"format":"pt"}})";
  SafetensorsReader reader(write_bytes("hand.safetensors", safetensors_bytes(header, data)));
  EXPECT_EQ(reader.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(reader.load("a").to_floats(), (std::vector<float>{0.5f, -1.f, 2.f}));
  EXPECT_EQ(reader.load("b").to_ints(), (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(reader.load("b").shape(), (Shape{1, 2}));
  EXPECT_EQ(reader.metadata_value("format"), "pt");
}

TEST(Safetensors, LoadIntoChecksShapeAndConvertsFloats) {
  const std::string path = scratch_directory() + "/w.safetensors";
  const Tensor w = Tensor::from_floats(std::vector<float>{1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {2, 3});
  write_safetensors(
      path, {{"wte.weight", w.to_dtype(DType::BF16)}, {"ids", Tensor::from_ints(std::vector<int32_t>{1}, {1})}});
  SafetensorsReader reader(path);

  Tensor into = Tensor::zeros({2, 3}, DType::F32);
  reader.load_into("wte.weight", into);  // bf16 file into an f32 tensor
  EXPECT_EQ(into.to_floats(), w.to_floats());

  Tensor wrong_shape = Tensor::zeros({3, 2}, DType::F32);
  expect_error([&] { reader.load_into("wte.weight", wrong_shape); }, ErrorKind::Format,
               {path, "wte.weight", "[2, 3]", "expected [3, 2]"});
  Tensor wrong_dtype = Tensor::zeros({1}, DType::F32);
  expect_error([&] { reader.load_into("ids", wrong_dtype); }, ErrorKind::Format, {"ids", "i32", "expected f32"});
  expect_error([&] { reader.load("no.such.tensor"); }, ErrorKind::Format, {path, "no.such.tensor"});
  expect_error([&] { reader.metadata_value("format"); }, ErrorKind::Format, {"format"});
}

TEST(Safetensors, WriterRejectsBadNames) {
  const std::string path = scratch_directory() + "/w.safetensors";
  const Tensor t = Tensor::zeros({1}, DType::F32);
  expect_error([&] { write_safetensors(path, {{"a", t}, {"a", t}}); }, ErrorKind::InvalidArgument, {"'a'"});
  expect_error([&] { write_safetensors(path, {{"__metadata__", t}}); }, ErrorKind::InvalidArgument);
  EXPECT_FALSE(file_exists(path));
}

TEST(Safetensors, OverwritingReplacesTheWholeFile) {
  const std::string path = scratch_directory() + "/w.safetensors";
  write_safetensors(path, {{"a", Tensor::zeros({4}, DType::F32)}});
  write_safetensors(path, {{"b", Tensor::zeros({2}, DType::I32)}});
  SafetensorsReader reader(path);
  EXPECT_EQ(reader.names(), std::vector<std::string>{"b"});
}

// ---------------------------------------------------------------- damaged files

TEST(SafetensorsErrors, MissingFileIsAnIoError) {
  const std::string path = scratch_directory() + "/absent.safetensors";
  expect_error([&] { SafetensorsReader r(path); }, ErrorKind::Io, {path});
}

TEST(SafetensorsErrors, FileShorterThanTheLengthField) {
  const std::string path = write_bytes("short.safetensors", "abc");
  expect_error([&] { SafetensorsReader r(path); }, ErrorKind::Format, {path, "too short"});
}

TEST(SafetensorsErrors, TruncatedData) {
  const std::string path = scratch_directory() + "/model.safetensors";
  write_safetensors(path, {{"a", Tensor::zeros({4}, DType::F32)}, {"b", Tensor::zeros({8}, DType::F32)}});
  const std::string bytes = read_file(path);
  write_file_atomic(path, bytes.substr(0, bytes.size() - 5));
  expect_error([&] { SafetensorsReader r(path); }, ErrorKind::Format, {path, "'b'", "past the end"});
}

TEST(SafetensorsErrors, TruncatedHeader) {
  const std::string path = scratch_directory() + "/model.safetensors";
  write_safetensors(path, {{"a", Tensor::zeros({4}, DType::F32)}});
  write_file_atomic(path, read_file(path).substr(0, 20));
  expect_error([&] { SafetensorsReader r(path); }, ErrorKind::Format, {path, "header length"});
}

TEST(SafetensorsErrors, HeaderLengthLargerThanTheFile) {
  std::string bytes = safetensors_bytes("{}", "");
  bytes[5] = 0x01;  // a length around 2^40
  const std::string path = write_bytes("huge.safetensors", bytes);
  expect_error([&] { SafetensorsReader r(path); }, ErrorKind::Format, {path, "header length", "exceeds"});
}

TEST(SafetensorsErrors, CorruptJson) {
  const std::string path = write_with_header(R"({"w": {"dtype": "F32", "shape": [2, 2], )");
  expect_error([&] { SafetensorsReader r(path); }, ErrorKind::Format, {path, "not valid JSON", "line 1"});
}

TEST(SafetensorsErrors, HeaderThatIsNotAnObject) {
  const std::string path = write_with_header("[1, 2, 3]");
  expect_error([&] { SafetensorsReader r(path); }, ErrorKind::Format, {path, "not a JSON object"});
}

TEST(SafetensorsErrors, UnknownDtype) {
  const std::string path = write_with_header(R"({"w":{"dtype":"F33","shape":[2,2],"data_offsets":[0,16]}})");
  expect_error([&] { SafetensorsReader r(path); }, ErrorKind::Format, {path, "'w'", "unknown dtype 'F33'"});
}

TEST(SafetensorsErrors, ValidButUnsupportedDtypeListsButDoesNotLoad) {
  const std::string path = write_with_header(R"({"w":{"dtype":"F64","shape":[2],"data_offsets":[0,16]}})");
  SafetensorsReader reader(path);
  EXPECT_EQ(reader.shape("w"), (Shape{2}));
  expect_error([&] { reader.load("w"); }, ErrorKind::Unsupported, {path, "'w'", "F64"});
}

TEST(SafetensorsErrors, ShapeDisagreesWithOffsets) {
  const std::string path = write_with_header(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,16]}})");
  expect_error([&] { SafetensorsReader r(path); }, ErrorKind::Format, {path, "'w'", "[2, 3]", "needs 24 bytes", "16"});
}

TEST(SafetensorsErrors, ShapeWhoseSizeOverflows) {
  const std::string path =
      write_with_header(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,16]}})");
  expect_error([&] { SafetensorsReader r(path); }, ErrorKind::Format, {path, "'w'", "more than 2^63"});
}

TEST(SafetensorsErrors, MalformedEntries) {
  expect_error(
      [&] { SafetensorsReader r(write_with_header(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0]}})")); },
      ErrorKind::Format, {"'w'", "data_offsets"});
  expect_error([&] { SafetensorsReader r(write_with_header(R"({"w":{"dtype":"F32","shape":[4]}})")); },
               ErrorKind::Format, {"'w'", "missing key 'data_offsets'"});
  expect_error(
      [&] { SafetensorsReader r(write_with_header(R"({"w":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})")); },
      ErrorKind::Format, {"'w'", "negative"});
  expect_error(
      [&] { SafetensorsReader r(write_with_header(R"({"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,16]}})")); },
      ErrorKind::Format, {"'w'", "integer"});
  expect_error(
      [&] { SafetensorsReader r(write_with_header(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[16,0]}})")); },
      ErrorKind::Format, {"'w'", "not an ordered range"});
  expect_error([&] { SafetensorsReader r(write_with_header(R"({"__metadata__":{"step":3}})")); }, ErrorKind::Format,
               {"__metadata__", "'step'"});
}

TEST(SafetensorsErrors, DuplicateTensorName) {
  const std::string path = write_with_header(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                             R"("w":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})");
  expect_error([&] { SafetensorsReader r(path); }, ErrorKind::Format, {path, "'w'", "twice"});
}

TEST(SafetensorsErrors, OverlappingRanges) {
  const std::string path = write_with_header(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},)"
                                             R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})");
  expect_error([&] { SafetensorsReader r(path); }, ErrorKind::Format, {path, "'a'", "'b'", "overlaps"});
}

TEST(SafetensorsErrors, RangePastTheEnd) {
  const std::string path = write_with_header(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[4,20]}})");
  expect_error([&] { SafetensorsReader r(path); }, ErrorKind::Format, {path, "'a'", "past the end", "16 bytes"});
}

}  // namespace
}  // namespace lab
