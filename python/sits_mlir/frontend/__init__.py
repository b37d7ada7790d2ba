"""Model frontends: each reads a model format into the SITS dialect.

`sits_mlir.frontend.onnx` imports ONNX models.
"""
