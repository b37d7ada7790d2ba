// A Llama-2-7B-style decoder block (f16, batch 1, 16 tokens, hidden 4096,
// FFN 11008) with grouped-query attention (Hq = 32 query heads, Hkv = 8
// key/value heads of 128): RMSNorm, q/k/v projections in the [out, in]
// weight layout, rotary embeddings written with tensor/linalg/arith, causal
// GQA, and the SiLU-gated MLP down(silu(gate(x)) * up(x)).
//
// RUN: sits-opt %s -o %t.mlir
// RUN: sits-opt %t.mlir -o %t.2.mlir
// RUN: diff %t.mlir %t.2.mlir
// RUN: sits-opt %s --mlir-print-op-generic | sits-opt -o %t.generic.mlir
// RUN: diff %t.mlir %t.generic.mlir
// RUN: sits-opt %s --emit-bytecode | sits-opt -o %t.bytecode.mlir
// RUN: diff %t.mlir %t.bytecode.mlir
// RUN: FileCheck %s --input-file=%t.mlir
// RUN: sits-opt %s --pass-pipeline='builtin.module(func.func(sits-fuse-epilogue))' | FileCheck %s --check-prefix=FUSED

module attributes {sits.target = #sits.target<"h200">} {
  func.func @llama_block(%x: tensor<1x16x4096xf16>, %cos: tensor<16x128xf16>, %sin: tensor<16x128xf16>,
                         %attn_norm: tensor<4096xf16>,
                         %wq: tensor<4096x4096xf16>, %wk: tensor<1024x4096xf16>,
                         %wv: tensor<1024x4096xf16>, %wo: tensor<4096x4096xf16>,
                         %mlp_norm: tensor<4096xf16>,
                         %w_gate: tensor<11008x4096xf16>, %w_up: tensor<11008x4096xf16>,
                         %w_down: tensor<4096x11008xf16>) -> tensor<1x16x4096xf16> {
    %h = sits.rms_norm %x, %attn_norm {epsilon = 1.0e-06 : f64}
        : (tensor<1x16x4096xf16>, tensor<4096xf16>) -> tensor<1x16x4096xf16>
    %q = sits.matmul %h, %wq {transpose_rhs} : (tensor<1x16x4096xf16>, tensor<4096x4096xf16>) -> tensor<1x16x4096xf16>
    %k = sits.matmul %h, %wk {transpose_rhs} : (tensor<1x16x4096xf16>, tensor<1024x4096xf16>) -> tensor<1x16x1024xf16>
    %v = sits.matmul %h, %wv {transpose_rhs} : (tensor<1x16x4096xf16>, tensor<1024x4096xf16>) -> tensor<1x16x1024xf16>
    %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [1, 16, 32, 128] : tensor<1x16x4096xf16> into tensor<1x16x32x128xf16>
    %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [1, 16, 8, 128] : tensor<1x16x1024xf16> into tensor<1x16x8x128xf16>
    %v4 = tensor.expand_shape %v [[0], [1], [2, 3]] output_shape [1, 16, 8, 128] : tensor<1x16x1024xf16> into tensor<1x16x8x128xf16>
    %eq = tensor.empty() : tensor<1x32x16x128xf16>
    %ekv = tensor.empty() : tensor<1x8x16x128xf16>
    %qh = linalg.transpose ins(%q4 : tensor<1x16x32x128xf16>) outs(%eq : tensor<1x32x16x128xf16>) permutation = [0, 2, 1, 3]
    %kh = linalg.transpose ins(%k4 : tensor<1x16x8x128xf16>) outs(%ekv : tensor<1x8x16x128xf16>) permutation = [0, 2, 1, 3]
    %vh = linalg.transpose ins(%v4 : tensor<1x16x8x128xf16>) outs(%ekv : tensor<1x8x16x128xf16>) permutation = [0, 2, 1, 3]

    // Rotary embeddings: t * cos + rotate_half(t) * sin, with
    // rotate_half(t) = concat(-t[..., 64:], t[..., :64]).
    %cos_q = linalg.broadcast ins(%cos : tensor<16x128xf16>) outs(%eq : tensor<1x32x16x128xf16>) dimensions = [0, 1]
    %sin_q = linalg.broadcast ins(%sin : tensor<16x128xf16>) outs(%eq : tensor<1x32x16x128xf16>) dimensions = [0, 1]
    %q_lo = tensor.extract_slice %qh[0, 0, 0, 0] [1, 32, 16, 64] [1, 1, 1, 1] : tensor<1x32x16x128xf16> to tensor<1x32x16x64xf16>
    %q_hi = tensor.extract_slice %qh[0, 0, 0, 64] [1, 32, 16, 64] [1, 1, 1, 1] : tensor<1x32x16x128xf16> to tensor<1x32x16x64xf16>
    %q_hi_neg = arith.negf %q_hi : tensor<1x32x16x64xf16>
    %q_rot = tensor.concat dim(3) %q_hi_neg, %q_lo : (tensor<1x32x16x64xf16>, tensor<1x32x16x64xf16>) -> tensor<1x32x16x128xf16>
    %q_c = arith.mulf %qh, %cos_q : tensor<1x32x16x128xf16>
    %q_s = arith.mulf %q_rot, %sin_q : tensor<1x32x16x128xf16>
    %q_pe = arith.addf %q_c, %q_s : tensor<1x32x16x128xf16>
    %cos_k = linalg.broadcast ins(%cos : tensor<16x128xf16>) outs(%ekv : tensor<1x8x16x128xf16>) dimensions = [0, 1]
    %sin_k = linalg.broadcast ins(%sin : tensor<16x128xf16>) outs(%ekv : tensor<1x8x16x128xf16>) dimensions = [0, 1]
    %k_lo = tensor.extract_slice %kh[0, 0, 0, 0] [1, 8, 16, 64] [1, 1, 1, 1] : tensor<1x8x16x128xf16> to tensor<1x8x16x64xf16>
    %k_hi = tensor.extract_slice %kh[0, 0, 0, 64] [1, 8, 16, 64] [1, 1, 1, 1] : tensor<1x8x16x128xf16> to tensor<1x8x16x64xf16>
    %k_hi_neg = arith.negf %k_hi : tensor<1x8x16x64xf16>
    %k_rot = tensor.concat dim(3) %k_hi_neg, %k_lo : (tensor<1x8x16x64xf16>, tensor<1x8x16x64xf16>) -> tensor<1x8x16x128xf16>
    %k_c = arith.mulf %kh, %cos_k : tensor<1x8x16x128xf16>
    %k_s = arith.mulf %k_rot, %sin_k : tensor<1x8x16x128xf16>
    %k_pe = arith.addf %k_c, %k_s : tensor<1x8x16x128xf16>

    // Grouped-query attention: query head h reads key/value head h / 4.
    %att = sits.attention %q_pe, %k_pe, %vh {causal}
        : (tensor<1x32x16x128xf16>, tensor<1x8x16x128xf16>, tensor<1x8x16x128xf16>) -> tensor<1x32x16x128xf16>
    %e2 = tensor.empty() : tensor<1x16x32x128xf16>
    %att_t = linalg.transpose ins(%att : tensor<1x32x16x128xf16>) outs(%e2 : tensor<1x16x32x128xf16>) permutation = [0, 2, 1, 3]
    %att2 = tensor.collapse_shape %att_t [[0], [1], [2, 3]] : tensor<1x16x32x128xf16> into tensor<1x16x4096xf16>
    %o = sits.matmul %att2, %wo {transpose_rhs} : (tensor<1x16x4096xf16>, tensor<4096x4096xf16>) -> tensor<1x16x4096xf16>
    %x1 = arith.addf %x, %o : tensor<1x16x4096xf16>

    // SiLU-gated MLP.
    %h2 = sits.rms_norm %x1, %mlp_norm {epsilon = 1.0e-06 : f64}
        : (tensor<1x16x4096xf16>, tensor<4096xf16>) -> tensor<1x16x4096xf16>
    %gate = sits.matmul %h2, %w_gate {transpose_rhs} : (tensor<1x16x4096xf16>, tensor<11008x4096xf16>) -> tensor<1x16x11008xf16>
    %gate_act = sits.activation <silu> %gate : tensor<1x16x11008xf16>
    %up = sits.matmul %h2, %w_up {transpose_rhs} : (tensor<1x16x4096xf16>, tensor<11008x4096xf16>) -> tensor<1x16x11008xf16>
    %gu = arith.mulf %gate_act, %up : tensor<1x16x11008xf16>
    %down = sits.matmul %gu, %w_down {transpose_rhs} : (tensor<1x16x11008xf16>, tensor<4096x11008xf16>) -> tensor<1x16x4096xf16>
    %x2 = arith.addf %x1, %down : tensor<1x16x4096xf16>
    return %x2 : tensor<1x16x4096xf16>
  }
}

// CHECK: module attributes {sits.target = #sits.target<"h200">}
// CHECK-LABEL: func.func @llama_block
//  CHECK-SAME: (%[[X:[^:]+]]: tensor<1x16x4096xf16>, %[[COS:[^:]+]]: tensor<16x128xf16>, %[[SIN:[^:]+]]: tensor<16x128xf16>,
//  CHECK-SAME: %[[ANORM:[^:]+]]: tensor<4096xf16>,
//  CHECK-SAME: %[[WQ:[^:]+]]: tensor<4096x4096xf16>, %[[WK:[^:]+]]: tensor<1024x4096xf16>,
//  CHECK-SAME: %[[WV:[^:]+]]: tensor<1024x4096xf16>, %[[WO:[^:]+]]: tensor<4096x4096xf16>,
//  CHECK-SAME: %[[MNORM:[^:]+]]: tensor<4096xf16>,
//  CHECK-SAME: %[[WG:[^:]+]]: tensor<11008x4096xf16>, %[[WU:[^:]+]]: tensor<11008x4096xf16>,
//  CHECK-SAME: %[[WD:[^:]+]]: tensor<4096x11008xf16>)
//       CHECK:   %[[H:.+]] = sits.rms_norm %[[X]], %[[ANORM]] {epsilon = 9.9999999999999995E-7 : f64}
//       CHECK:   %[[Q:.+]] = sits.matmul %[[H]], %[[WQ]] {transpose_rhs} : {{.+}} -> tensor<1x16x4096xf16>
//       CHECK:   %[[K:.+]] = sits.matmul %[[H]], %[[WK]] {transpose_rhs} : {{.+}} -> tensor<1x16x1024xf16>
//       CHECK:   %[[V:.+]] = sits.matmul %[[H]], %[[WV]] {transpose_rhs} : {{.+}} -> tensor<1x16x1024xf16>
//       CHECK:   linalg.broadcast ins(%[[COS]] : tensor<16x128xf16>) outs(%{{.+}} : tensor<1x32x16x128xf16>) dimensions = [0, 1]
//       CHECK:   tensor.concat dim(3)
//       CHECK:   %[[QPE:.+]] = arith.addf {{.+}} : tensor<1x32x16x128xf16>
//       CHECK:   %[[KPE:.+]] = arith.addf {{.+}} : tensor<1x8x16x128xf16>
//       CHECK:   %[[ATT:.+]] = sits.attention %[[QPE]], %[[KPE]], %{{[^ ]+}} {causal}
//  CHECK-SAME:     : (tensor<1x32x16x128xf16>, tensor<1x8x16x128xf16>, tensor<1x8x16x128xf16>) -> tensor<1x32x16x128xf16>
//       CHECK:   %[[O:.+]] = sits.matmul %{{.+}}, %[[WO]] {transpose_rhs}
//       CHECK:   %[[X1:.+]] = arith.addf %[[X]], %[[O]] : tensor<1x16x4096xf16>
//       CHECK:   %[[H2:.+]] = sits.rms_norm %[[X1]], %[[MNORM]] {epsilon = 9.9999999999999995E-7 : f64}
//       CHECK:   %[[GATE:.+]] = sits.matmul %[[H2]], %[[WG]] {transpose_rhs} : {{.+}} -> tensor<1x16x11008xf16>
//       CHECK:   %[[GA:.+]] = sits.activation <silu> %[[GATE]] : tensor<1x16x11008xf16>
//       CHECK:   %[[UP:.+]] = sits.matmul %[[H2]], %[[WU]] {transpose_rhs} : {{.+}} -> tensor<1x16x11008xf16>
//       CHECK:   %[[GU:.+]] = arith.mulf %[[GA]], %[[UP]] : tensor<1x16x11008xf16>
//       CHECK:   %[[DOWN:.+]] = sits.matmul %[[GU]], %[[WD]] {transpose_rhs} : {{.+}} -> tensor<1x16x4096xf16>
//       CHECK:   %[[X2:.+]] = arith.addf %[[X1]], %[[DOWN]] : tensor<1x16x4096xf16>
//       CHECK:   return %[[X2]]

// The SiLU gate fuses into the gate projection.
// FUSED-LABEL: func.func @llama_block
//       FUSED:   %[[GATE:.+]] = sits.matmul {{.+}} {activation = #sits.activation<silu>, transpose_rhs} : {{.+}} -> tensor<1x16x11008xf16>
//   FUSED-NOT:   sits.activation
//       FUSED:   arith.mulf %[[GATE]],
