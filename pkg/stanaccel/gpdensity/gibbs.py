"""The Gibbs sampler of the sigmoidal GP density model (Donner & Opper, Algorithm 1).

The model: p(x) = sigma(g(x)) pi(x) / Z, g ~ GP(mu0, k). Augmenting with a
rate scaling lambda (the paper's prior 1/lambda; see below), Polya-Gamma variables omega_n at the
observations and a marked Poisson process of latent events (x_m, omega_m)
makes every conditional tractable. One sweep:

1. omega_n ~ PG(1, g(x_n));
2. lambda ~ Gamma(N + M, 1 + beta / N) (the paper's rate 1 is beta = 0);
3. the events: a Poisson process of rate lambda pi(x) (M_max ~ Poisson(lambda)
   points from pi), each kept with probability sigma(-g(x)) (thinning), with
   g at the proposals drawn from the GP conditioned on its current values;
   each kept event gets a mark omega_m ~ PG(1, g(x_m));
4. every ``hyper_every`` (v) sweeps, the kernel hyperparameters by
   random-walk Metropolis-Hastings on p(theta | omega, events), g and mu0
   integrated out, and the base measure's from its exact
   (Normal-inverse-Wishart) conditional given the data and the events;
5. mu0 from p(mu0 | theta, omega, events), g integrated out, then g at the
   N + M points from its Gaussian conditional N(Sigma (u + K^-1 mu0 1), Sigma),
   Sigma = (D + K^-1)^-1, D = diag(omega), u = (1/2 at data, -1/2 at events);
6. every ``normaliser_every`` sweeps (default never), a Metropolis-Hastings move along the
   unidentified normaliser: g and mu0 shifted by c, lambda rescaled by e^-kappa c,
   latent events thinned or added to match
   (:mod:`stanaccel.gpdensity.normaliser`), after which the marks are redrawn.

Steps 4 and 5 depart from the paper's literal updates (MH on theta given g,
mu0 given g, MH on pi's parameters), which are exact but stop moving on
data they were not tuned to: :mod:`stanaccel.gpdensity.marginal` says why
and what replaces them. The random walk's step is adapted during the
warm-up only, so the kept draws are an exact Markov chain.

The paper leaves the hyperpriors open. Here: log amplitude ~ N(0, 1.5^2),
log lengthscale_d ~ N(log sd_d of the data, 1.5^2); the Jeffreys prior
|cov|^-(dim + 1)/2 (flat on the mean) on the base measure; mu0 ~ N(0, 2^2);
and lambda ~ lambda^-1 exp(-beta lambda / N), beta = ``rate_penalty`` = 1,
instead of the paper's 1/lambda. Why the last two:

The normaliser Z = E_pi[sigma(g)] is not identified. For a density p and
any Z below 1 / max(p / pi), g = logit(Z p / pi) gives exactly p, so the
likelihood is flat along this family and only the priors say where on it
the posterior sits. That matters, because lambda is about N / Z and the
number of latent events M about N (1 - Z) / Z: each sweep's cost,
O((N + M)^3), is set by a quantity the data cannot see. Small Z is the
regime where sigma(g) ~ e^g and shifting g and mu0 together changes
nothing but Z: there only mu0's prior holds the chain (under a flat prior
mu0 drifts to -infinity while lambda and M grow without bound), and under
N(0, 2^2) alone it lets M wander between about N and 10 N, slowly, since
the sweep moves along the family only through lambda's and M's
conditionals (measured on a three-bump mixture at N = 60: two chains from
different starts settled at mean M 654 and 102). The penalty multiplies
the posterior by (1 + beta / (N Z))^-N, about exp(-beta / Z): a prior on Z
alone, which keeps Z near its largest possible value (M about 1-2 N on
the same mixture) and changes the density's posterior only by a factor
between 1 and exp(-beta max(p / pi)). The variational method and the Stan
baseline keep the 1/lambda prior: their cost does not grow with M.

Dense linear algebra is nearly all of the time: ``run`` holds BLAS to
``blas_threads`` threads (default 1; see :class:`GibbsSampler`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from polyagamma import random_polyagamma
from scipy.special import expit
from threadpoolctl import threadpool_limits

from stanaccel.gpdensity.base_measure import GaussianBase
from stanaccel.gpdensity.covariance import SquaredExponential, conditional_draw, conditional_marginals
from stanaccel.gpdensity.marginal import Marginal, PseudoObservations, adapted_step, update_kernel
from stanaccel.gpdensity.normaliser import NormaliserMove
from stanaccel.results import Result

HYPER_PRIOR_SD = 1.5


@dataclass
class GibbsState:
    """Everything the sampler updates; g is kept at the data and at the latent events."""

    events: np.ndarray
    g_data: np.ndarray
    g_events: np.ndarray
    omega_data: np.ndarray
    omega_events: np.ndarray
    rate: float
    mu0: float
    kernel: SquaredExponential
    base: GaussianBase
    chol: np.ndarray | None = None  # Cholesky factor of the kernel matrix at data and events, if known
    kernel_step: float = 0.1  # the random-walk step of the kernel update (adapted during the warm-up)
    adaptations: int = 0  # kernel updates adapted so far in this adaptation window
    normaliser_step: float = 0.05  # the sd of the normaliser move's shift (adapted during the warm-up)
    normaliser_exponent: float = 1.0  # kappa of the normaliser move (set during the warm-up)
    normaliser_adaptations: int = 0  # normaliser moves adapted so far in this adaptation window


def check_data(data: np.ndarray) -> np.ndarray:
    """Observations as a finite (N, dim) array, or a clear error."""
    data = np.asarray(data, dtype=float)
    if data.ndim == 1:
        data = data[:, None]
    if data.ndim != 2 or data.shape[0] == 0:
        raise ValueError(f"need at least one observation as an (N, dim) array, not shape {data.shape}")
    bad = np.flatnonzero(~np.all(np.isfinite(data), axis=1))
    if bad.size:
        raise ValueError(f"{bad.size} observations are NaN or infinite (first at row {bad[0]})")
    if data.shape[0] <= data.shape[1]:
        raise ValueError(
            f"{data.shape[0]} observations cannot fit a {data.shape[1]}-dimensional base measure"
        )
    return data


def sample_data_marks(g_data: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """omega_n ~ PG(1, g(x_n))."""
    return _polyagamma(g_data, rng)


def sample_rate(n_data: int, n_events: int, rng: np.random.Generator, penalty: float = 0.0) -> float:
    """lambda ~ Gamma(N + M, 1 + penalty / N), its conditional under lambda^-1 exp(-penalty lambda / N)."""
    return float(rng.gamma(n_data + n_events, 1.0 / (1.0 + penalty / n_data)))


def sample_events(
    rate: float, base: GaussianBase, g_at: Callable[[np.ndarray], np.ndarray], rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Latent events by thinning a Poisson process of rate ``rate * pi(x)``.

    ``g_at(points)`` draws g at the proposed points (jointly). Returns the kept
    events, g there, their marks omega_m ~ PG(1, g(x_m)), and the number of
    proposals.
    """
    n_proposed = int(rng.poisson(rate))
    proposals = base.sample(n_proposed, rng)
    g = g_at(proposals)
    keep = rng.random(n_proposed) < expit(-g)
    return proposals[keep], g[keep], _polyagamma(g[keep], rng), n_proposed


def _polyagamma(z: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    if len(z) == 0:
        return np.empty(0)
    return np.asarray(random_polyagamma(1.0, z, random_state=rng), dtype=float)


class GibbsSampler:
    """Algorithm 1 for data (N, dim) with a Gaussian base measure.

    Parameters
    ----------
    data : ndarray (N, dim) or (N,)
    hyper_every : int
        v: update the kernel and base-measure hyperparameters every v sweeps.
        The paper's v is 10; here the update costs one Cholesky factorisation
        (a fifth to a third of a sweep), so every sweep makes one.
    kernel : SquaredExponential, optional
        Starting kernel; default amplitude 1 and the data's sd per dimension.
    base : GaussianBase, optional
        Starting base measure; default the data's mean and covariance.
    kernel_step : float
        Starting random-walk step of the kernel update (log scale); adapted
        during the warm-up, then fixed.
    mu0_prior : (mean, sd)
        The Gaussian prior of the GP's constant mean.
    rate_penalty : float
        beta in lambda's prior lambda^-1 exp(-beta lambda / N); 0 is the
        paper's 1/lambda. It multiplies the posterior by (1 + beta / (N Z))^-N,
        about exp(-beta / Z), a prior on the normaliser Z = E_pi[sigma(g)]
        alone, which the data cannot see (see the module docstring); it keeps
        the number of latent events M, about N (1 - Z) / Z, from wandering
        to many times N.
    normaliser_every : int
        Make the normaliser move (:mod:`stanaccel.gpdensity.normaliser`) every
        this many sweeps, after the other updates; 0 (the default) never. It
        costs one Cholesky factorisation when accepted (a sweep cost 0.95-1.06
        of one without, within the timing noise), but the chain then visits
        larger M (the density study's `bimodal_1d` at N = 300: mean M 555
        against 456, 52 s against 37 s); in the runs measured it gave no
        consistent gain in M's and lambda's ESS (docs/methods/gp-density.md),
        so it is off until one is shown.
    normaliser_step : float
        Starting sd of the move's shift c of g; adapted during the warm-up
        (to acceptance 0.3), then fixed.
    learn_base : bool
        Draw the base measure's mean and covariance each sweep (the default),
        or keep the starting one (``base``, default the data's fit): an
        empirical-Bayes base, which drops pi's trade with sigma(g) (p is
        proportional to their product). Measured on the three densities of
        ``benchmarks/density_gibbs_normaliser.py`` (N = 300, 400 sweeps): M's
        ESS per 100 sweeps 4.0, 0.5 and 5.2 with the base kept against 3.3,
        0.5 and 1.3 with it learnt, and on the 2-D mixture mean M 603
        against 1036 (so 0.14 s a sweep against 0.44 s); Hellinger 0.057,
        0.047 and 0.125 against 0.061, 0.054 and 0.105.
    blas_threads : int or None
        BLAS threads while running (threadpoolctl; None leaves them as they
        are). One by default: on two cores a second OpenBLAS thread made a
        sweep (many middling products and solves) 1.7x slower on an idle
        machine and 3x slower beside another BLAS user
        (``benchmarks/density_blas_threads.py``).
    """

    def __init__(self, data, *, hyper_every: int = 1, kernel: SquaredExponential | None = None,
                 base: GaussianBase | None = None, kernel_step: float = 0.1,
                 mu0_prior: tuple[float, float] = (0.0, 2.0), blas_threads: int | None = 1,
                 rate_penalty: float = 1.0, normaliser_every: int = 0,
                 normaliser_step: float = 0.05, learn_base: bool = True):  # fmt: skip
        self.data = check_data(data)
        if hyper_every < 1:
            raise ValueError(f"hyper_every must be at least 1, not {hyper_every}")
        if not kernel_step > 0:
            raise ValueError(f"kernel_step must be positive, not {kernel_step}")
        if blas_threads is not None and blas_threads < 1:
            raise ValueError(f"blas_threads must be at least 1 (or None), not {blas_threads}")
        if not rate_penalty >= 0:
            raise ValueError(f"rate_penalty must be 0 or more, not {rate_penalty}")
        if normaliser_every < 0:
            raise ValueError(f"normaliser_every must be 0 (never) or more, not {normaliser_every}")
        if not normaliser_step > 0:
            raise ValueError(f"normaliser_step must be positive, not {normaliser_step}")
        self.hyper_every = int(hyper_every)
        self.scale = self.data.std(axis=0)
        self.initial_kernel = kernel or SquaredExponential(1.0, self.scale)
        self.initial_base = base or GaussianBase.fit(self.data)
        if self.initial_base.dim != self.data.shape[1]:
            raise ValueError(
                f"the base measure has {self.initial_base.dim} dimensions, the data {self.data.shape[1]}"
            )
        self.mu0_prior = (float(mu0_prior[0]), float(mu0_prior[1]))
        self.kernel_step = float(kernel_step)
        self.blas_threads = blas_threads
        self.rate_penalty = float(rate_penalty)
        self.normaliser_every = int(normaliser_every)
        self.normaliser_step = float(normaliser_step)
        self.learn_base = bool(learn_base)
        n = len(self.data)
        self.normaliser_move = NormaliserMove((0.0, self.rate_penalty / n), self.mu0_prior)

    def init(self, rng: np.random.Generator, *, mu0: float = 0.0, rate: float | None = None) -> GibbsState:
        """The starting state: g = mu0 at the data, no events, lambda = ``rate`` (default N).

        A low ``mu0`` with a large ``rate`` starts the chain with many latent events.
        """
        n = len(self.data)
        return GibbsState(
            events=np.empty((0, self.data.shape[1])),
            g_data=np.full(n, float(mu0)),
            g_events=np.empty(0),
            omega_data=np.full(n, 0.25),
            omega_events=np.empty(0),
            rate=float(n if rate is None else rate),
            mu0=float(mu0),
            kernel=self.initial_kernel,
            base=self.initial_base,
            kernel_step=self.kernel_step,
            normaliser_step=self.normaliser_step,
        )

    def points(self, state: GibbsState) -> np.ndarray:
        return np.vstack([self.data, state.events])

    def step(
        self, state: GibbsState, iteration: int, rng: np.random.Generator, *, adapt: bool = False
    ) -> tuple[GibbsState, bool | None, bool | None]:
        """One sweep of Algorithm 1. Returns the new state and whether the kernel update and the
        normaliser move (each if this sweep made one) were accepted; ``adapt`` adapts their steps
        (warm-up only)."""
        n = len(self.data)
        omega_data = sample_data_marks(state.g_data, rng)
        rate = sample_rate(n, len(state.events), rng, self.rate_penalty)
        points, g_all = self.points(state), np.concatenate([state.g_data, state.g_events])

        def g_at(proposals, points=points, g_all=g_all):
            return conditional_draw(state.kernel, points, g_all, proposals, state.mu0, rng, chol=state.chol)

        events, _, omega_events, _ = sample_events(rate, state.base, g_at, rng)
        points = np.vstack([self.data, events])
        observations = PseudoObservations.of(omega_data, omega_events)
        kernel, base, step = state.kernel, state.base, state.kernel_step
        marginal = Marginal(kernel(points), observations, self.mu0_prior)
        accepted = None
        if (iteration + 1) % self.hyper_every == 0:
            update = update_kernel(kernel, marginal, points, observations, self._log_kernel_prior, step, rng)
            kernel, marginal, accepted = update.kernel, update.marginal, update.accepted
            if adapt:
                step = adapted_step(step, accepted, state.adaptations)
            if self.learn_base:
                base = GaussianBase.conditional_draw(points, rng)
        mu0 = marginal.draw_mu0(rng)
        chol = np.linalg.cholesky(marginal.K)
        g = marginal.draw_g(mu0, chol, rng)
        g_data, g_events = g[:n], g[n:]
        adaptations = state.adaptations + (adapt and accepted is not None)
        state = replace(state, events=events, g_data=g_data, g_events=g_events, omega_data=omega_data,
                        omega_events=omega_events, rate=rate, mu0=mu0, kernel=kernel, base=base, chol=chol,
                        kernel_step=step, adaptations=adaptations)  # fmt: skip
        moved = None
        if self.normaliser_every and (iteration + 1) % self.normaliser_every == 0:
            count, kappa = state.normaliser_adaptations, state.normaliser_exponent
            if adapt:  # kappa: the window's running mean of the data's mean sigma(-g_n)
                kappa += (np.mean(expit(-g_data)) - kappa) / (count + 1)
                state = replace(state, normaliser_exponent=float(kappa))
            state, moved = self.normaliser_move(state, self.data, state.normaliser_step, kappa, rng)
            if moved:
                state = replace(state, omega_data=sample_data_marks(state.g_data, rng),
                                omega_events=_polyagamma(state.g_events, rng))  # fmt: skip
            if adapt:
                state = replace(state, normaliser_step=adapted_step(state.normaliser_step, moved, count),
                                normaliser_adaptations=count + 1)  # fmt: skip
        return state, accepted, moved

    def _log_kernel_prior(self, kernel: SquaredExponential) -> float:
        centre = np.log(np.concatenate([[1.0], self.scale]))
        return float(-0.5 * np.sum(((kernel.log_parameters() - centre) / HYPER_PRIOR_SD) ** 2))

    def density(self, state: GibbsState, at: np.ndarray, rng: np.random.Generator, n_normaliser: int = 4096):
        """The density sigma(g(x)) pi(x) / Z at points, for this state's g.

        g is drawn at each point from its conditional given the state's g at the
        data and events, independently per point (exact marginals; a joint draw at
        a 2-D grid would cost O(|at|^3) per draw). Z = E_pi[sigma(g)] from
        ``n_normaliser`` quasi-random points of pi, with g drawn there the same way.
        """
        at = np.atleast_2d(np.asarray(at, dtype=float))
        if at.shape[1] != self.data.shape[1]:
            at = at.reshape(-1, self.data.shape[1])
        reference = state.base.quasi_sample(n_normaliser, seed=int(rng.integers(2**31)))
        g_all = np.concatenate([state.g_data, state.g_events])
        mean, variance = conditional_marginals(state.kernel, self.points(state), g_all,
                                               np.vstack([at, reference]), state.mu0, state.chol)  # fmt: skip
        g = mean + np.sqrt(variance) * rng.standard_normal(len(mean))
        normaliser = np.mean(expit(g[len(at) :]))
        return expit(g[: len(at)]) * np.exp(state.base.logpdf(at)) / normaliser

    def run(self, iterations: int, *, warmup: int = 0, seed: int = 0, at: np.ndarray | None = None,
            n_normaliser: int = 4096, density_every: int = 1, start: GibbsState | None = None,
            progress: bool = False) -> GibbsRun:  # fmt: skip
        """Run the sampler; keep the hyperparameters, lambda, M and (at ``at``, every ``density_every``
        kept iteration) the density. The warm-up adapts the kernel update's step in two windows, the
        second starting again (large gains) from the first's step, so that the step fits the posterior
        the chain has reached rather than its wide start; the kept iterations use the step it ended with.
        ``start``: a state to start from (default :meth:`init`). Ctrl-C
        stops it early and keeps what was drawn (``interrupted``).

        Returns a :class:`GibbsRun`: the dict of kept values, which is also a one-chain Result."""
        from tqdm.auto import tqdm

        started = time.perf_counter()
        rng = np.random.default_rng(seed)
        state = self.init(rng) if start is None else start
        record: dict[str, list] = {k: [] for k in ("rate", "n_events", "mu0", "amplitude", "lengthscales",
                                                     "base_mean", "base_chol", "density")}  # fmt: skip
        moves = {"warmup": [], "sampling": [], "normaliser_warmup": [], "normaliser": []}
        interrupted = False
        blas = threadpool_limits(self.blas_threads, "blas") if self.blas_threads else contextlib.nullcontext()
        with blas, tqdm(total=warmup + iterations, disable=not progress, desc="Gibbs", leave=False) as bar:
            try:
                for i in range(warmup + iterations):
                    if i == warmup // 2:
                        state = replace(state, adaptations=0, normaliser_adaptations=0)  # a second window
                    state, accepted, moved = self.step(state, i, rng, adapt=i < warmup)
                    bar.update(1)
                    if accepted is not None:
                        moves["warmup" if i < warmup else "sampling"].append(accepted)
                    if moved is not None:
                        moves["normaliser_warmup" if i < warmup else "normaliser"].append(moved)
                    if i < warmup:
                        continue
                    record["rate"].append(state.rate)
                    record["n_events"].append(len(state.events))
                    record["mu0"].append(state.mu0)
                    record["amplitude"].append(state.kernel.amplitude)
                    record["lengthscales"].append(state.kernel.lengthscales)
                    record["base_mean"].append(state.base.mean)
                    record["base_chol"].append(state.base.chol)
                    if at is not None and (i - warmup) % density_every == 0:
                        record["density"].append(self.density(state, at, rng, n_normaliser))
            except KeyboardInterrupt:
                interrupted = True
        out: dict[str, Any] = {k: np.asarray(v) for k, v in record.items() if v}
        out["acceptance"] = {"kernel": _share(moves["sampling"]), "kernel_warmup": _share(moves["warmup"]),
                             "normaliser": _share(moves["normaliser"]),
                             "normaliser_warmup": _share(moves["normaliser_warmup"])}  # fmt: skip
        out["kernel_step"] = state.kernel_step
        out["normaliser_step"] = state.normaliser_step
        out["normaliser_exponent"] = state.normaliser_exponent
        out["state"] = state
        out["interrupted"] = interrupted
        return GibbsRun(out, wall_seconds=time.perf_counter() - started)


def _share(flags: list[bool]) -> float:
    return float(np.mean(flags)) if flags else float("nan")


# what a run keeps besides its draws
NOT_DRAWS = ("acceptance", "kernel_step", "normaliser_step", "normaliser_exponent", "state", "interrupted")


def inference_groups(runs: list[dict]) -> dict:
    """Groups for ``stanaccel.diagnostics.to_inference_data`` from one or more ``GibbsSampler.run``
    outputs (one per chain, same lengths): lambda, M, mu0, the hyperparameters and the density."""
    names = [k for k in runs[0] if k not in NOT_DRAWS]
    posterior = {k: np.stack([run[k] for run in runs]) for k in names}
    posterior["lambda"] = posterior.pop("rate")
    normaliser = [run["acceptance"].get("normaliser", np.nan) for run in runs]
    attrs = {"sampler": "gp_density_gibbs", "exact": True,
             "kernel_acceptance": float(np.mean([run["acceptance"]["kernel"] for run in runs])),
             "normaliser_acceptance": float(np.mean(normaliser)),
             "kernel_step": float(np.mean([run["kernel_step"] for run in runs]))}  # fmt: skip
    return {"posterior": posterior, "attrs": attrs}


class GibbsRun(dict, Result):
    """What ``GibbsSampler.run`` returns: its dict of kept values, and a one-chain Result.

    The keys are as before: per kept iteration ``rate``, ``n_events``,
    ``mu0``, ``amplitude``, ``lengthscales`` (iterations, dim), ``base_mean``,
    ``base_chol`` and, when the run had output points, ``density``
    (iterations kept for the density, points); ``acceptance`` (of the
    kernel update: ``kernel`` over the kept iterations, ``kernel_warmup``
    over the warm-up; of the normaliser move: ``normaliser``,
    ``normaliser_warmup``, NaN when it was not made), ``kernel_step`` (the
    step the warm-up adapted), ``normaliser_step`` and
    ``normaliser_exponent`` (the move's step and kappa from the warm-up),
    ``state`` (the last :class:`GibbsState`, to go on from with ``run(...,
    start=)``) and ``interrupted``. As a
    :class:`~stanaccel.results.Result` (``draws()``, ``summary()``,
    ``metrics()``, ``to_inference_data()``, ``save(path)``) its posterior is
    those draws as one chain, lambda named ``lambda`` (see
    :func:`inference_groups`, which also combines the runs of several chains).
    ``density`` is kept every ``density_every`` iterations, so with
    ``density_every`` > 1 it has fewer draws than the other values and goes
    into its own group ``density_posterior`` rather than the posterior.

    Attributes
    ----------
    wall_seconds : float
        Wall time of the run, warm-up included.
    """

    def __init__(self, values: dict[str, Any], wall_seconds: float = float("nan")):
        super().__init__(values)
        self.wall_seconds = float(wall_seconds)

    def inference_groups(self) -> dict[str, Any]:
        """Groups for ``stanaccel.diagnostics.to_inference_data``: this run as one chain."""
        groups = inference_groups([self])
        posterior = groups["posterior"]
        if "density" in posterior and posterior["density"].shape[1] != posterior["lambda"].shape[1]:
            groups["density_posterior"] = {"density": posterior.pop("density")}
        return groups

    def _metrics_arguments(self) -> dict[str, Any]:
        return {"wall_seconds": self.wall_seconds}
