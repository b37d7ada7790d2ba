"""End to end on the CPU: every benchmark model and MiniLM-L6 compiles into
one artifact, loads in the runtime and matches onnxruntime within 1e-4
relative (fp32)."""

import numpy as np
import pytest

import sits_mlir
from sits_mlir import runtime
from bench_models import relative_error, run_onnxruntime

MODELS = ["mlp", "gpt_prefill", "gpt_decode", "cnn", "minilm"]


@pytest.fixture(scope="module")
def compiled(model_path, tmp_path_factory):
    out = tmp_path_factory.mktemp("artifacts")
    cache = {}

    def get(name):
        if name not in cache:
            path, inputs = model_path(name)
            artifact = sits_mlir.compile(path, target="cpu", output=out / f"{name}.sitsm")
            cache[name] = (artifact, path, inputs)
        return cache[name]
    return get


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_matches_onnxruntime(compiled, name):
    artifact, path, inputs = compiled(name)
    model = artifact.load()
    outputs = model.run(**inputs)
    expected = run_onnxruntime(path, inputs)
    assert len(outputs) == len(expected)
    for spec, actual, reference in zip(model.outputs, outputs, expected):
        assert actual.shape == reference.shape, spec.name
        assert actual.dtype == reference.dtype, spec.name
        err = relative_error(actual, reference)
        assert err < 1e-4, f"{name}: output {spec.name} differs by {err:.2e} (relative)"
        # And elementwise, relative to the output's scale.
        scale = np.abs(reference).max()
        assert np.abs(actual - reference).max() <= 1e-4 * scale + 1e-6, spec.name


@pytest.mark.parametrize("name", ["mlp", "gpt_decode"])
def test_manifest(compiled, name):
    artifact, path, inputs = compiled(name)
    manifest = runtime.read_manifest(artifact.path)
    assert manifest["sits_version"] == sits_mlir.__version__
    assert manifest["llvm_version"] == sits_mlir.llvm_version()
    assert manifest["target"]["name"] == "cpu"
    (entry,) = manifest["entry_points"]
    roles = [a["role"] for a in entry["args"]]
    # Weights travel in their own section, passed as the first argument.
    assert roles[0] == "weights" and "input" in roles and roles[-1] == "output"
    names = [a["name"] for a in entry["args"] if a["role"] == "input"]
    assert names == list(inputs)
    assert manifest["pipeline"] == artifact.pipeline
    assert manifest["pipeline"].startswith("builtin.module(sits-cpu-pipeline")


def test_code_is_small_and_weights_are_not_in_it(compiled):
    artifact, _, _ = compiled("mlp")
    info = runtime.read_artifact(artifact.path)
    code = info.sections["code.cpu"][1]
    weights = info.sections["weights"][1]
    # 25.2M fp32 parameters travel in the weights section; the code is the
    # size of the graph (three matmuls), not of the parameters.
    assert weights >= 25_000_000 * 4
    assert code < 2_000_000
    (entry,) = artifact.manifest["entry_points"]
    first = entry["args"][0]
    assert (first["role"], first["dtype"], first["shape"]) == ("weights", "i8", [weights])
