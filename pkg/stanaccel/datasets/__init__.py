"""Data generators for the bundled Stan programs, each with its known truth.

Every generator draws observations in sequence from one seeded generator, so
the first N points of a larger data set equal the data set of size N (the
tempering paper's protocol for sweeps over N).
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Dataset:
    """Stan data for a program plus what generated it.

    Attributes
    ----------
    program : str
        Name of the bundled program the data fit (``stanaccel.programs.program_path``).
    data : dict
        The Stan data.
    truth : dict
        Parameter values the data were drawn with.
    """

    program: str
    data: dict[str, Any]
    truth: dict[str, Any] = field(default_factory=dict)


GENERATORS = ("gp_ard", "mvn_mean", "logistic", "digits")
PROGRAMS = {"gp_ard": "gp_ard", "mvn_mean": "mvn_mean", "logistic": "logistic", "digits": "logistic"}
"""The bundled program each generator's data fit (its :attr:`Dataset.program`), known before it runs."""


def generator(name: str) -> Callable[..., Dataset]:
    """The ``generate`` function of a bundled program's data generator (its options are its keywords)."""
    if name not in GENERATORS:
        raise ValueError(f"no data generator {name!r}; have {list(GENERATORS)}")
    from importlib import import_module

    return import_module(f"stanaccel.datasets.{name}").generate


def generate(name: str, **options: Any) -> Dataset:
    """Call the generator of a bundled program by name, e.g. ``generate("gp_ard", N=64, D=3)``."""
    return generator(name)(**options)


def take_observations(data: dict[str, Any], indices, keys, n_key: str = "N") -> dict[str, Any]:
    """The data restricted to the observations at ``indices``.

    Parameters
    ----------
    data : dict
        Stan data.
    indices : array of int
        The observations to keep.
    keys : sequence of str, or a bundled program's name
        The variables indexed by observation along their first axis
        (:data:`stanaccel.observations.BUNDLED` for the bundled programs).
    n_key : str
        The variable holding the number of observations, set to ``len(indices)``.
    """
    from stanaccel.observations import BUNDLED, Observations

    if isinstance(keys, str):
        if keys not in BUNDLED:
            raise ValueError(f"no observation layout known for {keys!r}; pass the variable names")
        return BUNDLED[keys].take(data, indices)
    return Observations(n_key, tuple(keys)).take(data, indices)
