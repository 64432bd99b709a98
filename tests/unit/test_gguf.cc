// GGUF writer/reader round trip over every metadata type, and malformed files: truncated at
// every length, wrong magic, huge counts, bad types, missing tensors, unknown architecture.
#include <cstring>
#include <fstream>
#include <functional>

#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "model/decoder_model.h"
#include "model/synthetic.h"
#include "test_support.h"

namespace kvserve {
namespace {

std::string tmp(const std::string& tag) { return std::string(KVSERVE_BINARY_DIR) + "/test-gguf-" + tag + ".gguf"; }

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

TEST(Gguf, RoundTripsEveryValueType) {
  GgufWriter w(64);
  w.add("u8", {GgufType::kUint8, GgufType::kUint8, uint64_t{200}});
  w.add("i8", {GgufType::kInt8, GgufType::kUint8, int64_t{-100}});
  w.add("u16", {GgufType::kUint16, GgufType::kUint8, uint64_t{60000}});
  w.add("i16", {GgufType::kInt16, GgufType::kUint8, int64_t{-30000}});
  w.add("u32", GgufValue::u32(4000000000u));
  w.add("i32", GgufValue::i32(-2000000000));
  w.add("u64", {GgufType::kUint64, GgufType::kUint8, uint64_t{1} << 60});
  w.add("i64", {GgufType::kInt64, GgufType::kUint8, -(int64_t{1} << 60)});
  w.add("f32", GgufValue::f32(1.5f));
  w.add("f64", {GgufType::kFloat64, GgufType::kUint8, 3.25});
  w.add("bool", GgufValue::boolean(true));
  w.add("str", GgufValue::str("héllo"));
  GgufArray inner1 = {GgufValue::i32(1), GgufValue::i32(2)}, inner2 = {GgufValue::i32(3)};
  w.add("nested", GgufValue::array(GgufType::kArray, {GgufValue::array(GgufType::kInt32, inner1),
                                                      GgufValue::array(GgufType::kInt32, inner2)}));
  w.add("strs", GgufValue::array(GgufType::kString, {GgufValue::str("a"), GgufValue::str("")}));
  const float data[6] = {1, 2, 3, 4, 5, 6};
  w.add_tensor("t.f32", {3, 2}, TensorType::kF32, [&](uint8_t* out) { std::memcpy(out, data, sizeof(data)); });
  w.add_tensor("t.f16", {5}, TensorType::kF16, [](uint8_t* out) { std::memset(out, 0x3C, 10); });
  w.write(tmp("roundtrip"));

  GgufFile f(tmp("roundtrip"));
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.get("u8").as_int("u8"), 200);
  EXPECT_EQ(f.get("i8").as_int("i8"), -100);
  EXPECT_EQ(f.get("u16").as_int("u16"), 60000);
  EXPECT_EQ(f.get("i16").as_int("i16"), -30000);
  EXPECT_EQ(f.get("u32").as_int("u32"), 4000000000);
  EXPECT_EQ(f.get("i32").as_int("i32"), -2000000000);
  EXPECT_EQ(f.get("u64").as_int("u64"), int64_t{1} << 60);
  EXPECT_EQ(f.get("i64").as_int("i64"), -(int64_t{1} << 60));
  EXPECT_EQ(f.get("f32").as_float("f32"), 1.5);
  EXPECT_EQ(f.get("f64").as_float("f64"), 3.25);
  EXPECT_TRUE(f.get("bool").as_bool("bool"));
  EXPECT_EQ(f.get("str").as_string("str"), "héllo");
  const auto& nested = f.get("nested").as_array("nested");
  ASSERT_EQ(nested.size(), 2u);
  EXPECT_EQ(nested[0].as_array("n")[1].as_int("n"), 2);
  EXPECT_EQ(nested[1].as_array("n")[0].as_int("n"), 3);
  EXPECT_EQ(f.get("strs").as_array("strs")[1].as_string("s"), "");
  const auto& t = f.tensor("t.f32");
  EXPECT_EQ(t.dims, (std::vector<uint64_t>{3, 2}));
  EXPECT_EQ(std::memcmp(f.tensor_data(t), data, sizeof(data)), 0);
  EXPECT_EQ(f.tensor("t.f16").type, TensorType::kF16);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(f.tensor_data(f.tensor("t.f16"))) % 64, 0u);
  EXPECT_THROW(f.get("str").as_int("str"), GgufError);
  EXPECT_THROW(f.get("missing"), GgufError);
}

TEST(Gguf, EveryTruncationIsAnErrorNotACrash) {
  SyntheticSpec spec{.dim = 16, .layers = 1, .heads = 2, .kv_heads = 1, .ffn = 16, .vocab = 260};
  write_synthetic_model(spec, tmp("full"));
  const std::string bytes = testing::read_text(tmp("full"));
  // Every cut inside the header and metadata, then a sample of cuts through the tensor data.
  for (size_t cut = 0; cut < bytes.size(); cut += cut < 12000 ? 1 : 997) {
    write_bytes(tmp("cut"), bytes.substr(0, cut));
    try {
      GgufFile f(tmp("cut"));
      DecoderModel m(f);
      ADD_FAILURE() << "a file cut at " << cut << " of " << bytes.size() << " bytes loaded";
    } catch (const GgufError& e) {
      EXPECT_NE(std::string(e.what()).find(tmp("cut")), std::string::npos) << e.what();
    }
  }
}

TEST(Gguf, CorruptHeadersNameTheProblem) {
  auto expect_error = [](const std::string& bytes, const std::string& fragment) {
    write_bytes(tmp("bad"), bytes);
    try {
      GgufFile f(tmp("bad"));
      ADD_FAILURE() << "no error; expected '" << fragment << "'";
    } catch (const GgufError& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  auto header = [](uint32_t magic, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    std::string s(24, '\0');
    std::memcpy(&s[0], &magic, 4);
    std::memcpy(&s[4], &version, 4);
    std::memcpy(&s[8], &n_tensors, 8);
    std::memcpy(&s[16], &n_kv, 8);
    return s;
  };
  expect_error(header(0x12345678, 3, 0, 0), "wrong magic");
  expect_error(header(0x46554747, 1, 0, 0), "unsupported GGUF version 1");
  expect_error(header(0x46554747, 3, 0, uint64_t{1} << 60), "metadata count");
  expect_error(header(0x46554747, 3, uint64_t{1} << 60, 0), "tensor count");
  // One key whose value claims a huge string, and one with an unknown type.
  std::string key = std::string("\x03\0\0\0\0\0\0\0", 8) + "abc";
  std::string huge_str = header(0x46554747, 3, 0, 1) + key + std::string("\x08\0\0\0", 4) +
                         std::string("\xFF\xFF\xFF\xFF\xFF\xFF\xFF\x7F", 8);
  expect_error(huge_str, "string length");
  expect_error(header(0x46554747, 3, 0, 1) + key + std::string("\x63\0\0\0", 4), "unknown value type 99");
  std::string huge_arr = header(0x46554747, 3, 0, 1) + key + std::string("\x09\0\0\0\x04\0\0\0", 8) +
                         std::string("\xFF\xFF\xFF\xFF\xFF\xFF\xFF\x0F", 8);
  expect_error(huge_arr, "array count");
}

TEST(Gguf, ModelErrorsNameTensorTypeAndKey) {
  auto expect_model_error = [](const SyntheticSpec& spec, const std::string& fragment,
                               const std::function<void(std::string&)>& corrupt) {
    write_synthetic_model(spec, tmp("model"));
    std::string bytes = testing::read_text(tmp("model"));
    corrupt(bytes);
    write_bytes(tmp("model"), bytes);
    try {
      GgufFile f(tmp("model"));
      DecoderModel m(f);
      ADD_FAILURE() << "no error; expected '" << fragment << "'";
    } catch (const GgufError& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  SyntheticSpec spec{.dim = 16, .layers = 1, .heads = 2, .kv_heads = 1, .ffn = 16, .vocab = 260};
  auto replace = [](std::string& b, const std::string& from, const std::string& to) {
    size_t at = b.find(from);
    ASSERT_NE(at, std::string::npos);
    b.replace(at, from.size(), to);
  };
  expect_model_error(spec, "unsupported architecture 'qwenx'",
                     [&](std::string& b) { replace(b, std::string("\x05\0\0\0\0\0\0\0llama", 13),
                                                   std::string("\x05\0\0\0\0\0\0\0qwenx", 13)); });
  expect_model_error(spec, "missing tensor 'blk.0.ffn_up.weight'",
                     [&](std::string& b) { replace(b, "blk.0.ffn_up.weight", "blk.0.ffn_uq.weight"); });
  auto set_q_type = [&](uint8_t type) {
    return [&, type](std::string& b) {
      size_t at = b.find("blk.0.attn_q.weight") + 19 + 4 + 16;  // name, n_dims, two dims
      b[at] = static_cast<char>(type);
    };
  };
  // A type named by the table but not loadable here, one whose blocks do not divide the rows,
  // and an id no ggml type has: each named.
  SyntheticSpec wide = spec;
  wide.dim = 32;
  wide.ffn = 32;
  expect_model_error(wide, "tensor 'blk.0.attn_q.weight' has type Q8_1 (9), which this build cannot load",
                     set_q_type(9));
  expect_model_error(spec, "tensor 'blk.0.attn_q.weight': Q4_0 (2) stores rows in blocks of 32 values, but a row has 16",
                     set_q_type(2));
  expect_model_error(spec, "tensor 'blk.0.attn_q.weight': type 99 is not a ggml tensor type", set_q_type(99));
  // A tensor offset near 2^64 wraps around when added to the data start and the size: it used to
  // pass the bounds check and read outside the mapping.
  expect_model_error(spec, "runs past the end of the file", [&](std::string& b) {
    const size_t at = b.find("blk.0.attn_q.weight") + 19 + 4 + 16 + 4;  // name, n_dims, dims, type
    const uint64_t wrap = ~uint64_t{0} - 31;                              // aligned, and -32
    std::memcpy(&b[at], &wrap, 8);
  });
  // A layer count the file's tensors cannot back is refused before anything is sized by it.
  expect_model_error(spec, "block_count 4194304 but the file has no tensors of layer 4194303", [&](std::string& b) {
    const std::string key = "llama.block_count";
    const size_t at = b.find(key) + key.size() + 4;  // the key, its type
    const uint32_t layers = 1u << 22;
    std::memcpy(&b[at], &layers, 4);
  });
}

// An array whose elements are one byte each in the file takes a whole value each in memory:
// a small file cannot make the reader allocate far more than itself.
TEST(Gguf, MetadataMemoryIsBoundedByTheFileSize) {
  const uint64_t n = 10'000'000;
  std::string bytes = std::string("GGUF\x03\0\0\0", 8) + std::string(8, '\0');  // magic, version 3, 0 tensors
  const uint64_t n_kv = 1, key_len = 4;
  bytes.append(reinterpret_cast<const char*>(&n_kv), 8);
  bytes.append(reinterpret_cast<const char*>(&key_len), 8);
  bytes += "junk";
  bytes += std::string("\x09\0\0\0\0\0\0\0", 8);  // an array of uint8
  bytes.append(reinterpret_cast<const char*>(&n), 8);
  bytes += std::string(n, '\x01');
  write_bytes(tmp("bigarray"), bytes);
  try {
    GgufFile f(tmp("bigarray"));
    ADD_FAILURE() << "a 10 MB file's 10M-element array was held (about 600 MB)";
  } catch (const GgufError& e) {
    EXPECT_NE(std::string(e.what()).find("metadata would take more than"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kvserve
