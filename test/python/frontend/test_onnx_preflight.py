"""Pre-flight checking and bad input: every unsupported node is reported at
once, before any IR is built; unreadable input is a CompileError with a
clear message, never a traceback from deep inside."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper

import sits_mlir
from sits_mlir.errors import CompileError, UnsupportedNode
from sits_mlir.frontend.onnx import check, import_model


def three_unsupported():
    """Relu, then a custom-domain op, NonZero (data-dependent shape), a Gelu
    with an unknown `approximate`, and a MaxPool with storage_order=1."""
    x = h.make_tensor_value_info("x", TP.FLOAT, [2, 3, 8, 8])
    nodes = [
        h.make_node("Relu", ["x"], ["r"], name="relu"),
        h.make_node("FancyOp", ["r"], ["f"], name="fancy", domain="com.example"),
        h.make_node("NonZero", ["r"], ["nz"], name="nonzero"),
        h.make_node("Gelu", ["r"], ["g"], name="gelu", approximate="sigmoid"),
        h.make_node("MaxPool", ["g"], ["p"], name="pool", kernel_shape=[2, 2], storage_order=1),
    ]
    outs = [h.make_tensor_value_info("f", TP.FLOAT, [2, 3, 8, 8]),
            h.make_tensor_value_info("nz", TP.INT64, [4, "n"]),
            h.make_tensor_value_info("p", TP.FLOAT, [2, 3, 7, 7])]
    g = h.make_graph(nodes, "bad", [x], outs)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 20), h.make_opsetid("com.example", 1)],
                        ir_version=9)


EXPECTED = {
    "fancy": ("FancyOp", "com.example", 1, "unknown op"),
    "nonzero": ("NonZero", "ai.onnx", 20, "depends on run-time data"),
    "gelu": ("Gelu", "ai.onnx", 20, "approximate='sigmoid'"),
    "pool": ("MaxPool", "ai.onnx", 20, "storage_order=1"),
}


def test_import_raises_one_error_listing_every_unsupported_node():
    with pytest.raises(CompileError) as err:
        import_model(three_unsupported())
    diags = err.value.diagnostics
    assert len(diags) == 4
    assert all(isinstance(d, UnsupportedNode) for d in diags)
    by_name = {d.node_name: d for d in diags}
    assert set(by_name) == set(EXPECTED)
    for name, (op, domain, opset, reason) in EXPECTED.items():
        d = by_name[name]
        assert (d.op_type, d.domain, d.opset) == (op, domain, opset)
        assert reason in d.message, d.message
        assert d.location == f'loc("{name}")'
    text = str(err.value)
    assert "4 unsupported nodes" in text
    for name in EXPECTED:
        assert f"node '{name}'" in text


def test_check_returns_the_same_without_raising(tmp_path):
    problems = check(three_unsupported())
    assert {p.node_name for p in problems} == set(EXPECTED)
    # From a file, and through the package-level entry point.
    path = tmp_path / "bad.onnx"
    onnx.save(three_unsupported(), str(path))
    assert [str(p) for p in sits_mlir.check(str(path))] == [str(p) for p in problems]
    assert sits_mlir.check(str(path), target="cpu") == problems


def test_check_of_a_supported_model_is_empty():
    x = h.make_tensor_value_info("x", TP.FLOAT, [2, 3])
    g = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "ok", [x],
                     [h.make_tensor_value_info("y", TP.FLOAT, [2, 3])])
    assert check(h.make_model(g, opset_imports=[h.make_opsetid("", 13)], ir_version=7)) == []


def test_unknown_op_in_the_default_domain_is_reported_not_rejected():
    x = h.make_tensor_value_info("x", TP.FLOAT, [2, 3])
    g = h.make_graph([h.make_node("NotAnOnnxOp", ["x"], ["y"], name="mystery")], "g", [x],
                     [h.make_tensor_value_info("y", TP.FLOAT, [2, 3])])
    (p,) = check(h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8))
    assert p.node_name == "mystery" and p.message == "unknown op"


def test_unsupported_dtype_is_reported_and_a_runtime_shape_input_is_not():
    x = h.make_tensor_value_info("x", TP.FLOAT, [2, 3])
    s = h.make_tensor_value_info("s", TP.INT64, [2])
    nodes = [h.make_node("Cast", ["x"], ["c"], to=TP.COMPLEX64, name="to_complex"),
             h.make_node("Reshape", ["x", "s"], ["r"], name="reshape")]
    g = h.make_graph(nodes, "g", [x, s], [h.make_tensor_value_info("c", TP.COMPLEX64, [2, 3]),
                                          h.make_tensor_value_info("r", TP.FLOAT, ["a", "b"])])
    problems = {p.node_name: p.message for p in
                check(h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8))}
    assert "complex64" in problems["to_complex"]
    # A Reshape target computed at run time is read at run time.
    assert "reshape" not in problems


def test_unnamed_nodes_are_named_after_type_and_index():
    x = h.make_tensor_value_info("x", TP.FLOAT, [4])
    nodes = [h.make_node("Relu", ["x"], ["a"]), h.make_node("NonZero", ["a"], ["y"])]
    g = h.make_graph(nodes, "g", [x], [h.make_tensor_value_info("y", TP.INT64, [1, "n"])])
    (p,) = check(h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8))
    assert p.node_name == "NonZero_1"


def test_missing_file():
    with pytest.raises(CompileError, match="no such file"):
        import_model("/nonexistent/model.onnx")
    with pytest.raises(CompileError, match="no such file"):
        sits_mlir.check("/nonexistent/model.onnx")


def test_directory(tmp_path):
    with pytest.raises(CompileError, match="is a directory"):
        import_model(str(tmp_path))


def test_garbage_bytes(tmp_path):
    path = tmp_path / "garbage.onnx"
    path.write_bytes(b"\x00\xffthis is not a protobuf\x13\x37" * 10)
    with pytest.raises(CompileError, match="is not an ONNX model"):
        import_model(str(path))
    path.write_text("hello world")
    with pytest.raises(CompileError, match="is not an ONNX model"):
        check(path)


def test_output_without_shape_is_rejected_by_the_checker():
    x = h.make_tensor_value_info("x", TP.FLOAT, [2])
    g = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "g", [x],
                     [h.make_tensor_value_info("y", TP.FLOAT, None)])
    with pytest.raises(CompileError, match="invalid ONNX model"):
        check(h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8))


def test_invalid_model_is_rejected_by_the_checker():
    x = h.make_tensor_value_info("x", TP.FLOAT, [2])
    g = h.make_graph([h.make_node("Add", ["x", "missing"], ["y"])], "g", [x],
                     [h.make_tensor_value_info("y", TP.FLOAT, [2])])
    with pytest.raises(CompileError, match="invalid ONNX model") as err:
        import_model(h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8))
    assert "missing" in str(err.value)


def test_old_opsets_are_converted_new_ones_refused():
    x = h.make_tensor_value_info("x", TP.FLOAT, [2, 3])
    # Opset 11 Squeeze takes its axes as an attribute; opset 13 as an input.
    g = h.make_graph([h.make_node("Unsqueeze", ["x"], ["u"], axes=[0]),
                      h.make_node("Relu", ["u"], ["y"])], "g", [x],
                     [h.make_tensor_value_info("y", TP.FLOAT, [1, 2, 3])])
    im = import_model(h.make_model(g, opset_imports=[h.make_opsetid("", 11)], ir_version=6))
    assert im.opset == 13
    assert [tuple(s.shape) for s in im.outputs] == [(1, 2, 3)]
    with pytest.raises(CompileError, match="opset 99; SITS reads opsets 13 to"):
        import_model(h.make_model(g, opset_imports=[h.make_opsetid("", 99)], ir_version=8))
    with pytest.raises(CompileError, match="expected a path"):
        import_model(42)


def test_unknown_target_and_bad_dynamic_dims():
    x = h.make_tensor_value_info("x", TP.FLOAT, ["n"])
    g = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "g", [x],
                     [h.make_tensor_value_info("y", TP.FLOAT, ["n"])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    with pytest.raises(CompileError, match="unknown target"):
        check(m, target="tpu9000")
    with pytest.raises(CompileError, match="no graph input has"):
        import_model(m, dynamic_dims={"batch": 2})


def test_model_bytes_and_paths_import_alike(tmp_path):
    x = h.make_tensor_value_info("x", TP.FLOAT, [2, 80])
    w = numpy_helper.from_array(np.arange(80 * 3, dtype=np.float32).reshape(80, 3), "w")
    g = h.make_graph([h.make_node("MatMul", ["x", "w"], ["y"])], "g", [x],
                     [h.make_tensor_value_info("y", TP.FLOAT, [2, 3])], initializer=[w])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    path = tmp_path / "m.onnx"
    on_disk = onnx.ModelProto()
    on_disk.CopyFrom(m)  # onnx.save moves the data of what it saves externally
    onnx.save(on_disk, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
              location="m.data", size_threshold=0)
    texts = {str(import_model(src).module) for src in (m, m.SerializeToString(), str(path), path)}
    assert len(texts) == 1


def test_reshape_that_shapes_cannot_prove_imports_with_run_time_extents():
    # [n, 8] -> [4, -1]: the result's dynamic extent (2n) is not the
    # input's; it is computed at run time (test_onnx_dynamic_extents.py).
    x = h.make_tensor_value_info("x", TP.FLOAT, ["n", 8])
    s = numpy_helper.from_array(np.array([4, -1], np.int64), "s")
    g = h.make_graph([h.make_node("Reshape", ["x", "s"], ["y"], name="reshape")], "g", [x],
                     [h.make_tensor_value_info("y", TP.FLOAT, [4, "m"])], initializer=[s])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    assert check(m) == []
    assert import_model(m).outputs[0].shape == (4, None)
    # With the extent pinned it is static.
    assert import_model(m, dynamic_dims={"n": 2}).outputs[0].shape == (4, 4)


def test_string_constants_are_unsupported_not_a_crash():
    x = h.make_tensor_value_info("x", TP.FLOAT, [2])
    c = h.make_node("Constant", [], ["c"], name="text",
                    value=h.make_tensor("c", TP.STRING, [1], [b"hello"]))
    g = h.make_graph([c, h.make_node("Identity", ["c"], ["y"], name="id"),
                      h.make_node("Relu", ["x"], ["z"])], "g", [x],
                     [h.make_tensor_value_info("y", TP.STRING, [1]),
                      h.make_tensor_value_info("z", TP.FLOAT, [2])])
    problems = check(h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8))
    assert problems and all("string" in p.message for p in problems)


def test_import_into_a_given_context():
    from sits_mlir import ir

    x = h.make_tensor_value_info("x", TP.FLOAT, [2])
    g = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "g", [x],
                     [h.make_tensor_value_info("y", TP.FLOAT, [2])])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    ctx = ir.Context()
    assert import_model(model, context=ctx).module.context is ctx
    with ir.Context() as current:
        assert import_model(model).module.context is current


def test_dynamic_extent_that_is_one_at_run_time_broadcasts(tmp_path):
    """ONNX broadcasting with dynamic extents: y's first extent is unknown
    when compiling and 1 when running, so it must broadcast, not be read
    past its end."""
    x = h.make_tensor_value_info("x", TP.FLOAT, ["n", 4])
    y = h.make_tensor_value_info("y", TP.FLOAT, ["m", 4])
    g = h.make_graph([h.make_node("Add", ["x", "y"], ["z"])], "g", [x, y],
                     [h.make_tensor_value_info("z", TP.FLOAT, ["n", 4])])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    main = sits_mlir.compile(model, target="cpu", output=tmp_path / "m.sitsm").load().entry("main")
    rng = np.random.default_rng(0)
    xv = rng.standard_normal((3, 4)).astype(np.float32)
    for rows in (1, 3):
        yv = rng.standard_normal((rows, 4)).astype(np.float32)
        (z,) = main.run(xv, yv)
        np.testing.assert_allclose(z, xv + yv, rtol=1e-6)


def _external_model(tmp_path, rows=256):
    """y = x @ w1 @ w2 with both weights in one external data file (sizes
    multiples of 64 bytes, so every tensor starts 64-byte aligned)."""
    rng = np.random.default_rng(3)
    ws = [rng.standard_normal((rows, rows)).astype(np.float32) for _ in range(2)]
    x = h.make_tensor_value_info("x", TP.FLOAT, ["n", rows])
    g = h.make_graph([h.make_node("MatMul", ["x", "w1"], ["t"]),
                      h.make_node("MatMul", ["t", "w2"], ["y"])], "g", [x],
                     [h.make_tensor_value_info("y", TP.FLOAT, ["n", rows])],
                     initializer=[numpy_helper.from_array(w, f"w{i + 1}")
                                  for i, w in enumerate(ws)])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
              location="m.data", size_threshold=0)
    return path, ws


def test_external_data_is_mapped_not_copied(tmp_path):
    from sits_mlir.frontend.onnx._builder import is_mapped

    path, ws = _external_model(tmp_path)
    imported = import_model(str(path))
    mapped = [a for a in imported.weights.values() if a.nbytes == ws[0].nbytes]
    assert len(mapped) == 2 and all(is_mapped(a) for a in mapped)
    art = sits_mlir.compile(str(path), output=tmp_path / "m.sitsm")
    x = np.random.default_rng(4).standard_normal((3, 256)).astype(np.float32)
    np.testing.assert_allclose(art.load()(x), x @ ws[0] @ ws[1], rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("damage", ["short", "missing", "escaping"])
def test_bad_external_data_is_a_compile_error(tmp_path, damage):
    path, _ = _external_model(tmp_path, rows=64)
    data = tmp_path / "m.data"
    if damage == "short":
        data.write_bytes(data.read_bytes()[:-100])
    elif damage == "missing":
        data.unlink()
    else:
        m = onnx.load(str(path), load_external_data=False)
        for entry in m.graph.initializer[0].external_data:
            if entry.key == "location":
                entry.value = "../m.data"
        onnx.save(m, str(path))
    with pytest.raises(CompileError, match="external data"):
        import_model(str(path))
