"""The explain report: every decision the graph passes made, for a person.

Each graph pass records its decisions on the module as `sits.report.<pass>`
(an array of dictionaries, each with at least `op` and `kind`). This module
reads them and renders one markdown document: what was pruned, the precision
of every weight block with its estimated error, the fusion groups, the
estimated time of every op on the target, and the peak memory before and
after reordering. Reports it has no section for (or keys it does not know)
are shown as generic tables, so new passes and new keys appear without
changes here.

    text = sits_mlir.explain.render(sits_mlir.explain.reports(module))
"""

from __future__ import annotations

from typing import Any, Iterable

from . import ir

__all__ = ["render", "reports"]

_PREFIX = "sits.report."
#: Longest list shown whole in a table cell; longer ones are cut there.
_MAX_LIST = 16


def _python(attr: ir.Attribute) -> Any:
    for cls, convert in ((ir.BoolAttr, lambda a: a.value),
                         (ir.IntegerAttr, lambda a: a.value),
                         (ir.FloatAttr, lambda a: a.value),
                         (ir.StringAttr, lambda a: a.value),
                         (ir.ArrayAttr, lambda a: [_python(x) for x in a]),
                         (ir.DictAttr, lambda a: {n.name: _python(n.attr) for n in a})):
        if isinstance(attr, cls):
            return convert(attr)
    return str(attr)


def reports(module: ir.Module | ir.Operation) -> dict[str, list[dict[str, Any]]]:
    """The module's `sits.report.<pass>` attributes as {pass: [entry, ...]}."""
    op = module.operation if isinstance(module, ir.Module) else module
    result = {}
    attributes = op.attributes
    for i in range(len(attributes)):
        named = attributes[i]
        if named.name.startswith(_PREFIX):
            value = _python(named.attr)
            result[named.name[len(_PREFIX):]] = value if isinstance(value, list) else [value]
    return result


def _cell(value: Any) -> str:
    if isinstance(value, float):
        text = f"{value:.4g}"
    elif isinstance(value, list):
        shown = value if len(value) <= _MAX_LIST else value[:_MAX_LIST]
        text = ", ".join(_cell(v) for v in shown)
        if len(value) > _MAX_LIST:
            text += f", ... ({len(value)} values)"
    else:
        text = str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def _table(rows: Iterable[dict[str, Any]], columns: list[str] | None = None) -> list[str]:
    rows = list(rows)
    if not rows:
        return ["(none)", ""]
    if columns is None:
        columns = []
        for row in rows:
            columns += [k for k in row if k not in columns]
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    out += ["| " + " | ".join(_cell(row.get(c, "")) for c in columns) + " |" for row in rows]
    return out + [""]


def _bytes(n: Any) -> str:
    if not isinstance(n, (int, float)):
        return str(n)
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit} ({int(n)} B)"
    return f"{int(n)} B"


def _schedule_section(entries: list[dict[str, Any]]) -> list[str]:
    out = []
    for summary in (e for e in entries if e.get("kind") == "summary"):
        before, after = summary.get("peak_bytes_before"), summary.get("peak_bytes_after")
        change = ""
        if isinstance(before, int) and isinstance(after, int) and before:
            change = f" ({100.0 * (after - before) / before:+.1f}%)"
        out += [f"### Function `{summary.get('op')}` on {summary.get('target')} "
                f"(profile: {summary.get('profile')})", "",
                f"- Peak live memory (tensors between fusion groups): {_bytes(before)} in the "
                f"original order, {_bytes(after)} after reordering{change}",
                f"- Memory plan (one arena): {_bytes(summary.get('arena_bytes'))}; weights "
                f"{_bytes(summary.get('weight_bytes'))}; limit {_bytes(summary.get('memory_limit'))}",
                f"- Estimated time: {summary.get('est_time_us', 0):.4g} us in sequence, "
                f"{summary.get('est_time_overlapped_us', 0):.4g} us with memory- and "
                "compute-bound neighbours overlapped",
                f"- Fusion groups: {summary.get('groups')}", ""]
        if summary.get("dynamic"):
            out += ["Some extents are dynamic and were counted as 1: sizes and times are per "
                    "unit of each dynamic dimension.", ""]
        if summary.get("nominal"):
            out += ["The target table lists no peak or bandwidth for this target: times use "
                    "nominal figures and are only meaningful relative to each other.", ""]
    groups = [e for e in entries if e.get("kind") == "group"]
    out += ["### Fusion groups, in execution order", ""]
    out += _table(({"#": g.get("id"), "anchor": g.get("op"), "kind": g.get("anchor"),
                    "ops": g.get("ops"), "after": g.get("after"), "bound": g.get("bound"),
                    "est. time (us)": g.get("est_time_us"), "GFLOP": g.get("flops", 0) / 1e9,
                    "bytes": g.get("bytes")} for g in groups))
    ops = [e for e in entries if e.get("kind") == "op"]
    out += ["### Estimated time per op on the target", ""]
    out += _table(({"#": o.get("index"), "op": o.get("op"), "kind": o.get("name"),
                    "group": o.get("group"), "bound": o.get("bound"),
                    "est. time (us)": o.get("est_time_us"), "GFLOP": o.get("flops", 0) / 1e9,
                    "bytes": o.get("bytes")} for o in ops))
    rest = [e for e in entries if e.get("kind") not in ("summary", "group", "op")]
    if rest:
        out += _table(rest)
    return out


def _precision_section(entries: list[dict[str, Any]]) -> list[str]:
    out = []
    for e in entries:
        formats = e.get("format")
        line = f"- `{e.get('op')}` ({e.get('kind')})"
        extras = []
        if "bytes" in e and "fp32_bytes" in e:
            extras.append(f"{_bytes(e['bytes'])} instead of {_bytes(e['fp32_bytes'])}")
        if "est_error" in e:
            extras.append(f"estimated error {_cell(e['est_error'])}")
        if extras:
            line += ": " + ", ".join(extras)
        out.append(line)
        if isinstance(formats, list) and formats:
            counts = {f: formats.count(f) for f in dict.fromkeys(formats)}
            shape = e.get("block_shape", "?")
            if isinstance(shape, list):
                shape = "x".join(str(d) for d in shape)
            out.append(f"  - blocks of {shape}: " +
                       ", ".join(f"{n} x {f}" for f, n in counts.items()) +
                       f" (row-major: {_cell(formats)})")
    out.append("")
    return out + ["All fields:", ""] + _table(entries)


_TITLES = {"pruning": "What was pruned", "precision": "Precision per weight and block",
           "schedule": "Schedule: fusion groups, order, time and memory"}


def _stages_section(stages: dict[str, dict[str, Any]]) -> list[str]:
    rows = ["| stage | seconds | peak RSS so far (MiB) | anonymous RSS after (MiB) |",
            "|---|---:|---:|---:|"]

    def mib(value: Any) -> str:
        return "—" if value is None else f"{value:,.0f}"

    for name, stage in stages.items():
        rows.append(f"| {name} | {stage.get('seconds', 0.0):.2f} | "
                    f"{mib(stage.get('peak_rss_mib'))} | {mib(stage.get('rss_anon_mib'))} |")
    total = sum(stage.get("seconds", 0.0) for stage in stages.values())
    rows.append(f"| total | {total:.2f} | | |")
    return rows + [""]


def render(reports_by_pass: dict[str, list[dict[str, Any]]], title: str = "SITS explain report",
           stages: dict[str, dict[str, Any]] | None = None) -> str:
    """One markdown document with a section per report; `stages` (the
    compile's {stage: {"seconds", "peak_rss_mib", "rss_anon_mib"}}) adds the
    time and memory of each compile stage."""
    out = [f"# {title}", ""]
    if stages:
        out += ["## Compile stages", ""] + _stages_section(stages)
    if not reports_by_pass:
        out += ["No graph pass recorded any decision.", ""]
    order = [p for p in ("pruning", "precision", "schedule") if p in reports_by_pass]
    order += sorted(p for p in reports_by_pass if p not in order)
    for name in order:
        entries = reports_by_pass[name]
        out += [f"## {_TITLES.get(name, 'Report of ' + name)} (`sits.report.{name}`)", ""]
        if not entries:
            out += ["Nothing to report.", ""]
        elif name == "schedule":
            out += _schedule_section(entries)
        elif name == "precision":
            out += _precision_section(entries)
        else:
            out += _table(entries)
    return "\n".join(out).rstrip() + "\n"
