//===- SitsOps.td - Python bindings of the SITS dialect ----*- tablegen -*-===//
//
// Entry point for the Python op-class generator; the dialect lives in
// dialects/Sits/IR.

#ifndef SITS_PYTHON_SITSOPS_TD
#define SITS_PYTHON_SITSOPS_TD

include "dialects/Sits/IR/SitsOps.td"

#endif // SITS_PYTHON_SITSOPS_TD
