//===- CostModel.h - Roofline cost of SITS and linalg ops --------*- C++
//-*-===//
//
// How much work an op does (FLOPs), how many bytes it moves, and how long
// that takes on a target from the known-target table: the larger of compute
// time at the target's peak for the op's dtype and memory time at its
// bandwidth. Graph passes use it to rank fusion groups and orders; the
// schedule file and explain report show its estimates.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_PASSES_ANALYSIS_COSTMODEL_H
#define SITS_PASSES_ANALYSIS_COSTMODEL_H

#include "dialects/Target/KnownTargets.h"

#include "mlir/IR/Operation.h"
#include "mlir/IR/Types.h"

namespace mlir::sits::cost {

/// Bytes a tensor of `type` occupies in memory: low-bit elements packed when
/// the tensor carries a `#sits.packed` encoding, otherwise rounded up to
/// whole bytes each (how they are stored unpacked). Dynamic extents count
/// as 1 and set `*dynamic`. Non-tensor types occupy 0 bytes.
int64_t getTensorBytes(Type type, bool *dynamic = nullptr);

/// What one op costs, independently of the hardware.
struct OpCost {
  double flops = 0;
  /// Bytes of every operand read and every result written (weights at their
  /// stored width).
  int64_t bytesRead = 0;
  int64_t bytesWritten = 0;
  /// The element type the arithmetic runs in (the activations' for
  /// weight-only quantized contractions), null when the op computes nothing.
  Type computeType;
  /// Whether a dynamic extent was counted as 1.
  bool dynamic = false;

  int64_t bytes() const { return bytesRead + bytesWritten; }
};

/// FLOPs and bytes of `op`: contractions and attention count 2 per
/// multiply-accumulate, normalizations and activations a few per element,
/// linalg ops their iteration space times the arithmetic in their body.
/// Views, constants and `tensor.empty` cost nothing.
OpCost estimateOpCost(Operation *op);

/// Whether `op` is free at run time: a constant, an uninitialized tensor, or
/// a view of another tensor (reshapes and slices become views of the same
/// buffer after bufferization).
bool isFreeOp(Operation *op);

struct Estimate {
  double seconds = 0;
  double computeSeconds = 0;
  double memorySeconds = 0;
  bool memoryBound = false;
};

/// The roofline of one target.
class CostModel {
public:
  /// `peakGflopsOverride` / `bandwidthGBsOverride` replace the table's
  /// figures when positive (for measured hosts and for tests).
  explicit CostModel(const target::TargetInfo &info,
                     double peakGflopsOverride = 0,
                     double bandwidthGBsOverride = 0);

  const target::TargetInfo &getTarget() const { return info; }

  /// Peak FLOP/s for arithmetic in `elementType`: the table's figure for
  /// that dtype, the fp32 one when the target has no faster path for it.
  double getPeakFlops(Type elementType) const;
  /// Memory bandwidth in bytes/s.
  double getBandwidth() const { return bandwidth; }
  /// Device memory in bytes.
  int64_t getMemoryBytes() const;

  /// Whether a figure the table leaves unknown (the host CPU's peak and
  /// bandwidth) was replaced by a nominal one derived from its core count
  /// and SIMD width; estimates are then relative, not absolute.
  bool isNominal() const { return nominal; }

  Estimate estimate(double flops, int64_t bytes, Type computeType) const;
  Estimate estimate(const OpCost &cost) const {
    return estimate(cost.flops, cost.bytes(), cost.computeType);
  }

private:
  const target::TargetInfo &info;
  double peakFp32 = 0;
  double bandwidth = 0;
  bool nominal = false;
};

} // namespace mlir::sits::cost

#endif // SITS_PASSES_ANALYSIS_COSTMODEL_H
