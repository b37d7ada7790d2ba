"""Parsing and printing SITS IR from Python: custom, generic and bytecode
forms all round-trip."""

import io
import re

from sits_mlir import ir

GPT2_ATTENTION = """
module attributes {sits.target = #sits.target<"h100">} {
  func.func @attn(%x: tensor<1x128x768xf32>, %g: tensor<768xf32>, %b: tensor<768xf32>,
                  %wq: tensor<768x768xf32>, %wk: tensor<768x768xf32>, %wv: tensor<768x768xf32>)
      -> tensor<1x12x128x64xf32> {
    %h = sits.layer_norm %x, %g, %b {epsilon = 1.0e-05 : f64}
        : (tensor<1x128x768xf32>, tensor<768xf32>, tensor<768xf32>) -> tensor<1x128x768xf32>
    %q = sits.matmul %h, %wq : (tensor<1x128x768xf32>, tensor<768x768xf32>) -> tensor<1x128x768xf32>
    %k = sits.matmul %h, %wk : (tensor<1x128x768xf32>, tensor<768x768xf32>) -> tensor<1x128x768xf32>
    %v = sits.matmul %h, %wv : (tensor<1x128x768xf32>, tensor<768x768xf32>) -> tensor<1x128x768xf32>
    %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [1, 128, 12, 64]
        : tensor<1x128x768xf32> into tensor<1x128x12x64xf32>
    %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [1, 128, 12, 64]
        : tensor<1x128x768xf32> into tensor<1x128x12x64xf32>
    %v4 = tensor.expand_shape %v [[0], [1], [2, 3]] output_shape [1, 128, 12, 64]
        : tensor<1x128x768xf32> into tensor<1x128x12x64xf32>
    %e = tensor.empty() : tensor<1x12x128x64xf32>
    %qt = linalg.transpose ins(%q4 : tensor<1x128x12x64xf32>) outs(%e : tensor<1x12x128x64xf32>) permutation = [0, 2, 1, 3]
    %kt = linalg.transpose ins(%k4 : tensor<1x128x12x64xf32>) outs(%e : tensor<1x12x128x64xf32>) permutation = [0, 2, 1, 3]
    %vt = linalg.transpose ins(%v4 : tensor<1x128x12x64xf32>) outs(%e : tensor<1x12x128x64xf32>) permutation = [0, 2, 1, 3]
    %o = sits.attention %qt, %kt, %vt {causal}
        : (tensor<1x12x128x64xf32>, tensor<1x12x128x64xf32>, tensor<1x12x128x64xf32>) -> tensor<1x12x128x64xf32>
    return %o : tensor<1x12x128x64xf32>
  }
}
"""


def test_custom_form_roundtrip(ctx):
    m = ir.Module.parse(GPT2_ATTENTION)
    assert m.operation.verify()
    printed = str(m)
    assert str(ir.Module.parse(printed)) == printed
    assert re.search(r"sits.attention %\w+, %\w+, %\w+ \{causal\}", printed)


def test_generic_form_roundtrip(ctx):
    m = ir.Module.parse(GPT2_ATTENTION)
    generic = m.operation.get_asm(print_generic_op_form=True)
    assert '"sits.layer_norm"' in generic
    assert str(ir.Module.parse(generic)) == str(m)


def test_bytecode_roundtrip(ctx):
    m = ir.Module.parse(GPT2_ATTENTION)
    buf = io.BytesIO()
    m.operation.write_bytecode(buf)
    assert buf.getvalue()[:4] == b"ML\xefR"
    assert str(ir.Module.parse(buf.getvalue())) == str(m)


def test_attribute_access_from_python(ctx):
    m = ir.Module.parse(GPT2_ATTENTION)
    target = m.operation.attributes["sits.target"]
    assert type(target).__name__ == "TargetAttr"
    assert target.name == "h100" and target.info["chip"] == "sm_90"
    func_op = m.body.operations[0]
    ops = [op for op in func_op.regions[0].blocks[0].operations]
    attention = next(op for op in ops if op.name == "sits.attention")
    assert "causal" in attention.attributes
    assert "scale" not in attention.attributes
