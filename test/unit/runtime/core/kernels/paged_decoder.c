/* A fake decoder compiled with a paged KV cache, for the PagedRunner tests.
   Every input is observable in its outputs:

   sits_entry_main(input_ids: i64[B, T], position_ids: i64[B, T],
                   kv_pool: f32[?, 2, 2, 2, 4, 3], block_tables: i32[B, N],
                   slot_mapping: i64[B, T], context_lens: i32[B])
       -> logits: f32[B, T, 5], status: i32

   First every token with a slot >= 0 writes its K/V: element (l, kv, h, d)
   of slot s (block s / 4, offset s % 4) becomes kvValue(id, position, l,
   kv, h, d) below. Then, as attention would after all writes of a layer,
   every row reads its context back through its block table:
       S[b] = sum over p < context_lens[b] of
              pool[table[b][p / 4], 0, 0, 0, p % 4, 0]
   and logits[b, t] = {S[b], id, position, context_lens[b], slot}.
   The status flag, checked before anything is written: 1 for an id outside
   [0, 100), 2 for a block table entry outside the pool, 3 for a slot
   outside the pool, 4 for a context longer than the block table.

   sits_entry_no_positions takes (kv_pool, input_ids, context_lens,
   slot_mapping, block_tables), in that order, and derives each position
   from the left padding: context_len - T + t.

   sits_entry_main_f16 / sits_entry_main_bf16: main's signature without the
   status and with 16-bit logits whose bits are id + v (any id below
   65536 - 5 is accepted), so a test picks the exact halves it wants.

   sits_entry_shapes(main's inputs) -> extents: i64[2] = {B, T}: a shape
   function for logits declared without dim names. */
#include "memref.h"

#include <stddef.h>

enum { L = 2, KV = 2, H = 2, BS = 4, D = 3, V = 5 };

typedef struct {
  void *allocated;
  void *aligned;
  int64_t offset;
  int64_t sizes[3];
  int64_t strides[3];
} MemRef3;

typedef struct {
  void *allocated;
  void *aligned;
  int64_t offset;
  int64_t sizes[6];
  int64_t strides[6];
} MemRef6;

/* The test computes the same: exact in f32 for ids < 100 and positions
   below 1000. */
static float kvValue(int64_t id, int64_t pos, int l, int kv, int h, int d) {
  return (float)(id * 1000 + pos) +
         (float)(((l * KV + kv) * H + h) * D + d) / 32.0f;
}

typedef struct {
  const MemRef2 *ids, *positions; /* positions may be NULL */
  const MemRef6 *pool;
  const MemRef2 *tables, *slots;
  const MemRef1 *lens;
} Args;

/* Checks, writes the K/V of the new tokens and returns 0, or returns the
   failed check's code having written nothing. Stores each row's context
   sum in sums[B]. */
static int32_t step(const Args *a, int64_t maxId, double *sums) {
  const int64_t B = a->ids->sizes[0], T = a->ids->sizes[1];
  const int64_t N = a->tables->sizes[1], blocks = a->pool->sizes[0];
  if (a->pool->sizes[1] != L || a->pool->sizes[2] != KV ||
      a->pool->sizes[3] != H || a->pool->sizes[4] != BS ||
      a->pool->sizes[5] != D || a->slots->sizes[0] != B ||
      a->slots->sizes[1] != T || a->tables->sizes[0] != B ||
      a->lens->sizes[0] != B ||
      (a->positions &&
       (a->positions->sizes[0] != B || a->positions->sizes[1] != T)))
    __builtin_trap(); /* the runtime checked the signature */
  const int64_t *ids = (const int64_t *)a->ids->aligned;
  const int64_t *slots = (const int64_t *)a->slots->aligned;
  const int32_t *tables = (const int32_t *)a->tables->aligned;
  const int32_t *lens = (const int32_t *)a->lens->aligned;
  const int64_t *positions =
      a->positions ? (const int64_t *)a->positions->aligned : NULL;
  float *pool = (float *)a->pool->aligned;
  SITS_CHECK_ALIGNED(pool, 4);

  for (int64_t i = 0; i < B * T; ++i) {
    if (ids[i] < 0 || ids[i] >= maxId)
      return 1;
    if (slots[i] < -1 || slots[i] >= blocks * BS)
      return 3;
  }
  for (int64_t b = 0; b < B; ++b) {
    if (lens[b] < 0 || lens[b] > N * BS)
      return 4;
    for (int64_t p = 0; p < lens[b]; p += BS)
      if (tables[b * N + p / BS] < 0 || tables[b * N + p / BS] >= blocks)
        return 2;
  }

  const int64_t blockElems = L * KV * H * BS * D;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      const int64_t slot = slots[b * T + t];
      if (slot < 0)
        continue;
      const int64_t pos = positions ? positions[b * T + t] : lens[b] - T + t;
      float *block = pool + (slot / BS) * blockElems;
      for (int l = 0; l < L; ++l)
        for (int kv = 0; kv < KV; ++kv)
          for (int h = 0; h < H; ++h)
            for (int d = 0; d < D; ++d)
              block[(((l * KV + kv) * H + h) * BS + slot % BS) * D + d] =
                  kvValue(ids[b * T + t], pos, l, kv, h, d);
    }
  for (int64_t b = 0; b < B; ++b) {
    double s = 0;
    for (int64_t p = 0; p < lens[b]; ++p)
      s += pool[tables[b * N + p / BS] * blockElems + (p % BS) * D];
    sums[b] = s;
  }
  return 0;
}

/* Row sums for up to this many rows (the tests batch at most a few). */
enum { kMaxRows = 64 };

static void writeLogits(const Args *a, const double *sums, MemRef3 *out) {
  const int64_t B = a->ids->sizes[0], T = a->ids->sizes[1];
  if (out->sizes[0] != B || out->sizes[1] != T || out->sizes[2] != V)
    __builtin_trap();
  const int64_t *ids = (const int64_t *)a->ids->aligned;
  const int64_t *slots = (const int64_t *)a->slots->aligned;
  const int32_t *lens = (const int32_t *)a->lens->aligned;
  const int64_t *positions =
      a->positions ? (const int64_t *)a->positions->aligned : NULL;
  float *logits = (float *)out->aligned;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      float *row = logits + (b * T + t) * V;
      row[0] = (float)sums[b];
      row[1] = (float)ids[b * T + t];
      row[2] = (float)(positions ? positions[b * T + t] : lens[b] - T + t);
      row[3] = (float)lens[b];
      row[4] = (float)slots[b * T + t];
    }
}

SITS_EXPORT void sits_entry_main(void **args) {
  Args a = {(MemRef2 *)args[0], (MemRef2 *)args[1], (MemRef6 *)args[2],
            (MemRef2 *)args[3], (MemRef2 *)args[4], (MemRef1 *)args[5]};
  int32_t *flag = (int32_t *)((MemRef0 *)args[7])->aligned;
  double sums[kMaxRows];
  if (a.ids->sizes[0] > kMaxRows)
    __builtin_trap();
  if ((*flag = step(&a, 100, sums)) == 0)
    writeLogits(&a, sums, (MemRef3 *)args[6]);
}

SITS_EXPORT void sits_entry_no_positions(void **args) {
  Args a = {(MemRef2 *)args[1], NULL,
            (MemRef6 *)args[0], (MemRef2 *)args[4],
            (MemRef2 *)args[3], (MemRef1 *)args[2]};
  int32_t *flag = (int32_t *)((MemRef0 *)args[6])->aligned;
  double sums[kMaxRows];
  if (a.ids->sizes[0] > kMaxRows)
    __builtin_trap();
  if ((*flag = step(&a, 100, sums)) == 0)
    writeLogits(&a, sums, (MemRef3 *)args[5]);
}

static void half(void **args) {
  Args a = {(MemRef2 *)args[0], (MemRef2 *)args[1], (MemRef6 *)args[2],
            (MemRef2 *)args[3], (MemRef2 *)args[4], (MemRef1 *)args[5]};
  MemRef3 *out = (MemRef3 *)args[6];
  double sums[kMaxRows];
  if (a.ids->sizes[0] > kMaxRows || step(&a, 65536 - V, sums) != 0)
    __builtin_trap();
  const int64_t n = a.ids->sizes[0] * a.ids->sizes[1];
  const int64_t *ids = (const int64_t *)a.ids->aligned;
  uint16_t *bits = (uint16_t *)out->aligned;
  SITS_CHECK_ALIGNED(bits, 2);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t v = 0; v < V; ++v)
      bits[i * V + v] = (uint16_t)(ids[i] + v);
}

SITS_EXPORT void sits_entry_main_f16(void **args) { half(args); }
SITS_EXPORT void sits_entry_main_bf16(void **args) { half(args); }

SITS_EXPORT void sits_entry_shapes(void **args) {
  const MemRef2 *ids = (const MemRef2 *)args[0];
  MemRef1 *out = (MemRef1 *)args[6];
  if (out->sizes[0] != 2)
    __builtin_trap();
  ((int64_t *)out->aligned)[0] = ids->sizes[0];
  ((int64_t *)out->aligned)[1] = ids->sizes[1];
}
