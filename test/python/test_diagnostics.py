"""MLIR diagnostics reach Python as exceptions carrying messages and
locations."""

import pytest

from sits_mlir import ir, passmanager

BAD_MATMUL = """
func.func @f(%a: tensor<8x16xf32>, %b: tensor<32x4xf32>) -> tensor<8x4xf32> {
  %0 = sits.matmul %a, %b : (tensor<8x16xf32>, tensor<32x4xf32>) -> tensor<8x4xf32> loc("model.onnx":7:3)
  return %0 : tensor<8x4xf32>
}
"""


def test_verifier_error_carries_message_and_location(ctx):
    with pytest.raises(ir.MLIRError) as err:
        ir.Module.parse(BAD_MATMUL)
    diags = err.value.error_diagnostics
    assert len(diags) >= 1
    first = diags[0]
    assert "'sits.matmul' op contracting dimensions differ: lhs has [16], rhs has [32]" in first.message
    assert str(first.location) == 'loc("model.onnx":7:3)'
    assert first.severity == ir.DiagnosticSeverity.ERROR


def test_name_locations_as_the_frontend_makes_them(ctx):
    # The ONNX frontend turns node names into NameLocs; diagnostics keep them.
    source = BAD_MATMUL.replace('loc("model.onnx":7:3)', 'loc("/layers.0/fc1/MatMul")')
    with pytest.raises(ir.MLIRError) as err:
        ir.Module.parse(source)
    assert str(err.value.error_diagnostics[0].location) == 'loc("/layers.0/fc1/MatMul")'


def test_parse_error_reports_position(ctx):
    with pytest.raises(ir.MLIRError) as err:
        ir.Module.parse("func.func @f() {\n  %0 = sits.softmax : \n}")
    diag = err.value.error_diagnostics[0]
    assert ":2:" in str(diag.location)  # the line of the bad op
    assert diag.message


def test_verify_reports_every_failing_op(ctx):
    m = ir.Module.parse("""
    func.func @f(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
      %0 = sits.softmax %x : tensor<2x3xf32>
      return %0 : tensor<2x3xf32>
    }""")
    softmax = m.body.operations[0].regions[0].blocks[0].operations[0]
    softmax.attributes["axis"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 5)
    with pytest.raises(ir.MLIRError) as err:
        m.operation.verify()
    assert "axis 5 is out of range for an input of rank 2" in err.value.error_diagnostics[0].message


def test_pass_failure_raises(ctx):
    m = ir.Module.parse("""
    func.func @f(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
      %0 = sits.softmax %x : tensor<2x3xf32>
      return %0 : tensor<2x3xf32>
    }""")
    softmax = m.body.operations[0].regions[0].blocks[0].operations[0]
    softmax.attributes["axis"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), -3)
    pm = passmanager.PassManager.parse("builtin.module(func.func(sits-fuse-epilogue))")
    with pytest.raises(ir.MLIRError) as err:
        pm.run(m.operation)
    assert any("axis -3 is out of range" in d.message for d in err.value.error_diagnostics)
