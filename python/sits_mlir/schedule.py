"""Schedule files (`.sits`): what the graph passes decided for one target.

`sits-reorder{schedule-file=...}` (`sits-compile --emit-schedule`,
`compile(..., emit_schedule=...)`) writes them; the format is documented in
passes/Analysis/ScheduleFormat.md. `load` parses one and `dumps` writes the
same records back, so the format round-trips:

    s = sits_mlir.schedule.load("model.sits")
    s.target["name"], s.functions[0].summary["peak_bytes_after"]
    [g["ops"] for g in s.functions[0].groups]
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FORMAT_VERSION", "FunctionSchedule", "Schedule", "ScheduleFormatError", "dumps",
           "load", "loads"]

#: The format version this module reads and writes.
FORMAT_VERSION = 1

#: Fields whose values are comma-separated lists.
_LIST_FIELDS = {"ops", "after", "format"}


class ScheduleFormatError(ValueError):
    """A schedule file that does not follow the format, with its line."""


@dataclass
class FunctionSchedule:
    name: str
    summary: dict[str, Any] = field(default_factory=dict)
    #: One dict per fusion group, in execution order (`id` is the position).
    groups: list[dict[str, Any]] = field(default_factory=list)
    #: One dict per op, in execution order (`index`).
    ops: list[dict[str, Any]] = field(default_factory=list)
    #: Tensors stored between groups, with their arena offsets.
    tensors: list[dict[str, Any]] = field(default_factory=list)
    weights: list[dict[str, Any]] = field(default_factory=list)
    #: The mixed-precision pass's entries, copied verbatim.
    precision: list[dict[str, Any]] = field(default_factory=list)
    #: kv_dtype="auto": the KV pool's width per (layer, kv head), verbatim.
    kv: list[dict[str, Any]] = field(default_factory=list)
    memory: dict[str, Any] = field(default_factory=dict)


@dataclass
class Schedule:
    version: int
    target: dict[str, Any]
    profile: str
    functions: list[FunctionSchedule]

    def function(self, name: str = "main") -> FunctionSchedule:
        for f in self.functions:
            if f.name == name:
                return f
        raise KeyError(f"the schedule has no function {name!r}")


def _value(key: str, text: str) -> Any:
    if key in _LIST_FIELDS:
        return [_value("", item) for item in text.split(",")] if text else []
    if text in ("true", "false"):
        return text == "true"
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return text


def _record(tokens: list[str], line_no: int) -> tuple[str, Any, dict[str, Any]]:
    keyword, rest = tokens[0], tokens[1:]
    positional = None
    if rest and "=" not in rest[0]:
        positional, rest = rest[0], rest[1:]
    fields: dict[str, Any] = {}
    for token in rest:
        key, sep, text = token.partition("=")
        if not sep or not key:
            raise ScheduleFormatError(f"line {line_no}: expected key=value, got {token!r}")
        fields[key] = _value(key, text)
    return keyword, positional, fields


def loads(text: str) -> Schedule:
    """Parses the text of a schedule file."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith("sits-schedule "):
        raise ScheduleFormatError("line 1: expected 'sits-schedule <version>'")
    try:
        version = int(lines[0].split()[1])
    except (IndexError, ValueError):
        raise ScheduleFormatError(f"line 1: bad version in {lines[0]!r}") from None
    if version != FORMAT_VERSION:
        raise ScheduleFormatError(f"line 1: schedule format version {version} is not "
                                  f"supported (this reader knows version {FORMAT_VERSION})")
    schedule = Schedule(version, {}, "", [])
    current: FunctionSchedule | None = None
    for line_no, line in enumerate(lines[1:], start=2):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            tokens = shlex.split(line, posix=True)
        except ValueError as error:
            raise ScheduleFormatError(f"line {line_no}: {error}") from None
        keyword, positional, fields = _record(tokens, line_no)
        if keyword == "target":
            schedule.target = {"name": positional, **fields}
        elif keyword == "profile":
            schedule.profile = positional or ""
        elif keyword == "function":
            current = FunctionSchedule(positional or "")
            schedule.functions.append(current)
        elif current is None:
            raise ScheduleFormatError(f"line {line_no}: '{keyword}' outside a function section")
        elif keyword == "end":
            current = None
        elif keyword == "summary":
            current.summary = fields
        elif keyword == "memory":
            current.memory = fields
        elif keyword in ("group", "op", "tensor"):
            if positional is None:
                raise ScheduleFormatError(f"line {line_no}: '{keyword}' needs an id")
            fields = {"_id": int(positional), **fields}
            {"group": current.groups, "op": current.ops, "tensor": current.tensors}[
                keyword].append(fields)
        elif keyword == "weight":
            current.weights.append(fields)
        elif keyword == "precision":
            current.precision.append(fields)
        elif keyword == "kv":
            current.kv.append(fields)
        # Records a newer writer added are skipped, as the format allows.
    if current is not None:
        raise ScheduleFormatError(f"function {current.name!r}: missing 'end'")
    return schedule


def load(path: str | os.PathLike) -> Schedule:
    """Parses the schedule file at `path`."""
    with open(path, encoding="utf-8") as f:
        return loads(f.read())


def _token(value: Any, key: str = "") -> str:
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, list):
        text = ",".join(_token(v).strip('"') if not isinstance(v, str) else v for v in value)
    elif isinstance(value, float):
        text = f"{value:.6g}"
    else:
        text = str(value)
    if text and not any(c in text for c in " \t\"'\\#="):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _line(keyword: str, positional: Any, fields: dict[str, Any]) -> str:
    parts = [keyword] + ([_token(positional)] if positional is not None else [])
    parts += [f"{k}={_token(v, k)}" for k, v in fields.items() if k != "_id"]
    return " ".join(parts)


def dumps(schedule: Schedule) -> str:
    """The text of `schedule` as a schedule file (what `loads` reads back)."""
    target = dict(schedule.target)
    out = [f"sits-schedule {schedule.version}",
           _line("target", target.pop("name", None), target),
           _line("profile", schedule.profile, {})]
    for f in schedule.functions:
        out.append(_line("function", f.name, {}))
        out.append(_line("summary", None, f.summary))
        out += [_line("group", g["_id"], g) for g in f.groups]
        out += [_line("op", o["_id"], o) for o in f.ops]
        out += [_line("tensor", t["_id"], t) for t in f.tensors]
        out += [_line("weight", None, w) for w in f.weights]
        out += [_line("precision", None, p) for p in f.precision]
        out += [_line("kv", None, k) for k in f.kv]
        out.append(_line("memory", None, f.memory))
        out.append("end")
    return "\n".join(out) + "\n"
