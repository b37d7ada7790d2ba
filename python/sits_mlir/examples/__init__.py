"""Bundled example models, built deterministically in memory (no files to
download): `mlp()` is the default model of the README's main job."""

from .models import mlp

__all__ = ["mlp"]
