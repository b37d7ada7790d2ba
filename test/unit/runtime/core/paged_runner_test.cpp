//===- paged_runner_test.cpp - The engine's runner for paged-KV decoders --===//
//
// `engine::PagedRunner` over kernels/paged_decoder.c, a fake decoder whose
// logits echo every input (the context summed through the block table, the
// last token's id, position and slot, the context length) and which writes
// each new token's K/V into its slot of the kv::Memory pool. The tests
// check create()'s signature and pool checks (quantized int8 and fp8
// pools included), the split of a step into a decode call and a left-padded
// prefill call, the K/V in the pool slot by slot (padding writes nothing),
// copies before the model, model errors, the exact widening of f16 / bf16
// logits and the rejection of inconsistent sequences.
//
//===----------------------------------------------------------------------===//
#include "core_test_util.h"

#include "sits/runtime/engine/paged_runner.h"

#include <cmath>
#include <map>
#include <numeric>

using namespace sits::runtime;
using namespace sits::runtime::test;
using engine::PagedRunner;
using engine::PagedRunnerOptions;
using engine::ScheduledSequence;
using engine::StepBatch;
using engine::StepOutput;

namespace {

// The fake decoder's shapes (kernels/paged_decoder.c).
constexpr int64_t kLayers = 2, kHeads = 2, kBlockSize = 4, kHeadDim = 3,
                  kVocab = 5;

/// The K/V the kernel writes for a token: element (layer, kv, head, d).
float kvValue(int64_t id, int64_t pos, int64_t l, int64_t kv, int64_t h,
              int64_t d) {
  return float(id * 1000 + pos) +
         float(((l * 2 + kv) * kHeads + h) * kHeadDim + d) / 32.0f;
}

/// The kernel's context sum of a sequence whose token p is ids[p] at
/// position p (element (0, K, 0, 0) of each).
float contextSum(const std::vector<int32_t> &ids) {
  double s = 0;
  for (size_t p = 0; p < ids.size(); ++p)
    s += kvValue(ids[p], int64_t(p), 0, 0, 0, 0);
  return float(s);
}

std::vector<Arg> decoderArgs(const std::string &logitsDType = "f32") {
  return {{"input", "input_ids", "i64", {-1, -1}, {"batch", "tokens"}},
          {"input", "position_ids", "i64", {-1, -1}, {"batch", "tokens"}},
          {"input",
           "kv_pool",
           "f32",
           {-1, kLayers, 2, kHeads, kBlockSize, kHeadDim},
           {}},
          {"input", "block_tables", "i32", {-1, -1}, {"batch", ""}},
          {"input", "slot_mapping", "i64", {-1, -1}, {"batch", "tokens"}},
          {"input", "context_lens", "i32", {-1}, {"batch"}},
          {"output",
           "logits",
           logitsDType,
           {-1, -1, kVocab},
           {"batch", "tokens", ""}}};
}

const char *const kStatusArg =
    ", {\"role\": \"status\", \"name\": \"status\", \"dtype\": \"i32\", "
    "\"shape\": [], \"messages\": [\"token id out of range\", \"block table "
    "entry out of range\", \"slot out of range\", \"context longer than its "
    "block table\"]}";

/// An entry point of the fake decoder; the pool is updated in place, as
/// the compiler declares it.
std::string decoderEntry(const std::string &name, std::vector<Arg> args,
                         bool status = true, const std::string &symbol = "") {
  std::string e = entryJson(name, args, symbol);
  const std::string pool = "\"name\": \"kv_pool\"";
  size_t at = e.find(pool);
  if (at != std::string::npos)
    e.insert(at + pool.size(), ", \"updated_in_place\": true");
  if (status)
    e.insert(e.size() - 2, kStatusArg);
  return e;
}

Module loadDecoder(const std::vector<std::string> &entries) {
  std::vector<uint8_t> bytes =
      writeArtifact(manifestJson(entries), kernelBytes("paged_decoder"));
  StatusOr<Module> m = Module::load(bytes.data(), bytes.size());
  EXPECT_TRUE(m.ok()) << m.status().toString();
  return std::move(m).value();
}

Module loadMain() { return loadDecoder({decoderEntry("main", decoderArgs())}); }

struct PoolShape {
  int64_t layers = kLayers, heads = kHeads, blockSize = kBlockSize,
          headDim = kHeadDim;
  kv::DType dtype = kv::DType::kF32;
  kv::KVQuantization quantization = kv::KVQuantization::kNone;
};

std::shared_ptr<kv::Memory> makeMemory(int64_t blocks = 8,
                                       PoolShape shape = {}) {
  kv::PoolConfig c;
  c.num_blocks = blocks;
  c.block_size = shape.blockSize;
  c.num_layers = shape.layers;
  c.num_kv_heads = shape.heads;
  c.head_dim = shape.headDim;
  c.dtype = shape.dtype;
  c.quantization = shape.quantization;
  c.num_host_blocks = 2;
  StatusOr<std::unique_ptr<kv::Memory>> m = kv::Memory::create(c);
  EXPECT_TRUE(m.ok()) << m.status().toString();
  return m.ok() ? std::shared_ptr<kv::Memory>(std::move(m).value()) : nullptr;
}

float &at(const kv::Memory &m, kv::Tier tier, int64_t block, int64_t l,
          int64_t kv, int64_t h, int64_t t, int64_t d) {
  const kv::MemoryLayout &y = m.layout();
  return *reinterpret_cast<float *>(static_cast<uint8_t *>(m.data(tier)) +
                                    y.offset(block, l, kv, h, t) +
                                    d * y.elem_size);
}

/// (id, position) of the token in each written slot.
using Written = std::map<int64_t, std::pair<int64_t, int64_t>>;

/// Every element of the device pool: the K/V of `written` slots, zero
/// elsewhere (padding and unused blocks included).
void expectPool(const kv::Memory &m, const Written &written) {
  const int64_t blocks = m.numBlocks(kv::Tier::kDevice);
  int64_t mismatches = 0;
  for (int64_t slot = 0; slot < blocks * kBlockSize; ++slot) {
    auto it = written.find(slot);
    for (int64_t l = 0; l < kLayers; ++l)
      for (int64_t kv = 0; kv < 2; ++kv)
        for (int64_t h = 0; h < kHeads; ++h)
          for (int64_t d = 0; d < kHeadDim; ++d) {
            float want =
                it == written.end()
                    ? 0.0f
                    : kvValue(it->second.first, it->second.second, l, kv, h, d);
            float got = at(m, kv::Tier::kDevice, slot / kBlockSize, l, kv, h,
                           slot % kBlockSize, d);
            if (got != want && ++mismatches <= 5)
              ADD_FAILURE()
                  << "slot " << slot << " (" << l << ", " << kv << ", " << h
                  << ", " << d << "): " << got << ", expected " << want;
          }
  }
  EXPECT_EQ(mismatches, 0);
}

/// A sequence whose tokens `ids` sit at positions [first, first + n) and
/// whose context ends with them.
ScheduledSequence sequence(uint64_t id, std::vector<int32_t> ids, int64_t first,
                           std::vector<int32_t> table,
                           std::vector<int64_t> slots) {
  ScheduledSequence q;
  q.seq_id = id;
  q.is_prefill = ids.size() > 1 || first == 0;
  q.positions.resize(ids.size());
  std::iota(q.positions.begin(), q.positions.end(), first);
  q.context_len = first + int64_t(ids.size());
  q.token_ids = std::move(ids);
  q.block_table = std::move(table);
  q.slot_mapping = std::move(slots);
  return q;
}

/// Row `row` of `out`: {context sum, id, position, context length, slot}.
void expectRow(const StepOutput &out, size_t row, std::vector<float> want) {
  ASSERT_EQ(out.vocab_size, kVocab);
  ASSERT_GE(out.logits.size(), (row + 1) * size_t(kVocab));
  std::vector<float> got(out.logits.begin() + long(row * kVocab),
                         out.logits.begin() + long((row + 1) * kVocab));
  EXPECT_EQ(got, want) << "row " << row;
}

std::unique_ptr<PagedRunner> makeRunner(Module m,
                                        std::shared_ptr<kv::Memory> memory,
                                        PagedRunnerOptions options = {}) {
  StatusOr<std::unique_ptr<PagedRunner>> r =
      PagedRunner::create(std::move(m), std::move(memory), std::move(options));
  EXPECT_TRUE(r.ok()) << r.status().toString();
  return r.ok() ? std::move(r).value() : nullptr;
}

/// create()'s error for `entry`'s args, expected kInvalidArgument with
/// `needle` in its message.
void expectCreateError(const std::vector<Arg> &args, const std::string &needle,
                       std::shared_ptr<kv::Memory> memory = makeMemory(),
                       PagedRunnerOptions options = {}) {
  Module m = loadDecoder({decoderEntry("main", args)});
  StatusOr<std::unique_ptr<PagedRunner>> r =
      PagedRunner::create(m, std::move(memory), std::move(options));
  ASSERT_FALSE(r.ok()) << "accepted, expected: " << needle;
  EXPECT_EQ(r.code(), StatusCode::kInvalidArgument) << r.status().toString();
  EXPECT_NE(r.status().message().find(needle), std::string::npos)
      << r.status().toString();
}

TEST(PagedRunner, CreateReportsTheModel) {
  std::unique_ptr<PagedRunner> r = makeRunner(loadMain(), makeMemory());
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->vocabSize(), kVocab);
  EXPECT_TRUE(r->takesPositions());
  EXPECT_EQ(r->blockSize(), kBlockSize);
  EXPECT_EQ(r->steps(), 0);
  EXPECT_EQ(r->calls(), 0);
  // A pool declared with dynamic extents takes any memory's.
  std::vector<Arg> args = decoderArgs();
  args[2].shape = {-1, -1, -1, -1, -1, -1};
  Module m = loadDecoder({decoderEntry("main", args)});
  EXPECT_NE(makeRunner(m, makeMemory()), nullptr);
}

TEST(PagedRunner, CreateRejectsNullMemoryAndUnknownEntryPoints) {
  StatusOr<std::unique_ptr<PagedRunner>> r =
      PagedRunner::create(loadMain(), nullptr);
  EXPECT_EQ(r.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().info().subject, "memory");

  PagedRunnerOptions options;
  options.entry = "decode";
  r = PagedRunner::create(loadMain(), makeMemory(), options);
  EXPECT_EQ(r.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("no entry point named 'decode'"),
            std::string::npos)
      << r.status().toString();

  options = {};
  options.shape_function = "shapes";
  r = PagedRunner::create(loadMain(), makeMemory(), options);
  EXPECT_EQ(r.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("no shape function named 'shapes'"),
            std::string::npos)
      << r.status().toString();
}

TEST(PagedRunner, CreateRejectsMissingAndForeignInputs) {
  // The kernel is never called: only the manifest differs.
  for (size_t drop : {size_t(0), size_t(2), size_t(3), size_t(4), size_t(5)}) {
    std::vector<Arg> args = decoderArgs();
    std::string name = args[drop].name;
    args.erase(args.begin() + long(drop));
    expectCreateError(args, "it has no input '" + name + "'");
  }
  std::vector<Arg> args = decoderArgs();
  args.insert(args.begin() + 1,
              Arg{"input", "attention_mask", "i64", {-1, -1}, {}});
  expectCreateError(args, "it takes 'attention_mask'");
}

TEST(PagedRunner, CreateRejectsInputsOfTheWrongType) {
  struct Case {
    size_t arg;
    std::string dtype;
    std::vector<int64_t> shape;
    std::string needle;
  };
  const Case cases[] = {
      {0, "i32", {-1, -1}, "its input 'input_ids' is i32[?, ?]"},
      {1, "f32", {-1, -1}, "its input 'position_ids' is f32[?, ?]"},
      {3, "i64", {-1, -1}, "its input 'block_tables' is i64[?, ?]"},
      {3, "i32", {-1}, "its input 'block_tables' is i32[?]"},
      {4, "i32", {-1, -1}, "its input 'slot_mapping' is i32[?, ?]"},
      {5, "i64", {-1}, "its input 'context_lens' is i64[?]"},
      {2,
       "f32",
       {-1, kLayers, 2, kHeads, kBlockSize},
       "the model expects kv_pool: f32[?, 2, 2, 2, 4]"},
  };
  for (const Case &c : cases) {
    std::vector<Arg> args = decoderArgs();
    args[c.arg].dtype = c.dtype;
    args[c.arg].shape = c.shape;
    args[c.arg].dimNames.clear();
    expectCreateError(args, c.needle);
  }
}

TEST(PagedRunner, CreateRejectsAPoolThatDoesNotFitTheModel) {
  PoolShape f16;
  f16.dtype = kv::DType::kF16;
  expectCreateError(decoderArgs(), "the KV pool is f16[8, 2, 2, 2, 4, 3]",
                    makeMemory(8, f16));
  PoolShape layers, heads, blockSize, headDim;
  layers.layers = 3;
  heads.heads = 1;
  blockSize.blockSize = 8;
  headDim.headDim = 4;
  expectCreateError(decoderArgs(), "the KV pool is f32[8, 3, 2, 2, 4, 3]",
                    makeMemory(8, layers));
  expectCreateError(decoderArgs(), "the KV pool is f32[8, 2, 2, 1, 4, 3]",
                    makeMemory(8, heads));
  expectCreateError(decoderArgs(), "the KV pool is f32[8, 2, 2, 2, 8, 3]",
                    makeMemory(8, blockSize));
  expectCreateError(decoderArgs(),
                    "the KV pool is f32[8, 2, 2, 2, 4, 4], the model expects "
                    "kv_pool: f32[?, 2, 2, 2, 4, 3]",
                    makeMemory(8, headDim));
  // A model with an f16 pool and f32 memory.
  std::vector<Arg> args = decoderArgs();
  args[2].dtype = "f16";
  expectCreateError(args, "the model expects kv_pool: f16[?, 2, 2, 2, 4, 3]");
}

/// A per_token_head memory of `dtype` and the decoder whose kv_pool is
/// `modelDType` rows of head_dim codes + a 4-byte scale: its token stride
/// counts the scale, and the runner takes it with static and dynamic pool
/// extents. Returns the model's arguments and the memory.
void expectQuantizedPoolFits(kv::DType dtype, const char *modelDType,
                             std::vector<Arg> *args,
                             std::shared_ptr<kv::Memory> *memory) {
  PoolShape quantized;
  quantized.dtype = dtype;
  quantized.quantization = kv::KVQuantization::kPerTokenHead;
  *args = decoderArgs();
  (*args)[2].dtype = modelDType;
  (*args)[2].shape.back() = kHeadDim + 4;
  *memory = makeMemory(8, quantized);
  ASSERT_NE(*memory, nullptr);
  EXPECT_EQ((*memory)->layout().token_stride, kHeadDim + 4);
  EXPECT_NE(makeRunner(loadDecoder({decoderEntry("main", *args)}), *memory),
            nullptr);
  std::vector<Arg> dynamic = *args;
  dynamic[2].shape = {-1, -1, -1, -1, -1, -1};
  EXPECT_NE(makeRunner(loadDecoder({decoderEntry("main", dynamic)}), *memory),
            nullptr);
}

TEST(PagedRunner, AQuantizedPoolIsInt8RowsWithTheirScale) {
  // per_token_head: each row is head_dim int8 codes + a 4-byte f32 scale, so
  // the model declares kv_pool i8[?, layers, 2, heads, bs, head_dim + 4].
  std::vector<Arg> i8;
  std::shared_ptr<kv::Memory> memory;
  expectQuantizedPoolFits(kv::DType::kInt8, "i8", &i8, &memory);
  if (HasFatalFailure())
    return;
  // A quantized memory with an f32 model, and with an i8 model of plain
  // head_dim rows.
  expectCreateError(decoderArgs(),
                    "the KV pool is int8[8, 2, 2, 2, 4, 7] (per_token_head: 3 "
                    "codes + an f32 scale per row), the model expects "
                    "kv_pool: f32[?, 2, 2, 2, 4, 3]",
                    memory);
  std::vector<Arg> plainI8 = decoderArgs();
  plainI8[2].dtype = "i8";
  expectCreateError(plainI8, "the model expects kv_pool: i8[?, 2, 2, 2, 4, 3]",
                    memory);
  // An f32 memory, and an unquantized int8 memory, with the quantized model.
  expectCreateError(i8, "the KV pool is f32[8, 2, 2, 2, 4, 3], the model "
                        "expects kv_pool: i8[?, 2, 2, 2, 4, 7]");
  PoolShape int8;
  int8.dtype = kv::DType::kInt8;
  expectCreateError(i8,
                    "the KV pool is int8[8, 2, 2, 2, 4, 3], the model "
                    "expects kv_pool: i8[?, 2, 2, 2, 4, 7]",
                    makeMemory(8, int8));
}

TEST(PagedRunner, AnFp8QuantizedPoolIsE4M3RowsWithTheirScale) {
  // per_token_head over fp8_e4m3: rows of head_dim E4M3FN codes + the f32
  // scale's 4 bytes, kv_pool f8e4m3fn[?, layers, 2, heads, bs, head_dim + 4].
  std::vector<Arg> f8;
  std::shared_ptr<kv::Memory> memory;
  expectQuantizedPoolFits(kv::DType::kFP8E4M3, "f8e4m3fn", &f8, &memory);
  if (HasFatalFailure())
    return;
  // The int8 model of the same rows, a model of plain head_dim rows, and
  // the other fp8 type do not take it.
  std::vector<Arg> i8 = f8;
  i8[2].dtype = "i8";
  expectCreateError(i8,
                    "the KV pool is fp8_e4m3[8, 2, 2, 2, 4, 7] "
                    "(per_token_head: 3 codes + an f32 scale per row), the "
                    "model expects kv_pool: i8[?, 2, 2, 2, 4, 7]",
                    memory);
  std::vector<Arg> plain = decoderArgs();
  plain[2].dtype = "f8e4m3fn";
  expectCreateError(
      plain, "the model expects kv_pool: f8e4m3fn[?, 2, 2, 2, 4, 3]", memory);
  std::vector<Arg> e5m2 = f8;
  e5m2[2].dtype = "f8e5m2";
  expectCreateError(e5m2, "the model expects kv_pool: f8e5m2[?, 2, 2, 2, 4, 7]",
                    memory);
  // An int8 quantized memory, and an unquantized fp8_e4m3 one, with the
  // fp8 model.
  PoolShape int8;
  int8.dtype = kv::DType::kInt8;
  int8.quantization = kv::KVQuantization::kPerTokenHead;
  expectCreateError(f8,
                    "the KV pool is int8[8, 2, 2, 2, 4, 7] (per_token_head: 3 "
                    "codes + an f32 scale per row), the model expects "
                    "kv_pool: f8e4m3fn[?, 2, 2, 2, 4, 7]",
                    makeMemory(8, int8));
  PoolShape plainFp8;
  plainFp8.dtype = kv::DType::kFP8E4M3;
  expectCreateError(f8,
                    "the KV pool is fp8_e4m3[8, 2, 2, 2, 4, 3], the model "
                    "expects kv_pool: f8e4m3fn[?, 2, 2, 2, 4, 7]",
                    makeMemory(8, plainFp8));
}

TEST(PagedRunner, CreateRejectsABadLogitsOutput) {
  PagedRunnerOptions options;
  for (int64_t index : {int64_t(1), int64_t(-1)}) {
    options.logits_output = index;
    expectCreateError(decoderArgs(),
                      "logits_output " + std::to_string(index) +
                          ": the entry point has 1 outputs",
                      makeMemory(), options);
  }
  std::vector<Arg> args = decoderArgs("i32");
  expectCreateError(args, "its logits output is i32[?, ?, 5]");
  args = decoderArgs();
  args[6].shape = {-1, kVocab};
  args[6].dimNames = {"batch", ""};
  expectCreateError(args, "its logits output is f32[?, 5]");
}

TEST(PagedRunner, RunsDecodesAndPaddedPrefillsAsTwoCalls) {
  std::shared_ptr<kv::Memory> memory = makeMemory();
  std::unique_ptr<PagedRunner> r = makeRunner(loadMain(), memory);
  ASSERT_NE(r, nullptr);
  Written written;
  auto wrote = [&](const ScheduledSequence &q) {
    for (size_t i = 0; i < q.token_ids.size(); ++i)
      written[q.slot_mapping[i]] = {q.token_ids[i], q.positions[i]};
  };

  // Step 1: two prefills, one call; x is left-padded by 3 tokens.
  const std::vector<int32_t> x = {11, 12, 13, 14},
                             y = {21, 22, 23, 24, 25, 26, 27};
  StepBatch batch;
  batch.sequences = {
      sequence(1, {11, 12, 13}, 0, {1}, {4, 5, 6}),
      sequence(2, {21, 22, 23, 24, 25, 26}, 0, {2, 3}, {8, 9, 10, 11, 12, 13})};
  // Stale output is replaced.
  StepOutput out;
  out.vocab_size = 7;
  out.logits.assign(100, -1.0f);
  SITS_ASSERT_OK(r->execute(batch, &out));
  EXPECT_EQ(r->steps(), 1);
  EXPECT_EQ(r->calls(), 1);
  ASSERT_EQ(out.logits.size(), 2 * size_t(kVocab));
  expectRow(out, 0, {contextSum({11, 12, 13}), 13, 2, 3, 6});
  expectRow(out, 1, {contextSum({21, 22, 23, 24, 25, 26}), 26, 5, 6, 13});
  for (const ScheduledSequence &q : batch.sequences)
    wrote(q);
  expectPool(*memory, written);

  // Step 2, out of order: decode x (a block table longer than its context
  // needs), prefill z, decode y.
  batch.sequences = {
      sequence(1, {14}, 3, {1, 7, 7}, {7}),
      sequence(3, {31, 32, 33, 34, 35}, 0, {4, 5}, {16, 17, 18, 19, 20}),
      sequence(2, {27}, 6, {2, 3}, {14})};
  SITS_ASSERT_OK(r->execute(batch, &out));
  EXPECT_EQ(r->steps(), 2);
  EXPECT_EQ(r->calls(), 3);
  ASSERT_EQ(out.logits.size(), 3 * size_t(kVocab));
  expectRow(out, 0, {contextSum(x), 14, 3, 4, 7});
  expectRow(out, 1, {contextSum({31, 32, 33, 34, 35}), 35, 4, 5, 20});
  expectRow(out, 2, {contextSum(y), 27, 6, 7, 14});
  for (const ScheduledSequence &q : batch.sequences)
    wrote(q);
  expectPool(*memory, written);

  // Step 3: decodes only (one call); an empty step makes none.
  batch.sequences = {sequence(2, {28}, 7, {2, 3}, {15}),
                     sequence(1, {15}, 4, {1, 6}, {24})};
  SITS_ASSERT_OK(r->execute(batch, &out));
  EXPECT_EQ(r->calls(), 4);
  expectRow(out, 0,
            {contextSum({21, 22, 23, 24, 25, 26, 27, 28}), 28, 7, 8, 15});
  expectRow(out, 1, {contextSum({11, 12, 13, 14, 15}), 15, 4, 5, 24});
  SITS_ASSERT_OK(r->execute(StepBatch(), &out));
  EXPECT_EQ(r->steps(), 4);
  EXPECT_EQ(r->calls(), 4);
  EXPECT_TRUE(out.logits.empty());
}

TEST(PagedRunner, RunsAModelWithoutPositionsWhateverItsInputOrder) {
  std::vector<Arg> a = decoderArgs();
  // kv_pool, input_ids, context_lens, slot_mapping, block_tables, logits.
  std::vector<Arg> args = {a[2], a[0], a[5], a[4], a[3], a[6]};
  std::shared_ptr<kv::Memory> memory = makeMemory();
  PagedRunnerOptions options;
  options.entry = "no_positions";
  std::unique_ptr<PagedRunner> r = makeRunner(
      loadDecoder({decoderEntry("no_positions", args)}), memory, options);
  ASSERT_NE(r, nullptr);
  EXPECT_FALSE(r->takesPositions());

  StepBatch batch;
  batch.sequences = {
      sequence(1, {41, 42, 43, 44, 45}, 0, {2, 3}, {8, 9, 10, 11, 12}),
      sequence(2, {51, 52}, 0, {1}, {4, 5})};
  StepOutput out;
  SITS_ASSERT_OK(r->execute(batch, &out));
  // The kernel derives positions from the left padding: the runner must
  // right-align each row.
  expectRow(out, 0, {contextSum({41, 42, 43, 44, 45}), 45, 4, 5, 12});
  expectRow(out, 1, {contextSum({51, 52}), 52, 1, 2, 5});
  expectPool(*memory, {{8, {41, 0}},
                       {9, {42, 1}},
                       {10, {43, 2}},
                       {11, {44, 3}},
                       {12, {45, 4}},
                       {4, {51, 0}},
                       {5, {52, 1}}});
}

TEST(PagedRunner, SizesLogitsWithAShapeFunction) {
  // The same kernel, its logits declared without dim names.
  std::vector<Arg> args = decoderArgs();
  args[6].dimNames.clear();
  std::vector<Arg> shapeArgs(args.begin(), args.begin() + 6);
  shapeArgs.push_back({"output", "extents", "i64", {2}});
  Module m = loadDecoder(
      {decoderEntry("main", args), decoderEntry("shapes", shapeArgs, false)});

  StepBatch batch;
  batch.sequences = {sequence(1, {61}, 0, {1}, {4}),
                     sequence(2, {71, 72, 73}, 0, {2}, {8, 9, 10})};
  StepOutput out;
  // Without it, the logits cannot be sized.
  std::unique_ptr<PagedRunner> plain = makeRunner(m, makeMemory());
  ASSERT_NE(plain, nullptr);
  SITS_EXPECT_CODE(plain->execute(batch, &out), StatusCode::kSignatureMismatch);

  PagedRunnerOptions options;
  options.shape_function = "shapes";
  std::unique_ptr<PagedRunner> r = makeRunner(m, makeMemory(), options);
  ASSERT_NE(r, nullptr);
  SITS_ASSERT_OK(r->execute(batch, &out));
  EXPECT_EQ(r->calls(), 2);
  expectRow(out, 0, {contextSum({61}), 61, 0, 1, 4});
  expectRow(out, 1, {contextSum({71, 72, 73}), 73, 2, 3, 10});
}

TEST(PagedRunner, AppliesCopiesBeforeTheModel) {
  std::shared_ptr<kv::Memory> memory = makeMemory();
  std::unique_ptr<PagedRunner> r = makeRunner(loadMain(), memory);
  ASSERT_NE(r, nullptr);
  StepBatch batch;
  batch.sequences = {sequence(1, {1, 2, 3, 4}, 0, {1}, {4, 5, 6, 7})};
  StepOutput out;
  SITS_ASSERT_OK(r->execute(batch, &out));

  // A fork of sequence 1 reads block 1's tokens from block 5, which gets
  // them by way of the host tier: both copies, in order, before the call.
  batch.copies = {{1, kv::Tier::kDevice, 1, kv::Tier::kHost, 0, 4},
                  {1, kv::Tier::kHost, 0, kv::Tier::kDevice, 5, 4}};
  batch.sequences = {sequence(2, {9}, 4, {5, 6}, {24})};
  SITS_ASSERT_OK(r->execute(batch, &out));
  expectRow(out, 0, {contextSum({1, 2, 3, 4, 9}), 9, 4, 5, 24});
  Written written;
  for (int64_t p = 0; p < 4; ++p) {
    written[4 + p] = {p + 1, p};
    written[20 + p] = {p + 1, p};
  }
  written[24] = {9, 4};
  expectPool(*memory, written);

  // A bad copy (into the null block) fails the step before the model runs.
  batch.copies = {{2, kv::Tier::kDevice, 1, kv::Tier::kDevice, 0, 4}};
  batch.sequences = {sequence(2, {10}, 5, {5, 6}, {25})};
  SITS_EXPECT_CODE(r->execute(batch, &out), StatusCode::kInvalidArgument);
  EXPECT_EQ(r->calls(), 2);
  expectPool(*memory, written);
}

TEST(PagedRunner, ModelErrorsComeBack) {
  std::shared_ptr<kv::Memory> memory = makeMemory();
  std::unique_ptr<PagedRunner> r = makeRunner(loadMain(), memory);
  ASSERT_NE(r, nullptr);
  StepBatch batch;
  StepOutput out;
  // The fake embedding table has 100 rows.
  batch.sequences = {sequence(1, {5}, 0, {1}, {4}),
                     sequence(2, {100}, 0, {2}, {8})};
  Status s = r->execute(batch, &out);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << s.toString();
  EXPECT_EQ(s.message(), "entry point 'main': token id out of range");
  // A block past the pool, in the prefill call.
  batch.sequences = {sequence(3, {5, 6}, 0, {8}, {4, 5})};
  s = r->execute(batch, &out);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << s.toString();
  EXPECT_EQ(s.message(), "entry point 'main': block table entry out of range");
  expectPool(*memory, {});
  EXPECT_EQ(r->calls(), 0);

  // The runner is usable afterwards.
  batch.sequences = {sequence(1, {5}, 0, {1}, {4})};
  SITS_ASSERT_OK(r->execute(batch, &out));
  expectRow(out, 0, {contextSum({5}), 5, 0, 1, 4});
}

/// IEEE half and bfloat16 bits as doubles, by their definitions.
double halfValue(uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v = e == 0x1f ? (m ? NAN : INFINITY)
             : e == 0  ? std::ldexp(m, -24)
                       : std::ldexp(1024 + m, e - 25);
  return h & 0x8000 ? -v : v;
}
double bfloat16Value(uint16_t h) {
  const int e = (h >> 7) & 0xff, m = h & 0x7f;
  double v = e == 0xff ? (m ? NAN : INFINITY)
             : e == 0  ? std::ldexp(m, -133)
                       : std::ldexp(128 + m, e - 134);
  return h & 0x8000 ? -v : v;
}

void expectWidened(const std::string &dtype, double (*value)(uint16_t),
                   const std::vector<int32_t> &firstBits) {
  std::vector<Arg> args = decoderArgs(dtype);
  PagedRunnerOptions options;
  options.entry = "main_" + dtype;
  std::unique_ptr<PagedRunner> r =
      makeRunner(loadDecoder({decoderEntry(options.entry, args, false)}),
                 makeMemory(16), options);
  ASSERT_NE(r, nullptr);
  // One sequence per pattern; the last one is a prefill whose earlier
  // tokens must not show.
  StepBatch batch;
  for (size_t i = 0; i < firstBits.size(); ++i) {
    const int32_t block = int32_t(i) + 1;
    batch.sequences.push_back(
        i + 1 < firstBits.size()
            ? sequence(i, {firstBits[i]}, 0, {block}, {block * kBlockSize})
            : sequence(i, {7, 8, firstBits[i]}, 0, {block},
                       {block * kBlockSize, block * kBlockSize + 1,
                        block * kBlockSize + 2}));
  }
  StepOutput out;
  SITS_ASSERT_OK(r->execute(batch, &out));
  ASSERT_EQ(out.vocab_size, kVocab);
  ASSERT_EQ(out.logits.size(), firstBits.size() * size_t(kVocab));
  for (size_t i = 0; i < firstBits.size(); ++i)
    for (int64_t v = 0; v < kVocab; ++v) {
      const uint16_t bits = uint16_t(firstBits[i] + v);
      const float got = out.logits[i * size_t(kVocab) + size_t(v)];
      const double want = value(bits);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << dtype << " 0x" << std::hex << bits;
      } else {
        EXPECT_EQ(double(got), want) << dtype << " 0x" << std::hex << bits;
        EXPECT_EQ(std::signbit(got), std::signbit(want))
            << dtype << " 0x" << std::hex << bits;
      }
    }
}

TEST(PagedRunner, WidensHalfLogitsExactly) {
  // Around 1, zero and the subnormals (the largest is 0x3ff), the smallest
  // normals, the largest finite, infinity and NaNs, on both signs.
  expectWidened(
      "f16", halfValue,
      {0x3c00, 0x0000, 0x03fd, 0x7bfe, 0x8000, 0x83fe, 0xfbfe, 0x3555, 0x0200});
}

TEST(PagedRunner, WidensBfloat16LogitsExactly) {
  expectWidened(
      "bf16", bfloat16Value,
      {0x3f80, 0x0000, 0x007e, 0x7f7e, 0x8000, 0xc040, 0xff7e, 0x3eaa, 0x0040});
}

TEST(PagedRunner, RejectsInconsistentSequences) {
  std::shared_ptr<kv::Memory> memory = makeMemory();
  std::unique_ptr<PagedRunner> r = makeRunner(loadMain(), memory);
  ASSERT_NE(r, nullptr);
  std::vector<ScheduledSequence> bad(
      7, sequence(2, {3, 4, 5}, 2, {2, 3}, {10, 11, 12}));
  bad[0].positions.pop_back();
  bad[1].slot_mapping.push_back(13);
  bad[2].block_table = {2}; // 5 positions need 2 blocks of 4
  bad[3] = sequence(3, {6}, 4, {3}, {16});
  bad[3].block_table.clear();
  bad[3].context_len = 1;
  bad[4].token_ids.clear(); // nothing to compute
  bad[4].positions.clear();
  bad[4].slot_mapping.clear();
  bad[5].context_len = 2; // fewer than its own tokens
  bad[6].context_len = int64_t(1) << 31;
  // Beside a prefill (one call) and beside a decode (which runs first when
  // both are valid): either way nothing runs.
  for (const ScheduledSequence &good :
       {sequence(1, {1, 2}, 0, {1}, {4, 5}), sequence(1, {7}, 0, {1}, {4})})
    for (const ScheduledSequence &q : bad) {
      StepBatch batch;
      batch.sequences = {good, q};
      StepOutput out;
      Status s = r->execute(batch, &out);
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.toString();
      EXPECT_EQ(s.info().index, 1) << s.toString();
      EXPECT_EQ(s.info().subject, "sequences");
    }
  EXPECT_EQ(r->calls(), 0);
  expectPool(*memory, {});
}

} // namespace
