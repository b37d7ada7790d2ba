# Builds every SITS op through the Python API, verifies the module, prints it,
# and checks that sits-opt parses, verifies and prints back what Python
# printed.
#
# RUN: %python %s | sits-opt | FileCheck %s
# RUN: %python %s | sits-opt --mlir-print-op-generic | sits-opt | FileCheck %s

from sits_mlir import ir
from sits_mlir.dialects import func, sits


def tensor(shape, element, encoding=None):
    return ir.RankedTensorType.get(shape, element, encoding)


with ir.Context(), ir.Location.unknown():
    f16, f32 = ir.F16Type.get(), ir.F32Type.get()
    i4, i8 = ir.IntegerType.get_signless(4), ir.IntegerType.get_signless(8)
    packed = sits.PackedEncodingAttr.get(i8, 0)
    assert packed.axis == 0 and packed.storage == i8

    module = ir.Module.create()
    module.operation.attributes["sits.target"] = sits.TargetAttr.get("sm_90")
    with ir.InsertionPoint(module.body):

        @func.FuncOp.from_py_func(
            tensor([8, 1024], f32), tensor([4096, 1024], f32), tensor([4096], f32)
        )
        def linear_gelu(x, w, b):
            # The result type is inferred from the operands.
            y = sits.matmul(x, w, bias=b, transpose_rhs=True,
                            activation=sits.ActivationKind.Gelu)
            assert str(y.type) == "tensor<8x4096xf32>", y.type
            return y

        @func.FuncOp.from_py_func(
            tensor([1, 3, 112, 112], f32), tensor([64, 3, 7, 7], f32), tensor([64], f32)
        )
        def stem(x, w, b):
            y = sits.conv(x, w, bias=b, strides=[2, 2], padding=[3, 3, 3, 3])
            assert str(y.type) == "tensor<1x64x56x56xf32>", y.type
            return sits.activation(sits.ActivationKind.Relu, y)

        @func.FuncOp.from_py_func(
            tensor([8, 4096], f16), tensor([4096, 4096], i4, packed), tensor([32, 4096], f16)
        )
        def int4_linear(x, w, s):
            y = sits.qmatmul(x, w, s, axis=0, block_size=128,
                             activation=sits.ActivationKind.Silu)
            assert str(y.type) == "tensor<8x4096xf16>", y.type
            return y

        @func.FuncOp.from_py_func(
            tensor([1, 32, 16, 128], f16), tensor([1, 8, 16, 128], f16), tensor([1, 8, 16, 128], f16)
        )
        def gqa(q, k, v):
            o = sits.attention(q, k, v, causal=True)
            assert str(o.type) == "tensor<1x32x16x128xf16>", o.type
            return o

        @func.FuncOp.from_py_func(
            tensor([1, 128, 768], f32), tensor([768], f32), tensor([768], f32)
        )
        def norms(x, g, b):
            y = sits.layer_norm(x, g, bias=b)
            z = sits.rms_norm(y, g, epsilon=1e-6)
            return sits.softmax(z, axis=2)

        @func.FuncOp.from_py_func(tensor([768, 3072], f32), tensor([768], f32))
        def requantize(w, s):
            q = sits.quantize(tensor([768, 3072], i8), w, s, axis=0)
            return sits.dequantize(tensor([768, 3072], f32), q, s, axis=0)

    assert module.operation.verify()
    print(module)

# CHECK: module attributes {sits.target = #sits.target<"sm_90">}
# CHECK-LABEL: func.func @linear_gelu
#  CHECK-SAME: (%[[X:.+]]: tensor<8x1024xf32>, %[[W:.+]]: tensor<4096x1024xf32>, %[[B:.+]]: tensor<4096xf32>) -> tensor<8x4096xf32>
#       CHECK:   %[[Y:.+]] = sits.matmul %[[X]], %[[W]] bias(%[[B]]) {activation = #sits.activation<gelu>, transpose_rhs}
#  CHECK-SAME:     : (tensor<8x1024xf32>, tensor<4096x1024xf32>, tensor<4096xf32>) -> tensor<8x4096xf32>
#       CHECK:   return %[[Y]]
# CHECK-LABEL: func.func @stem
#       CHECK:   %[[C:.+]] = sits.conv %{{.+}}, %{{.+}} bias(%{{.+}}) {padding = array<i64: 3, 3, 3, 3>, strides = array<i64: 2, 2>}
#  CHECK-SAME:     -> tensor<1x64x56x56xf32>
#       CHECK:   %[[R:.+]] = sits.activation <relu> %[[C]] : tensor<1x64x56x56xf32>
#       CHECK:   return %[[R]]
# CHECK-LABEL: func.func @int4_linear
#       CHECK:   sits.qmatmul {{.+}} {activation = #sits.activation<silu>, axis = 0 : i64, block_size = 128 : i64}
#  CHECK-SAME:     : (tensor<8x4096xf16>, tensor<4096x4096xi4, #sits.packed<storage = i8, axis = 0>>, tensor<32x4096xf16>) -> tensor<8x4096xf16>
# CHECK-LABEL: func.func @gqa
#       CHECK:   sits.attention {{.+}} {causal} : (tensor<1x32x16x128xf16>, tensor<1x8x16x128xf16>, tensor<1x8x16x128xf16>) -> tensor<1x32x16x128xf16>
# CHECK-LABEL: func.func @norms
#       CHECK:   %[[LN:.+]] = sits.layer_norm %{{.+}}, %{{.+}}, %{{.+}} : (tensor<1x128x768xf32>, tensor<768xf32>, tensor<768xf32>) -> tensor<1x128x768xf32>
#       CHECK:   %[[RMS:.+]] = sits.rms_norm %[[LN]], %{{.+}} {epsilon = 9.9999999999999995E-7 : f64}
#       CHECK:   %[[SM:.+]] = sits.softmax %[[RMS]] {axis = 2 : i64} : tensor<1x128x768xf32>
#       CHECK:   return %[[SM]]
# CHECK-LABEL: func.func @requantize
#       CHECK:   %[[Q:.+]] = sits.quantize %{{.+}}, %{{.+}} {axis = 0 : i64} : (tensor<768x3072xf32>, tensor<768xf32>) -> tensor<768x3072xi8>
#       CHECK:   %[[D:.+]] = sits.dequantize %[[Q]], %{{.+}} {axis = 0 : i64} : (tensor<768x3072xi8>, tensor<768xf32>) -> tensor<768x3072xf32>
#       CHECK:   return %[[D]]
