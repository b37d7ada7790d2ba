"""SITS ops built from Python: generated builders, result-type inference,
attributes, and verification of what was built."""

import pytest

from sits_mlir import ir
from sits_mlir.dialects import arith, func, sits, tensor as tensor_d

from ir_helpers import tensor


def build_func(name, arg_types, body):
    """Builds `func.func @name(args)` whose body returns body(*args)."""
    module = ir.Module.create()
    with ir.InsertionPoint(module.body):
        f = func.FuncOp(name, (arg_types, []))
        entry = f.add_entry_block()
        with ir.InsertionPoint(entry):
            results = body(*entry.arguments)
            results = results if isinstance(results, (list, tuple)) else [results]
            func.ReturnOp(results)
        f.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(arg_types, [r.type for r in results]))
    assert module.operation.verify()
    return module


def test_matmul_infers_broadcast_batch_and_transposes(ctx):
    def body(a, b, bias):
        return sits.matmul(a, b, bias=bias, transpose_rhs=True,
                           activation=sits.ActivationKind.Gelu)

    m = build_func("f", [tensor([2, 1, 128, 64]), tensor([12, 128, 64]), tensor([128])], body)
    op = m.body.operations[0].regions[0].blocks[0].operations[0]
    assert isinstance(op.opview, sits.MatmulOp)
    assert str(op.result.type) == "tensor<2x12x128x128xf32>"
    assert str(op.attributes["activation"]) == "#sits.activation<gelu>"
    assert "transpose_rhs" in op.attributes


def test_conv_infers_output_spatial_extent(ctx):
    def body(x, w, b):
        return sits.conv(x, w, bias=b,
                         strides=ir.DenseI64ArrayAttr.get([2, 2]),
                         padding=ir.DenseI64ArrayAttr.get([3, 3, 3, 3]),
                         activation=sits.ActivationKind.Relu)

    m = build_func("stem", [tensor([1, 3, 112, 112]), tensor([64, 3, 7, 7]), tensor([64])], body)
    assert "-> tensor<1x64x56x56xf32>" in str(m)


def test_conv_with_dynamic_batch_keeps_it_dynamic(ctx):
    m = build_func("f", [tensor([None, 8, 32, 32]), tensor([16, 4, 3, 3])],
                   lambda x, w: sits.conv(x, w, groups=2))
    assert "-> tensor<?x16x30x30xf32>" in str(m)


def test_attention_gqa_decode_with_concatenated_cache(ctx):
    def body(q, past_k, k_new, v):
        k = tensor_d.concat(tensor([1, 8, 512, 128]), 2, [past_k, k_new])
        return sits.attention(q, k, v, causal=True)

    m = build_func("decode", [tensor([1, 32, 1, 128]), tensor([1, 8, 511, 128]),
                              tensor([1, 8, 1, 128]), tensor([1, 8, 512, 128])], body)
    text = str(m)
    assert "sits.attention" in text and "{causal}" in text
    assert "-> tensor<1x32x1x128xf32>" in text


def test_norms_and_softmax_keep_the_input_type(ctx):
    def body(x, g, b):
        y = sits.layer_norm(x, g, bias=b, epsilon=ir.FloatAttr.get_f64(1e-5))
        y = sits.rms_norm(y, g)
        return sits.softmax(y, axis=ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 1))

    m = build_func("f", [tensor([1, 128, 768]), tensor([768]), tensor([768])], body)
    assert str(m).count("tensor<1x128x768xf32>") >= 4


def test_quantize_dequantize_per_group_with_packed_encoding(ctx):
    i64 = ir.IntegerType.get_signless(64)
    packed = sits.PackedEncodingAttr.get(ir.IntegerType.get_signless(8), 1)
    assert packed.axis == 1 and str(packed.storage) == "i8"
    q_type = tensor([4096, 1024], ir.IntegerType.get_signless(4), packed)

    def body(w, s):
        q = sits.quantize(q_type, w, s, axis=ir.IntegerAttr.get(i64, 1),
                          block_size=ir.IntegerAttr.get(i64, 32))
        return sits.dequantize(tensor([4096, 1024]), q, s, axis=ir.IntegerAttr.get(i64, 1),
                               block_size=ir.IntegerAttr.get(i64, 32))

    m = build_func("f", [tensor([4096, 1024]), tensor([4096, 32])], body)
    assert "#sits.packed<storage = i8, axis = 1>" in str(m)


def test_qmatmul_int4_matmulnbits_layout(ctx):
    i64 = ir.IntegerType.get_signless(64)

    def body(x, w, s, zp):
        return sits.qmatmul(x, w, s, zero_point=zp, transpose_weight=True,
                            axis=ir.IntegerAttr.get(i64, 1),
                            block_size=ir.IntegerAttr.get(i64, 128))

    ui4 = ir.IntegerType.get_unsigned(4)
    m = build_func("f", [tensor([8, 4096], "f16"), tensor([11008, 4096], ui4),
                         tensor([11008, 32], "f16"), tensor([11008, 32], ui4)], body)
    assert "-> tensor<8x11008xf16>" in str(m)


def test_activation_builder_and_enum_roundtrip(ctx):
    m = build_func("f", [tensor([4])], lambda x: sits.activation(sits.ActivationKind.Silu, x))
    assert "sits.activation <silu>" in str(m)


def test_inference_failure_raises_with_the_verifier_message(ctx):
    module = ir.Module.create()
    with ir.InsertionPoint(module.body):
        f = func.FuncOp("f", ([tensor([8, 16]), tensor([32, 4])], []))
        with ir.InsertionPoint(f.add_entry_block()):
            a, b = f.arguments
            with pytest.raises(ir.MLIRError) as err:
                sits.matmul(a, b)
    text = str(err.value)
    assert "contracting dimensions differ: lhs has [16], rhs has [32]" in text


def test_unranked_operands_are_rejected_by_inference(ctx):
    # ODS type constraints reject unranked tensors in parsed IR; a Python
    # builder reaches the defensive check in inferReturnTypes first.
    unranked = ir.UnrankedTensorType.get(ir.F32Type.get())
    module = ir.Module.create()
    with ir.InsertionPoint(module.body):
        f = func.FuncOp("f", ([unranked, unranked], []))
        with ir.InsertionPoint(f.add_entry_block()):
            a, b = f.arguments
            for build, message in [
                (lambda: sits.matmul(a, b), "operands must be ranked tensors"),
                (lambda: sits.conv(a, b), "operands must be ranked tensors"),
                (lambda: sits.qmatmul(a, b, a), "operands must be ranked tensors"),
                (lambda: sits.attention(a, b, b), "operands must be ranked tensors"),
                (lambda: sits.layer_norm(a, b), "input must be a ranked tensor"),
                (lambda: sits.rms_norm(a, b), "input must be a ranked tensor"),
            ]:
                with pytest.raises(ir.MLIRError) as err:
                    build()
                assert message in str(err.value)


def test_built_op_that_violates_a_verifier_fails_verification(ctx):
    i64 = ir.IntegerType.get_signless(64)
    module = ir.Module.create()
    with ir.InsertionPoint(module.body):
        f = func.FuncOp("f", ([tensor([16, 64])], []))
        with ir.InsertionPoint(f.add_entry_block()):
            (w,) = f.arguments
            scale = arith.constant(tensor([3]), ir.DenseElementsAttr.get_splat(
                tensor([3]), ir.FloatAttr.get_f32(0.5)))
            sits.quantize(tensor([16, 64], "i8"), w, scale, axis=ir.IntegerAttr.get(i64, 0))
            func.ReturnOp([])
    with pytest.raises(ir.MLIRError) as err:
        module.operation.verify()
    diag = err.value.error_diagnostics[0]
    assert "per-channel scale has [3] elements but axis 0 has extent [16]" in diag.message
