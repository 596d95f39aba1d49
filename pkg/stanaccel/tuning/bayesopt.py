"""Bayesian optimisation of a noisy objective over a :class:`~stanaccel.tuning.space.Space`; random search.

The objective (for example :func:`~stanaccel.tuning.objectives.autocorrelation_objective`
of a short chain run with the settings) is modelled by a Gaussian process on
the unit cube; each iteration evaluates the candidate of largest expected
improvement. The tuner only proposes settings and records what came back:
it runs no sampler and changes nothing passed to it.
"""

from __future__ import annotations

import copy
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import direct, minimize
from scipy.special import ndtr
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

from stanaccel.tuning.space import Space

REFINE_EVALUATIONS = 100
"""Evaluations of the expected improvement DIRECT makes to refine the Real dimensions of a candidate."""

Objective = Callable[[dict, np.random.Generator], "float | tuple[float, dict]"]


@dataclass
class Trial:
    """One evaluation of the objective: the settings, the value, its wall time, what else it returned."""

    settings: dict
    value: float
    seconds: float
    details: dict = field(default_factory=dict)


@dataclass
class TuningResult:
    """The history of a tuning run and its best settings.

    Attributes
    ----------
    space : Space
    trials : list of Trial
        In the order evaluated.
    best : dict
        Bayesian optimisation: the evaluated settings with the highest
        posterior mean (robust to a lucky noisy value); random search: the
        highest observed value.
    best_value : float
        The posterior mean at ``best``, or the observed value for random search.
    seconds : float
        Wall time of the whole run, objective included.
    method : str
        "bayesian optimisation" or "random search".
    model : GaussianProcessRegressor or None
        The Gaussian process fitted to every trial (None for random search).
    candidates : ndarray (n, d) or None
        The acquisition's candidate set in the unit cube (for a policy over it).
    overhead : list of float
        Seconds of each iteration's model fit and acquisition, without the objective.
    """

    space: Space
    trials: list[Trial]
    best: dict
    best_value: float
    seconds: float
    method: str
    model: GaussianProcessRegressor | None = field(default=None, repr=False)
    candidates: np.ndarray | None = field(default=None, repr=False)
    overhead: list[float] = field(default_factory=list, repr=False)

    def predict(self, settings: list[dict]) -> tuple[np.ndarray, np.ndarray] | None:
        """The posterior mean and sd of the mean objective (the noise left out) at ``settings``.

        None for random search, which fits no model.
        """
        if self.model is None:
            return None
        return self.model.predict(self.space.to_unit(settings), return_std=True)

    def table(self) -> list[dict[str, Any]]:
        """One row per trial: its number, settings, value, seconds and (with a model) predicted mean."""
        predicted = self.predict([t.settings for t in self.trials])
        rows = []
        for i, trial in enumerate(self.trials):
            row = {"trial": i + 1, **trial.settings, "value": trial.value, "seconds": trial.seconds}
            if predicted is not None:
                row["predicted"] = float(predicted[0][i])
            rows.append(row)
        return rows


def bayesian_optimisation(
    objective: Objective,
    space: Space,
    *,
    budget: int,
    initial: int | None = None,
    seed: int = 0,
    n_continuous: int = 1024,
    refine: bool = True,
    say: Callable[[str], None] | None = None,
) -> TuningResult:
    """Maximise a noisy ``objective`` over ``space`` in ``budget`` evaluations.

    The first ``initial`` settings are a scrambled Sobol design. Then each
    iteration fits a Gaussian process (constant times an ARD Matern 5/2,
    plus white noise, on the unit cube) to every trial and evaluates the
    candidate (:meth:`Space.candidates`) of largest expected improvement
    over the incumbent, the largest posterior mean among the trials (the
    objective is noisy, so the best observed value is not). When the space
    has Real dimensions and ``refine``, DIRECT then searches their values
    with the discrete ones fixed at that candidate's, and the better point
    of the two is evaluated.

    Parameters
    ----------
    objective : callable
        ``objective(settings, rng) -> value`` or ``(value, details)``: a
        finite float to maximise. Its wall time is recorded per trial; the
        caller charges it.
    space : Space
    budget : int
        Evaluations of the objective in all.
    initial : int, optional
        Sobol points before the model is used; default ``max(3, min(10, budget // 4))``.
    seed : int
        Fixes the design, the candidates, the model fits and each trial's generator.
    n_continuous : int
        Sobol points of the Real dimensions per value of the discrete ones.
    refine : bool
        Refine the Real dimensions of the chosen candidate with DIRECT.
    say : callable, optional
        Receives one line per trial.
    """
    if budget < 1:
        raise ValueError(f"budget must be at least 1, not {budget}")
    initial = max(3, min(10, budget // 4)) if initial is None else initial
    if not 1 <= initial <= budget:
        raise ValueError(f"initial must be from 1 to the budget {budget}, not {initial}")
    start = time.perf_counter()
    generators = _trial_generators(seed, budget)
    candidates = space.candidates(n_continuous=n_continuous, seed=seed)
    fit_state = np.random.RandomState(seed)
    trials: list[Trial] = []
    for settings in space.from_unit(space.sobol(initial, seed)):
        _evaluate(objective, settings, generators, say, budget, trials)
    overhead = []
    model = None
    while len(trials) < budget:
        began = time.perf_counter()
        model = _fit(space, trials, fit_state, model)
        point = _next_point(model, space, trials, candidates, refine)
        overhead.append(time.perf_counter() - began)
        _evaluate(objective, space.from_unit(point)[0], generators, say, budget, trials)
    model = _fit(space, trials, fit_state, model)
    means = model.predict(space.to_unit([t.settings for t in trials]))
    best = int(np.argmax(means))
    return TuningResult(
        space=space,
        trials=trials,
        best=dict(trials[best].settings),
        best_value=float(means[best]),
        seconds=time.perf_counter() - start,
        method="bayesian optimisation",
        model=model,
        candidates=candidates,
        overhead=overhead,
    )


def random_search(
    objective: Objective,
    space: Space,
    *,
    budget: int,
    seed: int = 0,
    say: Callable[[str], None] | None = None,
) -> TuningResult:
    """Evaluate ``objective`` at ``budget`` settings drawn uniformly from ``space``; best = highest value.

    The baseline Bayesian optimisation must beat; arguments as for
    :func:`bayesian_optimisation`.
    """
    if budget < 1:
        raise ValueError(f"budget must be at least 1, not {budget}")
    start = time.perf_counter()
    generators = _trial_generators(seed, budget + 1)
    trials: list[Trial] = []
    for settings in space.random(budget, generators.pop()):
        _evaluate(objective, settings, generators, say, budget, trials)
    best = max(trials, key=lambda t: t.value)
    return TuningResult(
        space=space,
        trials=trials,
        best=dict(best.settings),
        best_value=best.value,
        seconds=time.perf_counter() - start,
        method="random search",
    )


def expected_improvement(mean: np.ndarray, sd: np.ndarray, incumbent: float) -> np.ndarray:
    """E[max(f - incumbent, 0)] for f ~ N(mean, sd^2), elementwise."""
    sd = np.maximum(sd, 1e-12)
    z = (mean - incumbent) / sd
    # ndtr and the density written out: scipy.stats.norm costs 0.1 ms a call, and DIRECT makes hundreds.
    return (mean - incumbent) * ndtr(z) + sd * np.exp(-0.5 * z**2) / np.sqrt(2 * np.pi)


def surrogate(d: int, random_state: np.random.RandomState, start=None) -> GaussianProcessRegressor:
    """The Gaussian process of the objective on the unit cube of ``d`` dimensions (unfitted).

    Length scales are bounded below by 0.05 of a dimension's range, so a
    few noisy values cannot be fitted as a needle of noise-free peaks; the
    hyperparameters' search starts at those of ``start`` (a kernel, the
    previous iteration's fit) and at one random point within the bounds.
    """
    kernel = ConstantKernel(1.0, (1e-2, 1e2)) * Matern(
        length_scale=np.ones(d), length_scale_bounds=(5e-2, 2e1), nu=2.5
    ) + WhiteKernel(noise_level=0.1, noise_level_bounds=(1e-6, 1e1))
    if start is not None:
        kernel = kernel.clone_with_theta(start.theta)
    return GaussianProcessRegressor(
        kernel,
        normalize_y=True,
        optimizer=_maximise_likelihood,
        n_restarts_optimizer=1,
        random_state=random_state,
    )


def _maximise_likelihood(negative_log_likelihood, theta, bounds):
    """scikit-learn's L-BFGS-B search of the hyperparameters with a looser tolerance.

    The default (relative change 2.2e-9) spends about half of a fit's
    likelihood evaluations on digits of the hyperparameters that change
    nothing the tuner does with the model.
    """
    found = minimize(
        negative_log_likelihood, theta, method="L-BFGS-B", jac=True, bounds=bounds, options={"ftol": 1e-6}
    )
    return found.x, found.fun


def _trial_generators(seed: int, count: int) -> list[np.random.Generator]:
    """One independent generator per trial, used in reverse (``pop``)."""
    children = np.random.SeedSequence(seed).spawn(count)
    return [np.random.default_rng(c) for c in reversed(children)]


def _evaluate(objective, settings: dict, generators, say, budget: int, trials: list[Trial]) -> None:
    """Run the objective on a copy of ``settings``, time it, and append the trial."""
    began = time.perf_counter()
    out = objective(dict(settings), generators.pop())
    seconds = time.perf_counter() - began
    value, details = out if isinstance(out, tuple) else (out, {})
    value = float(value)
    if not np.isfinite(value):
        raise ValueError(f"the objective returned {value} at {settings}; it must return a finite number")
    trials.append(Trial(dict(settings), value, seconds, dict(details)))
    if say is not None:
        say(f"trial {len(trials)}/{budget}: {settings} -> {value:.4g} ({seconds:.3g} s)")


def _fit(space: Space, trials: list[Trial], random_state, previous=None) -> GaussianProcessRegressor:
    """The Gaussian process of the mean objective, fitted to ``trials``; see :func:`without_noise`."""
    start = None if previous is None else previous.fitted_kernel
    model = surrogate(len(space.dimensions), random_state, start)
    with warnings.catch_warnings():
        # Length scales or noise at their bounds (a flat or noiseless objective) are expected here.
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(space.to_unit([t.settings for t in trials]), [t.value for t in trials])
    return without_noise(model)


def without_noise(model: GaussianProcessRegressor) -> GaussianProcessRegressor:
    """A copy of a fitted ``model`` whose predictions are of the mean objective, without the noise.

    scikit-learn's ``predict`` adds the WhiteKernel's variance to the sd,
    which would make every point look uncertain by the noise alone and
    drown the expected improvement; the noise is part of the fit (in the
    stored Cholesky factor), so dropping the WhiteKernel term from the
    kernel used to predict leaves the mean as it was and gives the sd of
    the mean objective. The full fitted kernel stays as ``fitted_kernel``.
    """
    latent = copy.copy(model)
    latent.fitted_kernel = model.kernel_
    latent.kernel_ = model.kernel_.k1
    return latent


def _next_point(model, space: Space, trials: list[Trial], candidates: np.ndarray, refine: bool) -> np.ndarray:
    """The point of the unit cube to evaluate next: the candidate of largest expected improvement, refined."""
    incumbent = float(np.max(model.predict(space.to_unit([t.settings for t in trials]))))
    mean, sd = model.predict(candidates, return_std=True)
    improvement = expected_improvement(mean, sd, incumbent)
    best = int(np.argmax(improvement))
    point, value = candidates[best].copy(), improvement[best]
    continuous = space.continuous
    if refine and continuous:

        def negative_improvement(x):
            trial = point.copy()
            trial[continuous] = x
            mean, sd = model.predict(trial[None, :], return_std=True)
            return -expected_improvement(mean, sd, incumbent)[0]

        found = direct(negative_improvement, [(0.0, 1.0)] * len(continuous), maxfun=REFINE_EVALUATIONS)
        if -found.fun > value:
            point[continuous] = found.x
    return point
