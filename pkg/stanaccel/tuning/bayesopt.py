"""Bayesian optimisation of a noisy objective over a :class:`~stanaccel.tuning.space.Space`; random search.

The objective (for example :func:`~stanaccel.tuning.objectives.autocorrelation_objective`
of a short chain run with the settings) is modelled by a Gaussian process on
the unit cube; each iteration evaluates the candidate of largest expected
improvement, never a setting already measured (or nearly: :func:`measured`).
A trial whose objective raises or returns a non-finite value is recorded as
failed, with its reason, and scores as the worst: the search goes on. The
tuner only proposes settings and records what came back: it runs no sampler
and changes nothing passed to it.
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

from stanaccel.tuning.space import Categorical, Space

REFINE_EVALUATIONS = 100
"""Evaluations of the expected improvement DIRECT makes to refine the Real dimensions of a candidate."""

NEAR = 0.05
"""Two settings are nearly the same (:func:`measured`) when their Integer and Real values differ by
less than this fraction of their range (on the unit cube: 5% of a log range is about 10% of a step
size from 0.016 to 0.13, and neighbouring integers of a range above 20) and their Categorical values
are equal. Short trials are noisy: a second trial that near a first one tells the model little."""

Objective = Callable[[dict, np.random.Generator], "float | tuple[float, dict]"]


@dataclass
class Trial:
    """One evaluation of the objective: the settings, the value, its wall time, what else it returned.

    A failed trial (the objective raised, or returned a non-finite value)
    has value ``-inf`` (the worst) and the reason in ``failed``. ``role``
    says why it was run: "search" for the tuner's own, or what the caller
    named it (such as "default").
    """

    settings: dict
    value: float
    seconds: float
    details: dict = field(default_factory=dict)
    failed: str | None = None
    role: str = "search"

    @property
    def ok(self) -> bool:
        return self.failed is None


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
    summary : dict
        What a caller adds about the choice (:mod:`stanaccel.sampling.tune`:
        the default's scores, the noise, whether the default was kept).
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
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def distinct(self) -> int:
        """The number of distinct settings among the trials (a repeated setting counts once)."""
        return len(_distinct([t.settings for t in self.trials]))

    @property
    def failures(self) -> int:
        """The number of failed trials."""
        return sum(not t.ok for t in self.trials)

    def predict(self, settings: list[dict]) -> tuple[np.ndarray, np.ndarray] | None:
        """The posterior mean and sd of the mean objective (the noise left out) at ``settings``.

        None for random search, which fits no model.
        """
        if self.model is None:
            return None
        return self.model.predict(self.space.to_unit(settings), return_std=True)

    def table(self) -> list[dict[str, Any]]:
        """One row per trial: number, role, settings, value, seconds, (with a model) predicted mean, failure.

        A failed trial's value is None and ``failed`` holds its reason; the
        predicted mean is None for settings outside the space.
        """
        inside = [i for i, t in enumerate(self.trials) if self.space.contains(t.settings)]
        predicted = self.predict([self.trials[i].settings for i in inside])
        means = {} if predicted is None else dict(zip(inside, predicted[0].tolist(), strict=True))
        rows = []
        for i, trial in enumerate(self.trials):
            row = {"trial": i + 1, "role": trial.role, **trial.settings}
            row.update(value=trial.value if trial.ok else None, seconds=trial.seconds)
            if predicted is not None:
                row["predicted"] = means.get(i)
            row["failed"] = trial.failed
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
    observed: list[Trial] | None = None,
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
    of the two is evaluated. A setting already measured (:func:`measured`)
    is never proposed again: the search stops early when every candidate
    has been measured. A failed trial (the objective raised, or returned a
    non-finite value) is recorded with its reason and fitted as the worst
    value measured.

    Parameters
    ----------
    objective : callable
        ``objective(settings, rng) -> value`` or ``(value, details)``: a
        finite float to maximise. Its wall time is recorded per trial; the
        caller charges it. An exception it raises fails the trial.
    space : Space
    budget : int
        Evaluations of the objective in all (``observed`` not counted).
    initial : int, optional
        Sobol points before the model is used; default ``max(3, min(10, budget // 4))``
        (at most the budget).
    seed : int
        Fixes the design, the candidates, the model fits and each trial's generator.
    n_continuous : int
        Sobol points of the Real dimensions per value of the discrete ones.
    refine : bool
        Refine the Real dimensions of the chosen candidate with DIRECT.
    say : callable, optional
        Receives one line per trial.
    observed : list of Trial, optional
        Trials measured before (such as the default settings): fitted with
        the rest (those inside the space), never proposed again, and first
        in the result's trials.

    Raises
    ------
    ValueError
        A bad budget or initial design, or every trial failed (the first reason named).
    """
    if budget < 1:
        raise ValueError(f"budget must be at least 1, not {budget}")
    initial = min(budget, max(3, min(10, budget // 4))) if initial is None else initial
    if not 1 <= initial <= budget:
        raise ValueError(f"initial must be from 1 to the budget {budget}, not {initial}")
    start = time.perf_counter()
    generators = _trial_generators(seed, budget)
    candidates = space.candidates(n_continuous=n_continuous, seed=seed)
    fit_state = np.random.RandomState(seed)
    trials: list[Trial] = list(observed or [])
    total = budget + len(trials)
    for point in space.sobol(initial, seed):
        if not measured(space, point[None, :], trials)[0]:
            _evaluate(objective, space.from_unit(point)[0], generators, say, total, trials)
    overhead = []
    model = None
    while len(trials) < total:
        began = time.perf_counter()
        model = _fit(space, trials, fit_state, model)
        point = _next_point(model, space, trials, candidates, refine)
        overhead.append(time.perf_counter() - began)
        if point is None:  # every candidate measured
            break
        _evaluate(objective, space.from_unit(point)[0], generators, say, total, trials)
    _check_some_succeeded(trials)
    model = _fit(space, trials, fit_state, model)
    best, best_value = _best(model, space, trials)
    return TuningResult(
        space=space,
        trials=trials,
        best=dict(best.settings),
        best_value=best_value,
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
    _check_some_succeeded(trials)
    best = max(trials, key=lambda t: t.value)
    return TuningResult(
        space=space,
        trials=trials,
        best=dict(best.settings),
        best_value=best.value,
        seconds=time.perf_counter() - start,
        method="random search",
    )


def evaluate(objective: Objective, settings: dict, rng: np.random.Generator, role: str = "search") -> Trial:
    """One trial: ``objective`` at a copy of ``settings``, timed; failed (value -inf) if it raises.

    A non-finite value fails the trial too. The reason is the exception's
    type and first line (:func:`failure`).
    """
    began = time.perf_counter()
    try:
        out = objective(dict(settings), rng)
        value, details = out if isinstance(out, tuple) else (out, {})
        value = float(value)
        if not np.isfinite(value):
            raise ValueError(f"the objective returned {value}, not a finite number")
    except Exception as error:  # any failure of one trial is that trial's, not the search's
        return Trial(dict(settings), -np.inf, time.perf_counter() - began, {}, failure(error), role)
    return Trial(dict(settings), value, time.perf_counter() - began, dict(details), None, role)


class TrialFailed(Exception):
    """An objective's way to fail its trial with a reason already written (:func:`failure` keeps it)."""


def failure(error: BaseException) -> str:
    """A trial's failure in one line: the exception's type and the first line of its message."""
    if isinstance(error, TrialFailed):
        return str(error)
    lines = str(error).strip().splitlines()
    text = f"{type(error).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    return text if len(text) <= 300 else text[:297] + "..."


def measured(space: Space, points: np.ndarray, trials: list[Trial]) -> np.ndarray:
    """Whether each point of the unit cube (n, d) is a setting already measured by ``trials`` (or nearly).

    Nearly the same setting: Integer and Real values within :data:`NEAR`
    of their range, equal Categorical values.
    """
    known = [t.settings for t in trials if space.contains(t.settings)]
    if not known:
        return np.zeros(len(points), dtype=bool)
    tolerance = np.array([1e-9 if isinstance(d, Categorical) else NEAR for d in space.dimensions])
    snapped = space.to_unit(space.from_unit(points))
    gaps = np.abs(snapped[:, None, :] - space.to_unit(known)[None, :, :])
    return np.any(np.all(gaps < tolerance, axis=2), axis=1)


def _distinct(settings: list[dict]) -> list[dict]:
    """``settings`` without repeats (Real values compared to 4 significant digits)."""

    def key(row):
        return tuple(sorted((k, float(f"{v:.4g}") if isinstance(v, float) else v) for k, v in row.items()))

    seen = {}
    for row in settings:
        seen.setdefault(key(row), row)
    return list(seen.values())


def _check_some_succeeded(trials: list[Trial]) -> None:
    if not any(t.ok for t in trials):
        raise ValueError(f"every one of the {len(trials)} trials failed; the first: {trials[0].failed}")


def _best(model, space: Space, trials: list[Trial]) -> tuple[Trial, float]:
    """The successful trial inside the space of highest posterior mean, and that mean.

    With none inside the space, the successful trial of highest value.
    """
    inside = [t for t in trials if t.ok and space.contains(t.settings)]
    if not inside:
        best = max(trials, key=lambda t: t.value)
        return best, best.value
    means = model.predict(space.to_unit([t.settings for t in inside]))
    i = int(np.argmax(means))
    return inside[i], float(means[i])


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
    """Evaluate the objective at ``settings`` (:func:`evaluate`) and append the trial."""
    trial = evaluate(objective, settings, generators.pop())
    trials.append(trial)
    if say is not None:
        shown = f"{trial.value:.4g}" if trial.ok else f"failed ({trial.failed})"
        say(f"trial {len(trials)}/{budget}: {settings} -> {shown} ({trial.seconds:.3g} s)")


def _fit(space: Space, trials: list[Trial], random_state, previous=None) -> GaussianProcessRegressor:
    """The Gaussian process of the mean objective, fitted to ``trials``; see :func:`without_noise`.

    Only trials inside the space are fitted; a failed trial counts as the
    worst value measured (0 while none succeeded).
    """
    start = None if previous is None else previous.fitted_kernel
    model = surrogate(len(space.dimensions), random_state, start)
    inside = [t for t in trials if space.contains(t.settings)]
    worst = min((t.value for t in inside if t.ok), default=0.0)
    values = [t.value if t.ok else worst for t in inside]
    with warnings.catch_warnings():
        # Length scales or noise at their bounds (a flat or noiseless objective) are expected here.
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(space.to_unit([t.settings for t in inside]), values)
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


def _next_point(
    model, space: Space, trials: list[Trial], candidates: np.ndarray, refine: bool
) -> np.ndarray | None:
    """The point of the unit cube to evaluate next: the candidate of largest expected improvement, refined.

    Candidates already measured are left out (None when every one is); a
    refined point already measured gives way to the candidate.
    """
    fitted = [t.settings for t in trials if space.contains(t.settings)]
    incumbent = float(np.max(model.predict(space.to_unit(fitted))))
    fresh = ~measured(space, candidates, trials)
    if not fresh.any():
        return None
    mean, sd = model.predict(candidates[fresh], return_std=True)
    improvement = expected_improvement(mean, sd, incumbent)
    best = int(np.argmax(improvement))
    point, value = candidates[fresh][best].copy(), improvement[best]
    continuous = space.continuous
    if refine and continuous:

        def negative_improvement(x):
            trial = point.copy()
            trial[continuous] = x
            mean, sd = model.predict(trial[None, :], return_std=True)
            return -expected_improvement(mean, sd, incumbent)[0]

        found = direct(negative_improvement, [(0.0, 1.0)] * len(continuous), maxfun=REFINE_EVALUATIONS)
        refined = point.copy()
        refined[continuous] = found.x
        if -found.fun > value and not measured(space, refined[None, :], trials)[0]:
            point = refined
    return point
