// The cost model behind sits-reorder, op by op, on an H100 (67 TFLOP/s fp32,
// 989 TFLOP/s fp16, 3.35 TB/s): FLOPs and bytes of each op kind, as the
// schedule file reports them.
//
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-reorder{profile=memory schedule-file=-})' -o /dev/null | FileCheck %s
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-reorder{profile=memory peak-gflops=1 bandwidth-gbs=1000 schedule-file=-})' -o /dev/null | FileCheck %s --check-prefix=SLOW

// conv: 2 x 3136 outputs x (8 x 3 x 3) window; reads input and filter,
// writes 1x16x14x14 f32.
// CHECK: op 0 op=conv bound=memory bytes=25344 est_time_us=0.00756537 flops=451584 group=0 index=0 name=sits.conv
// attention: QK^T and PV, 2 x (1 x 2 x 32) x 64 x (16 + 8), plus 12 per
// score for scale, max, exp, sum and divide.
// CHECK: op 1 op=attn bound=memory bytes=18432 est_time_us=0.00550209 flops=245760 group=1 index=1 name=sits.attention
// layer_norm: 8 per element, f16 (2 bytes each).
// CHECK: op 2 op=ln bound=memory bytes=1152 est_time_us=0.000343881 flops=2048 group=2 index=2 name=sits.layer_norm
// linalg.generic: iterations x body arithmetic (mulf 1, tanh 8); its
// tensor.empty destination is not read.
// CHECK: op 3 op=gen bound=memory bytes=1024 est_time_us=0.000305672 flops=2304 group=3 index=3 name=linalg.generic
// qconv: the conv's FLOPs plus one scale per output; the INT8 filter
// (1152 bytes) and its 16 scales replace the f32 filter's 4608 bytes, which
// leaves it compute-bound.
// CHECK: op 4 op=qconv bound=compute bytes=21952 est_time_us=0.00678687 flops=454720 group=4 index=4 name=sits.qconv

// Overridden figures: at 1 GFLOP/s (fp16 scaled alike) everything is
// compute-bound, and the target's figures are replaced in the header.
// SLOW: target h100 vendor=nvidia memory_bytes=80000000000 bandwidth_gbs=1000 peak_fp32_gflops=1 peak_fp16_gflops=14.7612 nominal=false
// SLOW: op 0 op=conv bound=compute bytes=25344 est_time_us=451.584 flops=451584
module attributes {sits.target = #sits.target<"h100">} {
  func.func @main(%img: tensor<1x8x16x16xf32>, %f: tensor<16x8x3x3xf32>, %q: tensor<1x2x32x16xf32>, %k: tensor<1x2x64x16xf32>, %v: tensor<1x2x64x8xf32>, %x: tensor<4x64xf16>, %g: tensor<64xf16>, %qf: tensor<16x8x3x3xi8>, %s: tensor<16xf32>)
      -> (tensor<1x16x14x14xf32>, tensor<1x2x32x8xf32>, tensor<4x64xf16>, tensor<4x64xf16>, tensor<1x16x14x14xf32>) {
    %c = sits.conv %img, %f : (tensor<1x8x16x16xf32>, tensor<16x8x3x3xf32>) -> tensor<1x16x14x14xf32> loc("conv")
    %a = sits.attention %q, %k, %v : (tensor<1x2x32x16xf32>, tensor<1x2x64x16xf32>, tensor<1x2x64x8xf32>) -> tensor<1x2x32x8xf32> loc("attn")
    %n = sits.layer_norm %x, %g : (tensor<4x64xf16>, tensor<64xf16>) -> tensor<4x64xf16> loc("ln")
    %e = tensor.empty() : tensor<4x64xf16>
    %t = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
        ins(%x : tensor<4x64xf16>) outs(%e : tensor<4x64xf16>) {
      ^bb0(%in: f16, %out: f16):
        %m = arith.mulf %in, %in : f16
        %h = math.tanh %m : f16
        linalg.yield %h : f16
    } -> tensor<4x64xf16> loc("gen")
    %qc = sits.qconv %img, %qf, %s : (tensor<1x8x16x16xf32>, tensor<16x8x3x3xi8>, tensor<16xf32>) -> tensor<1x16x14x14xf32> loc("qconv")
    return %c, %a, %n, %t, %qc : tensor<1x16x14x14xf32>, tensor<1x2x32x8xf32>, tensor<4x64xf16>, tensor<4x64xf16>, tensor<1x16x14x14xf32>
  }
}
