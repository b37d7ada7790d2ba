// RUN: sits-opt %s --split-input-file --pass-pipeline='builtin.module(sits-set-target{target=x86-64-v4},sits-cpu-pack-weights)' | FileCheck %s --check-prefixes=CHECK,V4
// RUN: sits-opt %s --split-input-file --pass-pipeline='builtin.module(sits-set-target{target=x86-64-v3},sits-cpu-pack-weights)' | FileCheck %s --check-prefixes=CHECK,V3

// A constant rhs is stored in panels of nr columns, the target's register
// block of two vectors: nr = 32 on x86-64-v4 (AVX-512), 16 on x86-64-v3
// (AVX2). The contraction reads it panel by panel, writing C viewed as
// [M, N/nr, nr].

// CHECK-DAG: #[[LHS:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d3)>
// CHECK-DAG: #[[PANEL:.+]] = affine_map<(d0, d1, d2, d3) -> (d1, d3, d2)>
// CHECK-DAG: #[[OUT:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
// CHECK-LABEL: func.func @packed
//  CHECK-SAME:   (%[[X:.+]]: tensor<8x4xf32>)
//       CHECK:   %[[F:.+]] = linalg.fill
// Panel 0 holds B[0][0:nr] then B[1][0:nr]: value nr + 1 is B[1][0] = 64.0
// (0x42800000), not B[0][nr]. Inline input stays inline.
//          V4:   %[[P:.+]] = arith.constant dense<"0x000000000000803F0000004000004040000080400000A0400000C0400000E0400000004100001041000020410000304100004041000050410000604100007041000080410000884100009041000098410000A0410000A8410000B0410000B8410000C0410000C8410000D0410000D8410000E0410000E8410000F0410000F8410000804200008242{{.*}}"> : tensor<2x4x32xf32>
//          V4:   %[[E:.+]] = tensor.expand_shape %[[F]] {{.+}} output_shape [8, 2, 32] : tensor<8x64xf32> into tensor<8x2x32xf32>
//          V4:   %[[G:.+]] = linalg.generic {indexing_maps = [#[[LHS]], #[[PANEL]], #[[OUT]]], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%[[X]], %[[P]] : tensor<8x4xf32>, tensor<2x4x32xf32>) outs(%[[E]] : tensor<8x2x32xf32>)
//          V3:   %[[P:.+]] = arith.constant dense<"0x000000000000803F0000004000004040000080400000A0400000C0400000E04000000041000010410000204100003041000040410000504100006041000070410000804200008242{{.*}}"> : tensor<4x4x16xf32>
//          V3:   %[[E:.+]] = tensor.expand_shape %[[F]] {{.+}} output_shape [8, 4, 16] : tensor<8x64xf32> into tensor<8x4x16xf32>
//          V3:   %[[G:.+]] = linalg.generic {indexing_maps = [#[[LHS]], #[[PANEL]], #[[OUT]]], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%[[X]], %[[P]] : tensor<8x4xf32>, tensor<4x4x16xf32>) outs(%[[E]] : tensor<8x4x16xf32>)
//       CHECK:     arith.mulf
//       CHECK:     arith.addf
//          V4:   %[[C:.+]] = tensor.collapse_shape %[[G]] {{.+}} : tensor<8x2x32xf32> into tensor<8x64xf32>
//          V3:   %[[C:.+]] = tensor.collapse_shape %[[G]] {{.+}} : tensor<8x4x16xf32> into tensor<8x64xf32>
//       CHECK:   return %[[C]]
//   CHECK-NOT:   linalg.matmul
func.func @packed(%x: tensor<8x4xf32>) -> tensor<8x64xf32> {
  %z = arith.constant 0.0 : f32
  %w = arith.constant dense<[[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0, 20.0, 21.0, 22.0, 23.0, 24.0, 25.0, 26.0, 27.0, 28.0, 29.0, 30.0, 31.0, 32.0, 33.0, 34.0, 35.0, 36.0, 37.0, 38.0, 39.0, 40.0, 41.0, 42.0, 43.0, 44.0, 45.0, 46.0, 47.0, 48.0, 49.0, 50.0, 51.0, 52.0, 53.0, 54.0, 55.0, 56.0, 57.0, 58.0, 59.0, 60.0, 61.0, 62.0, 63.0], [64.0, 65.0, 66.0, 67.0, 68.0, 69.0, 70.0, 71.0, 72.0, 73.0, 74.0, 75.0, 76.0, 77.0, 78.0, 79.0, 80.0, 81.0, 82.0, 83.0, 84.0, 85.0, 86.0, 87.0, 88.0, 89.0, 90.0, 91.0, 92.0, 93.0, 94.0, 95.0, 96.0, 97.0, 98.0, 99.0, 100.0, 101.0, 102.0, 103.0, 104.0, 105.0, 106.0, 107.0, 108.0, 109.0, 110.0, 111.0, 112.0, 113.0, 114.0, 115.0, 116.0, 117.0, 118.0, 119.0, 120.0, 121.0, 122.0, 123.0, 124.0, 125.0, 126.0, 127.0], [128.0, 129.0, 130.0, 131.0, 132.0, 133.0, 134.0, 135.0, 136.0, 137.0, 138.0, 139.0, 140.0, 141.0, 142.0, 143.0, 144.0, 145.0, 146.0, 147.0, 148.0, 149.0, 150.0, 151.0, 152.0, 153.0, 154.0, 155.0, 156.0, 157.0, 158.0, 159.0, 160.0, 161.0, 162.0, 163.0, 164.0, 165.0, 166.0, 167.0, 168.0, 169.0, 170.0, 171.0, 172.0, 173.0, 174.0, 175.0, 176.0, 177.0, 178.0, 179.0, 180.0, 181.0, 182.0, 183.0, 184.0, 185.0, 186.0, 187.0, 188.0, 189.0, 190.0, 191.0], [192.0, 193.0, 194.0, 195.0, 196.0, 197.0, 198.0, 199.0, 200.0, 201.0, 202.0, 203.0, 204.0, 205.0, 206.0, 207.0, 208.0, 209.0, 210.0, 211.0, 212.0, 213.0, 214.0, 215.0, 216.0, 217.0, 218.0, 219.0, 220.0, 221.0, 222.0, 223.0, 224.0, 225.0, 226.0, 227.0, 228.0, 229.0, 230.0, 231.0, 232.0, 233.0, 234.0, 235.0, 236.0, 237.0, 238.0, 239.0, 240.0, 241.0, 242.0, 243.0, 244.0, 245.0, 246.0, 247.0, 248.0, 249.0, 250.0, 251.0, 252.0, 253.0, 254.0, 255.0]]> : tensor<4x64xf32>
  %e = tensor.empty() : tensor<8x64xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<8x64xf32>) -> tensor<8x64xf32>
  %m = linalg.matmul ins(%x, %w : tensor<8x4xf32>, tensor<4x64xf32>) outs(%f : tensor<8x64xf32>) -> tensor<8x64xf32>
  return %m : tensor<8x64xf32>
}

// -----

// N = 40 is not a multiple of the panel width: the last panel is padded
// with zero columns (24 on v4, 8 on v3), the contraction runs on C padded
// to whole panels, and its first 40 columns are the result. Panel 0 row 0
// holds B[0][0:nr]; the last row of the last panel B[3][32:40] (152.0 to
// 159.0 = 0x431F0000) then zeros. A non-constant rhs has nothing to pack
// and stays a matmul.
// CHECK-LABEL: func.func @padded
//  CHECK-SAME:   (%[[X:.+]]: tensor<8x4xf32>, %[[V:.+]]: tensor<4x64xf32>)
//       CHECK:   %[[F:.+]] = linalg.fill
//          V4:   %[[P:.+]] = arith.constant dense<"0x000000000000803F{{.*}}00001F43000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"> : tensor<2x4x32xf32>
//          V3:   %[[P:.+]] = arith.constant dense<"0x000000000000803F{{.*}}00001F430000000000000000000000000000000000000000000000000000000000000000"> : tensor<3x4x16xf32>
//          V4:   %[[PAD:.+]] = tensor.pad %[[F]] low[0, 0] high[0, 24]
//          V3:   %[[PAD:.+]] = tensor.pad %[[F]] low[0, 0] high[0, 8]
//       CHECK:   %[[E:.+]] = tensor.expand_shape %[[PAD]]
//          V4:   %[[G:.+]] = linalg.generic {{.+}} ins(%[[X]], %[[P]] : tensor<8x4xf32>, tensor<2x4x32xf32>) outs(%[[E]] : tensor<8x2x32xf32>)
//          V3:   %[[G:.+]] = linalg.generic {{.+}} ins(%[[X]], %[[P]] : tensor<8x4xf32>, tensor<3x4x16xf32>) outs(%[[E]] : tensor<8x3x16xf32>)
//       CHECK:   %[[C:.+]] = tensor.collapse_shape %[[G]]
//          V4:   %[[R:.+]] = tensor.extract_slice %[[C]][0, 0] [8, 40] [1, 1] : tensor<8x64xf32> to tensor<8x40xf32>
//          V3:   %[[R:.+]] = tensor.extract_slice %[[C]][0, 0] [8, 40] [1, 1] : tensor<8x48xf32> to tensor<8x40xf32>
//       CHECK:   %[[M:.+]] = linalg.matmul ins(%[[X]], %[[V]]
//       CHECK:   return %[[R]], %[[M]]
func.func @padded(%x: tensor<8x4xf32>, %v: tensor<4x64xf32>) -> (tensor<8x40xf32>, tensor<8x64xf32>) {
  %z = arith.constant 0.0 : f32
  %w = arith.constant dense<[[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0, 20.0, 21.0, 22.0, 23.0, 24.0, 25.0, 26.0, 27.0, 28.0, 29.0, 30.0, 31.0, 32.0, 33.0, 34.0, 35.0, 36.0, 37.0, 38.0, 39.0], [40.0, 41.0, 42.0, 43.0, 44.0, 45.0, 46.0, 47.0, 48.0, 49.0, 50.0, 51.0, 52.0, 53.0, 54.0, 55.0, 56.0, 57.0, 58.0, 59.0, 60.0, 61.0, 62.0, 63.0, 64.0, 65.0, 66.0, 67.0, 68.0, 69.0, 70.0, 71.0, 72.0, 73.0, 74.0, 75.0, 76.0, 77.0, 78.0, 79.0], [80.0, 81.0, 82.0, 83.0, 84.0, 85.0, 86.0, 87.0, 88.0, 89.0, 90.0, 91.0, 92.0, 93.0, 94.0, 95.0, 96.0, 97.0, 98.0, 99.0, 100.0, 101.0, 102.0, 103.0, 104.0, 105.0, 106.0, 107.0, 108.0, 109.0, 110.0, 111.0, 112.0, 113.0, 114.0, 115.0, 116.0, 117.0, 118.0, 119.0], [120.0, 121.0, 122.0, 123.0, 124.0, 125.0, 126.0, 127.0, 128.0, 129.0, 130.0, 131.0, 132.0, 133.0, 134.0, 135.0, 136.0, 137.0, 138.0, 139.0, 140.0, 141.0, 142.0, 143.0, 144.0, 145.0, 146.0, 147.0, 148.0, 149.0, 150.0, 151.0, 152.0, 153.0, 154.0, 155.0, 156.0, 157.0, 158.0, 159.0]]> : tensor<4x40xf32>
  %e = tensor.empty() : tensor<8x40xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<8x40xf32>) -> tensor<8x40xf32>
  %m = linalg.matmul ins(%x, %w : tensor<8x4xf32>, tensor<4x40xf32>) outs(%f : tensor<8x40xf32>) -> tensor<8x40xf32>
  %e2 = tensor.empty() : tensor<8x64xf32>
  %f2 = linalg.fill ins(%z : f32) outs(%e2 : tensor<8x64xf32>) -> tensor<8x64xf32>
  %n = linalg.matmul ins(%x, %v : tensor<8x4xf32>, tensor<4x64xf32>) outs(%f2 : tensor<8x64xf32>) -> tensor<8x64xf32>
  return %m, %n : tensor<8x40xf32>, tensor<8x64xf32>
}

// -----

// The same with a run-time row count: the padding and the result keep it.
// CHECK-LABEL: func.func @padded_rows
//  CHECK-SAME:   (%[[X:.+]]: tensor<?x4xf32>)
//          V4:   tensor.pad %{{.+}} low[0, 0] high[0, 24]
//          V4:   } : tensor<?x40xf32> to tensor<?x64xf32>
//          V4:   %[[C:.+]] = tensor.collapse_shape %{{.+}} : tensor<?x2x32xf32> into tensor<?x64xf32>
//          V4:   %[[N:.+]] = tensor.dim %{{.+}}, %{{.+}} : tensor<?x64xf32>
//          V4:   tensor.extract_slice %[[C]][0, 0] [%[[N]], 40] [1, 1] : tensor<?x64xf32> to tensor<?x40xf32>
//          V3:   tensor.extract_slice %{{.+}}[0, 0] [%{{.+}}, 40] [1, 1] : tensor<?x48xf32> to tensor<?x40xf32>
//   CHECK-NOT:   linalg.matmul
func.func @padded_rows(%x: tensor<?x4xf32>) -> tensor<?x40xf32> {
  %z = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %d = tensor.dim %x, %c0 : tensor<?x4xf32>
  %w = arith.constant dense<[[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0, 20.0, 21.0, 22.0, 23.0, 24.0, 25.0, 26.0, 27.0, 28.0, 29.0, 30.0, 31.0, 32.0, 33.0, 34.0, 35.0, 36.0, 37.0, 38.0, 39.0], [40.0, 41.0, 42.0, 43.0, 44.0, 45.0, 46.0, 47.0, 48.0, 49.0, 50.0, 51.0, 52.0, 53.0, 54.0, 55.0, 56.0, 57.0, 58.0, 59.0, 60.0, 61.0, 62.0, 63.0, 64.0, 65.0, 66.0, 67.0, 68.0, 69.0, 70.0, 71.0, 72.0, 73.0, 74.0, 75.0, 76.0, 77.0, 78.0, 79.0], [80.0, 81.0, 82.0, 83.0, 84.0, 85.0, 86.0, 87.0, 88.0, 89.0, 90.0, 91.0, 92.0, 93.0, 94.0, 95.0, 96.0, 97.0, 98.0, 99.0, 100.0, 101.0, 102.0, 103.0, 104.0, 105.0, 106.0, 107.0, 108.0, 109.0, 110.0, 111.0, 112.0, 113.0, 114.0, 115.0, 116.0, 117.0, 118.0, 119.0], [120.0, 121.0, 122.0, 123.0, 124.0, 125.0, 126.0, 127.0, 128.0, 129.0, 130.0, 131.0, 132.0, 133.0, 134.0, 135.0, 136.0, 137.0, 138.0, 139.0, 140.0, 141.0, 142.0, 143.0, 144.0, 145.0, 146.0, 147.0, 148.0, 149.0, 150.0, 151.0, 152.0, 153.0, 154.0, 155.0, 156.0, 157.0, 158.0, 159.0]]> : tensor<4x40xf32>
  %e = tensor.empty(%d) : tensor<?x40xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<?x40xf32>) -> tensor<?x40xf32>
  %m = linalg.matmul ins(%x, %w : tensor<?x4xf32>, tensor<4x40xf32>) outs(%f : tensor<?x40xf32>) -> tensor<?x40xf32>
  return %m : tensor<?x40xf32>
}

// -----

// A layer outlined into a private function: each call passes its own weight
// in panels as a new argument, appended, and the old one goes with the
// constants only it read. Panel 0 holds row 0's first nr values, then row
// 1's (B[1][0] = 64.0 for the first call, 164.0 and 264.0 for the others).
// CHECK-LABEL: func.func private @layer
//  CHECK-SAME:   (%[[X:.+]]: tensor<8x2xf32>,
//     V4-SAME:   %[[P:.+]]: tensor<2x2x32xf32>)
//     V3-SAME:   %[[P:.+]]: tensor<4x2x16xf32>)
//       CHECK:   linalg.generic {{.+}} ins(%[[X]], %[[P]] :
//   CHECK-NOT:   linalg.matmul
// CHECK-LABEL: func.func @layers
//  CHECK-SAME:   (%[[IN:.+]]: tensor<8x2xf32>)
//   CHECK-NOT:   tensor<2x64xf32>
//       V4:   %[[W0:.+]] = arith.constant dense<"0x000000000000803F0000004000004040000080400000A0400000C0400000E0400000004100001041000020410000304100004041000050410000604100007041000080410000884100009041000098410000A0410000A8410000B0410000B8410000C0410000C8410000D0410000D8410000E0410000E8410000F0410000F84100008042{{.*}}"> : tensor<2x2x32xf32>
//       V3:   %[[W0:.+]] = arith.constant dense<"0x000000000000803F0000004000004040000080400000A0400000C0400000E040000000410000104100002041000030410000404100005041000060410000704100008042{{.*}}"> : tensor<4x2x16xf32>
//  CHECK-NEXT:   call @layer(%[[IN]], %[[W0]]) :
//       V4:   %[[W1:.+]] = arith.constant dense<"0x0000C8420000CA420000CC420000CE420000D0420000D2420000D4420000D6420000D8420000DA420000DC420000DE420000E0420000E2420000E4420000E6420000E8420000EA420000EC420000EE420000F0420000F2420000F4420000F6420000F8420000FA420000FC420000FE420000004300000143000002430000034300002443{{.*}}"> : tensor<2x2x32xf32>
//       V3:   %[[W1:.+]] = arith.constant dense<"0x0000C8420000CA420000CC420000CE420000D0420000D2420000D4420000D6420000D8420000DA420000DC420000DE420000E0420000E2420000E4420000E64200002443{{.*}}"> : tensor<4x2x16xf32>
//  CHECK-NEXT:   call @layer(%[[IN]], %[[W1]]) :
//       V4:   %[[W2:.+]] = arith.constant dense<"0x000048430000494300004A4300004B4300004C4300004D4300004E4300004F430000504300005143000052430000534300005443000055430000564300005743000058430000594300005A4300005B4300005C4300005D4300005E4300005F43000060430000614300006243000063430000644300006543000066430000674300008443{{.*}}"> : tensor<2x2x32xf32>
//       V3:   %[[W2:.+]] = arith.constant dense<"0x000048430000494300004A4300004B4300004C4300004D4300004E4300004F43000050430000514300005243000053430000544300005543000056430000574300008443{{.*}}"> : tensor<4x2x16xf32>
//  CHECK-NEXT:   call @layer(%[[IN]], %[[W2]]) :
//   CHECK-NOT:   tensor<2x64xf32>
func.func private @layer(%x: tensor<8x2xf32>, %w: tensor<2x64xf32>) -> tensor<8x64xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x64xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<8x64xf32>) -> tensor<8x64xf32>
  %m = linalg.matmul ins(%x, %w : tensor<8x2xf32>, tensor<2x64xf32>) outs(%f : tensor<8x64xf32>) -> tensor<8x64xf32>
  return %m : tensor<8x64xf32>
}
func.func @layers(%x: tensor<8x2xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>) {
  %w0 = arith.constant dense<[[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0, 20.0, 21.0, 22.0, 23.0, 24.0, 25.0, 26.0, 27.0, 28.0, 29.0, 30.0, 31.0, 32.0, 33.0, 34.0, 35.0, 36.0, 37.0, 38.0, 39.0, 40.0, 41.0, 42.0, 43.0, 44.0, 45.0, 46.0, 47.0, 48.0, 49.0, 50.0, 51.0, 52.0, 53.0, 54.0, 55.0, 56.0, 57.0, 58.0, 59.0, 60.0, 61.0, 62.0, 63.0], [64.0, 65.0, 66.0, 67.0, 68.0, 69.0, 70.0, 71.0, 72.0, 73.0, 74.0, 75.0, 76.0, 77.0, 78.0, 79.0, 80.0, 81.0, 82.0, 83.0, 84.0, 85.0, 86.0, 87.0, 88.0, 89.0, 90.0, 91.0, 92.0, 93.0, 94.0, 95.0, 96.0, 97.0, 98.0, 99.0, 100.0, 101.0, 102.0, 103.0, 104.0, 105.0, 106.0, 107.0, 108.0, 109.0, 110.0, 111.0, 112.0, 113.0, 114.0, 115.0, 116.0, 117.0, 118.0, 119.0, 120.0, 121.0, 122.0, 123.0, 124.0, 125.0, 126.0, 127.0]]> : tensor<2x64xf32>
  %h0 = call @layer(%x, %w0) : (tensor<8x2xf32>, tensor<2x64xf32>) -> tensor<8x64xf32>
  %w1 = arith.constant dense<[[100.0, 101.0, 102.0, 103.0, 104.0, 105.0, 106.0, 107.0, 108.0, 109.0, 110.0, 111.0, 112.0, 113.0, 114.0, 115.0, 116.0, 117.0, 118.0, 119.0, 120.0, 121.0, 122.0, 123.0, 124.0, 125.0, 126.0, 127.0, 128.0, 129.0, 130.0, 131.0, 132.0, 133.0, 134.0, 135.0, 136.0, 137.0, 138.0, 139.0, 140.0, 141.0, 142.0, 143.0, 144.0, 145.0, 146.0, 147.0, 148.0, 149.0, 150.0, 151.0, 152.0, 153.0, 154.0, 155.0, 156.0, 157.0, 158.0, 159.0, 160.0, 161.0, 162.0, 163.0], [164.0, 165.0, 166.0, 167.0, 168.0, 169.0, 170.0, 171.0, 172.0, 173.0, 174.0, 175.0, 176.0, 177.0, 178.0, 179.0, 180.0, 181.0, 182.0, 183.0, 184.0, 185.0, 186.0, 187.0, 188.0, 189.0, 190.0, 191.0, 192.0, 193.0, 194.0, 195.0, 196.0, 197.0, 198.0, 199.0, 200.0, 201.0, 202.0, 203.0, 204.0, 205.0, 206.0, 207.0, 208.0, 209.0, 210.0, 211.0, 212.0, 213.0, 214.0, 215.0, 216.0, 217.0, 218.0, 219.0, 220.0, 221.0, 222.0, 223.0, 224.0, 225.0, 226.0, 227.0]]> : tensor<2x64xf32>
  %h1 = call @layer(%x, %w1) : (tensor<8x2xf32>, tensor<2x64xf32>) -> tensor<8x64xf32>
  %w2 = arith.constant dense<[[200.0, 201.0, 202.0, 203.0, 204.0, 205.0, 206.0, 207.0, 208.0, 209.0, 210.0, 211.0, 212.0, 213.0, 214.0, 215.0, 216.0, 217.0, 218.0, 219.0, 220.0, 221.0, 222.0, 223.0, 224.0, 225.0, 226.0, 227.0, 228.0, 229.0, 230.0, 231.0, 232.0, 233.0, 234.0, 235.0, 236.0, 237.0, 238.0, 239.0, 240.0, 241.0, 242.0, 243.0, 244.0, 245.0, 246.0, 247.0, 248.0, 249.0, 250.0, 251.0, 252.0, 253.0, 254.0, 255.0, 256.0, 257.0, 258.0, 259.0, 260.0, 261.0, 262.0, 263.0], [264.0, 265.0, 266.0, 267.0, 268.0, 269.0, 270.0, 271.0, 272.0, 273.0, 274.0, 275.0, 276.0, 277.0, 278.0, 279.0, 280.0, 281.0, 282.0, 283.0, 284.0, 285.0, 286.0, 287.0, 288.0, 289.0, 290.0, 291.0, 292.0, 293.0, 294.0, 295.0, 296.0, 297.0, 298.0, 299.0, 300.0, 301.0, 302.0, 303.0, 304.0, 305.0, 306.0, 307.0, 308.0, 309.0, 310.0, 311.0, 312.0, 313.0, 314.0, 315.0, 316.0, 317.0, 318.0, 319.0, 320.0, 321.0, 322.0, 323.0, 324.0, 325.0, 326.0, 327.0]]> : tensor<2x64xf32>
  %h2 = call @layer(%x, %w2) : (tensor<8x2xf32>, tensor<2x64xf32>) -> tensor<8x64xf32>
  return %h0, %h1, %h2 : tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>
}

// -----

// A call passing a non-constant and a public function: nothing to pack. An
// argument with another use is packed, and kept for that use.
// CHECK-LABEL: func.func private @some_constant
//       CHECK:   linalg.matmul
// CHECK-LABEL: func.func @public
//       CHECK:   linalg.matmul
// CHECK-LABEL: func.func private @second_use
//  CHECK-SAME:   (%{{.+}}: tensor<8x2xf32>, %[[W:.+]]: tensor<2x64xf32>, %[[P:.+]]: tensor<{{2x2x32|4x2x16}}xf32>)
//       CHECK:   linalg.generic {{.+}} ins(%{{.+}}, %[[P]] :
//       CHECK:   return %{{.+}}, %[[W]]
// CHECK-LABEL: func.func @callers
//  CHECK-SAME:   (%[[IN:.+]]: tensor<8x2xf32>, %[[V:.+]]: tensor<2x64xf32>)
//       CHECK:   %[[C:.+]] = arith.constant dense<{{.+}}> : tensor<2x64xf32>
//       CHECK:   call @some_constant(%[[IN]], %[[C]])
//       CHECK:   call @some_constant(%[[IN]], %[[V]])
//       CHECK:   call @public(%[[IN]], %[[C]])
//       CHECK:   %[[P:.+]] = arith.constant dense<{{.+}}> : tensor<{{2x2x32|4x2x16}}xf32>
//  CHECK-NEXT:   call @second_use(%[[IN]], %[[C]], %[[P]])
func.func private @some_constant(%x: tensor<8x2xf32>, %w: tensor<2x64xf32>) -> tensor<8x64xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x64xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<8x64xf32>) -> tensor<8x64xf32>
  %m = linalg.matmul ins(%x, %w : tensor<8x2xf32>, tensor<2x64xf32>) outs(%f : tensor<8x64xf32>) -> tensor<8x64xf32>
  return %m : tensor<8x64xf32>
}
func.func @public(%x: tensor<8x2xf32>, %w: tensor<2x64xf32>) -> tensor<8x64xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x64xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<8x64xf32>) -> tensor<8x64xf32>
  %m = linalg.matmul ins(%x, %w : tensor<8x2xf32>, tensor<2x64xf32>) outs(%f : tensor<8x64xf32>) -> tensor<8x64xf32>
  return %m : tensor<8x64xf32>
}
func.func private @second_use(%x: tensor<8x2xf32>, %w: tensor<2x64xf32>) -> (tensor<8x64xf32>, tensor<2x64xf32>) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x64xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<8x64xf32>) -> tensor<8x64xf32>
  %m = linalg.matmul ins(%x, %w : tensor<8x2xf32>, tensor<2x64xf32>) outs(%f : tensor<8x64xf32>) -> tensor<8x64xf32>
  return %m, %w : tensor<8x64xf32>, tensor<2x64xf32>
}
func.func @callers(%x: tensor<8x2xf32>, %v: tensor<2x64xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>, tensor<2x64xf32>) {
  %w = arith.constant dense<[[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 18.0, 19.0, 20.0, 21.0, 22.0, 23.0, 24.0, 25.0, 26.0, 27.0, 28.0, 29.0, 30.0, 31.0, 32.0, 33.0, 34.0, 35.0, 36.0, 37.0, 38.0, 39.0, 40.0, 41.0, 42.0, 43.0, 44.0, 45.0, 46.0, 47.0, 48.0, 49.0, 50.0, 51.0, 52.0, 53.0, 54.0, 55.0, 56.0, 57.0, 58.0, 59.0, 60.0, 61.0, 62.0, 63.0], [64.0, 65.0, 66.0, 67.0, 68.0, 69.0, 70.0, 71.0, 72.0, 73.0, 74.0, 75.0, 76.0, 77.0, 78.0, 79.0, 80.0, 81.0, 82.0, 83.0, 84.0, 85.0, 86.0, 87.0, 88.0, 89.0, 90.0, 91.0, 92.0, 93.0, 94.0, 95.0, 96.0, 97.0, 98.0, 99.0, 100.0, 101.0, 102.0, 103.0, 104.0, 105.0, 106.0, 107.0, 108.0, 109.0, 110.0, 111.0, 112.0, 113.0, 114.0, 115.0, 116.0, 117.0, 118.0, 119.0, 120.0, 121.0, 122.0, 123.0, 124.0, 125.0, 126.0, 127.0]]> : tensor<2x64xf32>
  %a = call @some_constant(%x, %w) : (tensor<8x2xf32>, tensor<2x64xf32>) -> tensor<8x64xf32>
  %b = call @some_constant(%x, %v) : (tensor<8x2xf32>, tensor<2x64xf32>) -> tensor<8x64xf32>
  %c = call @public(%x, %w) : (tensor<8x2xf32>, tensor<2x64xf32>) -> tensor<8x64xf32>
  %d, %u = call @second_use(%x, %w) : (tensor<8x2xf32>, tensor<2x64xf32>) -> (tensor<8x64xf32>, tensor<2x64xf32>)
  return %a, %b, %c, %d, %u : tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>, tensor<2x64xf32>
}

// -----

// The grouped INT4 matmul of sits-to-linalg: codes [K/2, N] (two fields a
// byte) expanded to [groups, words, N] and scales [groups, N], dequantized
// elementwise and contracted over (m, n, g, w, f). Both constants go to
// panels of nr columns: the dequantization runs over (nb, g, w, f, j), its
// field index moved from dimension 2 to 3, and the contraction over
// (m, nb, j, g, w, f).
//   CHECK-DAG: #[[CODES:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>
//   CHECK-DAG: #[[SCALE:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4)>
//   CHECK-DAG: #[[ID5:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>
//   CHECK-DAG: #[[X6:.+]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d3, d4, d5)>
//   CHECK-DAG: #[[D6:.+]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d1, d3, d4, d5, d2)>
//   CHECK-DAG: #[[O6:.+]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2)>
// CHECK-LABEL: func.func @grouped_int4
// Panel 0 holds code rows 0 and 1 of columns 0..nr-1: 0, 1, ... then 64, 65, ...
//          V4:   %[[P:.+]] = arith.constant dense<"0x000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F404142434445464748494A4B4C4D4E4F505152535455565758595A5B5C5D5E5F{{.*}}"> : tensor<2x2x32xi8>
//          V3:   %[[P:.+]] = arith.constant dense<"0x000102030405060708090A0B0C0D0E0F404142434445464748494A4B4C4D4E4F{{.*}}"> : tensor<4x2x16xi8>
//          V4:   %[[S:.+]] = arith.constant dense<{{.+}}> : tensor<2x1x32xf32>
//          V3:   %[[S:.+]] = arith.constant dense<{{.+}}> : tensor<4x1x16xf32>
//          V4:   %[[E:.+]] = tensor.expand_shape %[[P]] {{\[}}[0], [1, 2], [3]] output_shape [2, 1, 2, 32]
//          V3:   %[[E:.+]] = tensor.expand_shape %[[P]] {{\[}}[0], [1, 2], [3]] output_shape [4, 1, 2, 16]
//       CHECK:   %[[D:.+]] = linalg.generic {indexing_maps = [#[[CODES]], #[[SCALE]], #[[ID5]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%[[E]], %[[S]] :
//       CHECK:     linalg.index 3 : index
//       CHECK:     arith.sitofp
//       CHECK:   linalg.generic {indexing_maps = [#[[X6]], #[[D6]], #[[O6]]], iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%{{.+}}, %[[D]] :
//       CHECK:   tensor.collapse_shape
//   CHECK-NOT:   tensor<2x64xi8>
func.func @grouped_int4(%x: tensor<8x1x2x2xf32>) -> tensor<8x64xf32> {
  %z = arith.constant 0.0 : f32
  %c32 = arith.constant 32 : i32
  %c4 = arith.constant 4 : i32
  %c28 = arith.constant 28 : i32
  %codes = arith.constant dense<[[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63], [64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124, 125, 126, 127]]> : tensor<2x64xi8>
  %scale = arith.constant dense<[[0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5, 10.5, 11.5, 12.5, 13.5, 14.5, 15.5, 16.5, 17.5, 18.5, 19.5, 20.5, 21.5, 22.5, 23.5, 24.5, 25.5, 26.5, 27.5, 28.5, 29.5, 30.5, 31.5, 32.5, 33.5, 34.5, 35.5, 36.5, 37.5, 38.5, 39.5, 40.5, 41.5, 42.5, 43.5, 44.5, 45.5, 46.5, 47.5, 48.5, 49.5, 50.5, 51.5, 52.5, 53.5, 54.5, 55.5, 56.5, 57.5, 58.5, 59.5, 60.5, 61.5, 62.5, 63.5]]> : tensor<1x64xf32>
  %storage = tensor.expand_shape %codes [[0, 1], [2]] output_shape [1, 2, 64] : tensor<2x64xi8> into tensor<1x2x64xi8>
  %de = tensor.empty() : tensor<1x2x2x64xf32>
  %d = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%storage, %scale : tensor<1x2x64xi8>, tensor<1x64xf32>) outs(%de : tensor<1x2x2x64xf32>) {
  ^bb0(%in: i8, %s: f32, %out: f32):
    %word = arith.extui %in : i8 to i32
    %i = linalg.index 2 : index
    %field = arith.index_castui %i : index to i32
    %low = arith.muli %field, %c4 : i32
    %up = arith.subi %c28, %low : i32
    %top = arith.shli %word, %up : i32
    %code = arith.shrsi %top, %c28 : i32
    %real = arith.sitofp %code : i32 to f32
    %v = arith.mulf %real, %s : f32
    linalg.yield %v : f32
  } -> tensor<1x2x2x64xf32>
  %e = tensor.empty() : tensor<8x64xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<8x64xf32>) -> tensor<8x64xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d2, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d2, d3, d4, d1)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction", "reduction", "reduction"]} ins(%x, %d : tensor<8x1x2x2xf32>, tensor<1x2x2x64xf32>) outs(%f : tensor<8x64xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %q = arith.addf %acc, %p : f32
    linalg.yield %q : f32
  } -> tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}
