"""The one import of ArviZ, so that moving to ArviZ 1.x touches one folder.

ArviZ 0.2x switches to Numba-compiled helpers when Numba is installed (the
Ising samplers need it), and one of them (``mcse(method="sd")``) fails under
NumPy >= 2.4 ("only 0-dimensional arrays can be converted to Python
scalars"); its NumPy path gives the same numbers. stanaccel's own statistics
therefore run inside :func:`numpy_path`, which turns ArviZ's Numba path off
for their duration and restores the user's setting afterwards: importing
stanaccel changes nothing of ArviZ's configuration.
"""

import warnings
from contextlib import contextmanager

with warnings.catch_warnings():
    # ArviZ 0.2x announces its 1.x refactor on import; it is not actionable here.
    warnings.simplefilter("ignore", FutureWarning)
    import arviz as az

__all__ = ["az", "numpy_path"]


@contextmanager
def numpy_path():
    """Run ArviZ's statistics on its NumPy path, restoring the Numba setting on exit.

    Usable as a context manager or as a decorator (``@numpy_path()``).
    ArviZ reads ``az.Numba.numba_flag`` at each call, so the setting holds
    for exactly the calls inside the block.
    """
    before = az.Numba.numba_flag
    az.Numba.numba_flag = False
    try:
        yield
    finally:
        az.Numba.numba_flag = before
