"""The one import of ArviZ, so that moving to ArviZ 1.x touches one folder.

ArviZ 0.2x switches to Numba-compiled helpers when Numba is installed (the
Ising samplers need it), and one of them (``mcse(method="sd")``) fails under
NumPy >= 2.4 ("only 0-dimensional arrays can be converted to Python
scalars"); its NumPy path gives the same numbers. stanaccel's own statistics
therefore run inside :func:`numpy_path`, which turns ArviZ's Numba path off
for their duration and restores the user's setting afterwards: importing
stanaccel changes nothing of ArviZ's configuration.
"""

import importlib.util
import sys
import warnings
from contextlib import contextmanager


def _import_arviz():
    """ArviZ, imported without the Numba compilation its import would do.

    Where Numba is installed (stanaccel's Ising samplers need it), importing
    ArviZ 0.2x compiles a Numba ufunc of its ECDF bands eagerly: about a
    third of ArviZ's import time, paid by every ``stanaccel`` command. While
    ArviZ is imported Numba is hidden, so those helpers stay plain Python
    (the same numbers; only ArviZ's ECDF bands are slower); then Numba is
    shown again and ArviZ's Numba setting restored to what ArviZ itself sets
    (on where Numba is installed), so that importing stanaccel changes
    nothing of ArviZ's configuration. An ArviZ the user imported first is
    taken as it is.
    """
    if "arviz" in sys.modules:  # the user's ArviZ, as the user set it
        return sys.modules["arviz"]
    hide = "numba" not in sys.modules
    if hide:
        sys.modules["numba"] = None  # an import of numba raises ImportError while this is there
    try:
        with warnings.catch_warnings():
            # ArviZ 0.2x announces its 1.x refactor on import; it is not actionable here.
            warnings.simplefilter("ignore", FutureWarning)
            import arviz
    finally:
        if hide:
            del sys.modules["numba"]
    arviz.Numba.numba_flag = importlib.util.find_spec("numba") is not None
    return arviz


az = _import_arviz()

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
