"""Stan's L-BFGS optimisation: the posterior mode, the Hessian there, and the Laplace approximation.

:func:`optimize` runs Stan's ``optimize::lbfgs`` service (with the Jacobian
of the constraining transform by default, so the mode is that of the density
on the unconstrained scale that the samplers see), then computes the Hessian
at the mode by finite differences of Stan gradients
(``finite_diff_hessian_auto``, as Stan's ``laplace_sample`` service does).
The Gaussian N(mode, (-H)^-1) is the Laplace approximation; :meth:`Mode.draws`
samples it, and :func:`laplace_sample` also weighs its draws against the
model (log p - log q, as Stan's ``laplace_sample`` writes them) for the
Pareto k that says how good it is. A run that ran off toward infinity (an
improper posterior: :func:`stanaccel.stan.improper.ran_off`) raises
:class:`RunawayError`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, ClassVar

import numpy as np
from scipy.linalg import solve_triangular

from stanaccel.densities import safe_log_densities
from stanaccel.stan.errors import StanEvaluationError
from stanaccel.stan.improper import ran_off
from stanaccel.stan.model import StanModel
from stanaccel.stan.pathfinder import psis
from stanaccel.stan.services import LbfgsSettings, init_texts, lbfgs_settings, run_threads

ATTEMPTS = 3
"""Starts L-BFGS is given: its line search can stop short of the mode from one start ("failed to
achieve a sufficient decrease") and converge from another, which costs far less than falling back
to NUTS's warm-up."""

POLISH_STEPS = 3
"""Newton steps at most that :func:`polished` takes from an end of L-BFGS toward the mode."""

POLISH_MAX_SDS = 5.0
"""An end of L-BFGS farther than this many sds (Newton decrement) from its quadratic's peak is left where
it is: the quadratic does not describe the density that far out, and a step there could leap anywhere."""


class RunawayError(StanEvaluationError):
    """L-BFGS ran off toward infinity: the log density increases without bound, the posterior is improper."""


@dataclass
class OptimizeSettings(LbfgsSettings):
    """Settings of Stan's L-BFGS optimiser, with CmdStan's defaults."""

    service: ClassVar[str] = "optimize"


@dataclass
class Mode:
    """The mode found by L-BFGS and the Hessian there.

    Attributes
    ----------
    point : ndarray (dim,)
        The mode, unconstrained.
    log_density : float
        The log density there (up to a constant; with the Jacobian if asked).
    gradient : ndarray (dim,)
        The gradient there (near zero at a mode).
    hessian : ndarray (dim, dim)
        The Hessian there, by finite differences of gradients.
    jacobian : bool
        Whether the density included the Jacobian of the constraining transform.
    iterations : int
        L-BFGS iterations.
    seconds : float
        Wall time of the optimisation and the Hessian.
    messages : list of str
        Stan's log messages.
    names : list of str or None
        The model's unconstrained parameter names.
    """

    point: np.ndarray
    log_density: float
    gradient: np.ndarray
    hessian: np.ndarray
    jacobian: bool
    iterations: int
    seconds: float
    messages: list[str]
    names: list[str] | None = None

    def covariance(self) -> np.ndarray:
        """The Laplace approximation's covariance, (-H)^-1.

        Raises
        ------
        ValueError
            The Hessian is not negative definite (no Gaussian fits here).
        """
        problem = self.hessian_problem()
        if problem:
            raise ValueError(f"no Laplace approximation at this mode: {problem}")
        return self._covariance.copy()

    @cached_property
    def _covariance(self) -> np.ndarray:
        """(-H)^-1, inverted once: the warm-up reads it four times (at 1000 parameters, 0.12 s each)."""
        return np.linalg.inv(-self.symmetric_hessian())

    @cached_property
    def curvatures(self) -> np.ndarray:
        """The eigenvalues of -H, ascending, computed once (NaN where H is not finite)."""
        hessian = self.symmetric_hessian()
        if not np.all(np.isfinite(hessian)):
            return np.full(len(self.point), np.nan)
        return np.linalg.eigvalsh(-hessian)

    def symmetric_hessian(self) -> np.ndarray:
        """The Hessian made exactly symmetric (finite differences leave it nearly so)."""
        return 0.5 * (self.hessian + self.hessian.T)

    def condition_number(self) -> float:
        """The condition number of -H (inf when it is not positive definite)."""
        eigenvalues = self.curvatures
        if not np.all(np.isfinite(eigenvalues)) or eigenvalues[0] <= 0:
            return float("inf")
        return float(eigenvalues[-1] / eigenvalues[0])

    def newton_decrement(self) -> float:
        """sqrt(g^T (-H)^-1 g): the distance to the quadratic's peak in the Laplace approximation's sds.

        Near zero at a converged mode; NaN when -H is not positive definite.
        """
        try:
            root = np.linalg.cholesky(-self.symmetric_hessian())
        except np.linalg.LinAlgError:
            return float("nan")
        w = np.linalg.solve(root, self.gradient)
        return float(np.sqrt(w @ w))

    def hessian_problem(self, max_condition: float = 1e10) -> str | None:
        """Why the Hessian gives no sound Gaussian, or None when it does.

        Not finite, not negative definite (its largest eigenvalue given), or
        condition number above ``max_condition``.
        """
        if not np.all(np.isfinite(self.hessian)):
            return "the Hessian has non-finite entries"
        eigenvalues = self.curvatures
        if eigenvalues[0] <= 0:
            return f"the Hessian is not negative definite (largest eigenvalue {-eigenvalues[0]:.3g})"
        condition = eigenvalues[-1] / eigenvalues[0]
        if condition > max_condition:
            return (
                f"the Hessian is badly conditioned (condition number {condition:.3g} > {max_condition:.0e})"
            )
        return None

    def draws(self, n: int, seed: int = 1) -> np.ndarray:
        """``n`` draws (unconstrained) from the Laplace approximation N(mode, (-H)^-1)."""
        rng = np.random.default_rng([seed, 0x1A91])
        return rng.multivariate_normal(self.point, self.covariance(), size=n, method="cholesky")


def optimize(
    model: StanModel,
    *,
    init: Any = None,
    jacobian: bool = True,
    progress: bool = False,
    attempts: int = ATTEMPTS,
    **settings: Any,
) -> Mode:
    """Find the posterior mode by Stan's L-BFGS, and the Hessian there.

    Parameters
    ----------
    model : StanModel
        The posterior.
    init : None, dict or ndarray
        The start: None for Stan's random init, a dict of constrained values,
        or an unconstrained point (dim,).
    jacobian : bool
        Include the Jacobian of the constraining transform: the mode of the
        density on the unconstrained scale (what a Laplace approximation for
        the samplers needs). False gives the maximum a posteriori estimate of
        the constrained parameters, as CmdStan's ``optimize`` does by default.
    progress : bool
        Show a bar (L-BFGS iterations) on a terminal.
    attempts : int
        Starts to try: after a failure, Stan's random init from the next seed
        (radius 2). Where each fails, a last one from the unconstrained origin,
        as CmdStan's ``init=0`` (on posteriordb's ``arma11`` every random start
        with |theta| > 1 lets the moving-average recursion overflow, and L-BFGS's
        line search fails there; from the origin it finds the mode).
    **settings
        Fields of :class:`OptimizeSettings`.

    Returns
    -------
    Mode

    Raises
    ------
    RunawayError
        It ran off toward infinity (an improper posterior): the message
        names the parameter.
    StanEvaluationError
        The optimisation failed from each start (Stan's messages);
        KeyboardInterrupt if stopped.
    """
    config = OptimizeSettings(**settings)
    config.check()
    starts = [init_texts(model, init, 1)[0]] + ["{}"] * (attempts - 1) + [None]  # None: the origin
    failures = []
    for attempt, text in enumerate(starts):
        if text is None:
            text = init_texts(model, np.zeros(model.dim), 1)[0]
        elif attempt:  # another start: Stan's random init from the next seed
            config = replace(config, seed=(config.seed + 1) % 2**32, init_radius=max(config.init_radius, 2.0))
        run = model.program.module.Optimization(model._model, _settings(config, text, jacobian))
        if run_threads([run], "L-BFGS", config.iterations, progress):
            raise KeyboardInterrupt
        r = run.result()
        if r["interrupted"]:
            raise KeyboardInterrupt
        _check_ends(model, [r], "L-BFGS")
        if not r["error"]:
            return _mode(model, r, jacobian)
        where = "the origin" if attempt == len(starts) - 1 else f"start {attempt + 1}"
        failures.append(f"{where}: {r['error']}\n" + "\n".join(r["messages"][-5:]))
    raise StanEvaluationError(
        f"L-BFGS optimisation failed from {len(starts)} starts, the last the origin:\n" + "\n".join(failures)
    )


def modes_from_starts(
    model: StanModel,
    starts: int,
    *,
    inits: np.ndarray | None = None,
    jacobian: bool = True,
    progress: bool = False,
    **settings: Any,
) -> list[Mode]:
    """L-BFGS from ``starts`` starts at once (a thread each): the modes it ended at.

    The starts are ``inits`` (unconstrained points, one per run), else Stan's
    random inits. Start i uses seed ``seed + i``. The runs that failed are left out (an
    empty list: every one failed); the caller compares the modes (several
    different ones: the posterior has several). A run that ran off toward
    infinity, failed or not, raises :class:`RunawayError`.
    """
    config = OptimizeSettings(**settings)
    config.check()
    configs = [replace(config, seed=(config.seed + i) % 2**32) for i in range(starts)]
    texts = ["{}"] * starts if inits is None else init_texts(model, inits, starts)
    runs = [
        model.program.module.Optimization(model._model, _settings(c, text, jacobian))
        for c, text in zip(configs, texts, strict=True)
    ]
    if run_threads(runs, "L-BFGS", config.iterations, progress):
        raise KeyboardInterrupt
    results = [run.result() for run in runs]
    if any(r["interrupted"] for r in results):
        raise KeyboardInterrupt
    _check_ends(model, results, f"L-BFGS from {starts} starts")
    return [polished(model, _mode(model, r, jacobian)) for r in results if not r["error"]]


def polished(model: StanModel, mode: Mode, steps: int = POLISH_STEPS) -> Mode:
    """``mode`` moved to its quadratic's peak by Newton steps with its Hessian, each kept where it raises
    the log density.

    L-BFGS stops where its progress per iteration falls below tolerances relative to the log density's
    size: on a posterior of 10^5 observations (a log density of -10^5) whose curvatures differ by 10^4, it
    stopped 0.2 to 1.9 sds (of the Laplace approximation) short of the mode, a different point from each
    start, so that ends of one mode looked like several (up to 3 sds apart). One Newton step brings them
    together to 10^-3 sds, at the cost of a gradient and no further L-BFGS iteration. The Hessian is held
    (computed at L-BFGS's end): where L-BFGS stops that short, on big data, the posterior is near
    Gaussian and its Hessian hardly changes over a few sds. Left as it is where -H is not positive
    definite or the end is more than :data:`POLISH_MAX_SDS` from the quadratic's peak.
    """
    try:
        root = np.linalg.cholesky(-mode.symmetric_hessian())
    except np.linalg.LinAlgError:
        return mode
    try:
        point = mode.point
        log_density, gradient = model.log_density_gradient(point, jacobian=mode.jacobian)
        gradient = np.array(gradient, dtype=float)
        for _ in range(steps):
            w = solve_triangular(root, gradient, lower=True)
            decrement = float(np.sqrt(w @ w))  # the step's length in sds
            if not decrement <= POLISH_MAX_SDS or decrement < 1e-6:
                break
            step = point + solve_triangular(root, w, lower=True, trans="T")
            value, step_gradient = model.log_density_gradient(step, jacobian=mode.jacobian)
            if not np.isfinite(value) or value < log_density or not np.all(np.isfinite(step_gradient)):
                break
            point, log_density, gradient = step, float(value), np.array(step_gradient, dtype=float)
    except StanEvaluationError:  # undefined at the step: keep the last point
        pass
    if point is mode.point:
        return mode
    return replace(mode, point=point, log_density=log_density, gradient=gradient)


def _check_ends(model: StanModel, results: list[dict], runs: str) -> None:
    """Raise :class:`RunawayError` where a run (failed or not) stopped beyond
    :data:`~stanaccel.stan.improper.RUNAWAY`."""
    ends = [end for end in (_end(model, r) for r in results) if end is not None]
    problem = ran_off(model, np.array(ends), runs) if ends else None
    if problem:
        raise RunawayError(problem)


def _end(model: StanModel, r: dict) -> np.ndarray | None:
    """Where a run stopped, unconstrained: its mode, or a failed run's last point (inf where that
    overflowed); None for a run that never started (no point defined)."""
    if not r["error"]:
        return np.ravel(r["mode"])
    if not r["rows"]:
        return None
    last = np.asarray(r["rows"][-1][1 : 1 + model.param_num()], dtype=float)  # after lp__
    try:
        end = np.asarray(model.param_unconstrain(last), dtype=float)
    except (StanEvaluationError, TypeError, ValueError):  # a value the transform cannot take back
        return np.full(model.dim, np.inf)
    return np.where(np.isfinite(end), end, np.inf)


def _mode(model: StanModel, r: dict, jacobian: bool) -> Mode:
    """The Mode of a finished ``Optimization`` run's result."""
    return Mode(
        point=np.ravel(r["mode"]),
        log_density=float(r["log_density"]),
        gradient=np.ravel(r["gradient"]),
        hessian=np.atleast_2d(r["hessian"]),
        jacobian=jacobian,
        iterations=int(r["iterations"]),
        seconds=float(r["seconds"]),
        messages=list(r["messages"]),
        names=model.param_unc_names(),
    )


@dataclass
class LaplaceDraws:
    """Draws of the Laplace approximation, weighed against the model.

    Attributes
    ----------
    draws : ndarray (n, dim)
        Unconstrained draws of N(mode, (-H)^-1).
    log_density : ndarray (n,)
        The model's log density there (with the mode's Jacobian choice).
    pareto_k : float
        The Pareto k of the importance weights p / q (of the draws where p
        is defined): above 0.7 the Gaussian misses the posterior's tails (it
        is too narrow somewhere); NaN where the weights are all equal (the
        Gaussian is the posterior: :func:`~stanaccel.stan.pathfinder.psis`).
    """

    draws: np.ndarray
    log_density: np.ndarray
    pareto_k: float

    @property
    def undefined(self) -> float:
        """The share of the draws where the model's log density is undefined (NaN, infinite, an error)."""
        return float(np.mean(~np.isfinite(self.log_density)))


def laplace_sample(model: StanModel, mode: Mode, n: int = 1000, seed: int = 1) -> LaplaceDraws:
    """``n`` draws of the Laplace approximation at ``mode``, their log densities and Pareto k.

    Raises
    ------
    ValueError
        The Hessian is not negative definite (no Gaussian fits at the mode).
    """
    draws = mode.draws(n, seed)  # raises where -H is not positive definite
    log_p = safe_log_densities(_FullDensity(model, mode.jacobian), draws)  # on every core: O(N) each
    deviation = draws - mode.point
    log_q = -0.5 * np.einsum("ij,ij->i", deviation @ -mode.symmetric_hessian(), deviation)  # precision -H
    finite = np.isfinite(log_p)
    pareto_k = psis(log_p[finite] - log_q[finite])[1] if finite.sum() > 1 else float("inf")
    return LaplaceDraws(draws, log_p, pareto_k)


class _FullDensity:
    """``model``'s log density with its constants, -inf where Stan cannot evaluate it (a batch's density)."""

    thread_safe = True

    def __init__(self, model: StanModel, jacobian: bool):
        self.model, self.jacobian = model, jacobian

    def log_density(self, point: np.ndarray) -> float:
        try:
            return self.model.log_density(point, propto=False, jacobian=self.jacobian)
        except StanEvaluationError:
            return -np.inf


def _settings(config: OptimizeSettings, init: str, jacobian: bool) -> dict:
    """The settings of the service call (``Optimization``)."""
    return {**lbfgs_settings(config, init), "jacobian": bool(jacobian), "chain": 1}
