"""Decoders exported from `transformers` have their repeated layers imported
once (`import_model(shared_layers=True)`, the default), and the module is the
one the node-by-node import builds: the same ops, each located at its own
layer's node. With four layers, the first differs in the export (it also
computes what every layer reads), so three are shared."""

import pytest

from hf_decoders import build
from ir_helpers import module_summary
from sits_mlir import ir
from sits_mlir.frontend.onnx import import_model

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning")]


@pytest.mark.parametrize("name,dtype", [("llama", "float32"), ("gpt2", "float16")])
def test_exported_layers_are_shared(tmp_path, name, dtype):
    dec = build(name, str(tmp_path), layers=4, dtype=dtype)
    with ir.Context():
        shared = import_model(dec.path)
        flat = import_model(dec.path, shared_layers=False)
        assert shared.shared_layers is not None and shared.shared_layers[0] == 3
        assert [s.name for s in shared.outputs] == [s.name for s in flat.outputs]
        assert module_summary(shared.module) == module_summary(flat.module)
