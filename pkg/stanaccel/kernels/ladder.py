"""Temperature ladders: the schedule is data, turned into log densities by one function.

A :class:`Ladder` holds the densities h_0 (the target), h_1, ..., h_M, hotter
as m grows, and answers "log h_n at this point", reusing what is known. Two
kinds (Dougal, Paige & Wood, tempering by subsampling):

- :func:`power_ladder`: h_m = prior x likelihood^beta_m. Built from two
  densities, the full posterior (beta = 1) and the prior alone (beta = 0),
  it knows every level's value and gradient at a point once both are
  evaluated there: log h_m = log prior + beta_m (log posterior - log prior).
  Points are cached, so swaps and tempered-transition ratios cost no extra
  evaluations.
- :func:`subsampled_ladder`: h_m = prior x likelihood of a nested subset of
  about beta_m N observations (X_M in ... in X_1 in X_0 = all data). A level's
  density at a point of another level is a fresh evaluation: the extra cost
  the paper notes for subsampled swaps.

A third kind, :func:`approximation_ladder`, holds cheaper and cheaper
approximations of the target rather than tempered copies (Wang & Neal).

The default schedule is geometric, beta_m = beta_*^(m/M), with M = 6 and
beta_* = 1/8 as in the paper.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

import numpy as np

from stanaccel.densities import safe_log_density, safe_log_density_gradient


def geometric_betas(n_levels: int = 6, beta_min: float = 1 / 8) -> np.ndarray:
    """beta_m = beta_min^(m/M) for m = 0..M: 1 at the target, ``beta_min`` at the top."""
    if n_levels < 1 or not 0 < beta_min < 1:
        raise ValueError(f"need n_levels >= 1 and 0 < beta_min < 1, not {n_levels} and {beta_min}")
    return beta_min ** (np.arange(n_levels + 1) / n_levels)


def check_betas(betas) -> np.ndarray:
    """Betas must start at 1 and decrease, staying in [0, 1]."""
    betas = np.asarray(betas, dtype=float)
    if betas.ndim != 1 or len(betas) < 2 or betas[0] != 1 or np.any(np.diff(betas) >= 0) or betas[-1] < 0:
        raise ValueError(f"betas must start at 1 and strictly decrease to a value >= 0, not {betas}")
    return betas


class Ladder:
    """Densities h_0 (target) ... h_M with their inverse temperatures.

    Attributes
    ----------
    levels : list of log densities
    betas : ndarray, or None for a ladder of approximations
    kind : str
        "power", "subsampled" or "approximation".
    """

    def __init__(self, levels: list, betas, kind: str):
        self.levels = list(levels)
        self.betas = None if betas is None else check_betas(betas)
        self.kind = kind
        if len(self.levels) < 2:
            raise ValueError("a ladder needs the target and at least one more density")
        if self.betas is not None and len(self.levels) != len(self.betas):
            raise ValueError(f"{len(self.levels)} densities for {len(self.betas)} betas")

    def __len__(self) -> int:
        return len(self.levels)

    @property
    def densities(self) -> list:
        """Every density whose evaluations count toward cost."""
        return list(self.levels)

    def log_density(self, level: int, position: np.ndarray) -> float:
        """log h_level at a point (``-inf`` where undefined)."""
        return safe_log_density(self.levels[level], position)


class _PowerParts:
    """Posterior and prior values (and gradients) at recently seen points."""

    def __init__(self, posterior, prior, size: int = 256):
        self.posterior, self.prior = posterior, prior
        self.size = size
        self.cache: OrderedDict[bytes, tuple] = OrderedDict()

    def get(self, x: np.ndarray, gradient: bool) -> tuple:
        key = x.tobytes()
        hit = self.cache.get(key)
        if hit is not None and (not gradient or hit[2] is not None):
            return hit
        if gradient:
            lp1, g1 = safe_log_density_gradient(self.posterior, x)
            lp0, g0 = safe_log_density_gradient(self.prior, x) if lp1 > -np.inf else (-np.inf, None)
        else:
            lp1, g1 = safe_log_density(self.posterior, x), None
            lp0, g0 = (safe_log_density(self.prior, x) if lp1 > -np.inf else -np.inf), None
        parts = (lp1, lp0, g1, g0)
        self.cache[key] = parts
        if len(self.cache) > self.size:
            self.cache.popitem(last=False)
        return parts


class PowerTempered:
    """h_beta = prior x likelihood^beta from a posterior and a prior density (shared cache)."""

    def __init__(self, parts: _PowerParts, beta: float):
        self.parts, self.beta = parts, float(beta)
        self.dim = parts.posterior.dim

    def log_density(self, x: np.ndarray) -> float:
        lp1, lp0, _, _ = self.parts.get(x, gradient=False)
        return lp0 + self.beta * (lp1 - lp0) if lp1 > -np.inf and lp0 > -np.inf else -np.inf

    def log_density_gradient(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        lp1, lp0, g1, g0 = self.parts.get(x, gradient=True)
        if g1 is None or g0 is None:
            raise FloatingPointError("tempered density undefined at this point")
        return lp0 + self.beta * (lp1 - lp0), g0 + self.beta * (g1 - g0)


class PowerLadder(Ladder):
    """A power-tempering ladder; its cost is counted on the posterior and prior densities."""

    def __init__(self, posterior, prior, betas):
        self.parts = _PowerParts(posterior, prior)
        super().__init__([PowerTempered(self.parts, b) for b in check_betas(betas)], betas, "power")

    @property
    def densities(self) -> list:
        return [self.parts.posterior, self.parts.prior]

    def log_likelihood(self, x: np.ndarray) -> float:
        """log posterior - log prior at a point (its cached values where it was just evaluated)."""
        lp1, lp0, _, _ = self.parts.get(x, gradient=False)
        return lp1 - lp0 if lp1 > -np.inf and lp0 > -np.inf else -np.inf


def power_ladder(posterior, prior, betas=None) -> PowerLadder:
    """h_m = prior x likelihood^beta_m, from the posterior (beta=1) and prior (beta=0) densities.

    For a Stan program with a ``beta`` data variable these are two instances:
    ``model`` and ``model.with_data({**data, "beta": 0.0})``.
    """
    return PowerLadder(posterior, prior, geometric_betas() if betas is None else betas)


def approximation_ladder(target, approximations: list) -> Ladder:
    """pi_0 = ``target``, then ``approximations`` pi_1, ..., pi_n, ever cheaper (Wang & Neal).

    For tempered transitions that move with fast approximations of an
    expensive density: subsets of decreasing size, or fewer and fewer
    inducing points (:mod:`stanaccel.approx`). The densities must share one
    unconstrained space.
    """
    levels = [target, *approximations]
    dims = {getattr(d, "dim", None) for d in levels}
    if len(dims) != 1:
        raise ValueError(f"the densities of a ladder must share one dimension, not {sorted(dims, key=str)}")
    return Ladder(levels, None, "approximation")


def subset_betas(betas, n_obs: int) -> np.ndarray:
    """The betas of the distinct subsets a subsampled ladder over ``n_obs`` observations takes.

    Each beta is rounded to a whole subset size k / N (at least one observation), and levels that share
    a size are merged: two levels of one subset would swap every time and add nothing.
    """
    sizes = np.maximum(np.round(check_betas(betas) * n_obs), 1)
    return np.unique(sizes)[::-1] / n_obs


def nested_subsets(n_obs: int, betas, rng: np.random.Generator) -> list[np.ndarray]:
    """Indices of nested subsets of about beta_m N observations (sorted, level 0 = all).

    One random permutation is drawn and level m takes its first
    ``round(beta_m N)`` entries, so X_M in ... in X_1 in X_0.
    """
    order = rng.permutation(n_obs)
    sizes = [int(round(b * n_obs)) for b in check_betas(betas)]
    sizes[0] = n_obs
    return [np.sort(order[:size]) for size in sizes]


def subsampled_ladder(
    make_density: Callable[[np.ndarray], object], n_obs: int, betas=None, *, seed: int = 0
) -> Ladder:
    """h_m = prior x likelihood of a nested random subset of about beta_m N observations.

    Parameters
    ----------
    make_density : callable indices -> log density
        The posterior given the observations at ``indices``; for a Stan program,
        ``lambda idx: model.with_data(take_observations(data, idx))``.
    n_obs : int
        Number of observations N.
    seed : int
        Seed of the random permutation that fixes the subsets.
    """
    betas = geometric_betas() if betas is None else check_betas(betas)
    subsets = nested_subsets(n_obs, betas, np.random.default_rng(seed))
    ladder = Ladder([make_density(idx) for idx in subsets], betas, "subsampled")
    ladder.subsets = subsets
    return ladder
