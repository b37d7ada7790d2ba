// RUN: sits-opt %s --sits-prune-channels | FileCheck %s --check-prefix=CHANNELS
// RUN: sits-opt %s --sits-prune-heads | FileCheck %s --check-prefix=HEADS
// RUN: sits-opt %s --sits-prune-channels --sits-prune-heads | FileCheck %s --check-prefix=BOTH
// RUN: sits-opt %s --sits-prune-channels --mlir-pass-statistics -o /dev/null 2>&1 | FileCheck %s --check-prefix=STATS
// RUN: not sits-opt %s --sits-prune-channels=threshold=-1 -o /dev/null 2>&1 | FileCheck %s --check-prefix=NEG-CHANNELS
// RUN: not sits-opt %s --sits-prune-channels=channel-multiple=-2 -o /dev/null 2>&1 | FileCheck %s --check-prefix=NEG-MULTIPLE
// RUN: not sits-opt %s --sits-prune-heads=threshold=-1 -o /dev/null 2>&1 | FileCheck %s --check-prefix=NEG-HEADS

// The structural steps of sits-prune as passes of their own: each prunes
// only its structure, and appends to the report of the passes before it.

// NEG-CHANNELS: error: sits-prune-channels: 'threshold' must be a finite number >= 0, got -1
// NEG-MULTIPLE: error: sits-prune-channels: 'channel-multiple' must be >= 0, got -2
// NEG-HEADS: error: sits-prune-heads: 'threshold' must be a finite number >= 0, got -1

// STATS: (S) 16 num-bytes
// STATS: (S)  1 num-channels

// The report of an earlier pass is kept and the new entries follow it.
// CHANNELS: sits.report.pruning = [{kind = "earlier"}, {bytes = 16 : i64, consumer = "ffn2", {{.+}} kind = "ffn_channels", multiple = 1 : i64, op = "ffn1", removed = 1 : i64, {{.+}}}, {constant_bytes_after
// HEADS: sits.report.pruning = [{kind = "earlier"}, {bytes = {{[0-9]+}} : i64, indices = [1], kind = "attention_heads", op = "attn", removed = 1 : i64, {{.+}}}, {constant_bytes_after
// BOTH: sits.report.pruning = [{kind = "earlier"}, {{{.+}} kind = "ffn_channels", {{.+}}}, {{{.+}} kind = "summary", {{.+}}}, {{{.+}} kind = "attention_heads", {{.+}}}, {{{.+}} kind = "summary", {{.+}}}]

// CHANNELS-LABEL: func.func @ffn
//       CHANNELS:   sits.matmul {{.+}} -> tensor<8x2xf32>
//       CHANNELS:   sits.matmul {{.+}} : (tensor<8x2xf32>, tensor<2x2xf32>) -> tensor<8x2xf32>
// HEADS-LABEL: func.func @ffn
//       HEADS:   sits.matmul {{.+}} -> tensor<8x3xf32>
module attributes {sits.report.pruning = [{kind = "earlier"}]} {
func.func @ffn(%x: tensor<8x2xf32>) -> tensor<8x2xf32> {
  %w1 = arith.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %w2 = arith.constant dense<[[1.0, 2.0], [0.0, 0.0], [5.0, 6.0]]> : tensor<3x2xf32>
  %h = sits.matmul %x, %w1 : (tensor<8x2xf32>, tensor<2x3xf32>) -> tensor<8x3xf32> loc("ffn1")
  %y = sits.matmul %h, %w2 : (tensor<8x3xf32>, tensor<3x2xf32>) -> tensor<8x2xf32> loc("ffn2")
  return %y : tensor<8x2xf32>
}

// Head 1 reads zero rows of the output projection.
// CHANNELS-LABEL: func.func @heads
//       CHANNELS:   sits.attention {{.+}} -> tensor<1x2x2x2xf32>
// HEADS-LABEL: func.func @heads
//       HEADS:   sits.attention {{.+}} -> tensor<1x1x2x2xf32>
//       HEADS:   sits.matmul {{.+}} : (tensor<1x2x2xf32>, tensor<2x4xf32>) -> tensor<1x2x4xf32>
func.func @heads(%x: tensor<1x2x4xf32>) -> tensor<1x2x4xf32> {
  %w = arith.constant dense<1.0> : tensor<4x12xf32>
  %qkv = sits.matmul %x, %w : (tensor<1x2x4xf32>, tensor<4x12xf32>) -> tensor<1x2x12xf32>
  %q = tensor.extract_slice %qkv[0, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x12xf32> to tensor<1x2x4xf32>
  %k = tensor.extract_slice %qkv[0, 0, 4] [1, 2, 4] [1, 1, 1] : tensor<1x2x12xf32> to tensor<1x2x4xf32>
  %v = tensor.extract_slice %qkv[0, 0, 8] [1, 2, 4] [1, 1, 1] : tensor<1x2x12xf32> to tensor<1x2x4xf32>
  %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [1, 2, 2, 2] : tensor<1x2x4xf32> into tensor<1x2x2x2xf32>
  %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [1, 2, 2, 2] : tensor<1x2x4xf32> into tensor<1x2x2x2xf32>
  %v4 = tensor.expand_shape %v [[0], [1], [2, 3]] output_shape [1, 2, 2, 2] : tensor<1x2x4xf32> into tensor<1x2x2x2xf32>
  %e = tensor.empty() : tensor<1x2x2x2xf32>
  %qh = linalg.transpose ins(%q4 : tensor<1x2x2x2xf32>) outs(%e : tensor<1x2x2x2xf32>) permutation = [0, 2, 1, 3]
  %kh = linalg.transpose ins(%k4 : tensor<1x2x2x2xf32>) outs(%e : tensor<1x2x2x2xf32>) permutation = [0, 2, 1, 3]
  %vh = linalg.transpose ins(%v4 : tensor<1x2x2x2xf32>) outs(%e : tensor<1x2x2x2xf32>) permutation = [0, 2, 1, 3]
  %a = sits.attention %qh, %kh, %vh {causal} : (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32> loc("attn")
  %at = linalg.transpose ins(%a : tensor<1x2x2x2xf32>) outs(%e : tensor<1x2x2x2xf32>) permutation = [0, 2, 1, 3]
  %c = tensor.collapse_shape %at [[0], [1], [2, 3]] : tensor<1x2x2x2xf32> into tensor<1x2x4xf32>
  %wo = arith.constant dense<[[2.0, 2.0, 2.0, 2.0], [2.0, 2.0, 2.0, 2.0], [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %y = sits.matmul %c, %wo : (tensor<1x2x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4xf32>
  return %y : tensor<1x2x4xf32>
}
}
