"""`sits-runtime` in the seeds' command shape on a compiled decoder: the
prompts file's requests come back with transformers' greedy tokens, the
synthetic workload runs with a shared prefix (prefix hits) and a pool small
enough to preempt, and bad input is a clear error."""

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from hf_decoders import transformers_greedy  # noqa: E402

from sits_mlir.tools import runtime as cli  # noqa: E402

pytestmark = [pytest.mark.slow,
              pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning")]


def test_prompts_file(served, tmp_path, capsys):
    dec, model, _ = served
    prompts = [[17, 3, 250, 96, 41], [5, 200, 8, 8, 131, 77, 64, 2, 19]]
    path = tmp_path / "prompts.jsonl"
    path.write_text("\n".join(json.dumps({"prompt_ids": p, "max_new_tokens": 16})
                              for p in prompts) + "\n")
    report_path = tmp_path / "report.json"
    rc = cli.main(["--config", model.path, "--batch-size", "8", "--max-seq-len", "2048",
                   "--prompts", str(path), "--json", str(report_path)])
    out = capsys.readouterr().out
    assert rc == 0
    assert "time to first token" in out and "waste_pct" in out and "prefix hit rate" in out
    report = json.loads(report_path.read_text())
    assert report["layers"] == dec.layers and report["kv_heads"] == dec.kv_heads
    tokens = [o["samples"][0]["tokens"] for o in report["outputs"]]
    assert tokens == [transformers_greedy(dec, p, 16) for p in prompts]
    # Paged: two sequences of at most 25 tokens take a few blocks, where a
    # contiguous cache reserves 8 x 2048 tokens.
    assert report["kv_peak_bytes"] < report["kv_contiguous_bytes"] / 100
    assert 0 <= report["waste_pct"] < 100


def test_synthetic_workload_preempts_and_hits_the_prefix_cache(served, tmp_path, capsys):
    dec, model, _ = served
    report_path = tmp_path / "report.json"
    rc = cli.main(["--config", model.path, "--batch-size", "4", "--max-seq-len", "64",
                   "--synthetic", "6", "--prompt-len", "12", "--output-len", "12",
                   "--shared-prefix", "8", "--block-size", "4", "--num-blocks", "17",
                   "--seed", "3", "--json", str(report_path)])
    assert rc == 0, capsys.readouterr().err
    report = json.loads(report_path.read_text())
    assert report["requests"] == 6 and report["failed"] == 0
    assert report["prefix_hit_rate"] > 0
    assert report["preemptions"] > 0
    assert report["tokens_per_s"] > 0 and report["ttft_ms"] > 0


def test_bad_input(compiled, tmp_path, capsys):
    _, model = compiled
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": [1, 2]}\n')
    assert cli.main(["--config", model.path, "--prompts", str(bad)]) == 1
    assert "bad.jsonl:1: expected a JSON object with 'prompt_ids'" in capsys.readouterr().err
    bad.write_text('{"prompt_ids": [1, 100000]}\n')
    assert cli.main(["--config", model.path, "--prompts", str(bad)]) == 1
    assert "prompt_ids[1] = 100000: token ids must be integers in [0, 256)" in \
        capsys.readouterr().err
    assert cli.main(["--config", str(tmp_path / "missing.sitsm"), "--synthetic", "1"]) == 1
    assert "sits-runtime: error:" in capsys.readouterr().err
    assert cli.main(["--config", model.path, "--synthetic", "1", "--batch-size", "0"]) == 2


def test_bad_requests_fail_alone(compiled, tmp_path, capsys):
    """Each bad line fails its own request, with the reason; the good ones
    are served (the exit status says some failed)."""
    dec, model = compiled
    lines = [{"prompt_ids": [1, 2], "max_new_tokens": 3},
             "not json",
             {"prompt_ids": [1, 2.5]},
             {"prompt_ids": [1, 2], "seed": -1},
             {"prompt_ids": [1, 2], "seed": 2**70},
             {"prompt_ids": [1, 2], "stop_token": "eos"},
             {"prompt_ids": [1, 2], "max_new_tokens": 0},
             {"prompt_ids": [1, 2], "temperature": "hot"},
             {"prompt_ids": [1, 2], "n": 99},
             {"prompt_ids": [True, 2]},
             [1, 2],
             {"prompt_ids": [3, 4], "max_new_tokens": 2}]
    path = tmp_path / "prompts.jsonl"
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    report_path = tmp_path / "report.json"
    assert cli.main(["--config", model.path, "--prompts", str(path), "--json",
                     str(report_path)]) == 1
    err = capsys.readouterr().err
    report = json.loads(report_path.read_text())
    assert report["requests"] == 12 and report["failed"] == 10
    outputs = report["outputs"]
    assert [o["request"] for o in outputs] == list(range(12))
    assert [len(outputs[i]["samples"][0]["tokens"]) for i in (0, 11)] == [3, 2]
    for i, why in [(1, "prompts.jsonl:2: Expecting value"),
                   (2, "prompt_ids[1] = 2.5: token ids must be integers"),
                   (3, "'seed' = -1 must be in [0, 18446744073709551616)"),
                   (4, "'seed' = 1180591620717411303424 must be in"),
                   (5, "'stop_token' must be an integer, got \"eos\""),
                   (6, "'max_new_tokens' = 0 must be in [1,"),
                   (7, "'temperature' must be a finite number"),
                   (8, "'n' = 99 must be in [1, 9)"),
                   (9, "prompt_ids[0] = true"),
                   (10, "expected a JSON object")]:
        assert why in outputs[i]["error"], (i, outputs[i]["error"])
        assert f"request {i} failed" in err


def test_resource_limits_are_checked_before_allocation(compiled, capsys):
    _, model = compiled
    assert cli.main(["--config", model.path, "--synthetic", "1", "--num-blocks", "0"]) == 2
    assert "--num-blocks must be positive" in capsys.readouterr().err
    assert cli.main(["--config", model.path, "--synthetic", "1", "--seed", "-1"]) == 2
    assert "--seed must be in" in capsys.readouterr().err
    assert cli.main(["--config", model.path, "--synthetic", "1", "--batch-size", "1000000",
                     "--max-seq-len", "4096"]) == 1
    assert "of memory available: lower --batch-size" in capsys.readouterr().err
    assert cli.main(["--config", model.path, "--synthetic", "1", "--batch-size", "100000000",
                     "--max-seq-len", "4096"]) == 1
    assert "num_blocks = 25600000001: must be <= 2^30" in capsys.readouterr().err


def test_paged_model_keeps_its_block_size(llm_models, capsys):
    _, model = llm_models("gpt2", "paged")
    assert cli.main(["--config", model.path, "--synthetic", "1", "--block-size", "16"]) == 1
    assert "--block-size 16 differs from the model's KV block size 4" in capsys.readouterr().err


def test_sits_compile_for_serving(llm_models, tmp_path, capsys):
    """`sits-compile --kv-cache paged --logits last` writes the serving form
    (the paged signature, logits of the last position), which `sits-runtime`
    serves with transformers' greedy tokens; --logits last alone is a usage
    error naming what it needs."""
    from sits_mlir import runtime
    from sits_mlir.tools import compile as compile_cli

    dec, _ = llm_models("llama")
    out = tmp_path / "serve.sitsm"
    assert compile_cli.main([dec.path, "--kv-cache", "paged", "--kv-block-size", "4",
                             "--logits", "last", "-o", str(out), "-q"]) == 0
    args = {a["name"]: a for a in runtime.read_manifest(out)["entry_points"][0]["args"]}
    assert {"kv_pool", "block_tables", "slot_mapping", "context_lens"} <= set(args)
    assert args["logits"]["dim_names"][1].startswith("1 - 1 // (")
    prompt = [17, 3, 250, 96, 41]
    path = tmp_path / "prompts.jsonl"
    path.write_text(json.dumps({"prompt_ids": prompt, "max_new_tokens": 8}) + "\n")
    report = tmp_path / "report.json"
    assert cli.main(["--config", str(out), "--block-size", "4", "--prompts", str(path),
                     "--json", str(report)]) == 0
    tokens = json.loads(report.read_text())["outputs"][0]["samples"][0]["tokens"]
    assert tokens == transformers_greedy(dec, prompt, 8)
    capsys.readouterr()
    assert compile_cli.main([dec.path, "--logits", "last", "-o", str(tmp_path / "x.sitsm"),
                             "-q"]) == 2
    assert "needs kv_cache='paged'" in capsys.readouterr().err


@pytest.mark.parametrize("policy", ["attention", "window"])
def test_token_eviction_under_a_kv_budget(llm_models, tmp_path, capsys, policy):
    # 40-token prompts and 24 new tokens under a budget of 16 (4 blocks):
    # every request is served and drops blocks; a budget below the sink,
    # recent and one more block refuses each request with the reason.
    _, model = llm_models("llama", "paged-last")
    report_path = tmp_path / "report.json"
    args = ["--config", model.path, "--batch-size", "4", "--max-seq-len", "128",
            "--synthetic", "4", "--prompt-len", "40", "--output-len", "24",
            "--kv-eviction", policy, "--json", str(report_path)]
    assert cli.main(args + ["--kv-budget", "16"]) == 0, capsys.readouterr().err
    assert f"token eviction ({policy}) at 16 tokens per sequence" in capsys.readouterr().out
    report = json.loads(report_path.read_text())
    assert report["failed"] == 0 and report["kv_budget"] == 16
    assert report["evicted_tokens"] >= 4 * (40 + 24 - 1 - 16 - 4)
    assert cli.main(args + ["--kv-budget", "4"]) == 1
    # At least sinks (1 block) + recent (a quarter of the budget: 1 block; window:
    # none) + 1 block.
    least = 12 if policy == "attention" else 8
    assert f"kv_budget = 4: must be in [{least}, " in capsys.readouterr().err
