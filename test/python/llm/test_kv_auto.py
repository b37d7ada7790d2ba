"""`compile(..., kv_cache="paged", kv_dtype="auto")`: a KIVI width, 4 or 2
bits, per (layer, kv head), chosen from calibration prompts within
`kv_error_budget`. The choice is in the artifact's manifest, the explain
report and the schedule file; the pool built from the manifest holds the
widths (in its null block) and the engine serves it."""

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import sits_mlir  # noqa: E402

from hf_decoders import build  # noqa: E402

from sits_mlir import schedule  # noqa: E402
from sits_mlir.runtime import kv  # noqa: E402
from sits_mlir.runtime.decoder import PagedRunner  # noqa: E402
from sits_mlir.runtime.engine import GREEDY, Engine  # noqa: E402
from sits_mlir.tools import runtime as cli  # noqa: E402
from sits_mlir.tools.runtime import decoder_geometry  # noqa: E402

pytestmark = [pytest.mark.slow,
              pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning")]

PROMPTS = [[17, 3, 250, 96, 41, 8, 131, 77, 5, 200] * 4, [45, 180, 33, 7] * 9]


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    out = tmp_path_factory.mktemp("llama-kv-auto")
    return build("llama", str(out)), out


def _compile(dec, out, budget, **options):
    art = sits_mlir.compile(dec.path, "cpu", out / f"auto-{budget}.sitsm", threads=2,
                            kv_cache="paged", kv_dtype="auto", kv_error_budget=budget,
                            emit_schedule=out / f"auto-{budget}.sits", **options)
    return art, art.load()


def _serve(model):
    g = decoder_geometry(model)
    pool = kv.KVAllocator(num_blocks=16, block_size=g["block_size"], num_layers=g["layers"],
                          num_kv_heads=g["kv_heads"], head_dim=g["head_dim"], max_seq_len=256,
                          dtype=g["kv_dtype"], quantization=g["kv_quantization"],
                          kivi_widths=g.get("kivi_widths", []))
    results = Engine(pool, PagedRunner(model, kv.KVMemory(pool)), max_batch_size=2).generate(
        PROMPTS, 24, sampling=GREEDY)
    assert all(r.error is None for r in results)
    return [r.samples[0].tokens for r in results], pool.geometry["bytes_per_block"]


def test_the_budget_sets_how_many_heads_take_2_bits(llama):
    # 2 layers x 2 kv heads of 16: 4-bit K/V errors near 0.08, 2-bit near
    # 0.38 (relative). A budget below the 4-bit mean keeps all at 4 bits,
    # one between takes the heads that cost least to 2 bits, one above
    # every 2-bit error takes them all.
    dec, out = llama
    chosen = {}
    for budget in (0.05, 0.2, 1.0):
        art, model = _compile(dec, out, budget)
        g = decoder_geometry(model)
        widths = g["kivi_widths"]
        report = art.reports["kv_cache"]
        heads = [e for e in report if e["kind"] == "kv_width"]
        summary = report[-1]
        assert [e["bits"] for e in heads] == widths and len(widths) == 4
        assert all(0 < e["error_4bit"] < e["error_2bit"] for e in heads)
        assert summary["two_bit_heads"] == widths.count(2)
        assert summary["mean_error"] <= budget or widths == [4] * 4
        # The schedule file carries the same entries.
        (function,) = [f for f in schedule.load(out / f"auto-{budget}.sits").functions
                       if f.kv]
        assert [int(k["bits"]) for k in function.kv if k["kind"] == "kv_width"] == widths
        tokens, block_bytes = _serve(model)
        chosen[budget] = (widths, block_bytes, tokens)
    assert chosen[0.05][0] == [4] * 4 and chosen[1.0][0] == [2] * 4
    assert 0 < chosen[0.2][0].count(2) < 4
    # Memory follows the widths: 2-bit heads take fewer bytes.
    assert chosen[0.05][1] > chosen[0.2][1] > chosen[1.0][1]
    # An all-4-bit choice is the int4 pool: the same tokens.
    int4 = sits_mlir.compile(dec.path, "cpu", out / "int4.sitsm", threads=2, kv_cache="paged",
                             kv_dtype="int4").load()
    assert _serve(int4)[0] == chosen[0.05][2]


def test_sits_runtime_builds_the_pool_from_the_manifest(llama, capsys):
    dec, out = llama
    _, model = _compile(dec, out, 0.2, kv_calibration=[PROMPTS[0] * 2, PROMPTS[1] * 2])
    assert cli.main(["--config", model.path, "--synthetic", "2", "--prompt-len", "40",
                     "--output-len", "8", "--max-seq-len", "128"]) == 0, capsys.readouterr().err
    assert "KV int4 (kivi)" in capsys.readouterr().out


def test_bad_auto_options_are_refused(llama):
    dec, out = llama
    with pytest.raises(ValueError, match="kv_error_budget must be a number >= 0"):
        _compile(dec, out, -1.0)
    # sits-compile refuses it at the command line, like its other budgets.
    from sits_mlir.tools import compile as compile_cli

    for bad in ("-1", "nan"):
        with pytest.raises(SystemExit) as exit_:
            compile_cli.main([dec.path, "-o", str(out / "x.sitsm"), "--kv-cache", "paged",
                              "--kv-dtype", "auto", "--kv-error-budget", bad])
        assert exit_.value.code == 2
    with pytest.raises(ValueError, match="at least kv_block_size = 32 tokens"):
        _compile(dec, out, 0.2, kv_calibration=[[1, 2, 3]])
    with pytest.raises(ValueError, match=r"token ids must be in \[0, 256\)"):
        _compile(dec, out, 0.2, kv_calibration=[[300] * 40])
    # The pool must carry the model's widths.
    _, model = _compile(dec, out, 0.2)
    g = decoder_geometry(model)
    pool = kv.KVAllocator(num_blocks=16, block_size=g["block_size"], num_layers=g["layers"],
                          num_kv_heads=g["kv_heads"], head_dim=g["head_dim"], max_seq_len=256,
                          dtype="int4", quantization="kivi")
    with pytest.raises(ValueError, match="widths"):
        PagedRunner(model, kv.KVMemory(pool))
    assert np.isfinite(g["kivi_widths"]).all()
