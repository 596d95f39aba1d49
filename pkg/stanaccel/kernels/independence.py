"""Independence Metropolis-Hastings with a multivariate t proposal, its proposals evaluated in batches.

The proposal ``y ~ t_df(mean, scale * covariance)`` does not depend on the
current point ``x``, so the Metropolis-Hastings ratio is a ratio of
importance weights ``w = pi / q``: accept with probability
``min(1, w(y) / w(x))`` (Tierney 1994). The kernel is exact for any
proposal whose support covers the target's; it is uniformly ergodic when
``w`` is bounded (Mengersen and Tweedie 1996), which the t's polynomial
tails give against a posterior with Gaussian (or lighter) tails. Its
acceptance rate is its efficiency: on a posterior close to the proposal
nearly every proposal is accepted and the draws are nearly independent; on
a posterior the proposal misses (another mode, tails heavier than the t's)
the chain sticks where ``w`` is large.

Batches: since the proposals do not depend on the state, a chain draws
``batch`` proposals at once, evaluates their log densities together
(:func:`~stanaccel.densities.safe_log_densities`: on every core at once for
a Stan density), then decides them in order, one per step. Each proposal's
normal vector, chi-square variate and accept uniform are drawn together,
proposal after proposal, so the random stream is used in the same order
whatever the batch: a chain with ``batch = 16`` makes exactly the draws of
the chain with ``batch = 1`` and the same seed. The proposals not yet
decided live in the chain's state (its record in ``State.extra``, which a
checkpoint keeps), so a resumed chain continues with the same proposals.
A run's last batch may be left partly unused: at most ``batch - 1``
evaluations per chain spent in vain. The same record counts the chain's
steps and acceptances, for its ``summary``.

Where a batch is evaluated is the kernel's ``evaluate`` (default: this
process's cores); a run on a Dask executor gives it one that splits the
batch across the cluster's workers
(:class:`~stanaccel.sampling.batches.ExecutorBatches`). The values, hence
the draws, are the same wherever they are computed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from stanaccel.densities import safe_log_densities, safe_log_density
from stanaccel.kernels.metropolis import decide
from stanaccel.kernels.pcn import colour, gaussian_root, whiten
from stanaccel.kernels.state import (
    Info,
    State,
    chain_statistics,
    check_start,
    statistics_key,
    with_statistics,
)


class IndependenceMetropolis:
    """Independence Metropolis-Hastings with a multivariate t proposal; exact for its target.

    Parameters
    ----------
    density : log density
    mean : ndarray (dim,)
        The proposal's location (the warm-up draws' mean).
    covariance : ndarray (dim, dim) or (dim,)
        A covariance (a vector: its diagonal), such as the warm-up draws'.
    df : float
        The t's degrees of freedom (> 0): the smaller, the heavier its tails.
    scale : float
        The t's scale matrix is ``scale * covariance`` (its covariance, for
        ``df > 2``, is ``df / (df - 2)`` times that).
    batch : int
        Proposals drawn and evaluated at once; the chain does not depend on it.
    evaluate : callable (density, points) -> log densities, optional
        Evaluates a batch, ``-inf`` where the density is undefined, and counts
        the evaluations on ``density``. Default:
        :func:`~stanaccel.densities.safe_log_densities` (every core of this process).
    """

    exact = True

    def __init__(
        self,
        density,
        mean: np.ndarray,
        covariance: np.ndarray,
        *,
        df: float = 7.0,
        scale: float = 1.2,
        batch: int = 1,
        evaluate: Callable[[Any, np.ndarray], np.ndarray] | None = None,
    ):
        if not df > 0:
            raise ValueError(f"need df > 0 (the t's degrees of freedom), not {df}")
        if not scale > 0:
            raise ValueError(f"need scale > 0, not {scale}")
        if int(batch) != batch or batch < 1:
            raise ValueError(f"need a whole batch >= 1, not {batch}")
        self.density = density
        self.mean = np.asarray(mean, dtype=float)
        self.root = gaussian_root(scale * np.asarray(covariance, dtype=float))
        self.df, self.scale, self.batch = float(df), float(scale), int(batch)
        self.evaluate = evaluate or safe_log_densities
        self.record_key = statistics_key(self)
        dim = len(self.mean)
        self._empty = {
            "points": np.empty((0, dim)),
            "log_densities": np.empty(0),
            "log_proposals": np.empty(0),
            "uniforms": np.empty(0),
            "next": 0,
            "steps": 0,
            "accepted": 0,
        }

    def init(self, position: np.ndarray) -> State:
        position = np.array(position, dtype=float)
        return check_start(
            State(position, safe_log_density(self.density, position)), "IndependenceMetropolis"
        )

    def log_proposal(self, x: np.ndarray) -> float:
        """log q(x), up to a constant that cancels in the ratio."""
        d = np.asarray(x, dtype=float) - self.mean
        w = whiten(self.root, d)
        return -0.5 * (self.df + len(d)) * float(np.log1p(w @ w / self.df))

    def draw(self, rng: np.random.Generator) -> tuple[np.ndarray, float]:
        """A proposal ``mean + root z sqrt(df / g)`` (``z ~ N(0, I)``, ``g ~ chi^2_df``) and its uniform."""
        z = rng.standard_normal(len(self.mean))
        g = rng.chisquare(self.df)
        return self.mean + colour(self.root, z) * np.sqrt(self.df / g), rng.random()

    def next_batch(self, rng: np.random.Generator) -> dict:
        """``batch`` proposals, their log densities (evaluated together), log q and accept uniforms."""
        drawn = [self.draw(rng) for _ in range(self.batch)]
        points = np.array([point for point, _ in drawn])
        return {
            "points": points,
            "log_densities": self.evaluate(self.density, points),
            "log_proposals": np.array([self.log_proposal(point) for point in points]),
            "uniforms": np.array([u for _, u in drawn]),
            "next": 0,
        }

    def step(self, state: State, rng: np.random.Generator) -> tuple[State, Info]:
        record = chain_statistics(state, self.record_key, self._empty)
        if record["next"] == len(record["uniforms"]):
            record.update(self.next_batch(rng))
        i = record["next"]
        lp = float(record["log_densities"][i])
        log_weight = lp - record["log_proposals"][i]
        current = state.log_density - self.log_proposal(state.position)
        accepted, probability = decide(log_weight - current, record["uniforms"][i])
        info = Info(accepted, probability, failed=lp == -np.inf)
        new = State(record["points"][i].copy(), lp) if accepted else state
        counts = {"next": i + 1, "steps": record["steps"] + 1, "accepted": record["accepted"] + accepted}
        return with_statistics(new, state, self.record_key, {**record, **counts}), info

    def summary(self, state: State) -> dict:
        """The chain's share of proposals accepted (``proposal_acceptance``): the sampler's efficiency."""
        record = chain_statistics(state, self.record_key, self._empty)
        return {"proposal_acceptance": record["accepted"] / max(record["steps"], 1)}
