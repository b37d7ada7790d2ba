// sits-reorder: fusion groups, the order that lowers peak live memory, and
// interleaving of memory- and compute-bound groups.
//
// RUN: sits-opt %s --split-input-file --pass-pipeline='builtin.module(sits-reorder{profile=memory})' | FileCheck %s --check-prefix=MEM
// RUN: sits-opt %s --split-input-file --pass-pipeline='builtin.module(sits-reorder{profile=latency})' | FileCheck %s --check-prefix=LAT
// RUN: sits-opt %s --split-input-file --pass-pipeline='builtin.module(sits-reorder{profile=memory})' -mlir-pass-statistics -o /dev/null 2>&1 | FileCheck %s --check-prefix=STATS
// The graph pipeline ends with sits-reorder and forwards its options.
// RUN: sits-opt %s --split-input-file --pass-pipeline='builtin.module(sits-graph-pipeline{profile=memory})' | FileCheck %s --check-prefix=GRAPH
// RUN: sits-opt %s --split-input-file --pass-pipeline='builtin.module(sits-graph-pipeline{profile=latency})' | FileCheck %s --check-prefix=GRAPH-LAT

// Four branches widen to 8x4096 and narrow back to 8x64, all wide
// projections first: 3 wide tensors alive at once (3 x 128 KiB plus the
// narrow ones). Finishing each branch before the next keeps one.
// The sums join the last narrow projection's group as its epilogue. The
// decisions are on the module: one summary, one entry per group and per op.
// MEM: sits.report.schedule = [{{{.*}}groups = 6 : i64, kind = "summary", {{.*}}peak_bytes_after = 137216 : i64, peak_bytes_before = 395264 : i64, profile = "memory", target = "cpu"
// MEM-SAME: {{{.*}}id = 5 : i64, kind = "group", op = "down0", ops = ["down0", "sum0", "sum1"]}
// MEM-LABEL: func.func @main
//  MEM-SAME: (%[[X:.+]]: tensor<8x64xf32>, %[[UP:.+]]: tensor<64x4096xf32>, %[[DOWN:.+]]: tensor<4096x64xf32>)
//       MEM:   %[[U2:.+]] = sits.matmul %[[X]], %[[UP]] :
//  MEM-NEXT:   %[[A2:.+]] = sits.activation <silu> %[[U2]]
//  MEM-NEXT:   %[[D2:.+]] = sits.matmul %[[A2]], %[[DOWN]]
//  MEM-NEXT:   %[[U1:.+]] = sits.matmul %[[X]], %[[UP]] {activation = #sits.activation<gelu>}
//  MEM-NEXT:   %[[D1:.+]] = sits.matmul %[[U1]], %[[DOWN]]
//  MEM-NEXT:   %[[U0:.+]] = sits.matmul %[[X]], %[[UP]] {activation = #sits.activation<relu>}
//  MEM-NEXT:   %[[D0:.+]] = sits.matmul %[[U0]], %[[DOWN]]
//  MEM-NEXT:   %[[S0:.+]] = arith.addf %[[D0]], %[[D1]]
//  MEM-NEXT:   %[[S1:.+]] = arith.addf %[[S0]], %[[D2]]
//  MEM-NEXT:   return %[[S1]]


// GRAPH: kind = "summary"{{.*}}peak_bytes_after = 137216 : i64, peak_bytes_before = 395264 : i64, profile = "memory"
// GRAPH-LABEL: func.func @main
//       GRAPH:   sits.matmul {{.*}}activation = #sits.activation<silu>
//  GRAPH-NEXT:   sits.matmul
//  GRAPH-NEXT:   sits.matmul {{.*}}activation = #sits.activation<gelu>
//  GRAPH-NEXT:   sits.matmul
//  GRAPH-LAT: kind = "summary"{{.*}}profile = "latency"

// STATS: SitsReorder
// STATS:   (S) {{ *}}6 num-groups
// STATS:   (S) {{ *}}4 num-moved
// STATS:   (S) {{ *}}137216 peak-bytes-after
// STATS:   (S) {{ *}}395264 peak-bytes-before
func.func @main(%x: tensor<8x64xf32>, %up: tensor<64x4096xf32>, %down: tensor<4096x64xf32>) -> tensor<8x64xf32> {
  %u0 = sits.matmul %x, %up {activation = #sits.activation<relu>} : (tensor<8x64xf32>, tensor<64x4096xf32>) -> tensor<8x4096xf32> loc("up0")
  %u1 = sits.matmul %x, %up {activation = #sits.activation<gelu>} : (tensor<8x64xf32>, tensor<64x4096xf32>) -> tensor<8x4096xf32> loc("up1")
  %u2 = sits.matmul %x, %up : (tensor<8x64xf32>, tensor<64x4096xf32>) -> tensor<8x4096xf32> loc("up2")
  %a2 = sits.activation <silu> %u2 : tensor<8x4096xf32> loc("act2")
  %d0 = sits.matmul %u0, %down : (tensor<8x4096xf32>, tensor<4096x64xf32>) -> tensor<8x64xf32> loc("down0")
  %d1 = sits.matmul %u1, %down : (tensor<8x4096xf32>, tensor<4096x64xf32>) -> tensor<8x64xf32> loc("down1")
  %d2 = sits.matmul %a2, %down : (tensor<8x4096xf32>, tensor<4096x64xf32>) -> tensor<8x64xf32> loc("down2")
  %s0 = arith.addf %d0, %d1 : tensor<8x64xf32> loc("sum0")
  %s1 = arith.addf %s0, %d2 : tensor<8x64xf32> loc("sum1")
  return %s1 : tensor<8x64xf32>
}

// -----

// A chain of compute-bound matmuls next to an independent chain of
// memory-bound softmaxes on an H100. `latency` alternates them (each
// softmax can hide under a matmul) within the original order's peak;
// `memory` runs the softmaxes last, which lowers the peak. Reshapes are
// views: they move with their user.
// LAT: kind = "summary"{{.*}}peak_bytes_after = 5373952 : i64, peak_bytes_before = 5373952 : i64, profile = "latency", target = "h100"
// LAT-LABEL: func.func @interleave
//       LAT:   sits.softmax %{{.+}} {axis = 1 : i64}
//  LAT-NEXT:   sits.matmul
//  LAT-NEXT:   tensor.collapse_shape
//  LAT-NEXT:   sits.softmax
//  LAT-NEXT:   sits.matmul
//  LAT-NEXT:   sits.matmul
//  LAT-NEXT:   return

// MEM: kind = "summary"{{.*}}peak_bytes_after = 5242880 : i64, peak_bytes_before = 5373952 : i64, profile = "memory", target = "h100"
// MEM-LABEL: func.func @interleave
//       MEM:   sits.matmul
//  MEM-NEXT:   sits.matmul
//  MEM-NEXT:   sits.matmul
//  MEM-NEXT:   sits.softmax
//  MEM-NEXT:   tensor.collapse_shape
//  MEM-NEXT:   sits.softmax
module attributes {sits.target = #sits.target<"h100">} {
  func.func @interleave(%a: tensor<512x512xf32>, %w: tensor<512x512xf32>, %wide: tensor<512x2048xf32>, %y: tensor<64x512xf32>) -> (tensor<512x2048xf32>, tensor<32768xf32>) {
    %m1 = sits.softmax %y {axis = 1 : i64} : tensor<64x512xf32> loc("m1")
    %flat = tensor.collapse_shape %m1 [[0, 1]] : tensor<64x512xf32> into tensor<32768xf32>
    %m2 = sits.softmax %flat {axis = 0 : i64} : tensor<32768xf32> loc("m2")
    %c1 = sits.matmul %a, %w : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32> loc("c1")
    %c2 = sits.matmul %c1, %w : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32> loc("c2")
    %big = sits.matmul %c2, %wide : (tensor<512x512xf32>, tensor<512x2048xf32>) -> tensor<512x2048xf32> loc("big")
    return %big, %m2 : tensor<512x2048xf32>, tensor<32768xf32>
  }
}

// -----

// Transposes join the group that reads all they produce (as the code
// generators fold them into its tiles); functions with side effects keep
// them in order; private functions are left alone.
// MEM: kind = "group", op = "attn", ops = ["tq", "tk", "attn"]
// MEM-LABEL: func.func @prologue
module {
  func.func @prologue(%q: tensor<1x8x2x4xf32>, %k: tensor<1x8x2x4xf32>, %v: tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32> {
    %e0 = tensor.empty() : tensor<1x2x8x4xf32>
    %tq = linalg.transpose ins(%q : tensor<1x8x2x4xf32>) outs(%e0 : tensor<1x2x8x4xf32>) permutation = [0, 2, 1, 3] loc("tq")
    %e1 = tensor.empty() : tensor<1x2x8x4xf32>
    %tk = linalg.transpose ins(%k : tensor<1x8x2x4xf32>) outs(%e1 : tensor<1x2x8x4xf32>) permutation = [0, 2, 1, 3] loc("tk")
    %o = sits.attention %tq, %tk, %v {causal} : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32> loc("attn")
    return %o : tensor<1x2x8x4xf32>
  }
  // MEM-LABEL: func.func private @helper
  //  MEM-NEXT:   sits.activation <relu>
  //  MEM-NEXT:   sits.activation <gelu>
  func.func private @helper(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
    %a = sits.activation <relu> %x : tensor<4xf32>
    %b = sits.activation <gelu> %x : tensor<4xf32>
    return %a, %b : tensor<4xf32>, tensor<4xf32>
  }
}
