"""Version pins have one home (pyproject.toml) and agree with themselves."""

import pathlib
import re

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def pins(requirements):
    out = {}
    for req in requirements:
        m = re.match(r"([A-Za-z0-9_.-]+)==([0-9.]+)", req)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def test_runtime_pins_equal_build_pins():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    build = pins(data["build-system"]["requires"])
    runtime = pins(data["project"]["dependencies"])
    assert runtime, "the installed package must pin the LLVM/MLIR libraries it links"
    for name, version in runtime.items():
        assert build.get(name) == version, f"{name}: runtime {version} vs build {build.get(name)}"


def test_installed_llvm_matches_the_pin():
    import sits_mlir

    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    llvm_pin = pins(data["build-system"]["requires"])["xtc-llvm-dev"]
    assert llvm_pin.startswith(sits_mlir.llvm_version() + ".")
    assert sits_mlir.__version__ == data["project"]["version"]
