"""The op converters, assembled: every op-family module is imported here (each
registers its converters into `CONVERTERS` as it is imported), so importing
`CONVERTERS` from this module gives the complete table.

    _ops_registry.py       Converter, CONVERTERS keyed by (domain, op_type,
                           since_version), the `converter` decorator
    _ops_common.py         shared checks and helpers (need_float, cast_value, ...)
    _ops_elementwise.py    arithmetic, comparisons, logic, unary math, Cast, ...
    _ops_activation.py     Relu, Gelu, Softplus, ..., Softmax, LogSoftmax
    _ops_normalization.py  BatchNorm, LayerNorm, RMSNorm, Instance/Group/MVN/Lp
    _ops_contraction.py    MatMul, Gemm, Conv, ConvTranspose
    _ops_pooling.py        MaxPool/AveragePool (1-D to 3-D), LpPool, Global*Pool
    _ops_reduction.py      Reduce*
    _ops_shape.py          Reshape, Transpose, Concat, Gather, Expand, ...
    _ops_slice.py          Slice, Pad
    _ops_generate.py       ConstantOfShape, Range, windows, EyeLike, OneHot
    _ops_quantization.py   Q/DQ, MatMulNBits, integer matmuls and convolutions
    _ops_attention.py      Attention, RotaryEmbedding, GroupQueryAttention
    _ops_einsum.py         Einsum
    _ops_index.py          GatherElements, Scatter*, ArgMax, CumSum, TopK, losses
    _ops_resize.py         Resize, GridSample
    _ops_recurrent.py      RNN, GRU, LSTM
    _ops_control.py        Scan, If, Loop (subgraph bodies)

The names below are re-exported for code that imported them from here.
"""

from __future__ import annotations

# Each op is registered once, so the order of these imports does not matter.
from . import (_ops_elementwise, _ops_activation, _ops_normalization,  # noqa: F401
               _ops_contraction, _ops_pooling, _ops_reduction, _ops_shape, _ops_generate,
               _ops_quantization)
from . import _ops_attention, _ops_einsum, _ops_index, _ops_resize, _ops_slice  # noqa: F401
from . import _ops_control  # noqa: F401
from . import _ops_recurrent  # noqa: F401
from ._ops_common import (I64, cast_value, conv_padding, extract_slice,  # noqa: F401
                          f64_attr, has_input, i64_attr, need_const, need_float, need_static,
                          norm_axis, pad_tensor, unused_outputs)
from ._ops_contraction import conv_attrs, emit_matmul  # noqa: F401
from ._ops_elementwise import binary_fn  # noqa: F401
from ._ops_normalization import bn_affine, moments, norm_param, normalize_over  # noqa: F401
from ._ops_quantization import emit_matmul_const  # noqa: F401
from ._ops_reduction import AXES_INPUT_SINCE, reduce_axes  # noqa: F401
from ._ops_registry import CONVERTERS, Converter, Registry, converter  # noqa: F401
from ._ops_shape import gather_generic, symbolic_groups, symbolic_reshape_ok  # noqa: F401
from ._ops_slice import slice_params  # noqa: F401
