// RUN: sits-opt %s --split-input-file --pass-pipeline='builtin.module(sits-set-target{target=x86-64-v4},sits-cpu-conv-to-gemm)' | FileCheck %s
// RUN: sits-opt %s --split-input-file --pass-pipeline='builtin.module(sits-set-target{target=x86-64-v3},sits-cpu-conv-to-gemm)' | FileCheck %s --check-prefix=V3

// A convolution with a constant filter becomes a k-major gather of input
// patches I[n, k, oh, ow], a contraction with the filter in panels
// [F/nr, K, nr] into an accumulator C, and a transpose to
// Y[n, F/nr, nr, oh, ow] viewed as NCHW. The panel width nr is the target's
// register block: 32 on x86-64-v4 (CHECK), 16 on x86-64-v3 (V3).
//
// Outputs this narrow (2 x 2 pixels, less than a register block of 8 on
// v4 or 4 on v3 per row) take the pixels as one M loop p = oh * OW + ow:
// C[n, F/nr, p, nr] over I viewed as [n, K, OH * OW]; the transpose reads
// C at p = oh * 2 + ow.

// CHECK-DAG: #[[ID4:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
// CHECK-DAG: #[[LHS:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2)>
// CHECK-DAG: #[[PANEL:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d1, d4, d3)>
// CHECK-DAG: #[[ACC:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
// CHECK-DAG: #[[FROMACC:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3 * 2 + d4, d2)>
// CHECK-DAG: #[[ID5:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>
// CHECK-LABEL: func.func @conv
//  CHECK-SAME:   (%[[X:.+]]: tensor<1x2x5x5xf32>, %[[B:.+]]: tensor<1x32x2x2xf32>)
// Panel 0 row 0 holds F[0..31][k = 0]: 0.0, then F[1][0] = 18.0 (0x41900000).
//       CHECK:   %[[P:.+]] = arith.constant dense<"0x0000000000009041{{.*}}"> : tensor<1x18x32xf32>
// At stride 2 the input is first split by column phase, X'[n, c, h, q, w']
// = X[n, c, h, 2 * w' + q] (zero past column 4), so that each patch row is
// a contiguous run of X'.
//       CHECK:   %[[S:.+]] = linalg.generic {indexing_maps = [#[[ID5]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} outs({{.+}} : tensor<1x2x5x2x3xf32>)
//       CHECK:     %[[SQ:.+]] = linalg.index 3
//       CHECK:     %[[SW:.+]] = linalg.index 4
//       CHECK:     %[[SB:.+]] = arith.muli %[[SW]], %{{.+}} : index
//       CHECK:     %[[SCOL:.+]] = arith.addi %[[SB]], %[[SQ]] : index
//       CHECK:     arith.cmpi slt, %[[SCOL]], %{{.+}} : index
//       CHECK:     tensor.extract %[[X]][
//       CHECK:   %[[I:.+]] = linalg.generic {indexing_maps = [#[[ID4]]], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs({{.+}} : tensor<1x18x2x2xf32>)
// k = c * 9 + kh * 3 + kw; input row oh * 2 + kh; phase kw % 2, column
// ow + kw / 2.
//       CHECK:     %[[N:.+]] = linalg.index 0
//       CHECK:     %[[K:.+]] = linalg.index 1
//       CHECK:     %[[OH:.+]] = linalg.index 2
//       CHECK:     %[[OW:.+]] = linalg.index 3
//       CHECK:     %[[C:.+]] = arith.divui %[[K]]
//       CHECK:     %[[R:.+]] = arith.remui %[[K]]
//       CHECK:     %[[KH:.+]] = arith.divui %[[R]]
//       CHECK:     %[[KW:.+]] = arith.remui %[[R]]
//       CHECK:     %[[SH:.+]] = arith.muli %[[OH]], %{{.+}} : index
//       CHECK:     %[[DH:.+]] = arith.muli %[[KH]], %{{.+}} : index
//       CHECK:     %[[IH:.+]] = arith.addi %[[SH]], %[[DH]] : index
//       CHECK:     %[[OFF:.+]] = arith.muli %[[KW]], %{{.+}} : index
//       CHECK:     %[[PH:.+]] = arith.remui %[[OFF]], %{{.+}} : index
//       CHECK:     %[[HALF:.+]] = arith.divui %[[OFF]], %{{.+}} : index
//       CHECK:     %[[COL:.+]] = arith.addi %[[OW]], %[[HALF]] : index
//       CHECK:     tensor.extract %[[S]][%[[N]], %[[C]], %[[IH]], %[[PH]], %[[COL]]] : tensor<1x2x5x2x3xf32>
//       CHECK:   %[[IP:.+]] = tensor.collapse_shape %[[I]] {{\[}}[0], [1], [2, 3]] : tensor<1x18x2x2xf32> into tensor<1x18x4xf32>
// The initial value is not a fill: C starts from zero and Y adds it.
//       CHECK:   %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
//       CHECK:   %[[Z:.+]] = linalg.fill ins(%[[ZERO]] : f32)
//  CHECK-SAME:     -> tensor<1x1x4x32xf32>
//       CHECK:   %[[G:.+]] = linalg.generic {indexing_maps = [#[[LHS]], #[[PANEL]], #[[ACC]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%[[IP]], %[[P]] : tensor<1x18x4xf32>, tensor<1x18x32xf32>) outs(%[[Z]] : tensor<1x1x4x32xf32>)
//       CHECK:     arith.mulf
//       CHECK:     arith.addf
//       CHECK:   %[[BE:.+]] = tensor.expand_shape %[[B]] {{\[}}[0], [1, 2], [3], [4]] output_shape [1, 1, 32, 2, 2]
//       CHECK:   %[[T:.+]] = linalg.generic {indexing_maps = [#[[FROMACC]], #[[ID5]], #[[ID5]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%[[G]], %[[BE]] : tensor<1x1x4x32xf32>, tensor<1x1x32x2x2xf32>)
//       CHECK:     arith.addf
//       CHECK:   %[[Y:.+]] = tensor.collapse_shape %[[T]] {{\[}}[0], [1, 2], [3], [4]] : tensor<1x1x32x2x2xf32> into tensor<1x32x2x2xf32>
//       CHECK:   return %[[Y]]
//   CHECK-NOT:   linalg.conv_2d_nchw_fchw
// V3-LABEL: func.func @conv
// Panel 0 row 0 holds F[0..15][k = 0]: 0.0, 18.0, ...
//       V3:   arith.constant dense<"0x0000000000009041{{.*}}"> : tensor<2x18x16xf32>
//       V3:   linalg.fill {{.+}} -> tensor<1x2x4x16xf32>
//       V3:   linalg.generic {{.+}} ins(%{{.+}}, %{{.+}} : tensor<1x18x4xf32>, tensor<2x18x16xf32>) outs(%{{.+}} : tensor<1x2x4x16xf32>)
//       V3:   tensor.expand_shape {{.+}} output_shape [1, 2, 16, 2, 2]
//       V3:   tensor.collapse_shape {{.+}} : tensor<1x2x16x2x2xf32> into tensor<1x32x2x2xf32>
//   V3-NOT:   linalg.conv_2d_nchw_fchw
func.func @conv(%x: tensor<1x2x5x5xf32>, %b: tensor<1x32x2x2xf32>) -> tensor<1x32x2x2xf32> {
  %w = arith.constant dense<[[[[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [6.0, 7.0, 8.0]], [[9.0, 10.0, 11.0], [12.0, 13.0, 14.0], [15.0, 16.0, 17.0]]], [[[18.0, 19.0, 20.0], [21.0, 22.0, 23.0], [24.0, 25.0, 26.0]], [[27.0, 28.0, 29.0], [30.0, 31.0, 32.0], [33.0, 34.0, 35.0]]], [[[36.0, 37.0, 38.0], [39.0, 40.0, 41.0], [42.0, 43.0, 44.0]], [[45.0, 46.0, 47.0], [48.0, 49.0, 50.0], [51.0, 52.0, 53.0]]], [[[54.0, 55.0, 56.0], [57.0, 58.0, 59.0], [60.0, 61.0, 62.0]], [[63.0, 64.0, 65.0], [66.0, 67.0, 68.0], [69.0, 70.0, 71.0]]], [[[72.0, 73.0, 74.0], [75.0, 76.0, 77.0], [78.0, 79.0, 80.0]], [[81.0, 82.0, 83.0], [84.0, 85.0, 86.0], [87.0, 88.0, 89.0]]], [[[90.0, 91.0, 92.0], [93.0, 94.0, 95.0], [96.0, 97.0, 98.0]], [[99.0, 100.0, 101.0], [102.0, 103.0, 104.0], [105.0, 106.0, 107.0]]], [[[108.0, 109.0, 110.0], [111.0, 112.0, 113.0], [114.0, 115.0, 116.0]], [[117.0, 118.0, 119.0], [120.0, 121.0, 122.0], [123.0, 124.0, 125.0]]], [[[126.0, 127.0, 128.0], [129.0, 130.0, 131.0], [132.0, 133.0, 134.0]], [[135.0, 136.0, 137.0], [138.0, 139.0, 140.0], [141.0, 142.0, 143.0]]], [[[144.0, 145.0, 146.0], [147.0, 148.0, 149.0], [150.0, 151.0, 152.0]], [[153.0, 154.0, 155.0], [156.0, 157.0, 158.0], [159.0, 160.0, 161.0]]], [[[162.0, 163.0, 164.0], [165.0, 166.0, 167.0], [168.0, 169.0, 170.0]], [[171.0, 172.0, 173.0], [174.0, 175.0, 176.0], [177.0, 178.0, 179.0]]], [[[180.0, 181.0, 182.0], [183.0, 184.0, 185.0], [186.0, 187.0, 188.0]], [[189.0, 190.0, 191.0], [192.0, 193.0, 194.0], [195.0, 196.0, 197.0]]], [[[198.0, 199.0, 200.0], [201.0, 202.0, 203.0], [204.0, 205.0, 206.0]], [[207.0, 208.0, 209.0], [210.0, 211.0, 212.0], [213.0, 214.0, 215.0]]], [[[216.0, 217.0, 218.0], [219.0, 220.0, 221.0], [222.0, 223.0, 224.0]], [[225.0, 226.0, 227.0], [228.0, 229.0, 230.0], [231.0, 232.0, 233.0]]], [[[234.0, 235.0, 236.0], [237.0, 238.0, 239.0], [240.0, 241.0, 242.0]], [[243.0, 244.0, 245.0], [246.0, 247.0, 248.0], [249.0, 250.0, 251.0]]], [[[252.0, 253.0, 254.0], [255.0, 256.0, 257.0], [258.0, 259.0, 260.0]], [[261.0, 262.0, 263.0], [264.0, 265.0, 266.0], [267.0, 268.0, 269.0]]], [[[270.0, 271.0, 272.0], [273.0, 274.0, 275.0], [276.0, 277.0, 278.0]], [[279.0, 280.0, 281.0], [282.0, 283.0, 284.0], [285.0, 286.0, 287.0]]], [[[288.0, 289.0, 290.0], [291.0, 292.0, 293.0], [294.0, 295.0, 296.0]], [[297.0, 298.0, 299.0], [300.0, 301.0, 302.0], [303.0, 304.0, 305.0]]], [[[306.0, 307.0, 308.0], [309.0, 310.0, 311.0], [312.0, 313.0, 314.0]], [[315.0, 316.0, 317.0], [318.0, 319.0, 320.0], [321.0, 322.0, 323.0]]], [[[324.0, 325.0, 326.0], [327.0, 328.0, 329.0], [330.0, 331.0, 332.0]], [[333.0, 334.0, 335.0], [336.0, 337.0, 338.0], [339.0, 340.0, 341.0]]], [[[342.0, 343.0, 344.0], [345.0, 346.0, 347.0], [348.0, 349.0, 350.0]], [[351.0, 352.0, 353.0], [354.0, 355.0, 356.0], [357.0, 358.0, 359.0]]], [[[360.0, 361.0, 362.0], [363.0, 364.0, 365.0], [366.0, 367.0, 368.0]], [[369.0, 370.0, 371.0], [372.0, 373.0, 374.0], [375.0, 376.0, 377.0]]], [[[378.0, 379.0, 380.0], [381.0, 382.0, 383.0], [384.0, 385.0, 386.0]], [[387.0, 388.0, 389.0], [390.0, 391.0, 392.0], [393.0, 394.0, 395.0]]], [[[396.0, 397.0, 398.0], [399.0, 400.0, 401.0], [402.0, 403.0, 404.0]], [[405.0, 406.0, 407.0], [408.0, 409.0, 410.0], [411.0, 412.0, 413.0]]], [[[414.0, 415.0, 416.0], [417.0, 418.0, 419.0], [420.0, 421.0, 422.0]], [[423.0, 424.0, 425.0], [426.0, 427.0, 428.0], [429.0, 430.0, 431.0]]], [[[432.0, 433.0, 434.0], [435.0, 436.0, 437.0], [438.0, 439.0, 440.0]], [[441.0, 442.0, 443.0], [444.0, 445.0, 446.0], [447.0, 448.0, 449.0]]], [[[450.0, 451.0, 452.0], [453.0, 454.0, 455.0], [456.0, 457.0, 458.0]], [[459.0, 460.0, 461.0], [462.0, 463.0, 464.0], [465.0, 466.0, 467.0]]], [[[468.0, 469.0, 470.0], [471.0, 472.0, 473.0], [474.0, 475.0, 476.0]], [[477.0, 478.0, 479.0], [480.0, 481.0, 482.0], [483.0, 484.0, 485.0]]], [[[486.0, 487.0, 488.0], [489.0, 490.0, 491.0], [492.0, 493.0, 494.0]], [[495.0, 496.0, 497.0], [498.0, 499.0, 500.0], [501.0, 502.0, 503.0]]], [[[504.0, 505.0, 506.0], [507.0, 508.0, 509.0], [510.0, 511.0, 512.0]], [[513.0, 514.0, 515.0], [516.0, 517.0, 518.0], [519.0, 520.0, 521.0]]], [[[522.0, 523.0, 524.0], [525.0, 526.0, 527.0], [528.0, 529.0, 530.0]], [[531.0, 532.0, 533.0], [534.0, 535.0, 536.0], [537.0, 538.0, 539.0]]], [[[540.0, 541.0, 542.0], [543.0, 544.0, 545.0], [546.0, 547.0, 548.0]], [[549.0, 550.0, 551.0], [552.0, 553.0, 554.0], [555.0, 556.0, 557.0]]], [[[558.0, 559.0, 560.0], [561.0, 562.0, 563.0], [564.0, 565.0, 566.0]], [[567.0, 568.0, 569.0], [570.0, 571.0, 572.0], [573.0, 574.0, 575.0]]]]> : tensor<32x2x3x3xf32>
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>} ins(%x, %w : tensor<1x2x5x5xf32>, tensor<32x2x3x3xf32>) outs(%b : tensor<1x32x2x2xf32>) -> tensor<1x32x2x2xf32>
  return %c : tensor<1x32x2x2xf32>
}

// -----

// A filled initial value seeds the accumulator; Y only moves values.
// CHECK-LABEL: func.func @filled
//  CHECK-SAME:   (%[[X:.+]]: tensor<1x2x5x5xf32>, %[[V:.+]]: f32)
//       CHECK:   %[[Z:.+]] = linalg.fill ins(%[[V]] : f32) outs({{.+}} : tensor<1x1x4x32xf32>)
//       CHECK:   %[[G:.+]] = linalg.generic {{.+}} outs(%[[Z]] : tensor<1x1x4x32xf32>)
//       CHECK:   %[[T:.+]] = linalg.generic {{.+}} ins(%[[G]] : tensor<1x1x4x32xf32>) outs({{.+}} : tensor<1x1x32x2x2xf32>)
//  CHECK-NEXT:   ^bb0(%[[IN:.+]]: f32, %{{.+}}: f32):
//  CHECK-NEXT:     linalg.yield %[[IN]] : f32
// V3-LABEL: func.func @filled
//       V3:   linalg.fill ins(%{{.+}} : f32) outs({{.+}} : tensor<1x2x4x16xf32>)
func.func @filled(%x: tensor<1x2x5x5xf32>, %v: f32) -> tensor<1x32x2x2xf32> {
  %w = arith.constant dense<[[[[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [6.0, 7.0, 8.0]], [[9.0, 10.0, 11.0], [12.0, 13.0, 14.0], [15.0, 16.0, 17.0]]], [[[18.0, 19.0, 20.0], [21.0, 22.0, 23.0], [24.0, 25.0, 26.0]], [[27.0, 28.0, 29.0], [30.0, 31.0, 32.0], [33.0, 34.0, 35.0]]], [[[36.0, 37.0, 38.0], [39.0, 40.0, 41.0], [42.0, 43.0, 44.0]], [[45.0, 46.0, 47.0], [48.0, 49.0, 50.0], [51.0, 52.0, 53.0]]], [[[54.0, 55.0, 56.0], [57.0, 58.0, 59.0], [60.0, 61.0, 62.0]], [[63.0, 64.0, 65.0], [66.0, 67.0, 68.0], [69.0, 70.0, 71.0]]], [[[72.0, 73.0, 74.0], [75.0, 76.0, 77.0], [78.0, 79.0, 80.0]], [[81.0, 82.0, 83.0], [84.0, 85.0, 86.0], [87.0, 88.0, 89.0]]], [[[90.0, 91.0, 92.0], [93.0, 94.0, 95.0], [96.0, 97.0, 98.0]], [[99.0, 100.0, 101.0], [102.0, 103.0, 104.0], [105.0, 106.0, 107.0]]], [[[108.0, 109.0, 110.0], [111.0, 112.0, 113.0], [114.0, 115.0, 116.0]], [[117.0, 118.0, 119.0], [120.0, 121.0, 122.0], [123.0, 124.0, 125.0]]], [[[126.0, 127.0, 128.0], [129.0, 130.0, 131.0], [132.0, 133.0, 134.0]], [[135.0, 136.0, 137.0], [138.0, 139.0, 140.0], [141.0, 142.0, 143.0]]], [[[144.0, 145.0, 146.0], [147.0, 148.0, 149.0], [150.0, 151.0, 152.0]], [[153.0, 154.0, 155.0], [156.0, 157.0, 158.0], [159.0, 160.0, 161.0]]], [[[162.0, 163.0, 164.0], [165.0, 166.0, 167.0], [168.0, 169.0, 170.0]], [[171.0, 172.0, 173.0], [174.0, 175.0, 176.0], [177.0, 178.0, 179.0]]], [[[180.0, 181.0, 182.0], [183.0, 184.0, 185.0], [186.0, 187.0, 188.0]], [[189.0, 190.0, 191.0], [192.0, 193.0, 194.0], [195.0, 196.0, 197.0]]], [[[198.0, 199.0, 200.0], [201.0, 202.0, 203.0], [204.0, 205.0, 206.0]], [[207.0, 208.0, 209.0], [210.0, 211.0, 212.0], [213.0, 214.0, 215.0]]], [[[216.0, 217.0, 218.0], [219.0, 220.0, 221.0], [222.0, 223.0, 224.0]], [[225.0, 226.0, 227.0], [228.0, 229.0, 230.0], [231.0, 232.0, 233.0]]], [[[234.0, 235.0, 236.0], [237.0, 238.0, 239.0], [240.0, 241.0, 242.0]], [[243.0, 244.0, 245.0], [246.0, 247.0, 248.0], [249.0, 250.0, 251.0]]], [[[252.0, 253.0, 254.0], [255.0, 256.0, 257.0], [258.0, 259.0, 260.0]], [[261.0, 262.0, 263.0], [264.0, 265.0, 266.0], [267.0, 268.0, 269.0]]], [[[270.0, 271.0, 272.0], [273.0, 274.0, 275.0], [276.0, 277.0, 278.0]], [[279.0, 280.0, 281.0], [282.0, 283.0, 284.0], [285.0, 286.0, 287.0]]], [[[288.0, 289.0, 290.0], [291.0, 292.0, 293.0], [294.0, 295.0, 296.0]], [[297.0, 298.0, 299.0], [300.0, 301.0, 302.0], [303.0, 304.0, 305.0]]], [[[306.0, 307.0, 308.0], [309.0, 310.0, 311.0], [312.0, 313.0, 314.0]], [[315.0, 316.0, 317.0], [318.0, 319.0, 320.0], [321.0, 322.0, 323.0]]], [[[324.0, 325.0, 326.0], [327.0, 328.0, 329.0], [330.0, 331.0, 332.0]], [[333.0, 334.0, 335.0], [336.0, 337.0, 338.0], [339.0, 340.0, 341.0]]], [[[342.0, 343.0, 344.0], [345.0, 346.0, 347.0], [348.0, 349.0, 350.0]], [[351.0, 352.0, 353.0], [354.0, 355.0, 356.0], [357.0, 358.0, 359.0]]], [[[360.0, 361.0, 362.0], [363.0, 364.0, 365.0], [366.0, 367.0, 368.0]], [[369.0, 370.0, 371.0], [372.0, 373.0, 374.0], [375.0, 376.0, 377.0]]], [[[378.0, 379.0, 380.0], [381.0, 382.0, 383.0], [384.0, 385.0, 386.0]], [[387.0, 388.0, 389.0], [390.0, 391.0, 392.0], [393.0, 394.0, 395.0]]], [[[396.0, 397.0, 398.0], [399.0, 400.0, 401.0], [402.0, 403.0, 404.0]], [[405.0, 406.0, 407.0], [408.0, 409.0, 410.0], [411.0, 412.0, 413.0]]], [[[414.0, 415.0, 416.0], [417.0, 418.0, 419.0], [420.0, 421.0, 422.0]], [[423.0, 424.0, 425.0], [426.0, 427.0, 428.0], [429.0, 430.0, 431.0]]], [[[432.0, 433.0, 434.0], [435.0, 436.0, 437.0], [438.0, 439.0, 440.0]], [[441.0, 442.0, 443.0], [444.0, 445.0, 446.0], [447.0, 448.0, 449.0]]], [[[450.0, 451.0, 452.0], [453.0, 454.0, 455.0], [456.0, 457.0, 458.0]], [[459.0, 460.0, 461.0], [462.0, 463.0, 464.0], [465.0, 466.0, 467.0]]], [[[468.0, 469.0, 470.0], [471.0, 472.0, 473.0], [474.0, 475.0, 476.0]], [[477.0, 478.0, 479.0], [480.0, 481.0, 482.0], [483.0, 484.0, 485.0]]], [[[486.0, 487.0, 488.0], [489.0, 490.0, 491.0], [492.0, 493.0, 494.0]], [[495.0, 496.0, 497.0], [498.0, 499.0, 500.0], [501.0, 502.0, 503.0]]], [[[504.0, 505.0, 506.0], [507.0, 508.0, 509.0], [510.0, 511.0, 512.0]], [[513.0, 514.0, 515.0], [516.0, 517.0, 518.0], [519.0, 520.0, 521.0]]], [[[522.0, 523.0, 524.0], [525.0, 526.0, 527.0], [528.0, 529.0, 530.0]], [[531.0, 532.0, 533.0], [534.0, 535.0, 536.0], [537.0, 538.0, 539.0]]], [[[540.0, 541.0, 542.0], [543.0, 544.0, 545.0], [546.0, 547.0, 548.0]], [[549.0, 550.0, 551.0], [552.0, 553.0, 554.0], [555.0, 556.0, 557.0]]], [[[558.0, 559.0, 560.0], [561.0, 562.0, 563.0], [564.0, 565.0, 566.0]], [[567.0, 568.0, 569.0], [570.0, 571.0, 572.0], [573.0, 574.0, 575.0]]]]> : tensor<32x2x3x3xf32>
  %e = tensor.empty() : tensor<1x32x2x2xf32>
  %f = linalg.fill ins(%v : f32) outs(%e : tensor<1x32x2x2xf32>) -> tensor<1x32x2x2xf32>
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>} ins(%x, %w : tensor<1x2x5x5xf32>, tensor<32x2x3x3xf32>) outs(%f : tensor<1x32x2x2xf32>) -> tensor<1x32x2x2xf32>
  return %c : tensor<1x32x2x2xf32>
}

// -----

// Output rows at least a register block wide keep two M loops (oh, ow): a
// register block is 8 pixels of one row, read from I[n, k, oh, ow] as is.
// CHECK-DAG: #[[RLHS:.+]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d5, d2, d3)>
// CHECK-DAG: #[[RPANEL:.+]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d1, d5, d4)>
// CHECK-DAG: #[[RACC:.+]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3, d4)>
// CHECK-DAG: #[[RFROM:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4, d2)>
// CHECK-LABEL: func.func @rows
//       CHECK:   %[[I:.+]] = linalg.generic {{.+}} outs({{.+}} : tensor<1x1x2x8xf32>)
//       CHECK:   %[[G:.+]] = linalg.generic {indexing_maps = [#[[RLHS]], #[[RPANEL]], #[[RACC]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%[[I]], %{{.+}} : tensor<1x1x2x8xf32>, tensor<1x1x32xf32>) outs(%{{.+}} : tensor<1x1x2x8x32xf32>)
//       CHECK:   linalg.generic {indexing_maps = [#[[RFROM]], {{.+}}]{{.+}} ins(%[[G]] : tensor<1x1x2x8x32xf32>)
// V3-LABEL: func.func @rows
//       V3:   linalg.generic {{.+}} ins(%{{.+}}, %{{.+}} : tensor<1x1x2x8xf32>, tensor<2x1x16xf32>) outs(%{{.+}} : tensor<1x2x2x8x16xf32>)
func.func @rows(%x: tensor<1x1x2x8xf32>) -> tensor<1x32x2x8xf32> {
  %z = arith.constant 0.0 : f32
  %w = arith.constant dense<[[[[0.0]]], [[[1.0]]], [[[2.0]]], [[[3.0]]], [[[4.0]]], [[[5.0]]], [[[6.0]]], [[[7.0]]], [[[8.0]]], [[[9.0]]], [[[10.0]]], [[[11.0]]], [[[12.0]]], [[[13.0]]], [[[14.0]]], [[[15.0]]], [[[16.0]]], [[[17.0]]], [[[18.0]]], [[[19.0]]], [[[20.0]]], [[[21.0]]], [[[22.0]]], [[[23.0]]], [[[24.0]]], [[[25.0]]], [[[26.0]]], [[[27.0]]], [[[28.0]]], [[[29.0]]], [[[30.0]]], [[[31.0]]]]> : tensor<32x1x1x1xf32>
  %e = tensor.empty() : tensor<1x32x2x8xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<1x32x2x8xf32>) -> tensor<1x32x2x8xf32>
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w : tensor<1x1x2x8xf32>, tensor<32x1x1x1xf32>) outs(%f : tensor<1x32x2x8xf32>) -> tensor<1x32x2x8xf32>
  return %c : tensor<1x32x2x8xf32>
}

// -----

// 40 output channels are not a multiple of the panel width (on either
// target), and a filter that is not a constant has nothing to lay out: both
// stay convolutions.
// CHECK-LABEL: func.func @kept
//       CHECK:   linalg.conv_2d_nchw_fchw
//       CHECK:   linalg.conv_2d_nchw_fchw
// V3-LABEL: func.func @kept
//       V3:   linalg.conv_2d_nchw_fchw
//       V3:   linalg.conv_2d_nchw_fchw
func.func @kept(%x: tensor<1x1x3x3xf32>, %v: tensor<32x1x1x1xf32>, %b: tensor<1x40x3x3xf32>, %b2: tensor<1x32x3x3xf32>) -> (tensor<1x40x3x3xf32>, tensor<1x32x3x3xf32>) {
  %w = arith.constant dense<[[[[0.0]]], [[[1.0]]], [[[2.0]]], [[[3.0]]], [[[4.0]]], [[[5.0]]], [[[6.0]]], [[[7.0]]], [[[8.0]]], [[[9.0]]], [[[10.0]]], [[[11.0]]], [[[12.0]]], [[[13.0]]], [[[14.0]]], [[[15.0]]], [[[16.0]]], [[[17.0]]], [[[18.0]]], [[[19.0]]], [[[20.0]]], [[[21.0]]], [[[22.0]]], [[[23.0]]], [[[24.0]]], [[[25.0]]], [[[26.0]]], [[[27.0]]], [[[28.0]]], [[[29.0]]], [[[30.0]]], [[[31.0]]], [[[32.0]]], [[[33.0]]], [[[34.0]]], [[[35.0]]], [[[36.0]]], [[[37.0]]], [[[38.0]]], [[[39.0]]]]> : tensor<40x1x1x1xf32>
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w : tensor<1x1x3x3xf32>, tensor<40x1x1x1xf32>) outs(%b : tensor<1x40x3x3xf32>) -> tensor<1x40x3x3xf32>
  %d = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %v : tensor<1x1x3x3xf32>, tensor<32x1x1x1xf32>) outs(%b2 : tensor<1x32x3x3xf32>) -> tensor<1x32x3x3xf32>
  return %c, %d : tensor<1x40x3x3xf32>, tensor<1x32x3x3xf32>
}

// -----

// INT8 filter codes (a sits.qconv's) are laid out in panels as they are,
// one byte each, and the GEMM widens them in its body, as the convolution
// did. Panel row k = 0 holds F[0..31][0] = 0, 1, 2, ...; row 1 their
// negations.
// CHECK-LABEL: func.func @int8_filter
//       CHECK:   %[[P:.+]] = arith.constant dense<{{\[}}{{\[}}[0, 1, 2, {{.*}}, 31], [0, -1, -2, {{.*}}, -31]]]> : tensor<1x2x32xi8>
//       CHECK:   linalg.generic {{.+}} ins(%{{.+}}, %[[P]] : tensor<1x2x6xf32>, tensor<1x2x32xi8>)
//  CHECK-NEXT:   ^bb0(%[[IN:.+]]: f32, %[[CODE:.+]]: i8, %[[OUT:.+]]: f32):
//  CHECK-NEXT:     %[[W:.+]] = arith.sitofp %[[CODE]] : i8 to f32
//  CHECK-NEXT:     %[[M:.+]] = arith.mulf %[[IN]], %[[W]] : f32
//  CHECK-NEXT:     arith.addf %[[OUT]], %[[M]] : f32
// V3-LABEL: func.func @int8_filter
//       V3:   %[[P:.+]] = arith.constant dense<{{\[}}{{\[}}[0, 1, 2, {{.*}}, 15], [0, -1, -2, {{.*}}, -15]], {{\[}}[16, 17, {{.*}}, 31], [-16, -17, {{.*}}, -31]]]> : tensor<2x2x16xi8>
//       V3:   linalg.generic {{.+}} ins(%{{.+}}, %[[P]] : tensor<1x2x6xf32>, tensor<2x2x16xi8>)
//  V3-NEXT:   ^bb0(%{{.+}}: f32, %[[CODE:.+]]: i8, %{{.+}}: f32):
//  V3-NEXT:     arith.sitofp %[[CODE]] : i8 to f32
func.func @int8_filter(%x: tensor<1x1x3x3xf32>) -> tensor<1x32x3x2xf32> {
  %w = arith.constant dense<[[[[0, 0]]], [[[1, -1]]], [[[2, -2]]], [[[3, -3]]], [[[4, -4]]], [[[5, -5]]], [[[6, -6]]], [[[7, -7]]], [[[8, -8]]], [[[9, -9]]], [[[10, -10]]], [[[11, -11]]], [[[12, -12]]], [[[13, -13]]], [[[14, -14]]], [[[15, -15]]], [[[16, -16]]], [[[17, -17]]], [[[18, -18]]], [[[19, -19]]], [[[20, -20]]], [[[21, -21]]], [[[22, -22]]], [[[23, -23]]], [[[24, -24]]], [[[25, -25]]], [[[26, -26]]], [[[27, -27]]], [[[28, -28]]], [[[29, -29]]], [[[30, -30]]], [[[31, -31]]]]> : tensor<32x1x1x2xi8>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x32x3x2xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x32x3x2xf32>) -> tensor<1x32x3x2xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w : tensor<1x1x3x3xf32>, tensor<32x1x1x2xi8>) outs(%init : tensor<1x32x3x2xf32>) -> tensor<1x32x3x2xf32>
  return %y : tensor<1x32x3x2xf32>
}

// -----

// A convolution layer outlined into a private function: each call passes
// its own filter in panels as a new argument, appended, and the old one
// goes with the constants only it read. Panel row k = 0 holds
// F[0..31][0], row 1 F[0..31][1]: a different filter per call.
// CHECK-LABEL: func.func private @conv_layer
//  CHECK-SAME:   (%[[X:.+]]: tensor<1x1x3x3xf32>, %[[P:.+]]: tensor<1x2x32xi8>)
//       CHECK:   linalg.generic {{.+}} ins(%{{.+}}, %[[P]] : tensor<1x2x6xf32>, tensor<1x2x32xi8>)
//   CHECK-NOT:   linalg.conv_2d_nchw_fchw
// CHECK-LABEL: func.func @conv_layers
//  CHECK-SAME:   (%[[IN:.+]]: tensor<1x1x3x3xf32>)
//   CHECK-NOT:   tensor<32x1x1x2xi8>
//       CHECK:   %[[F0:.+]] = arith.constant dense<{{\[}}{{\[}}[0, 1, 2, {{.*}}, 31], [0, -1, -2, {{.*}}, -31]]]> : tensor<1x2x32xi8>
//  CHECK-NEXT:   call @conv_layer(%[[IN]], %[[F0]])
//       CHECK:   %[[F1:.+]] = arith.constant dense<{{\[}}{{\[}}[32, 33, 34, {{.*}}, 63], [-32, -33, -34, {{.*}}, -63]]]> : tensor<1x2x32xi8>
//  CHECK-NEXT:   call @conv_layer(%[[IN]], %[[F1]])
//       CHECK:   %[[F2:.+]] = arith.constant dense<{{\[}}{{\[}}[64, 65, 66, {{.*}}, 95], [-64, -65, -66, {{.*}}, -95]]]> : tensor<1x2x32xi8>
//  CHECK-NEXT:   call @conv_layer(%[[IN]], %[[F2]])
//   CHECK-NOT:   tensor<32x1x1x2xi8>
// V3-LABEL: func.func private @conv_layer
//  V3-SAME:   (%{{.+}}: tensor<1x1x3x3xf32>, %{{.+}}: tensor<2x2x16xi8>)
// V3-LABEL: func.func @conv_layers
//       V3:   %[[F0:.+]] = arith.constant dense<{{\[}}{{\[}}[0, 1, 2, {{.*}}, 15], [0, -1, -2, {{.*}}, -15]], {{\[}}[16, 17, {{.*}}, 31], [-16, -17, {{.*}}, -31]]]> : tensor<2x2x16xi8>
//  V3-NEXT:   call @conv_layer(%{{.+}}, %[[F0]])
//       V3:   %[[F1:.+]] = arith.constant dense<{{\[}}{{\[}}[32, 33, 34, {{.*}}, 47], [-32, -33, -34, {{.*}}, -47]], {{\[}}[48, 49, {{.*}}, 63], [-48, -49, {{.*}}, -63]]]> : tensor<2x2x16xi8>
//  V3-NEXT:   call @conv_layer(%{{.+}}, %[[F1]])
func.func private @conv_layer(%x: tensor<1x1x3x3xf32>, %w: tensor<32x1x1x2xi8>) -> tensor<1x32x3x2xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x32x3x2xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x32x3x2xf32>) -> tensor<1x32x3x2xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w : tensor<1x1x3x3xf32>, tensor<32x1x1x2xi8>) outs(%init : tensor<1x32x3x2xf32>) -> tensor<1x32x3x2xf32>
  return %y : tensor<1x32x3x2xf32>
}
func.func @conv_layers(%x: tensor<1x1x3x3xf32>) -> (tensor<1x32x3x2xf32>, tensor<1x32x3x2xf32>, tensor<1x32x3x2xf32>) {
  %w0 = arith.constant dense<[[[[0, 0]]], [[[1, -1]]], [[[2, -2]]], [[[3, -3]]], [[[4, -4]]], [[[5, -5]]], [[[6, -6]]], [[[7, -7]]], [[[8, -8]]], [[[9, -9]]], [[[10, -10]]], [[[11, -11]]], [[[12, -12]]], [[[13, -13]]], [[[14, -14]]], [[[15, -15]]], [[[16, -16]]], [[[17, -17]]], [[[18, -18]]], [[[19, -19]]], [[[20, -20]]], [[[21, -21]]], [[[22, -22]]], [[[23, -23]]], [[[24, -24]]], [[[25, -25]]], [[[26, -26]]], [[[27, -27]]], [[[28, -28]]], [[[29, -29]]], [[[30, -30]]], [[[31, -31]]]]> : tensor<32x1x1x2xi8>
  %y0 = call @conv_layer(%x, %w0) : (tensor<1x1x3x3xf32>, tensor<32x1x1x2xi8>) -> tensor<1x32x3x2xf32>
  %w1 = arith.constant dense<[[[[32, -32]]], [[[33, -33]]], [[[34, -34]]], [[[35, -35]]], [[[36, -36]]], [[[37, -37]]], [[[38, -38]]], [[[39, -39]]], [[[40, -40]]], [[[41, -41]]], [[[42, -42]]], [[[43, -43]]], [[[44, -44]]], [[[45, -45]]], [[[46, -46]]], [[[47, -47]]], [[[48, -48]]], [[[49, -49]]], [[[50, -50]]], [[[51, -51]]], [[[52, -52]]], [[[53, -53]]], [[[54, -54]]], [[[55, -55]]], [[[56, -56]]], [[[57, -57]]], [[[58, -58]]], [[[59, -59]]], [[[60, -60]]], [[[61, -61]]], [[[62, -62]]], [[[63, -63]]]]> : tensor<32x1x1x2xi8>
  %y1 = call @conv_layer(%x, %w1) : (tensor<1x1x3x3xf32>, tensor<32x1x1x2xi8>) -> tensor<1x32x3x2xf32>
  %w2 = arith.constant dense<[[[[64, -64]]], [[[65, -65]]], [[[66, -66]]], [[[67, -67]]], [[[68, -68]]], [[[69, -69]]], [[[70, -70]]], [[[71, -71]]], [[[72, -72]]], [[[73, -73]]], [[[74, -74]]], [[[75, -75]]], [[[76, -76]]], [[[77, -77]]], [[[78, -78]]], [[[79, -79]]], [[[80, -80]]], [[[81, -81]]], [[[82, -82]]], [[[83, -83]]], [[[84, -84]]], [[[85, -85]]], [[[86, -86]]], [[[87, -87]]], [[[88, -88]]], [[[89, -89]]], [[[90, -90]]], [[[91, -91]]], [[[92, -92]]], [[[93, -93]]], [[[94, -94]]], [[[95, -95]]]]> : tensor<32x1x1x2xi8>
  %y2 = call @conv_layer(%x, %w2) : (tensor<1x1x3x3xf32>, tensor<32x1x1x2xi8>) -> tensor<1x32x3x2xf32>
  return %y0, %y1, %y2 : tensor<1x32x3x2xf32>, tensor<1x32x3x2xf32>, tensor<1x32x3x2xf32>
}

// -----

// A call passing a non-constant and a public function: the convolutions
// stay. An argument with another use is laid out, and kept for that use.
// CHECK-LABEL: func.func private @some_constant
//       CHECK:   linalg.conv_2d_nchw_fchw
// CHECK-LABEL: func.func @public
//       CHECK:   linalg.conv_2d_nchw_fchw
// CHECK-LABEL: func.func private @second_use
//  CHECK-SAME:   (%{{.+}}: tensor<1x1x3x3xf32>, %[[W:.+]]: tensor<32x1x1x2xi8>, %[[P:.+]]: tensor<1x2x32xi8>)
//       CHECK:   linalg.generic {{.+}} ins(%{{.+}}, %[[P]] :
//       CHECK:   return %{{.+}}, %[[W]]
// CHECK-LABEL: func.func @callers
//  CHECK-SAME:   (%[[IN:.+]]: tensor<1x1x3x3xf32>, %[[V:.+]]: tensor<32x1x1x2xi8>)
//       CHECK:   %[[C:.+]] = arith.constant dense<{{.+}}> : tensor<32x1x1x2xi8>
//       CHECK:   call @some_constant(%[[IN]], %[[C]])
//       CHECK:   call @some_constant(%[[IN]], %[[V]])
//       CHECK:   call @public(%[[IN]], %[[C]])
//       CHECK:   %[[P:.+]] = arith.constant dense<{{.+}}> : tensor<1x2x32xi8>
//  CHECK-NEXT:   call @second_use(%[[IN]], %[[C]], %[[P]])
// V3-LABEL: func.func @callers
func.func private @some_constant(%x: tensor<1x1x3x3xf32>, %w: tensor<32x1x1x2xi8>) -> tensor<1x32x3x2xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x32x3x2xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x32x3x2xf32>) -> tensor<1x32x3x2xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w : tensor<1x1x3x3xf32>, tensor<32x1x1x2xi8>) outs(%init : tensor<1x32x3x2xf32>) -> tensor<1x32x3x2xf32>
  return %y : tensor<1x32x3x2xf32>
}
func.func @public(%x: tensor<1x1x3x3xf32>, %w: tensor<32x1x1x2xi8>) -> tensor<1x32x3x2xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x32x3x2xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x32x3x2xf32>) -> tensor<1x32x3x2xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w : tensor<1x1x3x3xf32>, tensor<32x1x1x2xi8>) outs(%init : tensor<1x32x3x2xf32>) -> tensor<1x32x3x2xf32>
  return %y : tensor<1x32x3x2xf32>
}
func.func private @second_use(%x: tensor<1x1x3x3xf32>, %w: tensor<32x1x1x2xi8>) -> (tensor<1x32x3x2xf32>, tensor<32x1x1x2xi8>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x32x3x2xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x32x3x2xf32>) -> tensor<1x32x3x2xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%x, %w : tensor<1x1x3x3xf32>, tensor<32x1x1x2xi8>) outs(%init : tensor<1x32x3x2xf32>) -> tensor<1x32x3x2xf32>
  return %y, %w : tensor<1x32x3x2xf32>, tensor<32x1x1x2xi8>
}
func.func @callers(%x: tensor<1x1x3x3xf32>, %v: tensor<32x1x1x2xi8>) -> (tensor<1x32x3x2xf32>, tensor<1x32x3x2xf32>, tensor<1x32x3x2xf32>, tensor<1x32x3x2xf32>, tensor<32x1x1x2xi8>) {
  %w = arith.constant dense<[[[[0, 0]]], [[[1, -1]]], [[[2, -2]]], [[[3, -3]]], [[[4, -4]]], [[[5, -5]]], [[[6, -6]]], [[[7, -7]]], [[[8, -8]]], [[[9, -9]]], [[[10, -10]]], [[[11, -11]]], [[[12, -12]]], [[[13, -13]]], [[[14, -14]]], [[[15, -15]]], [[[16, -16]]], [[[17, -17]]], [[[18, -18]]], [[[19, -19]]], [[[20, -20]]], [[[21, -21]]], [[[22, -22]]], [[[23, -23]]], [[[24, -24]]], [[[25, -25]]], [[[26, -26]]], [[[27, -27]]], [[[28, -28]]], [[[29, -29]]], [[[30, -30]]], [[[31, -31]]]]> : tensor<32x1x1x2xi8>
  %a = call @some_constant(%x, %w) : (tensor<1x1x3x3xf32>, tensor<32x1x1x2xi8>) -> tensor<1x32x3x2xf32>
  %b = call @some_constant(%x, %v) : (tensor<1x1x3x3xf32>, tensor<32x1x1x2xi8>) -> tensor<1x32x3x2xf32>
  %c = call @public(%x, %w) : (tensor<1x1x3x3xf32>, tensor<32x1x1x2xi8>) -> tensor<1x32x3x2xf32>
  %d, %u = call @second_use(%x, %w) : (tensor<1x1x3x3xf32>, tensor<32x1x1x2xi8>) -> (tensor<1x32x3x2xf32>, tensor<32x1x1x2xi8>)
  return %a, %b, %c, %d, %u : tensor<1x32x3x2xf32>, tensor<1x32x3x2xf32>, tensor<1x32x3x2xf32>, tensor<1x32x3x2xf32>, tensor<32x1x1x2xi8>
}

// -----

// A stride that divides the width: no column of a phase falls past it, so
// the split reads the input without a bounds check.
// CHECK-LABEL: func.func @even_width_stride
//       CHECK:   linalg.generic {{.+}} outs({{.+}} : tensor<1x1x4x2x2xf32>)
//   CHECK-NOT:     arith.cmpi
//   CHECK-NOT:     arith.select
//       CHECK:     tensor.extract %{{.+}} : tensor<1x1x4x4xf32>
//       CHECK:   } -> tensor<1x1x4x2x2xf32>
func.func @even_width_stride(%x: tensor<1x1x4x4xf32>) -> tensor<1x32x2x2xf32> {
  %z = arith.constant 0.0 : f32
  %w = arith.constant dense<[[[[0.0]]], [[[1.0]]], [[[2.0]]], [[[3.0]]], [[[4.0]]], [[[5.0]]], [[[6.0]]], [[[7.0]]], [[[8.0]]], [[[9.0]]], [[[10.0]]], [[[11.0]]], [[[12.0]]], [[[13.0]]], [[[14.0]]], [[[15.0]]], [[[16.0]]], [[[17.0]]], [[[18.0]]], [[[19.0]]], [[[20.0]]], [[[21.0]]], [[[22.0]]], [[[23.0]]], [[[24.0]]], [[[25.0]]], [[[26.0]]], [[[27.0]]], [[[28.0]]], [[[29.0]]], [[[30.0]]], [[[31.0]]]]> : tensor<32x1x1x1xf32>
  %e = tensor.empty() : tensor<1x32x2x2xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<1x32x2x2xf32>) -> tensor<1x32x2x2xf32>
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>} ins(%x, %w : tensor<1x1x4x4xf32>, tensor<32x1x1x1xf32>) outs(%f : tensor<1x32x2x2xf32>) -> tensor<1x32x2x2xf32>
  return %c : tensor<1x32x2x2xf32>
}
