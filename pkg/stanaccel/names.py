"""Stan's names of a variable's scalars (``b[1]``, ``m[2,1]``), shared by the results and the reports.

This module imports nothing else of stanaccel.
"""

from __future__ import annotations

import numpy as np


def stan_names(name: str, shape: tuple[int, ...]) -> list[str]:
    """Stan's names of a variable's scalars in row-major order: ``b`` or ``b[1]``, ``b[2]``, ``m[1,2]``."""
    if not shape:
        return [name]
    return [f"{name}[{','.join(str(i + 1) for i in index)}]" for index in np.ndindex(*shape)]
