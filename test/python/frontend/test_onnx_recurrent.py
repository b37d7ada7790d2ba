"""RNN, GRU and LSTM against onnxruntime with random weights: every
direction, both layouts, sequence_lens of unequal lengths, initial states,
peepholes, clip, non-default activations, GRU's linear_before_reset, and
one artifact serving two batch sizes and sequence lengths."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as h

import sits_mlir

ort = pytest.importorskip("onnxruntime")

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
HIDDEN, INPUT = 5, 3


def _node(op, k, rng, *, direction="forward", layout=0, bias=True, lens=False,
          initial=False, peepholes=False, batch=2, outputs=("Y", "Y_h", "Y_c"), **attrs):
    """Node `k` of a graph: an `op` with constant W, R (and B, P) reading
    the graph's X (and L, the sequence_lens) and its own initial states.
    Returns it with its initializers, inputs and outputs."""
    nd = 2 if direction == "bidirectional" else 1
    g = GATES[op]

    def const(name, shape):
        return h.make_tensor(f"{name}{k}", TP.FLOAT, shape,
                             (0.5 * rng.standard_normal(shape)).astype(np.float32).ravel())

    inits = [const("W", [nd, g * HIDDEN, INPUT]), const("R", [nd, g * HIDDEN, HIDDEN])]
    names = ["X", f"W{k}", f"R{k}", "", "", "", "", ""]
    if bias:
        inits.append(const("B", [nd, 2 * g * HIDDEN]))
        names[3] = f"B{k}"
    state = [batch, nd, HIDDEN] if layout else [nd, batch, HIDDEN]
    inputs = []
    if lens:
        names[4] = "L"
    for j, name in enumerate(["H0", "C0"][:2 if op == "LSTM" else 1] if initial else []):
        names[5 + j] = f"{name}{k}"
        inputs.append(h.make_tensor_value_info(names[5 + j], TP.FLOAT, state))
    if peepholes:
        inits.append(const("P", [nd, 3 * HIDDEN]))
        names[7] = f"P{k}"
    while names[-1] == "":
        names.pop()
    outs = [f"{o}{k}" if o in outputs else ""
            for o in ("Y", "Y_h", "Y_c")[:3 if op == "LSTM" else 2]]
    while outs[-1] == "":
        outs.pop()
    node = h.make_node(op, names, outs, hidden_size=HIDDEN, direction=direction, **attrs,
                       **({"layout": layout} if layout else {}))
    out_info = [h.make_tensor_value_info(o, TP.FLOAT, [None] * (4 if o[1] != "_" else 3))
                for o in outs if o]
    return node, inits, inputs, out_info


def _model(specs, *, layout=0, dims=(4, 2), opset=14, seed=0):
    """A graph of one node per (op, attributes) of `specs`, all reading X
    ([seq, batch, input], or batch-major for layout 1; `dims` are ints or
    names of dynamic extents)."""
    rng = np.random.default_rng(seed)
    seq, batch = dims
    x = [batch, seq, INPUT] if layout else [seq, batch, INPUT]
    nodes, inits, inputs, outputs = [], [], [h.make_tensor_value_info("X", TP.FLOAT, x)], []
    for k, (op, kw) in enumerate(specs):
        node, i, ins, outs = _node(op, k, rng, layout=layout, batch=batch, **kw)
        nodes.append(node)
        inits += i
        inputs += ins
        outputs += outs
        if kw.get("lens") and all(i.name != "L" for i in inputs):
            inputs.insert(1, h.make_tensor_value_info("L", TP.INT32, [batch]))
    model = h.make_model(h.make_graph(nodes, "rnn", inputs, outputs, inits),
                         opset_imports=[h.make_opsetid("", opset)])
    onnx.checker.check_model(model)
    return model


def _feeds(model, seq, batch, lengths=None, layout=0, seed=1):
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in model.graph.input:
        dims = [d.dim_value or None for d in i.type.tensor_type.shape.dim]
        if i.name == "L":
            feeds["L"] = np.asarray(lengths, np.int32)
            continue
        if i.name == "X":
            shape = [batch, seq, INPUT] if layout else [seq, batch, INPUT]
        else:
            shape = [batch if d is None else d for d in dims]
        feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def _agree(model, tmp_path, runs, reference=None):
    """Compiles `model` once and compares every output with onnxruntime's
    for each (seq, batch, lengths) of `runs`. onnxruntime has no layout 1:
    `reference` is then the layout-0 model, fed and read transposed."""
    m = sits_mlir.compile(model, output=tmp_path / "m.sitsm").load()
    layout = reference is not None
    session = ort.InferenceSession((reference or model).SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    for seq, batch, lengths in runs:
        feeds = _feeds(model, seq, batch, lengths, layout=layout)
        ref_feeds = feeds
        if layout:  # X [batch, seq, input], states [batch, dirs, hidden]
            ref_feeds = {k: v if k == "L" else v.transpose(1, 0, 2) for k, v in feeds.items()}
        want = session.run(None, ref_feeds)
        if layout:  # Y [batch, seq, dirs, hidden], Y_h/Y_c [batch, dirs, hidden]
            want = [w.transpose(2, 0, 1, 3) if w.ndim == 4 else w.transpose(1, 0, 2)
                    for w in want]
        got = m.run(**feeds)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == w.shape, (g.shape, w.shape)
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_directions(direction, tmp_path):
    """Each op with biases, initial states, LSTM peepholes, every output;
    and without the optional inputs."""
    specs = [(op, {"direction": direction, "initial": True, "peepholes": op == "LSTM"})
             for op in GATES]
    specs += [(op, {"direction": direction, "bias": False}) for op in GATES]
    _agree(_model(specs), tmp_path, [(4, 2, None)])


def test_sequence_lens_layout_1_clip(tmp_path):
    """Unequal lengths (a finished entry keeps its state, Y gets zeros),
    batch-major layout, clipped gate inputs; GRU with linear_before_reset."""
    specs = [(op, {"direction": "bidirectional", "lens": True, "initial": True,
                   "peepholes": op == "LSTM", "clip": 0.7,
                   **({"linear_before_reset": 1} if op == "GRU" else {})}) for op in GATES]
    model = _model(specs, layout=1, dims=(5, 3))
    _agree(model, tmp_path, [(5, 3, [5, 2, 3])], reference=_model(specs, dims=(5, 3)))


def test_activations(tmp_path):
    """alpha/beta go to the activations that take them, in order."""
    specs = [
        ("RNN", {"direction": "bidirectional", "activations": ["LeakyRelu", "ScaledTanh"],
                 "activation_alpha": [0.2, 0.9], "activation_beta": [1.3]}),
        ("GRU", {"direction": "bidirectional",
                 "activations": ["HardSigmoid", "Softsign", "Affine", "Elu"],
                 "activation_alpha": [0.3, 0.5, 0.8], "activation_beta": [0.4, 0.1]}),
        ("LSTM", {"activations": ["HardSigmoid", "ThresholdedRelu", "Softplus"],
                  "activation_alpha": [0.25, 0.1], "activation_beta": [0.45]}),
        ("RNN", {"activations": ["Relu"], "initial": True}),
    ]
    _agree(_model(specs), tmp_path, [(4, 2, None)])


def test_input_forget_gru_lbr_opset_22(tmp_path):
    specs = [("LSTM", {"direction": "reverse", "lens": True, "input_forget": 1,
                       "outputs": ("Y_h", "Y_c")}),
             ("GRU", {"lens": True, "linear_before_reset": 1, "outputs": ("Y",)})]
    _agree(_model(specs, opset=22), tmp_path, [(4, 2, [1, 4])])


def test_dynamic_batch_and_seq(tmp_path):
    """One artifact for two batch sizes and sequence lengths."""
    specs = [(op, {"direction": "bidirectional", "lens": True, "initial": True,
                   "outputs": ("Y", "Y_h")}) for op in GATES]
    model = _model(specs, dims=("seq", "batch"))
    _agree(model, tmp_path, [(3, 2, [3, 1]), (6, 4, [6, 2, 5, 6])])


@pytest.mark.parametrize("attrs, reason", [
    ({"activations": ["Sigmoid", "Gelu", "Tanh"]}, "unsupported activation 'Gelu'"),
    ({"activations": ["Sigmoid", "Tanh"]}, "2 activations given; LSTM takes 3"),
])
def test_refusals(attrs, reason):
    (p,) = sits_mlir.check(_model([("LSTM", attrs)]))
    assert reason in p.message
