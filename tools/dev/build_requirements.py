#!/usr/bin/env python3
"""Prints pyproject.toml's [build-system] requires, one per line, so that the
no-isolation developer build installs exactly the pinned toolchain."""

import pathlib
import sys

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

root = pathlib.Path(__file__).resolve().parents[2]
with open(root / "pyproject.toml", "rb") as f:
    data = tomllib.load(f)
sys.stdout.write("\n".join(data["build-system"]["requires"]) + "\n")
