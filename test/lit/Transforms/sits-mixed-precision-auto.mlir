// RUN: sits-opt %s --sits-mixed-precision="precision=auto error-budget=0 block-k=32 block-n=2 group-size=32" | FileCheck %s --check-prefix=EXACT
// RUN: sits-opt %s --sits-mixed-precision="precision=auto error-budget=1 block-k=32 block-n=2 group-size=32" | FileCheck %s --check-prefix=LOOSE
// RUN: sits-opt %s --sits-mixed-precision="precision=auto error-budget=0.05 block-k=32 block-n=2 group-size=32" | FileCheck %s --check-prefix=MID

// precision=auto picks a format per 32x2 block. The blocks are built so
// that block (0, 0) is exact in INT4 (integers in [-7, 7]), blocks (0, 1)
// and (1, 0) are exact in INT8 only (integers in [-127, 127]), and block
// (1, 1) holds normal samples that no format represents exactly.
//
// With a zero budget every block takes its cheapest exact format, fp32 for
// the last (8-bit blocks share their column's scale, here 1): each block column is a strip of two K runs whose products are
// added, and the strips are concatenated.

// EXACT: block_error = [0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00]
// EXACT-SAME: block_shape = [32, 2]
// EXACT-SAME: est_error = 0.000000e+00 : f64, format = ["int4", "int8", "int8", "fp32"]
// EXACT-LABEL: func.func @blocks
//       EXACT: %[[X0:.+]] = tensor.extract_slice %arg0[0, 0] [4, 32] [1, 1]
//       EXACT: %[[A:.+]] = sits.qmatmul %[[X0]], %{{.+}}, %{{.+}} bias(%{{.+}}) {axis = 0 : i64, block_size = 32 : i64} : (tensor<4x32xf32>, tensor<32x2xi4, #sits.packed<storage = i8, axis = 0>>, tensor<1x2xf32>, tensor<2xf32>) -> tensor<4x2xf32>
//       EXACT: %[[X1:.+]] = tensor.extract_slice %arg0[0, 32] [4, 32] [1, 1]
//       EXACT: %[[B:.+]] = sits.qmatmul %[[X1]], %{{.+}}, %{{.+}} {axis = 1 : i64} : (tensor<4x32xf32>, tensor<32x2xi8>, tensor<2xf32>) -> tensor<4x2xf32>
//       EXACT: %[[AB:.+]] = arith.addf %[[A]], %[[B]] : tensor<4x2xf32>
//       EXACT: %[[R0:.+]] = sits.activation <gelu> %[[AB]]
//       EXACT: %[[C:.+]] = sits.qmatmul %{{.+}}, %{{.+}}, %{{.+}} bias(%{{.+}}) {axis = 1 : i64} : (tensor<4x32xf32>, tensor<32x2xi8>, tensor<2xf32>, tensor<2xf32>) -> tensor<4x2xf32>
//       EXACT: %[[D:.+]] = sits.matmul %{{.+}}, %{{.+}} : (tensor<4x32xf32>, tensor<32x2xf32>) -> tensor<4x2xf32>
//       EXACT: %[[CD:.+]] = arith.addf %[[C]], %[[D]] : tensor<4x2xf32>
//       EXACT: %[[R1:.+]] = sits.activation <gelu> %[[CD]]
//       EXACT: %[[R:.+]] = tensor.concat dim(1) %[[R0]], %[[R1]] : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x4xf32>
//       EXACT: return %[[R]]

// A budget of 100% relative error keeps every block in INT4: one qmatmul.
// LOOSE: format = ["int4", "int4", "int4", "int4"]
// LOOSE-LABEL: func.func @blocks
//       LOOSE: sits.qmatmul %arg0, %{{.+}}, %{{.+}} bias(%{{.+}}) {activation = #sits.activation<gelu>, axis = 0 : i64, block_size = 32 : i64} : (tensor<4x64xf32>, tensor<64x4xi4, #sits.packed<storage = i8, axis = 0>>, tensor<2x4xf32>, tensor<4xf32>) -> tensor<4x4xf32>
//   LOOSE-NOT: tensor.concat

// In between, the INT4-exact block stays INT4, and the estimate is within
// the budget.
// MID: est_error = 0.0{{[0-4][0-9]*}} : f64, format = ["int4",
func.func @blocks(%x: tensor<4x64xf32>) -> tensor<4x4xf32> {
  %w = arith.constant dense<[[7.0, -7.0, -36.0, -90.0], [6.0, 3.0, 127.0, -127.0], [6.0, -5.0, -34.0, 99.0], [4.0, 7.0, -30.0, 82.0], [-7.0, -2.0, -69.0, -5.0], [2.0, -6.0, -44.0, -68.0], [0.0, 2.0, 100.0, 77.0], [4.0, 6.0, -92.0, 108.0], [-1.0, -1.0, 120.0, -60.0], [0.0, 7.0, -19.0, 10.0], [-5.0, 0.0, 40.0, -15.0], [-7.0, -1.0, -90.0, 110.0], [7.0, 2.0, 49.0, -117.0], [-2.0, 7.0, 80.0, 59.0], [2.0, 7.0, -81.0, 29.0], [-7.0, -1.0, 0.0, -120.0], [5.0, 4.0, 109.0, 56.0], [-1.0, 0.0, -48.0, -123.0], [-1.0, 0.0, -104.0, 66.0], [-4.0, 4.0, -89.0, 3.0], [-6.0, -1.0, 102.0, 109.0], [-3.0, 4.0, -59.0, -111.0], [4.0, 3.0, -1.0, 87.0], [6.0, 6.0, 32.0, -110.0], [-5.0, -6.0, 38.0, -40.0], [-6.0, 3.0, -70.0, -18.0], [7.0, 6.0, 95.0, 119.0], [3.0, 7.0, -92.0, 16.0], [6.0, -7.0, 67.0, -61.0], [-6.0, 5.0, -58.0, -66.0], [-6.0, 7.0, -74.0, 99.0], [5.0, 7.0, -72.0, -70.0], [-96.0, -96.0, -0.10607225447893143, -1.1857198476791382], [127.0, 127.0, -2.398232936859131, 0.5130521059036255], [77.0, 22.0, -0.29758402705192566, -0.5300084352493286], [91.0, 14.0, -0.23615463078022003, 1.8164759874343872], [67.0, 79.0, -0.049800969660282135, 0.08661926537752151], [-112.0, 15.0, -1.4870728254318237, 1.647339105606079], [-12.0, -54.0, 0.9174879789352417, 1.0669348239898682], [-12.0, -22.0, 0.047672729939222336, 0.9166547656059265], [-2.0, 81.0, 0.37094682455062866, 0.6131891012191772], [83.0, 32.0, -0.15219296514987946, -1.4738879203796387], [54.0, 117.0, 1.0288543701171875, -1.9349596500396729], [35.0, -33.0, -0.23993666470050812, -0.2045224905014038], [-107.0, 13.0, -1.0428601503372192, 0.6131231188774109], [-68.0, 24.0, -0.2003297060728073, -0.4368683397769928], [-121.0, 89.0, 0.519841730594635, -0.47657904028892517], [113.0, -90.0, 1.3889800310134888, 0.35145506262779236], [81.0, -24.0, -0.4743329882621765, -1.9442650079727173], [-117.0, 105.0, -1.3077532052993774, 1.086830735206604], [112.0, -117.0, -0.050604064017534256, -0.2831250727176666], [24.0, 82.0, 1.643251657485962, -1.282649278640747], [74.0, -22.0, -0.5856577754020691, -0.4725876748561859], [92.0, 84.0, 0.5863372683525085, -0.6635351777076721], [-99.0, -125.0, -0.6134178638458252, -1.6051493883132935], [-101.0, -34.0, 0.7293493747711182, 0.806139349937439], [-100.0, -107.0, -0.4763767421245575, 0.16333994269371033], [-62.0, 39.0, -1.2926461696624756, -0.4718131422996521], [6.0, -58.0, 1.37795090675354, 0.13573072850704193], [115.0, 52.0, 2.310363531112671, -0.7871927618980408], [34.0, 113.0, 0.5802844166755676, -0.19550582766532898], [73.0, -95.0, 0.5658178329467773, -0.007211359683424234], [-118.0, 93.0, -0.5611981153488159, -0.8676167726516724], [-24.0, -112.0, 3.0660367012023926, -0.07734505832195282]]> : tensor<64x4xf32>
  %b = arith.constant dense<[0.5, -0.5, 1.0, 2.0]> : tensor<4xf32>
  %y = sits.matmul %x, %w bias(%b) {activation = #sits.activation<gelu>} : (tensor<4x64xf32>, tensor<64x4xf32>, tensor<4xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}
