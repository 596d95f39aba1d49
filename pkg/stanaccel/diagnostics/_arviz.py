"""The one import of ArviZ, so that moving to ArviZ 1.x touches one folder.

ArviZ 0.2x switches to Numba-compiled helpers when Numba is installed (the
Ising samplers need it), and one of them (``mcse(method="sd")``) fails under
NumPy >= 2.4 ("only 0-dimensional arrays can be converted to Python
scalars"); its NumPy path gives the same numbers, so it is used always.
"""

import warnings

with warnings.catch_warnings():
    # ArviZ 0.2x announces its 1.x refactor on import; it is not actionable here.
    warnings.simplefilter("ignore", FutureWarning)
    import arviz as az

az.Numba.disable_numba()

__all__ = ["az"]
