// A BERT-base encoder layer (post-LayerNorm, d = 768, 12 heads, FFN 3072,
// batch 2, 128 tokens) with an explicit attention mask: the 0/1 padding mask
// becomes an additive float mask (1 - m) * -10000 broadcast as [B, 1, 1, T]
// over heads and queries; attention is not causal.
//
// RUN: sits-opt %s -o %t.mlir
// RUN: sits-opt %t.mlir -o %t.2.mlir
// RUN: diff %t.mlir %t.2.mlir
// RUN: sits-opt %s --mlir-print-op-generic | sits-opt -o %t.generic.mlir
// RUN: diff %t.mlir %t.generic.mlir
// RUN: sits-opt %s --emit-bytecode | sits-opt -o %t.bytecode.mlir
// RUN: diff %t.mlir %t.bytecode.mlir
// RUN: FileCheck %s --input-file=%t.mlir

module {
  func.func @bert_layer(%x: tensor<2x128x768xf32>, %attention_mask: tensor<2x128xf32>,
                        %wq: tensor<768x768xf32>, %bq: tensor<768xf32>,
                        %wk: tensor<768x768xf32>, %bk: tensor<768xf32>,
                        %wv: tensor<768x768xf32>, %bv: tensor<768xf32>,
                        %wo: tensor<768x768xf32>, %bo: tensor<768xf32>,
                        %ln1_g: tensor<768xf32>, %ln1_b: tensor<768xf32>,
                        %wi: tensor<768x3072xf32>, %bi: tensor<3072xf32>,
                        %wf: tensor<3072x768xf32>, %bf: tensor<768xf32>,
                        %ln2_g: tensor<768xf32>, %ln2_b: tensor<768xf32>) -> tensor<2x128x768xf32> {
    // Additive mask: 0 where attended, -10000 where padded.
    %one = arith.constant dense<1.000000e+00> : tensor<2x128xf32>
    %big = arith.constant dense<-1.000000e+04> : tensor<2x128xf32>
    %inv = arith.subf %one, %attention_mask : tensor<2x128xf32>
    %add_mask = arith.mulf %inv, %big : tensor<2x128xf32>
    %mask = tensor.expand_shape %add_mask [[0, 1, 2], [3]] output_shape [2, 1, 1, 128]
        : tensor<2x128xf32> into tensor<2x1x1x128xf32>

    %q = sits.matmul %x, %wq bias(%bq) : (tensor<2x128x768xf32>, tensor<768x768xf32>, tensor<768xf32>) -> tensor<2x128x768xf32>
    %k = sits.matmul %x, %wk bias(%bk) : (tensor<2x128x768xf32>, tensor<768x768xf32>, tensor<768xf32>) -> tensor<2x128x768xf32>
    %v = sits.matmul %x, %wv bias(%bv) : (tensor<2x128x768xf32>, tensor<768x768xf32>, tensor<768xf32>) -> tensor<2x128x768xf32>
    %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [2, 128, 12, 64] : tensor<2x128x768xf32> into tensor<2x128x12x64xf32>
    %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [2, 128, 12, 64] : tensor<2x128x768xf32> into tensor<2x128x12x64xf32>
    %v4 = tensor.expand_shape %v [[0], [1], [2, 3]] output_shape [2, 128, 12, 64] : tensor<2x128x768xf32> into tensor<2x128x12x64xf32>
    %e = tensor.empty() : tensor<2x12x128x64xf32>
    %qh = linalg.transpose ins(%q4 : tensor<2x128x12x64xf32>) outs(%e : tensor<2x12x128x64xf32>) permutation = [0, 2, 1, 3]
    %kh = linalg.transpose ins(%k4 : tensor<2x128x12x64xf32>) outs(%e : tensor<2x12x128x64xf32>) permutation = [0, 2, 1, 3]
    %vh = linalg.transpose ins(%v4 : tensor<2x128x12x64xf32>) outs(%e : tensor<2x12x128x64xf32>) permutation = [0, 2, 1, 3]
    %ctx = sits.attention %qh, %kh, %vh mask(%mask) {scale = 1.250000e-01 : f64}
        : (tensor<2x12x128x64xf32>, tensor<2x12x128x64xf32>, tensor<2x12x128x64xf32>, tensor<2x1x1x128xf32>)
        -> tensor<2x12x128x64xf32>
    %e2 = tensor.empty() : tensor<2x128x12x64xf32>
    %ctx_t = linalg.transpose ins(%ctx : tensor<2x12x128x64xf32>) outs(%e2 : tensor<2x128x12x64xf32>) permutation = [0, 2, 1, 3]
    %ctx2 = tensor.collapse_shape %ctx_t [[0], [1], [2, 3]] : tensor<2x128x12x64xf32> into tensor<2x128x768xf32>
    %o = sits.matmul %ctx2, %wo bias(%bo) : (tensor<2x128x768xf32>, tensor<768x768xf32>, tensor<768xf32>) -> tensor<2x128x768xf32>
    %r1 = arith.addf %o, %x : tensor<2x128x768xf32>
    %h1 = sits.layer_norm %r1, %ln1_g, %ln1_b {epsilon = 9.9999999999999998E-13 : f64}
        : (tensor<2x128x768xf32>, tensor<768xf32>, tensor<768xf32>) -> tensor<2x128x768xf32>

    %i = sits.matmul %h1, %wi bias(%bi) {activation = #sits.activation<gelu>}
        : (tensor<2x128x768xf32>, tensor<768x3072xf32>, tensor<3072xf32>) -> tensor<2x128x3072xf32>
    %f = sits.matmul %i, %wf bias(%bf) : (tensor<2x128x3072xf32>, tensor<3072x768xf32>, tensor<768xf32>) -> tensor<2x128x768xf32>
    %r2 = arith.addf %f, %h1 : tensor<2x128x768xf32>
    %y = sits.layer_norm %r2, %ln2_g, %ln2_b {epsilon = 9.9999999999999998E-13 : f64}
        : (tensor<2x128x768xf32>, tensor<768xf32>, tensor<768xf32>) -> tensor<2x128x768xf32>
    return %y : tensor<2x128x768xf32>
  }
}

// CHECK-LABEL: func.func @bert_layer
//  CHECK-SAME: (%[[X:[^:]+]]: tensor<2x128x768xf32>, %[[AM:[^:]+]]: tensor<2x128xf32>,
//   CHECK-DAG:   %[[ONE:.+]] = arith.constant dense<1.000000e+00> : tensor<2x128xf32>
//   CHECK-DAG:   %[[BIG:.+]] = arith.constant dense<-1.000000e+04> : tensor<2x128xf32>
//       CHECK:   %[[INV:.+]] = arith.subf %[[ONE]], %[[AM]] : tensor<2x128xf32>
//       CHECK:   %[[ADD:.+]] = arith.mulf %[[INV]], %[[BIG]] : tensor<2x128xf32>
//       CHECK:   %[[MASK:.+]] = tensor.expand_shape %[[ADD]] {{\[\[}}0, 1, 2], [3]] output_shape [2, 1, 1, 128] : tensor<2x128xf32> into tensor<2x1x1x128xf32>
//  CHECK-COUNT-3:   sits.matmul %[[X]], {{.+}} -> tensor<2x128x768xf32>
//       CHECK:   %[[CTX:.+]] = sits.attention %{{[^,]+}}, %{{[^,]+}}, %{{[^ ]+}} mask(%[[MASK]]) {scale = 1.250000e-01 : f64}
//   CHECK-NOT:     causal
//  CHECK-SAME:     : (tensor<2x12x128x64xf32>, tensor<2x12x128x64xf32>, tensor<2x12x128x64xf32>, tensor<2x1x1x128xf32>) -> tensor<2x12x128x64xf32>
//       CHECK:   linalg.transpose ins(%[[CTX]]
//       CHECK:   %[[O:.+]] = sits.matmul
//       CHECK:   %[[R1:.+]] = arith.addf %[[O]], %[[X]]
//       CHECK:   %[[H1:.+]] = sits.layer_norm %[[R1]], {{.+}} {epsilon = 9.9999999999999998E-13 : f64}
//       CHECK:   %[[I:.+]] = sits.matmul %[[H1]], {{.+}} {activation = #sits.activation<gelu>} : {{.+}} -> tensor<2x128x3072xf32>
//       CHECK:   %[[F:.+]] = sits.matmul %[[I]], {{.+}} -> tensor<2x128x768xf32>
//       CHECK:   %[[R2:.+]] = arith.addf %[[F]], %[[H1]]
//       CHECK:   %[[Y:.+]] = sits.layer_norm %[[R2]], {{.+}} {epsilon = 9.9999999999999998E-13 : f64}
//       CHECK:   return %[[Y]]
