//===- Schedule.cpp - Fusion groups, orders and memory plans --------------===//

#include "passes/Analysis/Schedule.h"

#include "dialects/Sits/IR/SitsOps.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Linalg/Utils/Utils.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::sits;
using namespace mlir::sits::schedule;

static constexpr int64_t kAlignment = 64;

std::string schedule::getOpName(Operation *op) {
  std::function<std::string(Location)> name = [&](Location loc) {
    if (auto named = dyn_cast<NameLoc>(loc))
      return named.getName().str();
    if (auto fused = dyn_cast<FusedLoc>(loc))
      for (Location inner : fused.getLocations())
        if (std::string n = name(inner); !n.empty())
          return n;
    if (auto callSite = dyn_cast<CallSiteLoc>(loc))
      return name(callSite.getCallee());
    return std::string();
  };
  std::string result = name(op->getLoc());
  if (!result.empty())
    return result;
  llvm::raw_string_ostream os(result);
  op->getLoc().print(os);
  return result;
}

static bool isFree(Operation *op) {
  return cost::isFreeOp(op) && isMemoryEffectFree(op);
}

static bool isContractionOp(Operation *op) {
  if (isa<MatmulOp, QMatmulOp, ConvOp, QConvOp>(op))
    return true;
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  return linalgOp && (linalg::isaContractionOpInterface(linalgOp) ||
                      linalg::isaConvolutionOpInterface(linalgOp));
}

/// Ops that anchor (name) a group: they do the group's real work.
static bool isAnchor(Operation *op) {
  if (isContractionOp(op) ||
      isa<AttentionOp, PagedAttentionOp, LayerNormOp, RMSNormOp, SoftmaxOp>(op))
    return true;
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  return linalgOp && linalgOp.getNumReductionLoops() != 0;
}

static bool isElementwise(Operation *op) {
  if (isa<ActivationOp, QuantizeOp, DequantizeOp>(op))
    return true;
  if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op))
    return linalg::isElementwise(linalgOp);
  Dialect *dialect = op->getDialect();
  return dialect && op->getNumRegions() == 0 &&
         (isa<math::MathDialect>(dialect) ||
          dialect->getNamespace() == "arith") &&
         llvm::all_of(op->getResultTypes(), llvm::IsaPred<RankedTensorType>);
}

/// Data movement the code generators fold into the group that reads it.
static bool isCheapProducer(Operation *op) {
  return isa<linalg::TransposeOp, linalg::BroadcastOp, linalg::CopyOp,
             linalg::FillOp, tensor::PadOp>(op);
}

/// Calls `fn` on every value `op` (or an op nested in it) uses that is
/// defined by an op of `block`.
static void forEachUsedValue(Operation *op, Block &block,
                             llvm::function_ref<void(Value)> fn) {
  op->walk([&](Operation *inner) {
    for (Value v : inner->getOperands())
      if (Operation *def = v.getDefiningOp(); def && def->getBlock() == &block)
        fn(v);
  });
}

BlockSchedule::BlockSchedule(Block &block, const cost::CostModel &model)
    : block(block), model(model) {
  for (Operation &op : block.without_terminator()) {
    if (isFree(&op))
      continue;
    index[&op] = ops.size();
    ops.push_back(&op);
  }
  // Producers through free ops; ops with side effects keep their order.
  producers.resize(ops.size());
  int lastEffect = -1;
  for (auto [i, op] : llvm::enumerate(ops)) {
    llvm::SmallDenseSet<int> seen;
    std::function<void(Value)> visit = [&](Value v) {
      Operation *def = v.getDefiningOp();
      if (auto it = index.find(def); it != index.end()) {
        if (seen.insert(it->second).second)
          producers[i].push_back(it->second);
        return;
      }
      forEachUsedValue(def, block, visit);
    };
    forEachUsedValue(op, block, visit);
    if (!isMemoryEffectFree(op)) {
      if (lastEffect >= 0 && seen.insert(lastEffect).second)
        producers[i].push_back(lastEffect);
      lastEffect = i;
    }
  }
  formGroups();
  computeEdges();
  computeBuffers();
}

/// Scheduled ops reading `v` (through free ops), and whether the block's
/// terminator does.
static void collectConsumers(Value v, Block &block,
                             const llvm::DenseMap<Operation *, int> &index,
                             llvm::SetVector<int> &consumers, bool &returned) {
  for (OpOperand &use : v.getUses()) {
    Operation *user = block.findAncestorOpInBlock(*use.getOwner());
    if (!user)
      continue;
    if (user == block.getTerminator()) {
      returned = true;
    } else if (auto it = index.find(user); it != index.end()) {
      consumers.insert(it->second);
    } else {
      for (Value r : user->getResults())
        collectConsumers(r, block, index, consumers, returned);
    }
  }
}

void BlockSchedule::formGroups() {
  int n = ops.size();
  parent.resize(n);
  for (int i = 0; i < n; ++i)
    parent[i] = i;
  std::function<int(int)> find = [&](int i) {
    return parent[i] == i ? i : parent[i] = find(parent[i]);
  };
  SmallVector<SmallVector<int>> successors(n);
  for (int i = 0; i < n; ++i)
    for (int p : producers[i])
      successors[p].push_back(i);

  // Merging groups a and b must not put an op of another group between
  // them: the merged group would have to run both before and after it.
  auto canMerge = [&](int a, int b) {
    auto closure = [&](int root, bool forward) {
      llvm::BitVector seen(n);
      SmallVector<int> stack;
      for (int i = 0; i < n; ++i)
        if (find(i) == root)
          stack.push_back(i);
      while (!stack.empty()) {
        int i = stack.pop_back_val();
        for (int j : forward ? ArrayRef<int>(successors[i])
                             : ArrayRef<int>(producers[i]))
          if (!seen.test(j)) {
            seen.set(j);
            stack.push_back(j);
          }
      }
      return seen;
    };
    for (auto [from, to] : {std::pair(a, b), std::pair(b, a)}) {
      llvm::BitVector between = closure(from, true);
      between &= closure(to, false);
      for (int i : between.set_bits())
        if (find(i) != a && find(i) != b)
          return false;
    }
    return true;
  };
  auto consumersOf = [&](int i, bool &returned) {
    llvm::SetVector<int> consumers;
    returned = false;
    for (Value r : ops[i]->getResults())
      collectConsumers(r, block, index, consumers, returned);
    return consumers;
  };
  auto isEpilogueHost = [&](int root) {
    for (int i = 0; i < n; ++i)
      if (find(i) == root && !isContractionOp(ops[i]) && !isElementwise(ops[i]))
        return false;
    return true;
  };

  // Epilogues: an elementwise op joins the contraction or elementwise chain
  // producing an operand it alone reads.
  for (int i = 0; i < n; ++i) {
    if (!isElementwise(ops[i]))
      continue;
    for (int p : producers[i]) {
      bool returned;
      llvm::SetVector<int> consumers = consumersOf(p, returned);
      if (returned || consumers.size() != 1 || find(p) == find(i) ||
          !isEpilogueHost(find(p)) || !canMerge(find(p), find(i)))
        continue;
      parent[find(i)] = find(p);
      break;
    }
  }
  // Prologues: transposes, broadcasts, copies and pads join the group that
  // reads all they produce.
  for (int i = n - 1; i >= 0; --i) {
    if (!isCheapProducer(ops[i]) || find(i) != i ||
        llvm::any_of(llvm::seq(0, n),
                     [&](int j) { return j != i && find(j) == i; }))
      continue;
    bool returned;
    llvm::SetVector<int> consumers = consumersOf(i, returned);
    if (returned || consumers.empty())
      continue;
    int target = find(consumers[0]);
    if (llvm::all_of(consumers, [&](int c) { return find(c) == target; }) &&
        canMerge(i, target))
      parent[i] = target;
  }

  // Group ids in block order of their first op.
  llvm::DenseMap<int, int> idOfRoot;
  groupOfOp.resize(n);
  for (int i = 0; i < n; ++i) {
    auto [it, inserted] = idOfRoot.try_emplace(find(i), groups.size());
    if (inserted)
      groups.emplace_back();
    groupOfOp[i] = it->second;
    groups[it->second].ops.push_back(ops[i]);
  }
  for (Group &g : groups) {
    auto anchor = llvm::find_if(g.ops, isAnchor);
    g.anchor = anchor != g.ops.end() ? *anchor : g.ops.front();
  }
}

int BlockSchedule::groupOf(Operation *op) const {
  auto it = index.find(op);
  return it == index.end() ? -1 : groupOfOp[it->second];
}

void BlockSchedule::computeEdges() {
  for (auto [i, op] : llvm::enumerate(ops)) {
    Group &g = groups[groupOfOp[i]];
    for (int p : producers[i]) {
      int pg = groupOfOp[p];
      if (pg != groupOfOp[i] && !llvm::is_contained(g.predecessors, pg))
        g.predecessors.push_back(pg);
    }
  }
}

void BlockSchedule::computeBuffers() {
  reads.resize(groups.size());
  writes.resize(groups.size());
  for (auto [gi, g] : llvm::enumerate(groups)) {
    // Bytes entering the group: every value a member reads that the group
    // does not compute itself (activations, weights, inputs), once each.
    llvm::SmallDenseSet<Value> inputs;
    for (Operation *op : g.ops) {
      cost::OpCost c = cost::estimateOpCost(op);
      g.cost.flops += c.flops;
      g.cost.dynamic |= c.dynamic;
      op->walk([&](Operation *inner) {
        for (Value v : inner->getOperands()) {
          Operation *def = v.getDefiningOp();
          // Uninitialized destinations are never read.
          if ((def && groupOf(def) == int(gi)) ||
              (def && op->isProperAncestor(def)) ||
              isa_and_nonnull<tensor::EmptyOp>(def) || !inputs.insert(v).second)
            continue;
          g.cost.bytesRead +=
              cost::getTensorBytes(v.getType(), &g.cost.dynamic);
        }
      });
      for (Value r : op->getResults()) {
        llvm::SetVector<int> consumerOps;
        bool returned = false;
        collectConsumers(r, block, index, consumerOps, returned);
        SmallVector<int> consumers;
        for (int c : consumerOps)
          if (groupOfOp[c] != int(gi) &&
              !llvm::is_contained(consumers, groupOfOp[c]))
            consumers.push_back(groupOfOp[c]);
        // Results read only inside the group never reach memory.
        if (consumers.empty() && !returned && !consumerOps.empty())
          continue;
        int64_t bytes = cost::getTensorBytes(r.getType(), &g.cost.dynamic);
        if (!bytes)
          continue;
        int b = buffers.size();
        buffers.push_back({r, bytes, int(gi), consumers, returned});
        writes[gi].push_back(b);
        for (int c : consumers)
          reads[c].push_back(b);
        g.cost.bytesWritten += bytes;
      }
    }
    g.cost.computeType = cost::estimateOpCost(g.anchor).computeType;
    g.estimate = model.estimate(g.cost);
  }
}

SmallVector<int> BlockSchedule::getCurrentOrder() const {
  // Groups by their last op's position; a valid order since every op's
  // operands come before it in the block.
  SmallVector<int> order(groups.size());
  for (int i = 0, e = groups.size(); i < e; ++i)
    order[i] = i;
  llvm::DenseMap<Operation *, int> position;
  for (auto [i, op] : llvm::enumerate(block.without_terminator()))
    position[&op] = i;
  auto last = [&](int g) { return position.lookup(groups[g].ops.back()); };
  llvm::stable_sort(order, [&](int a, int b) { return last(a) < last(b); });
  // Merged groups can end before a predecessor's last op: repair with a
  // list schedule preferring this order.
  SmallVector<int> rank(groups.size());
  for (auto [i, g] : llvm::enumerate(order))
    rank[g] = i;
  return listSchedule([&](ArrayRef<int> ready, int64_t, int) {
    return int(llvm::min_element(
                   ready, [&](int a, int b) { return rank[a] < rank[b]; }) -
               ready.begin());
  });
}

int64_t BlockSchedule::computePeak(ArrayRef<int> order) const {
  SmallVector<int> remaining(buffers.size());
  for (auto [i, b] : llvm::enumerate(buffers))
    remaining[i] = b.consumers.size();
  int64_t live = 0, peak = 0;
  for (int g : order) {
    for (int b : writes[g])
      live += buffers[b].bytes;
    peak = std::max(peak, live);
    for (int b : reads[g])
      if (--remaining[b] == 0 && !buffers[b].returned)
        live -= buffers[b].bytes;
    for (int b : writes[g])
      if (remaining[b] == 0 && !buffers[b].returned)
        live -= buffers[b].bytes;
  }
  return peak;
}

/// Kahn's algorithm; `pick(ready, live, last)` chooses which ready group
/// runs next given the live bytes and the group that ran last (-1 first).
template <typename Pick>
SmallVector<int> BlockSchedule::listSchedule(Pick pick) const {
  int n = groups.size();
  SmallVector<int> waiting(n);
  SmallVector<SmallVector<int>> successors(n);
  for (int g = 0; g < n; ++g) {
    waiting[g] = groups[g].predecessors.size();
    for (int p : groups[g].predecessors)
      successors[p].push_back(g);
  }
  SmallVector<int> ready, order;
  for (int g = 0; g < n; ++g)
    if (!waiting[g])
      ready.push_back(g);
  SmallVector<int> remaining(buffers.size());
  for (auto [i, b] : llvm::enumerate(buffers))
    remaining[i] = b.consumers.size();
  int64_t live = 0;
  while (!ready.empty()) {
    int k = pick(ArrayRef<int>(ready), live, order.empty() ? -1 : order.back());
    int g = ready[k];
    ready.erase(ready.begin() + k);
    order.push_back(g);
    for (int b : writes[g])
      live += buffers[b].bytes;
    for (int b : reads[g])
      if (--remaining[b] == 0 && !buffers[b].returned)
        live -= buffers[b].bytes;
    for (int b : writes[g])
      if (remaining[b] == 0 && !buffers[b].returned)
        live -= buffers[b].bytes;
    for (int s : successors[g])
      if (--waiting[s] == 0)
        ready.push_back(s);
  }
  return order;
}

SmallVector<int> BlockSchedule::minimizeMemory() const {
  SmallVector<int> current = getCurrentOrder();
  SmallVector<int> rank(groups.size());
  for (auto [i, g] : llvm::enumerate(current))
    rank[g] = i;
  // The greedy order tracks how many consumers of each buffer are still to
  // run, to know what a candidate frees.
  SmallVector<int> remaining(buffers.size());
  for (auto [i, b] : llvm::enumerate(buffers))
    remaining[i] = b.consumers.size();
  auto delta = [&](int g) {
    int64_t d = 0;
    for (int b : writes[g])
      d += buffers[b].bytes;
    for (int b : reads[g])
      if (remaining[b] == 1 && !buffers[b].returned)
        d -= buffers[b].bytes;
    return d;
  };
  SmallVector<int> greedy =
      listSchedule([&](ArrayRef<int> ready, int64_t, int) {
        int best = 0;
        for (int k = 1, e = ready.size(); k < e; ++k) {
          int64_t dk = delta(ready[k]), db = delta(ready[best]);
          if (dk < db || (dk == db && rank[ready[k]] < rank[ready[best]]))
            best = k;
        }
        for (int b : reads[ready[best]])
          --remaining[b];
        return best;
      });

  // Depth first: the most recently readied group, so that a branch is
  // finished (and its tensors freed) before the next one starts.
  SmallVector<int> readyTime(groups.size(), 0);
  int clock = 0;
  SmallVector<int> depthFirst =
      listSchedule([&](ArrayRef<int> ready, int64_t, int) {
        for (int g : ready)
          if (!readyTime[g])
            readyTime[g] = ++clock;
        int best = 0;
        for (int k = 1, e = ready.size(); k < e; ++k)
          if (readyTime[ready[k]] > readyTime[ready[best]] ||
              (readyTime[ready[k]] == readyTime[ready[best]] &&
               rank[ready[k]] < rank[ready[best]]))
            best = k;
        return best;
      });

  SmallVector<int> best = current;
  int64_t bestPeak = computePeak(current);
  for (SmallVector<int> *candidate : {&greedy, &depthFirst}) {
    if (candidate->size() != groups.size())
      continue;
    if (int64_t peak = computePeak(*candidate); peak < bestPeak) {
      bestPeak = peak;
      best = *candidate;
    }
  }
  return best;
}

SmallVector<int> BlockSchedule::interleave(int64_t peakLimit) const {
  SmallVector<int> current = getCurrentOrder();
  SmallVector<int> rank(groups.size());
  for (auto [i, g] : llvm::enumerate(current))
    rank[g] = i;
  SmallVector<int> remaining(buffers.size());
  for (auto [i, b] : llvm::enumerate(buffers))
    remaining[i] = b.consumers.size();
  auto outBytes = [&](int g) {
    int64_t d = 0;
    for (int b : writes[g])
      d += buffers[b].bytes;
    return d;
  };
  auto delta = [&](int g) {
    int64_t d = outBytes(g);
    for (int b : reads[g])
      if (remaining[b] == 1 && !buffers[b].returned)
        d -= buffers[b].bytes;
    return d;
  };
  return listSchedule([&](ArrayRef<int> ready, int64_t live, int last) {
    // Prefer the other kind of group than the one that just ran, among
    // those that keep live memory under the limit; otherwise the group
    // that grows memory least.
    auto better = [&](int a, int b) {
      bool fitsA = live + outBytes(a) <= peakLimit;
      bool fitsB = live + outBytes(b) <= peakLimit;
      if (fitsA != fitsB)
        return fitsA;
      if (last >= 0) {
        bool otherA = isMemoryBound(groups[a]) != isMemoryBound(groups[last]);
        bool otherB = isMemoryBound(groups[b]) != isMemoryBound(groups[last]);
        if (fitsA && otherA != otherB)
          return otherA;
      }
      int64_t da = delta(a), db = delta(b);
      return da < db || (da == db && rank[a] < rank[b]);
    };
    int best = 0;
    for (int k = 1, e = ready.size(); k < e; ++k)
      if (better(ready[k], ready[best]))
        best = k;
    for (int b : reads[ready[best]])
      --remaining[b];
    return best;
  });
}

double BlockSchedule::estimateOverlappedSeconds(ArrayRef<int> order) const {
  double total = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const Group &a = groups[order[i]];
    if (i + 1 < order.size()) {
      const Group &b = groups[order[i + 1]];
      // An independent memory-bound / compute-bound pair runs concurrently:
      // the shorter one hides under the other.
      if (isMemoryBound(a) != isMemoryBound(b) &&
          !llvm::is_contained(b.predecessors, order[i])) {
        total += std::max(a.estimate.seconds, b.estimate.seconds);
        ++i;
        continue;
      }
    }
    total += a.estimate.seconds;
  }
  return total;
}

MemoryPlan BlockSchedule::planMemory(ArrayRef<int> order) const {
  MemoryPlan plan;
  plan.peakBytes = computePeak(order);
  SmallVector<int> step(groups.size());
  for (auto [i, g] : llvm::enumerate(order))
    step[g] = i;
  int lastStep = int(order.size()) - 1;
  for (auto [i, b] : llvm::enumerate(buffers)) {
    int end = step[b.producer];
    for (int c : b.consumers)
      end = std::max(end, step[c]);
    if (b.returned)
      end = lastStep;
    plan.allocations.push_back({int(i), step[b.producer], end, 0});
  }
  SmallVector<int> bySize(plan.allocations.size());
  for (size_t i = 0; i < bySize.size(); ++i)
    bySize[i] = i;
  llvm::stable_sort(bySize, [&](int a, int b) {
    return buffers[a].bytes > buffers[b].bytes;
  });
  SmallVector<int> placed;
  auto align = [](int64_t x) {
    return (x + kAlignment - 1) / kAlignment * kAlignment;
  };
  for (int a : bySize) {
    Allocation &alloc = plan.allocations[a];
    int64_t size = align(buffers[a].bytes);
    // Buffers alive at the same time, by offset.
    SmallVector<const Allocation *> overlapping;
    for (int p : placed) {
      const Allocation &other = plan.allocations[p];
      if (other.start <= alloc.end && alloc.start <= other.end)
        overlapping.push_back(&other);
    }
    llvm::sort(overlapping, [](const Allocation *x, const Allocation *y) {
      return x->offset < y->offset;
    });
    int64_t cursor = 0, bestOffset = -1, bestGap = INT64_MAX;
    for (const Allocation *other : overlapping) {
      int64_t gap = other->offset - cursor;
      if (gap >= size && gap < bestGap) {
        bestGap = gap;
        bestOffset = cursor;
      }
      cursor =
          std::max(cursor, other->offset + align(buffers[other->buffer].bytes));
    }
    alloc.offset = bestOffset >= 0 ? bestOffset : cursor;
    plan.arenaBytes = std::max(plan.arenaBytes, alloc.offset + size);
    placed.push_back(a);
  }
  return plan;
}

void BlockSchedule::apply(ArrayRef<int> order) {
  SmallVector<Operation *> sequence;
  llvm::DenseSet<Operation *> emitted;
  std::function<void(Operation *)> emit = [&](Operation *op) {
    if (!emitted.insert(op).second)
      return;
    forEachUsedValue(op, block, [&](Value v) {
      Operation *def = v.getDefiningOp();
      if (!op->isAncestor(def))
        emit(def);
    });
    sequence.push_back(op);
  };
  for (int g : order)
    for (Operation *op : groups[g].ops)
      emit(op);
  for (Operation &op : block.without_terminator())
    emit(&op);
  Operation *terminator = block.getTerminator();
  for (Operation *op : sequence)
    op->moveBefore(terminator);
}
