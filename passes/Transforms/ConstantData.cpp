//===- ConstantData.cpp - Reading and re-laying out constant data ---------===//

#include "passes/Transforms/ConstantData.h"
#include "passes/Transforms/Passes.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/Threading.h"
#include "llvm/ADT/DenseMap.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <memory>
#include <mutex>
#include <string>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

// Linux 5.4; older kernels refuse it (EINVAL), which costs nothing.
#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

using namespace mlir;
using namespace mlir::sits;

std::optional<ArrayRef<char>> mlir::sits::getConstantBytes(ElementsAttr value) {
  auto type = dyn_cast<ShapedType>(value.getType());
  if (!type || !type.hasStaticShape() ||
      !type.getElementType().isIntOrFloat() ||
      type.getElementType().getIntOrFloatBitWidth() % 8 != 0)
    return std::nullopt;
  ArrayRef<char> bytes;
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(value)) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob)
      return std::nullopt;
    bytes = blob->getData();
  } else if (auto dense = dyn_cast<DenseElementsAttr>(value);
             dense && !dense.isSplat()) {
    bytes = dense.getRawData();
  } else {
    return std::nullopt;
  }
  if (static_cast<int64_t>(bytes.size()) !=
      type.getNumElements() * getElementBytes(type))
    return std::nullopt;
  return bytes;
}

void mlir::sits::releaseConstantPages(ElementsAttr value) {
  auto resource = dyn_cast<DenseResourceElementsAttr>(value);
  AsmResourceBlob *blob =
      resource ? resource.getRawHandle().getBlob() : nullptr;
  // Heap data (the compiler's own, the frontend's copies) is mutable: only
  // the immutable blobs are views of files (the model's, scratch and weight
  // files), whose pages MADV_DONTNEED unmaps without touching the data.
  if (!blob || blob->isMutable())
    return;
  ArrayRef<char> bytes = blob->getData();
  // Whole pages inside the data only. Not MADV_PAGEOUT, which also evicts
  // them from the page cache, at a cost (a quarter of packing's time).
  uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  uintptr_t begin = (uintptr_t(bytes.data()) + page - 1) & ~(page - 1);
  uintptr_t end = (uintptr_t(bytes.data()) + bytes.size()) & ~(page - 1);
  if (end > begin)
    (void)madvise(reinterpret_cast<void *>(begin), end - begin, MADV_DONTNEED);
}

namespace {
/// Scratch blobs whose pages may be mapped into the compiler, oldest first.
/// The newest kResidentScratchBytes may stay mapped, where the artifact
/// writer copies them from; older ones are unmapped, so that a model's
/// re-laid-out weights never all count in its resident set at once.
struct ResidentScratch {
  std::mutex mutex;
  std::deque<std::pair<char *, size_t>> blobs;
  size_t bytes = 0;
};
constexpr size_t kResidentScratchBytes = size_t(1) << 30;

ResidentScratch &residentScratch() {
  static ResidentScratch resident;
  return resident;
}
} // namespace

static void keepResident(char *data, size_t size) {
  ResidentScratch &r = residentScratch();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.blobs.emplace_back(data, size);
  r.bytes += size;
  while (r.bytes > kResidentScratchBytes) {
    auto [oldest, oldestSize] = r.blobs.front();
    r.blobs.pop_front();
    r.bytes -= oldestSize;
    // Unmapped from the compiler only: the page cache keeps the data, and
    // writes it back when it needs the memory. (Writing it back here, as
    // msync and MADV_PAGEOUT would, made the compile wait on the disk:
    // 4 s of a 1.1 B-parameter compile.)
    (void)madvise(oldest, oldestSize, MADV_DONTNEED);
  }
}

static void forgetResident(char *data) {
  ResidentScratch &r = residentScratch();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (auto it = r.blobs.begin(); it != r.blobs.end(); ++it)
    if (it->first == data) {
      r.bytes -= it->second;
      r.blobs.erase(it);
      return;
    }
}

/// A new scratch file nothing else can open (unlinked, or never linked),
/// or -1.
static int openScratchFile() {
  const char *env = std::getenv("TMPDIR");
  std::string dir = env && *env ? env : "/tmp";
  int fd = -1;
#ifdef O_TMPFILE
  fd = open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
#endif
  if (fd < 0) {
    std::string path = dir + "/sits-weights-XXXXXX";
    fd = mkstemp(path.data());
    if (fd >= 0)
      unlink(path.c_str());
  }
  return fd;
}

static bool writeAllAt(int fd, ArrayRef<char> bytes, uint64_t offset) {
  for (size_t done = 0; done < bytes.size();) {
    ssize_t n = ::pwrite(fd, bytes.data() + done, bytes.size() - done,
                         off_t(offset + done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    done += size_t(n);
  }
  return true;
}

/// `data` in a new scratch file, mapped shared and read-only, or null.
/// Written with pwrite rather than filled through a writable mapping: a
/// write fault per page of a fresh file costs several times the copy.
static char *mapScratchCopy(ArrayRef<char> data) {
  int fd = openScratchFile();
  if (fd < 0)
    return nullptr;
  void *map = MAP_FAILED;
  if (writeAllAt(fd, data, 0))
    map = mmap(nullptr, data.size(), PROT_READ, MAP_SHARED, fd, 0);
  close(fd); // the mapping keeps the file
  return map == MAP_FAILED ? nullptr : static_cast<char *>(map);
}

AsmResourceBlob
mlir::sits::makeWeightBlob(size_t size,
                           function_ref<void(MutableArrayRef<char>)> fill) {
  AsmResourceBlob heap = HeapAsmResourceBlob::allocate(size, /*align=*/64);
  fill(heap.getMutableData());
  // Below this, a scratch file costs more than the memory it saves.
  constexpr size_t kScratchBytes = size_t(1) << 20;
  char *data = size >= kScratchBytes ? mapScratchCopy(heap.getData()) : nullptr;
  if (!data)
    return heap;
  keepResident(data, size);
  return AsmResourceBlob(
      ArrayRef<char>(data, size), /*alignment=*/64,
      [size](void *p, size_t, size_t) {
        forgetResident(static_cast<char *>(p));
        munmap(p, size);
      },
      /*dataIsMutable=*/false);
}

namespace {
/// A compile's weight file (setWeightFile) and the blobs written to it.
struct WeightFile {
  ~WeightFile() { ::close(fd); }
  int fd = -1;
  uint64_t base = 0;
  std::mutex mutex;
  /// Bytes allocated after `base`.
  uint64_t end = 0;
  /// Where weights are filled before they are written (fillMutex).
  std::mutex fillMutex;
  std::vector<char> buffer;
  /// Each live blob's data -> its offset from `base`.
  DenseMap<const char *, uint64_t> offsets;
};

struct WeightFiles {
  std::mutex mutex;
  DenseMap<MLIRContext *, std::shared_ptr<WeightFile>> files;
};

WeightFiles &weightFiles() {
  static WeightFiles files;
  return files;
}

std::shared_ptr<WeightFile> lookupWeightFile(MLIRContext *context) {
  WeightFiles &all = weightFiles();
  std::lock_guard<std::mutex> lock(all.mutex);
  return all.files.lookup(context);
}
} // namespace

void mlir::sits::setWeightFile(MLIRContext *context, int fd, uint64_t base) {
  std::shared_ptr<WeightFile> file;
  if (fd >= 0) {
    int own = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (own >= 0) {
      file = std::make_shared<WeightFile>();
      file->fd = own;
      file->base = base;
    }
  }
  WeightFiles &all = weightFiles();
  std::lock_guard<std::mutex> lock(all.mutex);
  if (std::shared_ptr<WeightFile> old = all.files.lookup(context)) {
    // The blobs keep the file; the fill buffer goes with the compile.
    std::lock_guard<std::mutex> fillLock(old->fillMutex);
    old->buffer = {};
  }
  if (file)
    all.files[context] = std::move(file);
  else
    all.files.erase(context);
}

std::optional<uint64_t> mlir::sits::getWeightFileOffset(MLIRContext *context,
                                                        ArrayRef<char> bytes) {
  std::shared_ptr<WeightFile> file = lookupWeightFile(context);
  if (!file)
    return std::nullopt;
  std::lock_guard<std::mutex> lock(file->mutex);
  auto it = file->offsets.find(bytes.data());
  if (it == file->offsets.end())
    return std::nullopt;
  return it->second;
}

/// Splits `size` bytes into ranges of about 1 MiB, whole `grain`s each,
/// and calls `each(begin, size)` for all of them on the context's threads.
static void forEachRange(MLIRContext *context, size_t size, size_t grain,
                         function_ref<void(size_t, size_t)> each) {
  constexpr size_t kRangeBytes = size_t(1) << 20;
  grain = std::max<size_t>(grain, 1);
  size_t range = std::max(grain, kRangeBytes / grain * grain);
  size_t ranges = (size + range - 1) / range;
  parallelFor(context, 0, ranges, [&](size_t i) {
    size_t begin = i * range;
    each(begin, std::min(range, size - begin));
  });
}

/// Writes all of `bytes` at `offset` of `fd`.
AsmResourceBlob mlir::sits::makeFinalWeightBlob(MLIRContext *context,
                                                size_t size, size_t grain,
                                                WeightRangeFill fill) {
  auto fillAll = [&](MutableArrayRef<char> out) {
    forEachRange(context, size, grain, [&](size_t begin, size_t n) {
      fill(begin, out.slice(begin, n));
    });
  };
  // Smaller ones may stay in the code (sits-externalize-weights' min-bytes).
  constexpr size_t kPlacedBytes = size_t(64) << 10;
  std::shared_ptr<WeightFile> file =
      size >= kPlacedBytes ? lookupWeightFile(context) : nullptr;
  if (!file)
    return makeWeightBlob(size, fillAll);
  // Filled in a buffer that stays resident from one weight to the next and
  // written with pwrite: filling a fresh mapping of the file instead costs
  // a page fault per page, more than the copy.
  std::lock_guard<std::mutex> fillLock(file->fillMutex);
  if (file->buffer.size() < size) {
    file->buffer = {}; // not copied when it grows
    file->buffer.resize(size);
  }
  MutableArrayRef<char> filled(file->buffer.data(), size);
  // Blobs follow each other on 64-byte boundaries, as in the weights
  // section; each maps the pages it touches (a page two share is mapped
  // by both: the mappings are shared, so they agree).
  uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
  uint64_t offset, at, delta;
  {
    std::lock_guard<std::mutex> lock(file->mutex);
    offset = (file->end + 63) / 64 * 64;
    at = file->base + offset;
    delta = at % page;
  }
  // Each range is written as soon as it is filled: one thread's write (the
  // file's writes take turns) overlaps the other's fill.
  std::atomic<bool> written = true;
  forEachRange(context, size, grain, [&](size_t begin, size_t n) {
    MutableArrayRef<char> part = filled.slice(begin, n);
    fill(begin, part);
    if (written.load(std::memory_order_relaxed) &&
        !writeAllAt(file->fd, part, at + begin))
      written = false;
  });
  void *map = written ? mmap(nullptr, delta + size, PROT_READ, MAP_SHARED,
                             file->fd, off_t(at - delta))
                      : MAP_FAILED;
  if (map == MAP_FAILED) // a full disk, say: as before
    return makeWeightBlob(size, [&](MutableArrayRef<char> out) {
      std::memcpy(out.data(), filled.data(), size);
    });
  char *data = static_cast<char *>(map) + delta;
  {
    std::lock_guard<std::mutex> lock(file->mutex);
    file->end = offset + size;
    file->offsets[data] = offset;
  }
  // Written back from now on; the page cache keeps what it can for the
  // artifact writer's one read (its digest).
  (void)sync_file_range(file->fd, off_t(at), off_t(size),
                        SYNC_FILE_RANGE_WRITE);
  return AsmResourceBlob(
      ArrayRef<char>(data, size), /*alignment=*/64,
      [file, delta](void *p, size_t bytes, size_t) {
        {
          std::lock_guard<std::mutex> lock(file->mutex);
          file->offsets.erase(static_cast<char *>(p));
        }
        munmap(static_cast<char *>(p) - delta, delta + bytes);
      },
      /*dataIsMutable=*/false);
}

std::optional<ArrayRef<char>>
mlir::sits::getSplatElementBytes(ElementsAttr value) {
  auto dense = dyn_cast<DenseElementsAttr>(value);
  if (!dense || !dense.isSplat() || dense.getElementType().isInteger(1) ||
      dense.getElementType().getIntOrFloatBitWidth() % 8 != 0)
    return std::nullopt;
  return dense.getRawData();
}

TypedAttr mlir::sits::joinConstants(ArrayRef<ElementsAttr> parts, int64_t dim,
                                    RankedTensorType type) {
  int64_t elementBytes = getElementBytes(type);
  int64_t rows = dim == 0 ? 1 : type.getDimSize(0);
  int64_t total = type.getNumElements() * elementBytes;
  AsmResourceBlob blob = makeWeightBlob(total, [&](MutableArrayRef<char> out) {
    // Each part contributes a run of its row to every row of the result.
    int64_t outRow = total / rows, at = 0;
    for (ElementsAttr part : parts) {
      int64_t run = part.getNumElements() * elementBytes / rows;
      if (std::optional<ArrayRef<char>> splat = getSplatElementBytes(part)) {
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t e = 0; e < run; e += elementBytes)
            std::memcpy(out.data() + r * outRow + at + e, splat->data(),
                        elementBytes);
      } else {
        ArrayRef<char> bytes = *getConstantBytes(part);
        for (int64_t r = 0; r < rows; ++r)
          std::memcpy(out.data() + r * outRow + at, bytes.data() + r * run,
                      run);
      }
      at += run;
    }
  });
  return makeConstantLike(parts.front(), type, std::move(blob), ".siblings");
}

int64_t mlir::sits::getElementBytes(ShapedType type) {
  return type.getElementType().getIntOrFloatBitWidth() / 8;
}

/// IEEE binary16 bits to the f32 of the same value.
static float halfBitsToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  uint32_t bits;
  if (exponent == 0x1f) { // inf / NaN
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) { // normal
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) { // zero
    bits = sign;
  } else { // subnormal: normalize
    int shift = 0;
    while (!(mantissa & 0x400)) {
      mantissa <<= 1;
      ++shift;
    }
    bits = sign | (uint32_t(113 - shift) << 23) | ((mantissa & 0x3ff) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

void mlir::sits::loadFloats(ArrayRef<char> bytes, FloatType type,
                            MutableArrayRef<float> out) {
  assert(bytes.size() >= out.size() * (type.isF32() ? 4 : 2) &&
         "loadFloats reads past the data");
  if (type.isF32()) {
    std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
    return;
  }
  bool bf16 = type.isBF16();
  assert((bf16 || type.isF16()) && "loadFloats reads f32, f16 or bf16");
  for (size_t i = 0; i < out.size(); ++i) {
    uint16_t h;
    std::memcpy(&h, bytes.data() + i * sizeof(h), sizeof(h));
    if (bf16) {
      uint32_t bits = uint32_t(h) << 16;
      std::memcpy(&out[i], &bits, sizeof(float));
    } else {
      out[i] = halfBitsToFloat(h);
    }
  }
}

TypedAttr mlir::sits::makeConstantLike(ElementsAttr original,
                                       RankedTensorType type,
                                       AsmResourceBlob blob, StringRef suffix) {
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(original))
    return DenseResourceElementsAttr::get(
        type, (resource.getRawHandle().getKey() + suffix).str(),
        std::move(blob));
  return DenseElementsAttr::getFromRawBuffer(type, blob.getData());
}

mlir::sits::CallSites::CallSites(ModuleOp module) {
  SymbolTableCollection symbolTables;
  SymbolUserMap users(symbolTables, module);
  for (auto func : module.getOps<func::FuncOp>()) {
    if (!func.isPrivate())
      continue;
    SmallVector<func::CallOp> funcCalls;
    for (Operation *user : users.getUsers(func)) {
      auto call = dyn_cast<func::CallOp>(user);
      if (!call || call.getCallee() != func.getSymName()) {
        funcCalls.clear();
        break;
      }
      funcCalls.push_back(call);
    }
    if (!funcCalls.empty())
      calls[func] = std::move(funcCalls);
  }
}

ArrayRef<func::CallOp> mlir::sits::CallSites::lookup(func::FuncOp func) const {
  auto it = calls.find(func);
  return it == calls.end() ? ArrayRef<func::CallOp>() : it->second;
}

/// `value`'s defining constant, when it holds elements.
static std::optional<ConstantSource> getOwnConstant(Value value) {
  auto constant = value.getDefiningOp<arith::ConstantOp>();
  auto elements =
      constant ? dyn_cast<ElementsAttr>(constant.getValue()) : nullptr;
  if (!elements)
    return std::nullopt;
  return ConstantSource{constant, elements, nullptr};
}

/// The function `value` is an argument of, when it is one.
static func::FuncOp getArgumentFunction(Value value) {
  auto arg = dyn_cast<BlockArgument>(value);
  if (!arg || !arg.getOwner()->isEntryBlock())
    return nullptr;
  return dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
}

SmallVector<ConstantSource>
mlir::sits::getConstantSources(Value value, const CallSites &calls) {
  if (std::optional<ConstantSource> own = getOwnConstant(value))
    return {*own};
  func::FuncOp func = getArgumentFunction(value);
  if (!func)
    return {};
  unsigned index = cast<BlockArgument>(value).getArgNumber();
  SmallVector<ConstantSource> sources;
  for (func::CallOp call : calls.lookup(func)) {
    std::optional<ConstantSource> passed =
        getOwnConstant(call.getOperand(index));
    if (!passed)
      return {};
    passed->call = call;
    sources.push_back(*passed);
  }
  return sources;
}

SmallVector<SmallVector<ConstantSource>>
mlir::sits::getJoinedConstantSources(ValueRange parts, const CallSites &calls) {
  SmallVector<SmallVector<ConstantSource>> paths;
  for (Value part : parts) {
    SmallVector<ConstantSource> sources = getConstantSources(part, calls);
    if (sources.empty() ||
        getArgumentFunction(part) != getArgumentFunction(parts.front()))
      return {};
    if (paths.empty())
      paths.resize(sources.size());
    if (sources.size() != paths.size())
      return {};
    for (auto [path, source] : llvm::zip(paths, sources)) {
      // Arguments of one function: each path is one call's operands.
      if (!path.empty() && path.front().call != source.call)
        return {};
      path.push_back(source);
    }
  }
  return paths;
}

Value mlir::sits::deriveJoinedConstant(
    RewriterBase &rewriter, ValueRange parts,
    ArrayRef<SmallVector<ConstantSource>> paths,
    function_ref<TypedAttr(ArrayRef<ConstantSource>)> derive) {
  assert(!paths.empty() && "deriveJoinedConstant needs the parts' constants");
  const ConstantSource &first = paths.front().front();
  if (!first.call)
    return arith::ConstantOp::create(rewriter, first.op->getLoc(),
                                     derive(paths.front()));

  OpBuilder::InsertionGuard guard(rewriter);
  func::FuncOp func = getArgumentFunction(parts.front());
  unsigned index = func.getNumArguments();
  Type type;
  for (ArrayRef<ConstantSource> path : paths) {
    func::CallOp call = path.front().call;
    rewriter.setInsertionPoint(call);
    Value derived = arith::ConstantOp::create(
        rewriter, path.front().op->getLoc(), derive(path));
    assert((!type || derived.getType() == type) &&
           "constants derived for one argument differ in type");
    type = derived.getType();
    rewriter.modifyOpInPlace(call,
                             [&] { call->insertOperands(index, derived); });
  }
  // func.func takes any signature: this cannot fail.
  rewriter.modifyOpInPlace(func, [&] {
    (void)func.insertArgument(index, type, /*argAttrs=*/{},
                              parts.front().getLoc());
  });
  return func.getArgument(index);
}

Value mlir::sits::deriveConstant(
    RewriterBase &rewriter, Value value, ArrayRef<ConstantSource> sources,
    function_ref<TypedAttr(const ConstantSource &)> derive) {
  SmallVector<SmallVector<ConstantSource>> paths =
      llvm::map_to_vector(sources, [](const ConstantSource &s) {
        return SmallVector<ConstantSource>{s};
      });
  return deriveJoinedConstant(
      rewriter, value, paths,
      [&](ArrayRef<ConstantSource> path) { return derive(path.front()); });
}

void mlir::sits::eraseIfUnused(RewriterBase &rewriter, Value value,
                               ArrayRef<ConstantSource> sources) {
  if (!value.use_empty() || sources.empty())
    return;
  if (!sources.front().call) {
    rewriter.eraseOp(sources.front().op);
    return;
  }
  unsigned index = cast<BlockArgument>(value).getArgNumber();
  for (const ConstantSource &source : sources) {
    rewriter.modifyOpInPlace(source.call,
                             [&] { source.call->eraseOperand(index); });
    if (source.op->use_empty())
      rewriter.eraseOp(source.op);
  }
  // func.func takes any signature: this cannot fail.
  func::FuncOp func = getArgumentFunction(value);
  rewriter.modifyOpInPlace(func, [&] {
    (void)func.eraseArgument(index);
    // Results updating a later argument in place now name it one lower.
    for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
      if (auto updated = func.getResultAttrOfType<IntegerAttr>(i, kUpdatesAttr);
          updated && updated.getInt() > int64_t(index))
        func.setResultAttr(
            i, kUpdatesAttr,
            IntegerAttr::get(updated.getType(), updated.getInt() - 1));
  });
}

Value mlir::sits::getPassedValue(Value value, func::CallOp call) {
  func::FuncOp func = call ? getArgumentFunction(value) : nullptr;
  if (!func || call.getCallee() != func.getSymName())
    return value;
  return call.getOperand(cast<BlockArgument>(value).getArgNumber());
}
