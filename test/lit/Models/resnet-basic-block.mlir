// ResNet-18 pieces (make_models.py `cnn`, 1x3x112x112 input, batch norm
// folded into conv weights and biases): the 7x7/2 stem with ReLU and a 3x3/2
// max pool written with linalg, a BasicBlock (conv+ReLU epilogue, conv,
// residual arith.addf, ReLU), and a downsampling BasicBlock whose identity
// path is a 1x1/2 conv.
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

module attributes {sits.target = #sits.target<"a100">} {
  func.func @stem(%x: tensor<1x3x112x112xf32>, %w: tensor<64x3x7x7xf32>, %b: tensor<64xf32>) -> tensor<1x64x28x28xf32> {
    %c = sits.conv %x, %w bias(%b) {strides = array<i64: 2, 2>, padding = array<i64: 3, 3, 3, 3>}
        : (tensor<1x3x112x112xf32>, tensor<64x3x7x7xf32>, tensor<64xf32>) -> tensor<1x64x56x56xf32>
    %r = sits.activation <relu> %c : tensor<1x64x56x56xf32>
    // MaxPool2d(3, stride 2, padding 1).
    %neg_inf = arith.constant 0xFF800000 : f32
    %padded = tensor.pad %r low[0, 0, 1, 1] high[0, 0, 1, 1] {
    ^bb0(%i: index, %j: index, %k: index, %l: index):
      tensor.yield %neg_inf : f32
    } : tensor<1x64x56x56xf32> to tensor<1x64x58x58xf32>
    %init = tensor.empty() : tensor<1x64x28x28xf32>
    %fill = linalg.fill ins(%neg_inf : f32) outs(%init : tensor<1x64x28x28xf32>) -> tensor<1x64x28x28xf32>
    %window = tensor.empty() : tensor<3x3xf32>
    %pool = linalg.pooling_nchw_max {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>}
        ins(%padded, %window : tensor<1x64x58x58xf32>, tensor<3x3xf32>)
        outs(%fill : tensor<1x64x28x28xf32>) -> tensor<1x64x28x28xf32>
    return %pool : tensor<1x64x28x28xf32>
  }

  func.func @basic_block(%x: tensor<1x64x28x28xf32>,
                         %w1: tensor<64x64x3x3xf32>, %b1: tensor<64xf32>,
                         %w2: tensor<64x64x3x3xf32>, %b2: tensor<64xf32>) -> tensor<1x64x28x28xf32> {
    %c1 = sits.conv %x, %w1 bias(%b1) {padding = array<i64: 1, 1, 1, 1>, activation = #sits.activation<relu>}
        : (tensor<1x64x28x28xf32>, tensor<64x64x3x3xf32>, tensor<64xf32>) -> tensor<1x64x28x28xf32>
    %c2 = sits.conv %c1, %w2 bias(%b2) {padding = array<i64: 1, 1, 1, 1>}
        : (tensor<1x64x28x28xf32>, tensor<64x64x3x3xf32>, tensor<64xf32>) -> tensor<1x64x28x28xf32>
    %s = arith.addf %c2, %x : tensor<1x64x28x28xf32>
    %y = sits.activation <relu> %s : tensor<1x64x28x28xf32>
    return %y : tensor<1x64x28x28xf32>
  }

  func.func @basic_block_downsample(%x: tensor<1x64x28x28xf32>,
                                    %w1: tensor<128x64x3x3xf32>, %b1: tensor<128xf32>,
                                    %w2: tensor<128x128x3x3xf32>, %b2: tensor<128xf32>,
                                    %wd: tensor<128x64x1x1xf32>, %bd: tensor<128xf32>) -> tensor<1x128x14x14xf32> {
    %c1 = sits.conv %x, %w1 bias(%b1) {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>,
                                       activation = #sits.activation<relu>}
        : (tensor<1x64x28x28xf32>, tensor<128x64x3x3xf32>, tensor<128xf32>) -> tensor<1x128x14x14xf32>
    %c2 = sits.conv %c1, %w2 bias(%b2) {padding = array<i64: 1, 1, 1, 1>}
        : (tensor<1x128x14x14xf32>, tensor<128x128x3x3xf32>, tensor<128xf32>) -> tensor<1x128x14x14xf32>
    %d = sits.conv %x, %wd bias(%bd) {strides = array<i64: 2, 2>}
        : (tensor<1x64x28x28xf32>, tensor<128x64x1x1xf32>, tensor<128xf32>) -> tensor<1x128x14x14xf32>
    %s = arith.addf %c2, %d : tensor<1x128x14x14xf32>
    %y = sits.activation <relu> %s : tensor<1x128x14x14xf32>
    return %y : tensor<1x128x14x14xf32>
  }
}

// CHECK: module attributes {sits.target = #sits.target<"a100">}
// CHECK-LABEL: func.func @stem
//  CHECK-SAME: (%[[X:[^:]+]]: tensor<1x3x112x112xf32>, %[[W:[^:]+]]: tensor<64x3x7x7xf32>, %[[B:[^:]+]]: tensor<64xf32>)
//       CHECK:   %[[C:.+]] = sits.conv %[[X]], %[[W]] bias(%[[B]]) {padding = array<i64: 3, 3, 3, 3>, strides = array<i64: 2, 2>}
//  CHECK-SAME:     -> tensor<1x64x56x56xf32>
//       CHECK:   %[[R:.+]] = sits.activation <relu> %[[C]] : tensor<1x64x56x56xf32>
//       CHECK:   %[[P:.+]] = tensor.pad %[[R]] low[0, 0, 1, 1] high[0, 0, 1, 1]
//       CHECK:   } : tensor<1x64x56x56xf32> to tensor<1x64x58x58xf32>
//       CHECK:   %[[F:.+]] = linalg.fill
//       CHECK:   %[[POOL:.+]] = linalg.pooling_nchw_max {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>}
//  CHECK-SAME:     ins(%[[P]], %{{.+}} : tensor<1x64x58x58xf32>, tensor<3x3xf32>) outs(%[[F]] : tensor<1x64x28x28xf32>)
//       CHECK:   return %[[POOL]]

// CHECK-LABEL: func.func @basic_block
//  CHECK-SAME: (%[[X:[^:]+]]: tensor<1x64x28x28xf32>,
//       CHECK:   %[[C1:.+]] = sits.conv %[[X]], {{.+}} {activation = #sits.activation<relu>, padding = array<i64: 1, 1, 1, 1>}
//       CHECK:   %[[C2:.+]] = sits.conv %[[C1]], {{.+}} {padding = array<i64: 1, 1, 1, 1>}
//       CHECK:   %[[S:.+]] = arith.addf %[[C2]], %[[X]] : tensor<1x64x28x28xf32>
//       CHECK:   %[[Y:.+]] = sits.activation <relu> %[[S]] : tensor<1x64x28x28xf32>
//       CHECK:   return %[[Y]]

// CHECK-LABEL: func.func @basic_block_downsample
//  CHECK-SAME: (%[[X:[^:]+]]: tensor<1x64x28x28xf32>,
//       CHECK:   %[[C1:.+]] = sits.conv %[[X]], {{.+}} {activation = #sits.activation<relu>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>}
//  CHECK-SAME:     -> tensor<1x128x14x14xf32>
//       CHECK:   %[[C2:.+]] = sits.conv %[[C1]], {{.+}} {padding = array<i64: 1, 1, 1, 1>}
//  CHECK-SAME:     -> tensor<1x128x14x14xf32>
//       CHECK:   %[[D:.+]] = sits.conv %[[X]], {{.+}} {strides = array<i64: 2, 2>}
//  CHECK-SAME:     : (tensor<1x64x28x28xf32>, tensor<128x64x1x1xf32>, tensor<128xf32>) -> tensor<1x128x14x14xf32>
//       CHECK:   %[[S:.+]] = arith.addf %[[C2]], %[[D]] : tensor<1x128x14x14xf32>
//       CHECK:   %[[Y:.+]] = sits.activation <relu> %[[S]]
//       CHECK:   return %[[Y]]

// The stem's ReLU fuses into its conv; the ReLUs after the residual adds do
// not (their producer is arith.addf).
// FUSED-LABEL: func.func @stem
//       FUSED:   %[[C:.+]] = sits.conv {{.+}} {activation = #sits.activation<relu>, padding = array<i64: 3, 3, 3, 3>, strides = array<i64: 2, 2>}
//   FUSED-NOT:   sits.activation
//       FUSED:   tensor.pad %[[C]]
// FUSED-LABEL: func.func @basic_block
//       FUSED:   %[[S:.+]] = arith.addf
//       FUSED:   sits.activation <relu> %[[S]]
// FUSED-LABEL: func.func @basic_block_downsample
//       FUSED:   %[[S:.+]] = arith.addf
//       FUSED:   sits.activation <relu> %[[S]]
