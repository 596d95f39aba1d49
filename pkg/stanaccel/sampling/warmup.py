"""The warm-up and what it adapts: the step size, metric, start points and draws the kernels start from.

:func:`warm_up` runs Stan's NUTS warm-up, or takes an earlier one
(:func:`read_warmup`: a ``WarmupState``, a netCDF file written by
stanaccel, CmdStan CSV files) and, for a method that needs draws, a short
NUTS pilot from it; it returns the :class:`Adaptation`. A borrowed
warm-up's recorded time is charged to the run (:func:`charge_borrowed`);
one made on other data or another version of the program, or recording
neither, is adapted again by Stan's NUTS from its points first
(:func:`readapted`).

A method whose table entry accepts it (``cheap_warmup``) may instead ask
(``warmup = "pathfinder"`` or ``"laplace"``) for a cheap warm-up
(:func:`cheap_warm_up`): a Gaussian fitted by Stan's Pathfinder, or at the
mode found by Stan's L-BFGS with the Hessian there. Its covariance's
diagonal is the inverse metric (as NUTS's warm-up adapts a diagonal one),
its draws are the draws (pCN's reference Gaussian, autoencoder training),
and distinct draws are the chains' starts. A method that moves with an HMC
step size on the posterior then has one adapted by Stan's NUTS with that
metric held fixed (:data:`STEP_ITERATIONS` iterations, the first phase of
NUTS's own warm-up); one whose HMC moves on approximations (``dc``,
``tt-approx``) has it tuned there instead, after the approximations are
built (:attr:`~stanaccel.sampling.methods.MethodSpec.inner_step`), without
evaluating pi. Its diagnostics decide whether the Gaussian is trusted: the Pareto
k of its draws' importance weights above :data:`PARETO_K_MAX` (Pathfinder's,
or the Laplace draws', weighed as Stan's ``laplace_sample`` does), a
Hessian that is not negative definite or is worse conditioned than
:data:`CONDITION_MAX`, or L-BFGS (or Pathfinder's paths) from
:data:`MODE_STARTS` starts ending at different modes, the log density
undefined at more than :data:`UNDEFINED_MAX` of its draws, or an improper
posterior (:mod:`stanaccel.stan.improper`: L-BFGS or Pathfinder running
off to infinity, a direction in which the log density does not fall), and
NUTS's warm-up runs instead, with a :class:`WarmupWarning` naming the
diagnostic and its value. Importance weights that are all equal (an exact
Gaussian) have no Pareto k (NaN): the Gaussian is kept. All of it is
charged to the sampler (``charged["warmup"]``; a cheap warm-up that was not
used, as ``"warmup (<kind>, not used)"``).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from stanaccel.approx.taylor import central_hessian
from stanaccel.densities import safe_log_density
from stanaccel.sampling.config import APPROX_WARMUP, DEFAULT_NUTS_WARMUP, NUTS_WARMUP, method_record
from stanaccel.stan import StanModel
from stanaccel.stan.errors import StanEvaluationError
from stanaccel.stan.improper import FLAT_LENGTH, FLAT_SDS, flat_direction, ran_off
from stanaccel.stan.nuts import NutsFit, WarmupState, check_borrowed, sample_nuts
from stanaccel.stan.optimize import RunawayError, laplace_sample, modes_from_starts, optimize
from stanaccel.stan.pathfinder import pareto_k_text, pathfinder
from stanaccel.stan.provenance import Provenance

PARETO_K_MAX = 0.7
"""A cheap warm-up's Gaussian is used when the Pareto k of its importance weights is at most this: above it
the weights' tail is too heavy for importance sampling to be reliable (Vehtari, Simpson, Gelman, Yao and
Gabry, "Pareto smoothed importance sampling", JMLR 25, 2024; Stan's Pathfinder warns at the same value)."""

CONDITION_MAX = 1e10
"""The Laplace Gaussian is used when the negative Hessian's condition number is at most this: beyond it
the Hessian's finite differences (relative error about 1e-6 or worse) leave the smallest curvature
unresolved, so the covariance in that direction is noise."""

MODE_STARTS = 4
"""L-BFGS runs in the Laplace warm-up and Pathfinder's paths in the Pathfinder one, at once, from as many
:func:`mirrored_starts`. Where they end at different modes the
posterior has several: one Gaussian covers one of them (Pathfinder's resampling weighs the paths'
Gaussians, but its Pareto k cannot tell that a mode it covers is one of several), and chains started
there would not show the others (chains warmed up by NUTS from random starts do, by R-hat), so NUTS's
warm-up runs (:func:`modes_apart`)."""

MODE_SEPARATION = 1.0
"""Two ends of runs from different starts are different modes when a coordinate differs by more than this
many sds of the Gaussian used: Laplace's at the highest mode, or that of Pathfinder's path with the best
ELBO (one mode's ends of L-BFGS differ by far less, and its paths' Gaussians' means by a few hundredths
of an sd on the regression of the tests)."""

MODE_BARRIER = 2.0
"""... and where the log density along the segment between them falls more than this many log units below
the lower end's (:func:`barrier`). A unimodal posterior whose log density is concave (a regression on
big data) never dips there, however far apart L-BFGS's tolerance leaves the ends; two modes NUTS cannot
move between are parted by a deep valley (18 log units between N(-3, 0.5) and N(3, 0.5)); a dip of a log
unit or two NUTS crosses, its energy varying by about that from one iteration to the next."""

BARRIER_POINTS = 9
"""Points on the segment between two ends at which :func:`barrier` evaluates the log density."""

STEP_ITERATIONS = 100
"""Iterations of Stan's NUTS adapting only the step size, with the cheap warm-up's metric held fixed,
for a method that moves with an HMC step size (charged as part of the warm-up)."""

DENSE_MAX_DIM = 200
"""Up to this many parameters ``auto``'s NUTS after a cheap warm-up moves with the dense metric of its
Gaussian (the Laplace or Pathfinder covariance, :attr:`Adaptation.dense`): correlations cost it no small
steps. A dense metric costs dim^2 per leapfrog step, which beyond a few hundred parameters outweighs what
it saves. The other kernels keep the covariance's diagonal: measured on the big-data logistic regression
(``benchmarks/big_data.py``, N = 10^5), HMC with a fixed number of steps made 1325 ESS (min of bulk and
tail) with the dense metric against 2247 with the diagonal, and DC's inner HMC 1774 against 2331."""

GAUSSIAN_DRAWS = 1000
"""Draws kept from the cheap warm-up's Gaussian (Pathfinder's PSIS draws, Laplace draws)."""


class WarmupWarning(UserWarning):
    """A cheap warm-up's Gaussian was not good enough: NUTS's warm-up ran instead."""


@dataclass
class Adaptation:
    """The warm-up's adapted values: what a NUTS warm-up (or a Python target's own) gives the kernels.

    Attributes
    ----------
    step_size : float or None
        The adapted step size (median over chains); None when nothing was adapted.
    inv_metric : ndarray (dim,) or (dim, dim)
        The adapted inverse metric (mean over chains).
    starts : ndarray (chains, dim)
        Where the warm-up's chains ended: the kernels' start points.
    draws : ndarray (n, dim) or None
        Warm-up draws after adaptation settled (for reference Gaussians and autoencoders).
    seconds : float
        The warm-up's time, charged to the sampler.
    laplace : (mean, eigenvalues, eigenvectors), optional
        A Laplace approximation N(mean, (I + V diag(eigenvalues) V^T)^-1) in
        whitened coordinates (the PDE posterior's MAP and Gauss-Newton
        Hessian): the reference of ``h-pcn`` and of the ``h-pcn`` inner kernel.
    whitened : bool
        The prior is N(0, I) in these coordinates (the PDE posterior): pCN's
        reference is that prior unless the user sets ``prior_sd``.
    warmup_state : WarmupState, optional
        The NUTS warm-up's per-chain step sizes and inverse metrics, saved
        with a ``sample`` result (its ``adaptation``) so that its file can be
        a later warm-up source.
    """

    step_size: float | None
    inv_metric: np.ndarray
    starts: np.ndarray
    draws: np.ndarray | None
    seconds: float
    laplace: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    whitened: bool = False
    warmup_state: WarmupState | None = None
    warmup: str = NUTS_WARMUP
    """The warm-up that made it: "nuts", "pathfinder" or "laplace"."""
    report: dict[str, Any] = field(default_factory=dict)
    """What the warm-up reports: its kind, diagnostics (Pareto k, condition number), a fallback."""
    dense: np.ndarray | None = None
    """A cheap warm-up's Gaussian's full covariance (Laplace, Pathfinder): a dense metric for NUTS."""

    @property
    def covariance(self) -> np.ndarray:
        metric = np.asarray(self.inv_metric)
        return np.diag(metric) if metric.ndim == 1 else metric

    def settings(self, dim: int) -> dict[str, Any]:
        """Tuned values of the configuration keys (used where the user set none).

        Without an adapted step size (``step_size`` None: no warm-up tuned the
        kernels) the step size and MH scale are left to their defaults.
        """
        from stanaccel.latent import default_latent_dim

        tuned = {"latent_dim": default_latent_dim(dim)}
        if self.whitened:
            tuned["prior_sd"] = 1.0
        if self.step_size is not None:
            tuned["step_size"] = self.step_size
        if self.step_size is not None or self.warmup != NUTS_WARMUP:  # the metric is the posterior's scale
            tuned["scale"] = 2.38 / np.sqrt(dim)
        return tuned

    def gaussian(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean and covariance of the warm-up draws (a pCN reference), regularised to be positive definite."""
        if self.draws is None or len(self.draws) < 2:
            raise ValueError("a Gaussian reference needs warm-up draws")
        mean = self.draws.mean(axis=0)
        cov = np.atleast_2d(np.cov(self.draws, rowvar=False))
        return mean, cov + 1e-9 * np.trace(cov) / len(cov) * np.eye(len(cov))


def warmup_share(fit: NutsFit) -> float:
    """The warm-up's share of a NUTS run's time, estimated by its share of the gradient evaluations."""
    return float(fit.warmup_sample_stats["n_steps"].sum() / max(fit.gradient_evaluations, 1))


BORROWED = "warmup (borrowed)"
"""The ``charged_seconds`` entry of a warm-up taken from an earlier run (``warmup_from``)."""


def charge_borrowed(state: WarmupState, charged: dict[str, float], say) -> None:
    """Charge a borrowed warm-up's recorded seconds to this run, or say that it records none."""
    if state.seconds is None:
        say(
            "the warm-up borrowed (warmup_from) records no time (CmdStan CSV files, a netCDF file of an "
            "older stanaccel, or a run that borrowed its own warm-up from one of those), so it is not "
            "charged: ESS per second leaves it out"
        )
    else:
        charged[BORROWED] = float(state.seconds)


def read_warmup(source: WarmupState | str | Path | list, model: StanModel) -> WarmupState:
    """A warm-up from a WarmupState, a stanaccel netCDF file, or CmdStan CSV files (or their folder)."""
    if isinstance(source, WarmupState):
        return source
    paths = [Path(p) for p in (source if isinstance(source, list | tuple) else [source])]
    if all(p.suffix == ".csv" for p in paths) or (len(paths) == 1 and paths[0].is_dir()):
        from stanaccel.stan.cmdstan import read_warmup as read_cmdstan

        return read_cmdstan(paths, model)
    if len(paths) != 1:
        raise ValueError(f"a warm-up is one netCDF file or CmdStan CSV files, not {source!r}")
    return WarmupState.from_netcdf(paths[0])


def warm_up(
    model, config, seeds, warmup_from, progress, say, charged, checkpoint=None, approximation=None
) -> Adaptation:
    """The warm-up ``config`` asks for (or an earlier one) and what it adapts; its time goes in ``charged``.

    A cheap warm-up whose diagnostics reject its Gaussian is followed by
    Stan's NUTS warm-up (1000 iterations); the Adaptation's ``report`` says so.
    ``approximation``: the label and Stan model that ``warmup = "nuts-approx"`` warms up on.
    """
    report: dict[str, Any] = {}
    if config.warmup_kind == APPROX_WARMUP and warmup_from is None:
        adaptation = approximation_warm_up(approximation, config, seeds, progress, say, charged, checkpoint)
        # The chains that follow run on this model: its file is a warm-up source for this program and data.
        adaptation.warmup_state = replace(adaptation.warmup_state, provenance=Provenance.of(model))
        return adaptation
    if config.cheap_warmup and warmup_from is None:
        adaptation, report = cheap_warm_up(model, config, seeds, progress, say, charged)
        if adaptation is not None:
            return adaptation
        config = config.replace(warmup=DEFAULT_NUTS_WARMUP)
    adaptation = nuts_warm_up(model, config, seeds, warmup_from, progress, say, charged, checkpoint)
    adaptation.report = report
    return adaptation


def cheap_warm_up(
    model, config, seeds, progress, say, charged, instead: str | Callable[[dict], str] | None = None
) -> tuple[Adaptation | None, dict[str, Any]]:
    """A Gaussian by Pathfinder or Laplace, and the Adaptation from it; None when its diagnostics reject it.

    Returns the Adaptation (None: NUTS's warm-up must run) and the report
    (the warm-up asked for, its diagnostics, its seconds, and the one used).
    ``instead``: what runs if it is rejected, for the warning (default
    Stan's NUTS warm-up), or a function of the report that says it.
    """
    kind = config.warmup_kind
    start = time.perf_counter()
    report: dict[str, Any] = {"warmup": kind}
    try:
        fit = _gaussian(model, kind, seeds["warmup"], progress, say, report)
    except RunawayError as error:  # an improper posterior: the message says which parameter, what to do
        fit = str(error)
    except StanEvaluationError as error:  # every path failed, or L-BFGS did
        first = " ".join(line.strip() for line in str(error).splitlines()[:2])  # L-BFGS: the first start's
        fit = f"{'Pathfinder' if kind == 'pathfinder' else 'L-BFGS'} failed ({first})"
    seconds = time.perf_counter() - start
    report["seconds"] = seconds
    if isinstance(fit, str):
        charged[f"warmup ({kind}, not used)"] = seconds
        report["used"] = "nuts"
        report["fallback"] = fit
        instead = instead(report) if callable(instead) else instead
        instead = instead or f"Stan's NUTS warm-up runs instead ({DEFAULT_NUTS_WARMUP} iterations)"
        message = (
            f"warmup = {kind!r}: {fit}, so its Gaussian is not trusted; {instead}; the {seconds:.1f} s spent "
            "are charged"
        )
        warnings.warn(message, WarmupWarning, stacklevel=2)  # the command line shows it: not said as well
        return None, report
    draws, covariance = fit
    report["used"] = kind
    inv_metric = np.diag(covariance).copy()
    starts = _distinct(draws, config.chains, seeds["warmup"])
    step_size = None
    # Without a step (mh, pcn, imh) the metric and starts are still kept: the run's file is a warm-up source.
    state = WarmupState(np.full(config.chains, np.nan), np.repeat(inv_metric[None], config.chains, axis=0),
                        "diag", starts, warmup=kind, provenance=Provenance.of(model))  # fmt: skip
    spec = method_record(config.method)
    if spec.warmup_adapts_step(config) and "step_size" not in config.user_keys():
        say(f"step size: Stan's NUTS, {STEP_ITERATIONS} iterations adapting only it, the metric fixed")
        state = adapt_step(model, state, seeds["warmup"], progress)
        starts = state.positions
        step_size = float(np.median(state.step_size))
        report["step_size"] = step_size
    seconds = time.perf_counter() - start
    report["seconds"] = seconds
    charged["warmup"] = seconds
    state.seconds = seconds
    return (
        Adaptation(
            step_size, inv_metric, starts, draws, sum(charged.values()), warmup_state=state, warmup=kind,
            report=report, dense=np.asarray(covariance) if np.ndim(covariance) == 2 else None,
        ),
        report,
    )  # fmt: skip


def step_size_fit(model, starts, inv_metric, iterations: int, seed: int, progress: bool, step_size=None):
    """Stan's NUTS adapting only its step size for ``iterations`` from ``starts``, the metric held fixed.

    One chain per start; ``inv_metric`` (dim,) is a diagonal metric, (dim, dim) a dense one.
    """
    return sample_nuts(
        model,
        chains=len(starts),
        warmup=iterations,
        draws=0,
        inits=starts,
        inv_metric=inv_metric,
        metric="diag" if np.ndim(inv_metric) == 1 else "dense",
        init_buffer=iterations,
        term_buffer=0,
        window=0,
        seed=seed,
        progress=progress,
        **({} if step_size is None else {"step_size": step_size}),
    )


def adapt_step(model: StanModel, state: WarmupState, seed: int, progress: bool) -> WarmupState:
    """``state`` with step sizes adapted by Stan's NUTS (:data:`STEP_ITERATIONS` iterations per chain,
    from its points, its metric, diagonal or dense, held fixed) and each chain's point after them.

    Raises
    ------
    KeyboardInterrupt
        Stopped by Ctrl-C (the message says where).
    """
    inv_metric = np.mean(np.asarray(state.inv_metric), axis=0)
    fit = step_size_fit(model, np.asarray(state.positions), inv_metric, STEP_ITERATIONS, seed, progress)
    if fit.interrupted:
        raise KeyboardInterrupt("stopped while Stan's NUTS adapted the step size (the warm-up)")
    steps = np.array([averaged_step(a) for a in fit.warmup_sample_stats["acceptance_rate"]])
    chains = len(steps)
    metric = "diag" if inv_metric.ndim == 1 else "dense"
    return WarmupState(steps, np.repeat(inv_metric[None], chains, axis=0), metric, fit.last_unconstrained(),
                       state.seconds, state.warmup, state.provenance)  # fmt: skip


def averaged_step(acceptance: np.ndarray, initial: float = 1.0, delta: float = 0.8) -> float:
    """The step size Stan's dual averaging ends a NUTS warm-up with, replayed from its acceptance statistics.

    Stan's ``stepsize_adaptation`` (Hoffman and Gelman 2014, with Stan's
    gamma 0.05, kappa 0.75, t0 10 and mu = log(10 x the initial step)):
    s_t = (1 - 1/(t + t0)) s_{t-1} + (delta - a_t) / (t + t0), x_t = mu -
    sqrt(t) s_t / gamma, x_bar_t = (1 - t^-kappa) x_bar_{t-1} + t^-kappa x_t,
    and the warm-up ends with exp(x_bar). It is replayed here because Stan's
    windowed adaptation cannot adapt the step alone: with the whole run one
    initial buffer, the one metric window ends at its last iteration,
    replacing the metric with an estimate from no draws and restarting the
    averaging (Stan's own final step would then be 1).
    """
    gamma, kappa, t0 = 0.05, 0.75, 10.0
    mu, s_bar, x_bar = np.log(10 * initial), 0.0, 0.0
    for t, a in enumerate(np.minimum(np.asarray(acceptance, dtype=float), 1.0), start=1):
        s_bar += (delta - a - s_bar) / (t + t0)
        x = mu - np.sqrt(t) * s_bar / gamma
        x_bar += (x - x_bar) * t**-kappa
    return float(np.exp(x_bar))


def warmup_covariance(draws: np.ndarray) -> np.ndarray:
    """The dense metric (an inverse metric) Stan's windowed adaptation estimates from warm-up ``draws``.

    ``draws`` (n, dim) are unconstrained. Stan's ``covar_adaptation``
    regularises the sample covariance toward a small multiple of the
    identity: n / (n + 5) Sigma + 10^-3 x 5 / (n + 5) I, so that a short
    window cannot give a singular metric.
    """
    draws = np.asarray(draws, dtype=float)
    n, dim = draws.shape
    covariance = np.atleast_2d(np.cov(draws, rowvar=False))
    return n / (n + 5.0) * covariance + 1e-3 * 5.0 / (n + 5.0) * np.eye(dim)


def _gaussian(model, kind, seed, progress, say, report) -> tuple[np.ndarray, np.ndarray] | str:
    """The cheap warm-up's (draws, covariance), or why its Gaussian is not trusted; fills ``report``.

    The draws are those where the model's log density is defined (the chains start at some of them).
    """
    name = model.name.removesuffix("_model")
    if kind == "pathfinder":
        say(f"Stan's Pathfinder on {name} (the warm-up)")
        starts = mirrored_starts(model, MODE_STARTS, seed)
        fit = pathfinder(model, inits=starts, seed=seed, paths=MODE_STARTS, psis_draws=GAUSSIAN_DRAWS,
                         progress=progress)  # fmt: skip
        if fit.interrupted:
            raise KeyboardInterrupt("stopped during Stan's Pathfinder (the warm-up)")
        report.update(pareto_k=fit.pareto_k, gradient_evaluations=fit.gradient_evaluations,
                      paths=len(fit.path_sizes), undefined=fit.undefined)  # fmt: skip
        paths = fit.paths()
        best = int(np.argmax(fit.path_elbos))
        runs, ends = f"Pathfinder's {len(paths)} paths", [p.mean(axis=0) for p in paths]
        problem = (
            ran_off(model, ends, runs)
            or _undefined("Pathfinder's", fit.undefined)
            or _flat(model, ends[best], None, "the mean of Pathfinder's best path")
        )
        if problem:
            return problem
        if fit.pareto_k > PARETO_K_MAX:
            return f"Pathfinder's Pareto k is {fit.pareto_k:.2f}, above {PARETO_K_MAX}"
        # a good fit of one mode of several has a good Pareto k too
        apart = modes_apart(model, runs, "Pathfinder", ends, best, paths[best].std(axis=0), report)
        if apart:
            return apart
        say(f"Pathfinder: Pareto k {pareto_k_text(fit.pareto_k)}, {fit.gradient_evaluations} log density "
            "evaluations")  # fmt: skip
        return fit.draws, fit.gaussian()[1]
    say(f"Laplace approximation of {name} (the warm-up): the mode by Stan's L-BFGS, the Hessian there")
    starts = mirrored_starts(model, MODE_STARTS, seed)  # on both sides of 0: two modes there are both met
    modes = modes_from_starts(model, MODE_STARTS, inits=starts, seed=seed, jacobian=True, progress=progress)
    if not modes:  # every start failed: retries from further starts, or the error
        modes = [optimize(model, seed=seed + MODE_STARTS, jacobian=True, progress=progress)]
    best = int(np.argmax([m.log_density for m in modes]))
    mode = modes[best]
    report.update(condition_number=mode.condition_number(), iterations=mode.iterations, lbfgs_runs=len(modes))
    problem = mode.hessian_problem(CONDITION_MAX)
    if problem is None:
        problem = modes_apart(model, f"L-BFGS from {len(modes)} starts", "Laplace", [m.point for m in modes],
                              best, np.sqrt(np.diag(mode.covariance())), report)  # fmt: skip
    if problem:  # a singular Hessian, or "modes" apart along a flat ridge: an improper posterior?
        flat = _flat(model, mode.point, mode.hessian, "the mode")
        if flat:  # the ends are points along it, not modes
            report.pop("mode_points", None), report.pop("mode_runs", None)
        return flat or problem
    laplace = laplace_sample(model, mode, GAUSSIAN_DRAWS, seed=seed)
    report.update(pareto_k=laplace.pareto_k, undefined=laplace.undefined)
    problem = _undefined("the Laplace approximation's", laplace.undefined)
    if problem:
        return problem
    if laplace.pareto_k > PARETO_K_MAX:
        return f"the Laplace approximation's Pareto k is {laplace.pareto_k:.2f}, above {PARETO_K_MAX}"
    say(f"Laplace: mode found in {mode.iterations} L-BFGS iterations, the Hessian's condition number "
        f"{report['condition_number']:.3g}, Pareto k {pareto_k_text(laplace.pareto_k)}")  # fmt: skip
    return laplace.draws[np.isfinite(laplace.log_density)], mode.covariance()


UNDEFINED_MAX = 0.01
"""A cheap warm-up's Gaussian is used when the model's log density is undefined (NaN, infinite, a Stan
error or reject) at no more than this share of its draws. Beyond it the Gaussian spreads where the
posterior does not exist: the program leaves part of the space undefined (a sqrt or log of a parameter
that may go negative, with no bound declared), and chains started there would fail. (A share weighs
nothing in the Pareto k, which sees only the draws where the density is defined.)"""


def _undefined(whose: str, share: float) -> str | None:
    """Why a Gaussian with ``share`` of its draws where the density is undefined is not trusted, or None."""
    if share <= UNDEFINED_MAX:
        return None
    return (
        f"the log density is undefined (NaN, infinite, or a Stan error) at {share:.0%} of {whose} draws, "
        f"above {UNDEFINED_MAX:.0%}: the Gaussian spreads where the program's density is not defined (a "
        "parameter whose declaration lacks the bounds its use needs, such as <lower=0> on one under a "
        "sqrt or log)"
    )


FLAT_MAX_DIM = 1000
"""Pathfinder's warm-up looks for a flat direction (:func:`_flat`) up to this many parameters: it needs
the Hessian at its mean, 2 dim gradients by finite differences (Laplace's mode has its own)."""


def _flat(model, point: np.ndarray, hessian: np.ndarray | None, where: str) -> str | None:
    """:func:`~stanaccel.stan.improper.flat_direction` from ``point`` along the weakest axes of the Hessian
    there (by finite differences of gradients where ``hessian`` is None), each
    :data:`~stanaccel.stan.improper.FLAT_SDS` of its own sds out, at most
    :data:`~stanaccel.stan.improper.FLAT_LENGTH` (a flat axis has no sd of its own). None where it cannot
    look (the gradient undefined nearby, more than :data:`FLAT_MAX_DIM` parameters)."""
    if hessian is None:
        if model.dim > FLAT_MAX_DIM:
            return None
        try:
            hessian = central_hessian(lambda x: model.log_density_gradient(x)[1], point)
        except ArithmeticError:
            return None
    curvatures, axes = np.linalg.eigh(-0.5 * (hessian + hessian.T))  # the weakest first
    if not np.all(np.isfinite(curvatures)):
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        sds = np.where(curvatures > 0, 1 / np.sqrt(curvatures), np.inf)
    return flat_direction(model, point, axes.T, np.minimum(FLAT_SDS * sds, FLAT_LENGTH), where)


INIT_RADIUS = 2.0
"""Stan's random inits are uniform in (-this, this) on the unconstrained scale (CmdStan's ``init=2``)."""


def mirrored_starts(model, n: int, seed: int) -> np.ndarray | None:
    """``n`` start points (unconstrained, (n, dim)) in mirrored pairs x and -x, each x drawn as Stan's
    random inits are (uniform in +-:data:`INIT_RADIUS`).

    Every coordinate starts on both sides of 0, where ``n`` of Stan's random inits all fall on one side
    one time in 2^(n - 1) (on two equal modes at b = -3 and 3 they did so at the command line's seed).
    A pair with an undefined density at either point is drawn again (as Stan tries up to 100 inits).
    Where no ``n`` pairs were found in ``100 n`` tries (a density undefined for a parameter below 0, whose
    mirror image is then never defined), the points drawn whose density is defined fill in, unpaired;
    None when there are not ``n`` of those either (Stan's own random inits then).
    """
    rng = np.random.default_rng([seed, 0x3A1F])
    starts: list[np.ndarray] = []
    unpaired: list[np.ndarray] = []
    for _ in range(100 * n):
        x = rng.uniform(-INIT_RADIUS, INIT_RADIUS, model.dim)
        defined = [p for p in (x, -x) if np.isfinite(safe_log_density(model, p))]
        if len(defined) == 2:
            starts += defined
        else:
            unpaired += defined
        if len(starts) >= n:
            return np.array(starts[:n])
    starts += unpaired
    return np.array(starts[:n]) if len(starts) >= n else None


def modes_apart(
    model, runs: str, gaussian: str, ends, best: int, sds: np.ndarray, report: dict
) -> str | None:
    """Why the cheap warm-up's runs from dispersed starts say that the posterior has several modes, or None.

    Two ends are different modes where a coordinate differs by more than :data:`MODE_SEPARATION` sds and
    the log density dips between them (:func:`barrier` above :data:`MODE_BARRIER`).

    Parameters
    ----------
    model : StanModel
        The posterior, whose log density (with the Jacobian) is evaluated between the ends.
    runs : str
        The runs, for the message ("L-BFGS from 4 starts", "Pathfinder's 4 paths").
    gaussian : str
        Whose sds ``sds`` are, for the message ("Laplace", "Pathfinder").
    ends : list of ndarray (dim,)
        Where each run ended (L-BFGS's modes; the means of Pathfinder's paths' Gaussians).
    best : int
        The run whose Gaussian would be used; ``sds`` are its sds.
    report : dict
        Gets ``mode_separation``: the largest distance of an end from the best one's, in its sds, over
        the coordinates; ``mode_barrier`` where that is above :data:`MODE_SEPARATION`: the deepest dip
        of the log density between two ends that far apart. Where ends are different modes it gets
        ``mode_points`` too, one end per mode (unconstrained), with ``mode_runs`` (``runs``): the
        verdict checks that the run's draws visit each (:func:`~stanaccel.diagnostics.modes.unvisited_modes`).
    """
    ends = np.asarray(ends, dtype=float)
    separation = float(np.max(np.abs(ends - ends[best]) / sds))
    report["mode_separation"] = separation
    if separation <= MODE_SEPARATION:
        return None
    points: list[np.ndarray] = []
    deepest = 0.0
    for end in ends:  # one end of each mode: an end near a kept one, or with no dip between, is its mode
        far = [point for point in points if np.max(np.abs(end - point) / sds) > MODE_SEPARATION]
        dips = [barrier(model, end, point) for point in far]
        deepest = max([deepest, *dips])
        if len(far) == len(points) and all(dip > MODE_BARRIER for dip in dips):
            points.append(end)
    report["mode_barrier"] = deepest
    if len(points) < 2:
        return None
    report["mode_points"], report["mode_runs"] = [p.tolist() for p in points], runs
    return (
        f"{runs} ended at modes {separation:.1f} {gaussian} sds apart, the log density {deepest:.3g} lower "
        "between them: the posterior has more than one mode, and a Gaussian at one of them would hide the "
        "others"
    )


def barrier(model, a: np.ndarray, b: np.ndarray) -> float:
    """How far the log density (with the Jacobian) falls below the lower of its values at ``a`` and ``b``
    on the segment between them, at :data:`BARRIER_POINTS` evenly spaced points: 0 where it does not,
    inf where it is undefined at one of them (as the old check, by distance alone, would have it)."""
    lower = min(safe_log_density(model, a), safe_log_density(model, b))
    between = min(
        safe_log_density(model, a + t * (b - a)) for t in np.linspace(0, 1, BARRIER_POINTS + 2)[1:-1]
    )
    if not np.isfinite(lower + between):
        return float("inf")
    return max(lower - between, 0.0)


def _distinct(draws: np.ndarray, n: int, seed: int) -> np.ndarray:
    """``n`` distinct rows of ``draws`` (PSIS resampling repeats some), chosen at random."""
    unique = np.unique(draws, axis=0)
    rng = np.random.default_rng([seed, 0x57A2])
    return unique[rng.choice(len(unique), size=n, replace=len(unique) < n)]


def approximation_warm_up(approximation, config, seeds, progress, say, charged, checkpoint=None):
    """Stan's NUTS warm-up on ``approximation`` (label, Stan model of pi*): metric, step, starts, draws.

    For ``dc`` and ``tt-approx``, whose inner kernel moves on the
    approximation: the step NUTS adapts there is the inner HMC's, and the
    chains' ends are the starts. It costs what NUTS's warm-up costs on pi*,
    a fraction of pi's; the kernels stay exact whatever pi* is.
    """
    if approximation is None:
        raise ValueError(f"warmup = {APPROX_WARMUP!r} needs the approximation's Stan model")
    start = time.perf_counter()
    label, model = approximation
    config = config.replace(warmup=DEFAULT_NUTS_WARMUP)
    say(f"warm-up on the approximation {label} (warmup = {APPROX_WARMUP!r}), not on pi")
    adaptation = nuts_warm_up(model, config, seeds, None, progress, say, charged, checkpoint)
    adaptation.warmup = APPROX_WARMUP
    adaptation.report = {
        "warmup": APPROX_WARMUP,
        "used": APPROX_WARMUP,
        "on": label,
        "seconds": time.perf_counter() - start,
        "step_size": adaptation.step_size,
    }
    return adaptation


def nuts_warm_up(model, config, seeds, warmup_from, progress, say, charged, checkpoint=None) -> Adaptation:
    """Stan's NUTS warm-up (or an earlier one) and what it adapts; its time is added to ``charged``."""
    train_from = getattr(config, "train_from", 0.5)
    if warmup_from is None:
        say(
            f"Stan NUTS warm-up on {model.name.removesuffix('_model')}: {config.chains} chains x "
            f"{config.warmup} iterations"
        )
        fit = sample_nuts(
            model,
            chains=config.chains,
            warmup=config.warmup,
            draws=0,
            seed=seeds["nuts"],
            progress=progress,
            checkpoint=checkpoint_part(checkpoint, "warmup"),
        )
        if fit.interrupted:
            raise KeyboardInterrupt("stopped during Stan's NUTS warm-up")
        charged["warmup"] = fit.wall_seconds
        state = fit.warmup_state()
        first = int(train_from * fit.warmup_unconstrained.shape[1])
        draws = fit.warmup_unconstrained[:, first:]
    else:
        state = read_warmup(warmup_from, model)
        charge_borrowed(state, charged, say)
        if check_borrowed(state, model) is not None:  # other data, or nothing to check: the warning says
            state = readapted(model, state, seeds["warmup"], progress, charged, checkpoint)
        draws = None
        spec = method_record(config.method)
        adapts = spec.warmup_adapts_step(config) and "step_size" not in config.user_keys()
        if not state.has_step_size and (adapts or spec.needs_draws):
            state = borrowed_step(model, state, seeds["warmup"], progress, say, charged)
        if spec.needs_draws:
            pilot = max(100, config.warmup // 4)
            say(f"pilot: Stan NUTS, {pilot} draws per chain from the earlier warm-up (for {config.method})")
            fit = sample_nuts(
                model,
                warmup_from=state,
                draws=pilot,
                seed=seeds["pilot"],
                progress=progress,
                checkpoint=checkpoint_part(checkpoint, "pilot"),
            )
            if fit.interrupted:
                raise KeyboardInterrupt("stopped during the NUTS pilot (the warm-up)")
            charged["pilot"] = charged.get("pilot", 0.0) + fit.wall_seconds
            draws = fit.draws_unconstrained
            state = replace(state, positions=fit.last_unconstrained())
    metric = np.mean(state.inv_metric, axis=0)
    flat = None if draws is None else draws.reshape(-1, model.dim)
    return Adaptation(
        float(np.median(state.step_size)) if state.has_step_size else None,
        metric,
        np.asarray(state.positions),
        flat,
        sum(charged.values()),
        warmup_state=state,
        warmup=state.warmup,  # a cheap warm-up's metric is the posterior's scale (Adaptation.settings)
    )


READAPTED = "warmup (adapted again)"
"""The ``charged_seconds`` entry of Stan's NUTS warm-up run from a borrowed warm-up that may not fit
(:func:`readapted`)."""


def readapted(model, state: WarmupState, seed: int, progress, charged, checkpoint=None) -> WarmupState:
    """A borrowed warm-up that may not fit ``model``'s posterior (other data, another version of the
    program, or nothing recorded to check), adapted again by Stan's NUTS warm-up from its points, metric
    and step size (:func:`~stanaccel.stan.nuts.sample_nuts` warns why and how long), its time charged as
    :data:`READAPTED`; the chains' walk from its points is left in that warm-up.

    Raises
    ------
    KeyboardInterrupt
        Stopped by Ctrl-C (the message says where).
    """
    fit = sample_nuts(model, warmup_from=state, draws=0, seed=seed, progress=progress,
                      checkpoint=checkpoint_part(checkpoint, "readapt"))  # fmt: skip
    if fit.interrupted:
        raise KeyboardInterrupt("stopped while Stan's NUTS adapted the borrowed warm-up again")
    charged[READAPTED] = fit.wall_seconds
    seconds = None if state.seconds is None else state.seconds + fit.wall_seconds
    return replace(fit.warmup_state(), seconds=seconds)


def borrowed_step(model, state: WarmupState, seed: int, progress, say, charged) -> WarmupState:
    """A borrowed warm-up without a step size (a cheap one's metric and points) given one by
    :func:`adapt_step`, its time charged as ``"pilot"``."""
    say(
        f"step size: the earlier {state.warmup} warm-up adapted none; Stan's NUTS, {STEP_ITERATIONS} "
        "iterations adapting only it, its metric fixed"
    )
    start = time.perf_counter()
    state = adapt_step(model, state, seed, progress)
    charged["pilot"] = charged.get("pilot", 0.0) + time.perf_counter() - start
    return state


def checkpoint_part(checkpoint: str | Path | None, part: str) -> Path | None:
    """The checkpoint folder of one part of a run (warm-up, pilot, chains), or None without checkpoints."""
    return None if checkpoint is None else Path(checkpoint) / part
