// RUN: sits-opt %s --split-input-file | FileCheck %s
// RUN: sits-opt %s --split-input-file | sits-opt --split-input-file | FileCheck %s

// Round trip of sits.paged_attention: a GQA decode step with dynamic batch,
// a static prefill with an explicit scale, and a layer given as an operand.

func.func @decode(%q: tensor<?x4x1x16xf32>, %k: tensor<?x2x1x16xf32>, %v: tensor<?x2x1x16xf32>,
                  %pool: tensor<?x2x2x2x16x16xf32>, %tables: tensor<?x?xi32>, %slots: tensor<?x1xi64>,
                  %lens: tensor<?xi32>) -> (tensor<?x4x1x16xf32>, tensor<?x2x2x2x16x16xf32>) {
  %o, %pool1 = sits.paged_attention %q, %k, %v, %pool, %tables, %slots, %lens {layer = 1}
      : (tensor<?x4x1x16xf32>, tensor<?x2x1x16xf32>, tensor<?x2x1x16xf32>, tensor<?x2x2x2x16x16xf32>,
         tensor<?x?xi32>, tensor<?x1xi64>, tensor<?xi32>) -> (tensor<?x4x1x16xf32>, tensor<?x2x2x2x16x16xf32>)
  return %o, %pool1 : tensor<?x4x1x16xf32>, tensor<?x2x2x2x16x16xf32>
}
// CHECK-LABEL: func.func @decode
//  CHECK-SAME: (%[[Q:[^:]+]]: {{.+}}, %[[K:[^:]+]]: {{.+}}, %[[V:[^:]+]]: {{.+}}, %[[P:[^:]+]]: {{.+}}, %[[T:[^:]+]]: {{.+}}, %[[S:[^:]+]]: {{.+}}, %[[L:[^:]+]]: tensor<?xi32>)
//       CHECK:   %[[O:.+]], %[[P1:.+]] = sits.paged_attention %[[Q]], %[[K]], %[[V]], %[[P]], %[[T]], %[[S]], %[[L]] {layer = 1 : i64}
//  CHECK-SAME:     -> (tensor<?x4x1x16xf32>, tensor<?x2x2x2x16x16xf32>)
//       CHECK:   return %[[O]], %[[P1]]

// -----

func.func @prefill(%q: tensor<2x8x5x32xf16>, %k: tensor<2x8x5x32xf16>, %v: tensor<2x8x5x32xf16>,
                   %pool: tensor<64x1x2x8x4x32xf16>, %tables: tensor<2x3xi32>, %slots: tensor<2x5xi64>,
                   %lens: tensor<2xi32>) -> tensor<2x8x5x32xf16> {
  %o, %pool1 = sits.paged_attention %q, %k, %v, %pool, %tables, %slots, %lens {layer = 0, scale = 0.125 : f64}
      : (tensor<2x8x5x32xf16>, tensor<2x8x5x32xf16>, tensor<2x8x5x32xf16>, tensor<64x1x2x8x4x32xf16>,
         tensor<2x3xi32>, tensor<2x5xi64>, tensor<2xi32>) -> (tensor<2x8x5x32xf16>, tensor<64x1x2x8x4x32xf16>)
  return %o : tensor<2x8x5x32xf16>
}
// CHECK-LABEL: func.func @prefill
//       CHECK:   sits.paged_attention {{.+}} {layer = 0 : i64, scale = 1.250000e-01 : f64}

// -----

// The layer as an operand, in a function shared by every layer.
func.func @shared_layer(%q: tensor<?x4x1x16xf32>, %k: tensor<?x2x1x16xf32>, %v: tensor<?x2x1x16xf32>,
                        %pool: tensor<?x?x2x2x16x16xf32>, %tables: tensor<?x?xi32>, %slots: tensor<?x1xi64>,
                        %lens: tensor<?xi32>, %layer: index) -> (tensor<?x4x1x16xf32>, tensor<?x?x2x2x16x16xf32>) {
  %o, %pool1 = sits.paged_attention %q, %k, %v, %pool, %tables, %slots, %lens layer(%layer) {scale = 0.25 : f64}
      : (tensor<?x4x1x16xf32>, tensor<?x2x1x16xf32>, tensor<?x2x1x16xf32>, tensor<?x?x2x2x16x16xf32>,
         tensor<?x?xi32>, tensor<?x1xi64>, tensor<?xi32>) -> (tensor<?x4x1x16xf32>, tensor<?x?x2x2x16x16xf32>)
  return %o, %pool1 : tensor<?x4x1x16xf32>, tensor<?x?x2x2x16x16xf32>
}
// CHECK-LABEL: func.func @shared_layer
//  CHECK-SAME: (%[[Q:[^:]+]]: {{.+}}, %[[K:[^:]+]]: {{.+}}, %[[V:[^:]+]]: {{.+}}, %[[P:[^:]+]]: {{.+}}, %[[T:[^:]+]]: {{.+}}, %[[S:[^:]+]]: {{.+}}, %[[L:[^:]+]]: {{.+}}, %[[I:[^:]+]]: index)
//       CHECK:   sits.paged_attention %[[Q]], %[[K]], %[[V]], %[[P]], %[[T]], %[[S]], %[[L]] layer(%[[I]]) {scale = 2.500000e-01 : f64}
//  CHECK-SAME:     : (tensor<?x4x1x16xf32>, tensor<?x2x1x16xf32>, tensor<?x2x1x16xf32>, tensor<?x?x2x2x16x16xf32>, tensor<?x?xi32>, tensor<?x1xi64>, tensor<?xi32>)
//  CHECK-SAME:     -> (tensor<?x4x1x16xf32>, tensor<?x?x2x2x16x16xf32>)

// -----

// An INT8 pool: rows of 16 codes and their 4-byte scale.
func.func @int8_pool(%q: tensor<?x4x1x16xf32>, %k: tensor<?x2x1x16xf32>, %v: tensor<?x2x1x16xf32>,
                     %pool: tensor<?x2x2x2x16x20xi8>, %tables: tensor<?x?xi32>, %slots: tensor<?x1xi64>,
                     %lens: tensor<?xi32>) -> (tensor<?x4x1x16xf32>, tensor<?x2x2x2x16x20xi8>) {
  %o, %pool1 = sits.paged_attention %q, %k, %v, %pool, %tables, %slots, %lens {layer = 1}
      : (tensor<?x4x1x16xf32>, tensor<?x2x1x16xf32>, tensor<?x2x1x16xf32>, tensor<?x2x2x2x16x20xi8>,
         tensor<?x?xi32>, tensor<?x1xi64>, tensor<?xi32>) -> (tensor<?x4x1x16xf32>, tensor<?x2x2x2x16x20xi8>)
  return %o, %pool1 : tensor<?x4x1x16xf32>, tensor<?x2x2x2x16x20xi8>
}
// CHECK-LABEL: func.func @int8_pool
//       CHECK:   sits.paged_attention {{.+}} {layer = 1 : i64}
//  CHECK-SAME:     -> (tensor<?x4x1x16xf32>, tensor<?x2x2x2x16x20xi8>)
