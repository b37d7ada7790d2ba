"""Command-line tools of the sits_mlir package (registered as console
scripts in pyproject.toml)."""
