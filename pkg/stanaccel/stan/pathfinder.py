"""Stan's Pathfinder: a Gaussian approximation of the posterior from a few L-BFGS paths.

Each path runs Stan's ``pathfinder_lbfgs_single`` service (Zhang, Carpenter,
Gelman and Vehtari, JMLR 2022) in its own thread (the bridge releases the
GIL): L-BFGS from a random start, a Gaussian at each iterate, the one with
the best ELBO kept, and ``draws`` draws from it with their log density
ratios. As Stan's multi-path service does, the paths' draws are then pooled
and resampled by Pareto-smoothed importance sampling; here PSIS is ArviZ's
(:func:`arviz.psislw`, the same tail length as Stan's), which also gives the
Pareto k that says how good the approximation is: above 0.7 the importance
weights have too heavy a tail to trust (Vehtari, Simpson, Gelman, Yao and
Gabry, "Pareto smoothed importance sampling", JMLR 25, 2024; Stan's
``psis.hpp`` warns at the same value). Weights that are all equal have no
tail, and no Pareto k: the Gaussian is the posterior (:func:`psis`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from stanaccel.stan.errors import StanEvaluationError
from stanaccel.stan.model import StanModel
from stanaccel.stan.services import LbfgsSettings, init_texts, lbfgs_settings, run_threads


@dataclass
class PathfinderSettings(LbfgsSettings):
    """Settings of Stan's Pathfinder, with CmdStan's defaults (``num_paths`` = 4)."""

    paths: int = 4
    draws: int = 1000
    """Draws per path, before resampling."""
    psis_draws: int = 1000
    """Draws kept by importance resampling over all paths."""
    iterations: int = 1000
    elbo_draws: int = 25

    service: ClassVar[str] = "pathfinder"
    counts: ClassVar[tuple[str, ...]] = (
        "paths",
        "draws",
        "psis_draws",
        "history_size",
        "iterations",
        "elbo_draws",
    )


@dataclass
class PathfinderFit:
    """What Pathfinder found.

    Attributes
    ----------
    draws : ndarray (psis_draws, dim)
        Unconstrained draws, resampled by PSIS from all paths' draws.
    log_density : ndarray (psis_draws,)
        The model's log density (with Jacobian) at each draw.
    path_draws : ndarray (paths * draws, dim)
        Every path's unconstrained draws before resampling (the paths that failed left out).
    path_sizes : list of int
        How many rows of ``path_draws`` each path gave, in order (:meth:`paths` splits them).
    path_elbos : list of float
        Each path's ELBO: the mean of log p - log q over its draws, q its Gaussian.
    pareto_k : float
        The Pareto k of the pooled importance weights: above 0.7 the
        approximation is poor; NaN where they are all equal (:func:`psis`).
    undefined : float
        The share of the paths' draws where the model's log density is
        undefined (NaN, infinite, an error), left out of the resampling.
    gradient_evaluations : int
        Log density (and gradient) evaluations of all paths together.
    seconds : float
        Wall time of the run, the pooling and resampling included.
    messages : list of str
        Stan's log messages, per path in order.
    interrupted : bool
        Stopped by Ctrl-C (the fit holds what the paths had when stopped).
    """

    draws: np.ndarray
    log_density: np.ndarray
    path_draws: np.ndarray
    pareto_k: float
    gradient_evaluations: int
    seconds: float
    messages: list[str]
    interrupted: bool = False
    path_sizes: list[int] = field(default_factory=list)
    path_elbos: list[float] = field(default_factory=list)
    undefined: float = 0.0

    def gaussian(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean and covariance of the resampled draws."""
        return self.draws.mean(axis=0), np.atleast_2d(np.cov(self.draws, rowvar=False))

    def paths(self) -> list[np.ndarray]:
        """Each path's unconstrained draws, (draws, dim) each: from its Gaussian, fitted at the iterate of
        its L-BFGS with the best ELBO (near where it ended, at a mode)."""
        return np.split(self.path_draws, np.cumsum(self.path_sizes)[:-1])


def pathfinder(
    model: StanModel, *, inits: Any = None, progress: bool = False, **settings: Any
) -> PathfinderFit:
    """Run Stan's multi-path Pathfinder on a model.

    Parameters
    ----------
    model : StanModel
        The posterior.
    inits : None, dict, list of dict, or ndarray
        Start points, one per path (as :func:`stanaccel.stan.nuts.sample_nuts`
        takes them); None for Stan's random inits.
    progress : bool
        Show a bar per path (L-BFGS iterations) on a terminal.
    **settings
        Fields of :class:`PathfinderSettings`.

    Returns
    -------
    PathfinderFit

    Raises
    ------
    StanEvaluationError
        Every path failed (the message gives Stan's last messages).
    KeyboardInterrupt
        Stopped (Ctrl-C, a stop signal) before any path had draws; a fit
        stopped later says so (``interrupted``).
    """
    config = PathfinderSettings(**settings)
    config.check()
    start = time.perf_counter()
    texts = init_texts(model, inits, config.paths)
    runs = [
        model.program.module.PathfinderPath(model._model, _path_settings(config, p, texts[p]))
        for p in range(config.paths)
    ]
    interrupted = run_threads(runs, "Pathfinder", config.iterations, progress)
    results = [run.result() for run in runs]
    messages = [m for r in results for m in r["messages"]]
    good = [r for r in results if not r["error"] and len(r["draws"])]
    if not good and (interrupted or any(r["interrupted"] for r in results)):
        raise KeyboardInterrupt(
            "stopped during Stan's Pathfinder, before any path had draws"
        )  # not a failure
    if not good:
        detail = "\n".join(messages[-10:])
        raise StanEvaluationError(f"every Pathfinder path failed: {results[0]['error']}\n{detail}".strip())
    width = model.param_num()
    constrained = np.concatenate([r["draws"][:, 2 : 2 + width] for r in good])
    log_p = np.concatenate([r["draws"][:, 1] for r in good])
    log_ratio = np.concatenate([r["lp_ratio"].ravel() for r in good])
    unconstrained = np.array([model.param_unconstrain(row) for row in constrained])
    finite = np.isfinite(log_ratio) & np.isfinite(log_p)
    if not finite.any():
        raise StanEvaluationError(
            f"Pathfinder: the log density is undefined at every one of its {len(finite)} draws"
        )
    log_weights, pareto_k = psis(log_ratio[finite])
    rng = np.random.default_rng([config.seed, 0x9A7F])
    weights = np.exp(log_weights - log_weights.max())
    chosen = rng.choice(int(finite.sum()), size=config.psis_draws, p=weights / weights.sum())
    return PathfinderFit(
        draws=unconstrained[finite][chosen],
        log_density=log_p[finite][chosen],
        path_draws=unconstrained,
        pareto_k=pareto_k,
        gradient_evaluations=int(sum(r["evaluations"] for r in results)),
        seconds=time.perf_counter() - start,
        messages=messages,
        interrupted=interrupted or any(r["interrupted"] for r in results),
        path_sizes=[len(r["draws"]) for r in good],
        path_elbos=[_elbo(r["lp_ratio"]) for r in good],
        undefined=float(1 - finite.mean()),
    )


def _elbo(log_ratio: np.ndarray) -> float:
    """A path's ELBO from its draws' log p - log q (the finite ones; -inf if none is)."""
    finite = np.ravel(log_ratio)[np.isfinite(np.ravel(log_ratio))]
    return float(np.mean(finite)) if len(finite) else float("-inf")


EQUAL_WEIGHTS = 1e-9
"""Log importance weights that all lie within this (relative to their size, at least 1) of one another
are equal: the Gaussian is the posterior up to rounding. Their tail has no shape, so Pareto k is not
defined (ArviZ's fit gives inf on ties, or noise: -3.4 to 0.2 on ``mvn_mean``'s prior, whose weights
differed by 3e-15)."""


def psis(log_ratio: np.ndarray) -> tuple[np.ndarray, float]:
    """Pareto-smoothed log weights and Pareto k (ArviZ's ``psislw``), from log ratios log p - log q.

    Where the ratios are all equal (within :data:`EQUAL_WEIGHTS`) the weights
    are uniform and k is NaN: not defined, since the Gaussian is exact. A k
    that ArviZ's fit cannot estimate otherwise is inf (no tail to trust).
    """
    import arviz as az

    log_ratio = np.asarray(log_ratio, dtype=float)
    if len(log_ratio) and np.ptp(log_ratio) <= EQUAL_WEIGHTS * max(1.0, float(np.max(np.abs(log_ratio)))):
        return np.full(len(log_ratio), -np.log(len(log_ratio))), float("nan")
    log_weights, k = az.psislw(log_ratio)
    return np.asarray(log_weights), float("inf") if np.isnan(k) else float(k)


def pareto_k_text(k: float) -> str:
    """A Pareto k for a message: its value, or why it has none."""
    return (
        "not defined (the importance weights are all equal: the Gaussian is exact)"
        if np.isnan(k)
        else f"{k:.2f}"
    )


def _path_settings(config: PathfinderSettings, path: int, init: str) -> dict:
    """The settings of one path's service call (``PathfinderPath``)."""
    return {
        **lbfgs_settings(config, init),
        "path": path + 1,
        "num_elbo_draws": int(config.elbo_draws),
        "num_draws": int(config.draws),
    }
