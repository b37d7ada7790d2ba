//===- qdot.h - The quantized matmul kernel's paths (internal) ------------===//
//
// `sitsRuntimeQDot` (qdot.cpp) picks one implementation per process from
// the CPU's features. The unit tests run each path the CPU has through
// `run` and check that all give the same bits as a plain reference.
// Exported (sits::runtime is) only for those tests; compiled code calls
// `sitsRuntimeQDot`.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_CORE_QDOT_H
#define SITS_RUNTIME_CORE_QDOT_H

#include "sits/runtime/export.h"

#include <cstdint>

extern "C" SITS_RUNTIME_API void
sitsRuntimeQDot(int64_t bits, int64_t m, int64_t n, int64_t k, int64_t group,
                const int8_t *xq, int64_t xqStride, const float *sx,
                int64_t sxStride, const uint8_t *w, const float *ws,
                int64_t wsStride, float *y, int64_t yStride);

namespace sits::runtime::qdot {

/// kAmx: AMX-INT8 tile products for whole 16-row blocks (prefill), the
/// AVX-512 VNNI tiles for the other rows.
enum class Isa { kScalar, kAvx2, kAvx512Vnni, kAmx };

/// "scalar", "avx2", "avx512vnni", "amx".
SITS_RUNTIME_API const char *isaName(Isa isa);
/// Whether this build and CPU can run `isa` (kScalar always).
SITS_RUNTIME_API bool isaAvailable(Isa isa);
/// The path `sitsRuntimeQDot` takes on this CPU.
SITS_RUNTIME_API Isa selectedIsa();
/// `sitsRuntimeQDot` on path `isa` (threads and argument checks included);
/// false, with nothing read or written, when `isa` is not available.
SITS_RUNTIME_API bool run(Isa isa, int64_t bits, int64_t m, int64_t n,
                          int64_t k, int64_t group, const int8_t *xq,
                          int64_t xqStride, const float *sx, int64_t sxStride,
                          const uint8_t *w, const float *ws, int64_t wsStride,
                          float *y, int64_t yStride);

} // namespace sits::runtime::qdot

#endif // SITS_RUNTIME_CORE_QDOT_H
