"""How far a result is from its reference; numpy only, so that the GPU
check's runtime-only host can use it too."""

import numpy as np


def relative_error(actual, expected) -> float:
    """‖actual − expected‖ / ‖expected‖ (0 for two zero tensors)."""
    a = np.asarray(actual, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    den = np.linalg.norm(e)
    return float(np.linalg.norm(a - e) / den) if den else float(np.linalg.norm(a))
