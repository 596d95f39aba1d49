"""The pilots' draws as the stages read them: unconstrained, with Stan's names for the coordinates."""

from __future__ import annotations

import numpy as np

from stanaccel.sampling.result import SampleResult
from stanaccel.stan.nuts import NutsFit


def _bracketed(name: str) -> str:
    """An unconstrained coordinate's name as Stan writes it: ``b.2.1`` as ``b[2,1]``."""
    variable, *index = name.split(".")
    return f"{variable}[{','.join(index)}]" if index else variable


def _unconstrained(result: SampleResult) -> np.ndarray:
    """(chains, draws, dim) of a result's unconstrained draws."""
    run = result.run
    return np.asarray(run.draws_unconstrained if isinstance(run, NutsFit) else run.positions)
