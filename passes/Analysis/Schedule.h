//===- Schedule.h - Fusion groups, orders and memory plans -------*- C++
//-*-===//
//
// The scheduling model of one block of tensor ops (a model's entry
// function): fusion groups, the tensors passed between them, valid orders
// of the groups, their peak live memory, and an arena plan for the tensors.
//
// Free ops (constants, tensor.empty, reshapes and slices, which become
// views) belong to no group: they are placed right before their first user.
// Only tensors a group hands to another group (or returns) occupy memory;
// values inside a group stay in the registers or tiles of the fused code.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_PASSES_ANALYSIS_SCHEDULE_H
#define SITS_PASSES_ANALYSIS_SCHEDULE_H

#include "passes/Analysis/CostModel.h"

#include "mlir/IR/Block.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <string>

namespace mlir::sits::schedule {

/// Ops the code generators compute in one fused kernel (a contraction with
/// its elementwise epilogue, a chain of elementwise ops, cheap producers
/// such as transposes folded into their only consumer).
struct Group {
  /// Members in block order.
  SmallVector<Operation *> ops;
  /// The op that names the group: its contraction, attention, normalization
  /// or reduction, else its first op.
  Operation *anchor = nullptr;
  /// FLOPs of all members; bytes of what enters and leaves the group only.
  cost::OpCost cost;
  cost::Estimate estimate;
  /// Groups whose results this group reads, and whose side effects must
  /// happen first.
  SmallVector<int> predecessors;
};

/// A tensor stored in memory between groups.
struct Buffer {
  Value value;
  int64_t bytes = 0;
  int producer = -1;
  /// Distinct groups reading it (directly or through views).
  SmallVector<int> consumers;
  /// Returned by the function: alive until the end.
  bool returned = false;
};

/// A buffer's place in the arena under some order.
struct Allocation {
  int buffer;
  /// Steps (positions in the order) of its producer and last consumer.
  int start, end;
  int64_t offset;
};

struct MemoryPlan {
  SmallVector<Allocation> allocations;
  int64_t arenaBytes = 0;
  int64_t peakBytes = 0;
};

/// Classification of a group for interleaving.
inline bool isMemoryBound(const Group &g) { return g.estimate.memoryBound; }

class BlockSchedule {
public:
  /// Groups the ops of `block` (which must end in a terminator) and costs
  /// them on `model`.
  BlockSchedule(Block &block, const cost::CostModel &model);

  ArrayRef<Group> getGroups() const { return groups; }
  ArrayRef<Buffer> getBuffers() const { return buffers; }

  /// The groups in the order their anchors appear in the block.
  SmallVector<int> getCurrentOrder() const;
  /// Peak bytes of buffers alive at once when running groups in `order`.
  int64_t computePeak(ArrayRef<int> order) const;
  /// An order of low peak memory: the best of a greedy order (the ready
  /// group that grows live memory least), a depth-first order (finish the
  /// branch just opened) and the current order.
  SmallVector<int> minimizeMemory() const;
  /// An order alternating memory- and compute-bound groups where they are
  /// independent, never letting live memory exceed `peakLimit` at a step
  /// where another choice would stay under it.
  SmallVector<int> interleave(int64_t peakLimit) const;
  /// Estimated seconds of `order` when each memory-bound group overlaps the
  /// independent compute-bound group next to it (and vice versa).
  double estimateOverlappedSeconds(ArrayRef<int> order) const;
  /// Assigns arena offsets (64-byte aligned) to the buffers, largest first,
  /// each in the tightest gap left by buffers alive at the same time.
  MemoryPlan planMemory(ArrayRef<int> order) const;

  /// Moves the block's ops into `order`: each group's ops together, free
  /// ops right before their first user. Keeps SSA dominance.
  void apply(ArrayRef<int> order);

private:
  int groupOf(Operation *op) const;
  bool dependsOn(int from, int to, int exclude) const;
  void formGroups();
  void computeEdges();
  void computeBuffers();
  template <typename Pick> SmallVector<int> listSchedule(Pick pick) const;

  Block &block;
  const cost::CostModel &model;
  /// Scheduled (non-free) ops in block order and their op-level producers.
  SmallVector<Operation *> ops;
  llvm::DenseMap<Operation *, int> index;
  SmallVector<SmallVector<int>> producers;
  /// Union-find over op indices while forming groups, then group ids.
  SmallVector<int> parent;
  SmallVector<int> groupOfOp;
  SmallVector<Group> groups;
  SmallVector<Buffer> buffers;
  /// Buffers each group reads and writes.
  SmallVector<SmallVector<int>> reads, writes;
};

/// The name an op is known by in reports: the ONNX node name its location
/// carries, else its printed location.
std::string getOpName(Operation *op);

} // namespace mlir::sits::schedule

#endif // SITS_PASSES_ANALYSIS_SCHEDULE_H
