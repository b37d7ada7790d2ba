"""Python bindings of the SITS dialect: op classes generated from ODS, the
activation enum, and the ``#sits.target`` / ``#sits.packed`` attributes."""

from ._sits_ops_gen import *  # noqa: F401,F403
from ._sits_enum_gen import *  # noqa: F401,F403
from .._mlir_libs._sits import PackedEncodingAttr, TargetAttr  # noqa: F401
