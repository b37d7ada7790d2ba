// `sits-opt --version` names the LLVM it was built with and the SITS version,
// the same version the Python package reports.
//
// RUN: sits-opt --version | FileCheck %s
// RUN: sits-opt --version > %t.version
// RUN: %python -c "import sys, sits_mlir; text = open(sys.argv[1]).read(); sys.exit(0 if 'SITS (Scalable Inference Tensor Scheduling) version ' + sits_mlir.__version__ + '\n' in text and 'LLVM version ' + sits_mlir.llvm_version() + '\n' in text else 'version mismatch: ' + text)" %t.version

// CHECK: LLVM version 22.1.8
// CHECK: SITS (Scalable Inference Tensor Scheduling) version {{[0-9]+\.[0-9]+\.[0-9]+$}}
