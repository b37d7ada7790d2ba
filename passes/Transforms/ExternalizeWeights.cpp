//===- ExternalizeWeights.cpp - Constants to a weights buffer -------------===//

#include "passes/Transforms/ConstantData.h"
#include "passes/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::sits {
#define GEN_PASS_DEF_SITSEXTERNALIZEWEIGHTS
#include "passes/Transforms/Passes.h.inc"
} // namespace mlir::sits

using namespace mlir;
using namespace mlir::sits;

int64_t mlir::sits::getWeightsAlignment() { return 64; }

std::optional<int64_t> mlir::sits::getConstantByteSize(ElementsAttr value) {
  auto type = dyn_cast<ShapedType>(value.getType());
  if (!type || !type.hasStaticShape())
    return std::nullopt;
  Type element = type.getElementType();
  // Sub-byte and boolean data are not laid out as plain bytes.
  if (!element.isIntOrFloat() || element.getIntOrFloatBitWidth() % 8 != 0)
    return std::nullopt;
  if (auto dense = dyn_cast<DenseElementsAttr>(value); dense && dense.isSplat())
    return std::nullopt; // A splat is one value; a fill is cheaper than a load.
  if (!isa<DenseResourceElementsAttr, DenseElementsAttr>(value))
    return std::nullopt;
  return type.getNumElements() * (element.getIntOrFloatBitWidth() / 8);
}

LogicalResult
mlir::sits::serializeWeights(ModuleOp module,
                             llvm::function_ref<void(StringRef)> write) {
  auto layout =
      module->getAttrOfType<ArrayAttr>(SitsDialect::getWeightsAttrName());
  if (!layout)
    return success();
  int64_t position = 0;
  auto pad = [&](int64_t to) {
    static const char zeros[64] = {};
    while (position < to) {
      int64_t n = std::min<int64_t>(64, to - position);
      write(StringRef(zeros, n));
      position += n;
    }
  };
  for (Attribute entry : layout) {
    auto dict = cast<DictionaryAttr>(entry);
    int64_t offset = cast<IntegerAttr>(dict.get("offset")).getInt();
    auto value = cast<ElementsAttr>(dict.get("value"));
    pad(offset);
    ArrayRef<char> bytes;
    if (auto resource = dyn_cast<DenseResourceElementsAttr>(value)) {
      AsmResourceBlob *blob = resource.getRawHandle().getBlob();
      if (!blob)
        return module.emitError()
               << "weight '" << cast<StringAttr>(dict.get("name")).getValue()
               << "' has no data (its resource blob was elided)";
      bytes = blob->getData();
    } else {
      bytes = cast<DenseElementsAttr>(value).getRawData();
    }
    write(StringRef(bytes.data(), bytes.size()));
    position += bytes.size();
  }
  return success();
}

namespace {

struct SitsExternalizeWeightsPass
    : sits::impl::SitsExternalizeWeightsBase<SitsExternalizeWeightsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    SymbolTable symbols(module);

    // Globals worth moving with their sizes, in first-use order so the
    // layout is stable.
    llvm::MapVector<memref::GlobalOp, int64_t> sizes;
    auto candidate = [&](memref::GetGlobalOp get) -> memref::GlobalOp {
      auto global = symbols.lookup<memref::GlobalOp>(get.getName());
      if (!global || !global.getConstant() || !global.getInitialValue())
        return nullptr;
      auto value = dyn_cast<ElementsAttr>(*global.getInitialValue());
      std::optional<int64_t> bytes =
          value ? getConstantByteSize(value) : std::nullopt;
      if (!bytes || *bytes < minBytes ||
          !global.getType().getLayout().isIdentity())
        return nullptr;
      sizes.insert({global, *bytes});
      return global;
    };

    auto i8Buffer =
        MemRefType::get({ShapedType::kDynamic}, IntegerType::get(ctx, 8));
    // Every entry point takes the weights buffer once the module has
    // weights, used or not: one calling convention for all of them (a
    // model's shape function rarely reads a weight, its main always does).
    SmallVector<std::pair<
        func::FuncOp,
        SmallVector<std::pair<memref::GetGlobalOp, memref::GlobalOp>>>>
        entries;
    bool anyWeights = false;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (!func.isPublic() || func.isExternal())
        continue;
      auto &uses =
          entries
              .emplace_back(
                  func, SmallVector<
                            std::pair<memref::GetGlobalOp, memref::GlobalOp>>())
              .second;
      func.walk([&](memref::GetGlobalOp get) {
        if (memref::GlobalOp global = candidate(get))
          uses.emplace_back(get, global);
      });
      anyWeights |= !uses.empty();
    }
    if (!anyWeights)
      return;
    int64_t placed = 0;
    llvm::DenseMap<memref::GlobalOp, int64_t> offsets =
        layOutWeights(sizes, placed);
    for (auto &[func, uses] : entries) {
      if (failed(func.insertArgument(0, i8Buffer, DictionaryAttr(),
                                     func.getLoc())))
        return signalPassFailure();
      Value weights = func.getArgument(0);
      OpBuilder builder(ctx);
      for (auto [get, global] : uses) {
        builder.setInsertionPoint(get);
        Value offset = arith::ConstantIndexOp::create(builder, get.getLoc(),
                                                      offsets[global]);
        Value view =
            memref::ViewOp::create(builder, get.getLoc(), get.getType(),
                                   weights, offset, ValueRange{});
        get.replaceAllUsesWith(view);
        get.erase();
      }
    }
    if (offsets.empty())
      return;

    // The layout in offset order, as serialization writes it.
    SmallVector<std::pair<int64_t, memref::GlobalOp>> ordered;
    for (auto [global, bytes] : sizes)
      ordered.emplace_back(offsets.lookup(global), global);
    llvm::stable_sort(ordered, llvm::less_first());
    SmallVector<Attribute> layout;
    int64_t size = 0;
    for (auto [offset, global] : ordered) {
      NamedAttrList fields;
      fields.append("name", global.getSymNameAttr());
      fields.append("offset",
                    IntegerAttr::get(IntegerType::get(ctx, 64), offset));
      fields.append("value", *global.getInitialValue());
      layout.push_back(fields.getDictionary(ctx));
      size = std::max(size, offset + sizes.lookup(global));
      ++numWeights;
    }
    numBytes = size;
    numPlacedBytes = placed;
    module->setAttr(SitsDialect::getWeightsAttrName(),
                    ArrayAttr::get(ctx, layout));
    if (placed)
      module->setAttr(SitsDialect::getWeightsPlacedAttrName(),
                      IntegerAttr::get(IntegerType::get(ctx, 64), placed));
    // The globals still read (by private functions, say) are found in one
    // walk: a walk per global is quadratic in the model's depth.
    llvm::DenseSet<StringAttr> used;
    if (std::optional<SymbolTable::UseRange> uses =
            SymbolTable::getSymbolUses(&module.getBodyRegion()))
      for (const SymbolTable::SymbolUse &use : *uses)
        used.insert(use.getSymbolRef().getRootReference());
    for (auto [global, bytes] : sizes)
      if (!used.contains(global.getSymNameAttr()))
        global.erase();
  }

  /// Each global's offset in the weights buffer. The weights the compile
  /// already wrote to its place in the artifact (makeFinalWeightBlob) keep
  /// that place, and `placed` is set to the bytes they span; the rest
  /// follow in first-use order. Blobs written there that nothing reads stay
  /// in the artifact as gaps, so more than a few of them put every weight
  /// in first-use order instead (copied when the artifact is written).
  llvm::DenseMap<memref::GlobalOp, int64_t>
  layOutWeights(const llvm::MapVector<memref::GlobalOp, int64_t> &sizes,
                int64_t &placed) {
    MLIRContext *ctx = &getContext();
    llvm::DenseMap<memref::GlobalOp, int64_t> offsets;
    int64_t spanned = 0, live = 0;
    for (auto [global, bytes] : sizes) {
      auto value = cast<ElementsAttr>(*global.getInitialValue());
      std::optional<ArrayRef<char>> data = getConstantBytes(value);
      std::optional<uint64_t> at =
          data ? getWeightFileOffset(ctx, *data) : std::nullopt;
      if (!at || *at % getWeightsAlignment() != 0)
        continue;
      offsets[global] = int64_t(*at);
      spanned = std::max(spanned, int64_t(*at) + bytes);
      live += bytes;
    }
    if (live < spanned - spanned / 8)
      offsets.clear();
    placed =
        offsets.empty() ? 0 : llvm::alignTo(spanned, getWeightsAlignment());
    int64_t size = placed;
    for (auto [global, bytes] : sizes) {
      if (offsets.contains(global))
        continue;
      size = llvm::alignTo(size, getWeightsAlignment());
      offsets[global] = size;
      size += bytes;
    }
    return offsets;
  }
};

} // namespace
