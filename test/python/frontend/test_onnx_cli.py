"""`python -m sits_mlir.frontend.onnx` (sits-import-onnx): prints the
imported IR; every bad input is one error on stderr and exit status 1,
never a traceback. The IR it prints is FileChecked in test/lit/Frontend."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper

from sits_mlir.frontend.onnx.__main__ import main

PROG = "sits-import-onnx"


def _save(model, path):
    onnx.save(model, str(path))
    return str(path)


def relu_model(dim="batch"):
    graph = h.make_graph([h.make_node("Relu", ["x"], ["y"], name="relu")], "relu",
                         [h.make_tensor_value_info("x", TP.FLOAT, [dim, 8])],
                         [h.make_tensor_value_info("y", TP.FLOAT, [dim, 8])])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


def unsupported_model():
    nodes = [h.make_node("Unique", ["x"], ["u"], name="unique"),
             h.make_node("Frobnicate", ["u"], ["y"], name="custom", domain="com.example")]
    graph = h.make_graph(nodes, "bad", [h.make_tensor_value_info("x", TP.FLOAT, [8])],
                         [h.make_tensor_value_info("y", TP.FLOAT, ["n"])])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17),
                                              h.make_opsetid("com.example", 1)], ir_version=8)


def run_main(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def assert_one_error(rc, out, err, message):
    assert rc == 1
    assert out == ""
    assert err.startswith(f"{PROG}: error: ")
    assert message in err
    assert "Traceback" not in err


# -- error paths ---------------------------------------------------------------------

def test_missing_file_in_a_process(tmp_path):
    """The real process: exit status 1, one line on stderr, nothing on stdout."""
    missing = tmp_path / "missing.onnx"
    done = subprocess.run([sys.executable, "-m", "sits_mlir.frontend.onnx", str(missing)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr == f"{PROG}: error: cannot read ONNX model '{missing}': no such file\n"


def test_console_script(tmp_path):
    """The installed console script (pyproject.toml's [project.scripts])."""
    from pathlib import Path

    prog = Path(sys.executable).parent / PROG
    prog = str(prog) if prog.is_file() else shutil.which(PROG)
    assert prog, f"{PROG} is not installed next to {sys.executable} nor on PATH"
    model = _save(relu_model(), tmp_path / "model.onnx")
    done = subprocess.run([prog, model], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "sits.activation <relu>" in done.stdout
    done = subprocess.run([prog, str(tmp_path / "missing.onnx")], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 1 and done.stderr.startswith(f"{PROG}: error: ")


def test_missing_file(capsys, tmp_path):
    rc, out, err = run_main(capsys, str(tmp_path / "missing.onnx"))
    assert_one_error(rc, out, err, "no such file")
    assert len(err.splitlines()) == 1


def test_directory(capsys, tmp_path):
    rc, out, err = run_main(capsys, str(tmp_path))
    assert_one_error(rc, out, err, "it is a directory")


def test_not_an_onnx_file(capsys, tmp_path):
    path = tmp_path / "model.onnx"
    path.write_text("not a model\n")
    rc, out, err = run_main(capsys, str(path))
    assert_one_error(rc, out, err, "is not an ONNX model")


def test_invalid_model(capsys, tmp_path):
    """A node reading a value nothing defines: onnx.checker's message."""
    graph = h.make_graph([h.make_node("Relu", ["nowhere"], ["y"], name="relu")], "g",
                         [h.make_tensor_value_info("x", TP.FLOAT, [8])],
                         [h.make_tensor_value_info("y", TP.FLOAT, [8])])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    rc, out, err = run_main(capsys, _save(model, tmp_path / "model.onnx"))
    assert_one_error(rc, out, err, "invalid ONNX model (onnx.checker)")


def test_unsupported_nodes_are_all_listed(capsys, tmp_path):
    rc, out, err = run_main(capsys, _save(unsupported_model(), tmp_path / "model.onnx"))
    assert_one_error(rc, out, err, "the model has 2 unsupported nodes; nothing was imported")
    lines = err.splitlines()
    assert len(lines) == 3
    assert "node 'unique' (Unique, opset 17)" in lines[1]
    assert "node 'custom' (com.example.Frobnicate, opset 1): unknown op" in lines[2]


def test_unsupported_model_writes_no_output_file(capsys, tmp_path):
    out_path = tmp_path / "model.mlir"
    rc, out, err = run_main(capsys, _save(unsupported_model(), tmp_path / "model.onnx"),
                            "-o", str(out_path))
    assert_one_error(rc, out, err, "unsupported nodes")
    assert not out_path.exists()


def test_unknown_dynamic_dim(capsys, tmp_path):
    rc, out, err = run_main(capsys, _save(relu_model(), tmp_path / "model.onnx"),
                            "--dynamic-dim", "seq=4")
    assert_one_error(rc, out, err, "dynamic_dims names 'seq', which no graph input has")


@pytest.mark.parametrize("arg,message", [("batch", "expected NAME=SIZE"),
                                         ("batch=two", "must be a non-negative integer"),
                                         ("batch=-1", "must be a non-negative integer")])
def test_malformed_dynamic_dim_is_a_usage_error(capsys, tmp_path, arg, message):
    with pytest.raises(SystemExit) as exit_info:
        main([str(tmp_path / "model.onnx"), "--dynamic-dim", arg])
    assert exit_info.value.code == 2  # argparse's usage errors
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_unwritable_output(capsys, tmp_path):
    rc, out, err = run_main(capsys, _save(relu_model(), tmp_path / "model.onnx"),
                            "-o", str(tmp_path / "no" / "such" / "dir" / "model.mlir"))
    assert_one_error(rc, out, err, "cannot write")


# -- success -------------------------------------------------------------------------

def test_prints_the_module(capsys, tmp_path):
    rc, out, err = run_main(capsys, _save(relu_model(), tmp_path / "model.onnx"))
    assert rc == 0 and err == ""
    assert "func.func @main(%arg0: tensor<?x8xf32>) -> tensor<?x8xf32>" in out
    assert "sits.activation <relu>" in out


def test_dynamic_dim_and_output_file(capsys, tmp_path):
    out_path = tmp_path / "model.mlir"
    rc, out, err = run_main(capsys, _save(relu_model(), tmp_path / "model.onnx"),
                            "--dynamic-dim", "batch=3", "-o", str(out_path))
    assert rc == 0 and out == "" and err == ""
    assert "func.func @main(%arg0: tensor<3x8xf32>) -> tensor<3x8xf32>" in out_path.read_text()


def test_generic_form_and_locations(capsys, tmp_path):
    rc, out, err = run_main(capsys, _save(relu_model(), tmp_path / "model.onnx"),
                            "--generic", "--debug-info")
    assert rc == 0
    assert '"func.func"' in out and '"sits.activation"' in out
    assert 'loc("relu")' in out


def test_printed_weights_parse_back(capsys, tmp_path):
    """Weights above the inline limit are printed as dense_resource blobs:
    the text is a complete module."""
    from sits_mlir import ir

    w = np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32)
    graph = h.make_graph([h.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "mm",
                         [h.make_tensor_value_info("x", TP.FLOAT, [2, 16])],
                         [h.make_tensor_value_info("y", TP.FLOAT, [2, 16])],
                         [numpy_helper.from_array(w, "w")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    rc, out, err = run_main(capsys, _save(model, tmp_path / "model.onnx"))
    assert rc == 0 and "dense_resource<w>" in out and "dialect_resources" in out
    with ir.Context():
        module = ir.Module.parse(out)
        assert "sits.matmul" in str(module)
