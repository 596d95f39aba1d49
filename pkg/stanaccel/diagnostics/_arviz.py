"""The one import of ArviZ, so that moving to ArviZ 1.x touches one folder."""

import warnings

with warnings.catch_warnings():
    # ArviZ 0.2x announces its 1.x refactor on import; it is not actionable here.
    warnings.simplefilter("ignore", FutureWarning)
    import arviz as az

__all__ = ["az"]
