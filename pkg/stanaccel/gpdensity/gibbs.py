"""The Gibbs sampler of the sigmoidal GP density model (Donner & Opper, Algorithm 1).

The model: p(x) = sigma(g(x)) pi(x) / Z, g ~ GP(mu0, k). Augmenting with a
rate scaling lambda (prior 1/lambda), Polya-Gamma variables omega_n at the
observations and a marked Poisson process of latent events (x_m, omega_m)
makes every conditional tractable:

1. omega_n ~ PG(1, g(x_n));
2. lambda ~ Gamma(N + M, 1);
3. the events: a Poisson process of rate lambda pi(x) (M_max ~ Poisson(lambda)
   points from pi), each kept with probability sigma(-g(x)) (thinning), with
   g at the proposals drawn from the GP conditioned on its current values;
   each kept event gets a mark omega_m ~ PG(1, g(x_m));
4. g at the N + M points ~ N(Sigma (u + K^-1 mu0 1), Sigma),
   Sigma = (D + K^-1)^-1, D = diag(omega), u = (1/2 at data, -1/2 at events);
5. mu0 from its Gaussian conditional;
6. every ``hyper_every`` (v = 10) iterations, the kernel hyperparameters and
   the base measure's by random-walk Metropolis-Hastings on their log /
   unconstrained scale.

The paper leaves the hyperpriors open. Here: log amplitude ~ N(0, 1.5^2),
log lengthscale_d ~ N(log sd_d of the data, 1.5^2); flat priors on the base
measure's mean and log-Cholesky factor; mu0 ~ N(0, 2^2). mu0 needs a proper
prior: as g falls, sigma(g) tends to e^g and the density no longer depends on
a shift of g, so under a flat prior mu0 drifts to -infinity while lambda and
the number of latent events grow without bound.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from polyagamma import random_polyagamma
from scipy.linalg import cho_solve, solve_triangular
from scipy.special import expit

from stanaccel.gpdensity.base_measure import GaussianBase
from stanaccel.gpdensity.covariance import (
    SquaredExponential,
    conditional_draw,
    conditional_marginals,
    log_gp_density,
)
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


def sample_rate(n_data: int, n_events: int, rng: np.random.Generator) -> float:
    """lambda ~ Gamma(N + M, 1)."""
    return float(rng.gamma(n_data + n_events, 1.0))


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


@dataclass
class GaussianConditional:
    """g's conditional N(mean, Sigma), Sigma = (D + K^-1)^-1 = L (I + L^T D L)^-1 L^T with K = L L^T
    and I + L^T D L = C C^T: stable when some omega are tiny, and drawn by triangular solves."""

    mean: np.ndarray
    L: np.ndarray
    C: np.ndarray

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        z = rng.standard_normal(len(self.mean))
        return self.mean + self.L @ solve_triangular(self.C, z, lower=True, trans="T")

    def covariance(self) -> np.ndarray:
        root = self.L @ np.linalg.inv(self.C).T
        return root @ root.T


def gaussian_conditional(K: np.ndarray, omega: np.ndarray, u: np.ndarray, mu0: float) -> GaussianConditional:
    """g at the N + M points given omega: mean Sigma (u + K^-1 mu0 1), covariance Sigma."""
    L = np.linalg.cholesky(K)
    A = np.eye(len(K)) + (L.T * omega) @ L
    C = np.linalg.cholesky(A)
    rhs = L.T @ u + solve_triangular(L, np.full(len(K), mu0), lower=True)
    return GaussianConditional(L @ cho_solve((C, True), rhs), L, C)


def sample_mu0(L: np.ndarray, g: np.ndarray, rng: np.random.Generator, prior: tuple[float, float]) -> float:
    """mu0 | g, Gaussian: prior N(m, s^2) times N(g | mu0 1, K), with K = L L^T.

    Precision ``1/s^2 + 1^T K^-1 1``, mean ``(m/s^2 + 1^T K^-1 g) / precision``.
    """
    w = cho_solve((L, True), np.ones(len(g)))
    m, s = prior
    precision = 1 / s**2 + float(w.sum())
    return float(rng.normal((m / s**2 + w @ g) / precision, 1 / np.sqrt(precision)))


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
        v: update the kernel and base-measure hyperparameters every v iterations.
    kernel : SquaredExponential, optional
        Starting kernel; default amplitude 1 and the data's sd per dimension.
    base : GaussianBase, optional
        Starting base measure; default the data's mean and covariance.
    kernel_step, base_step : float
        Random-walk steps of the hyperparameter MH updates (log / unconstrained scale).
    mu0_prior : (mean, sd)
        The Gaussian prior of the GP's constant mean.
    """

    def __init__(self, data, *, hyper_every: int = 10, kernel: SquaredExponential | None = None,
                 base: GaussianBase | None = None, kernel_step: float = 0.1, base_step: float = 0.05,
                 mu0_prior: tuple[float, float] = (0.0, 2.0)):  # fmt: skip
        self.data = check_data(data)
        if hyper_every < 1:
            raise ValueError(f"hyper_every must be at least 1, not {hyper_every}")
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
        self.base_step = float(base_step)
        self.accepted = {"kernel": 0, "base": 0}
        self.proposed = {"kernel": 0, "base": 0}

    def init(self, rng: np.random.Generator) -> GibbsState:
        n = len(self.data)
        return GibbsState(
            events=np.empty((0, self.data.shape[1])),
            g_data=np.zeros(n),
            g_events=np.empty(0),
            omega_data=np.full(n, 0.25),
            omega_events=np.empty(0),
            rate=float(n),
            mu0=0.0,
            kernel=self.initial_kernel,
            base=self.initial_base,
        )

    def points(self, state: GibbsState) -> np.ndarray:
        return np.vstack([self.data, state.events])

    def step(self, state: GibbsState, iteration: int, rng: np.random.Generator) -> GibbsState:
        """One sweep of Algorithm 1."""
        n = len(self.data)
        omega_data = sample_data_marks(state.g_data, rng)
        rate = sample_rate(n, len(state.events), rng)
        points, g_all = self.points(state), np.concatenate([state.g_data, state.g_events])

        def g_at(proposals, points=points, g_all=g_all):
            return conditional_draw(state.kernel, points, g_all, proposals, state.mu0, rng, chol=state.chol)

        events, _, omega_events, _ = sample_events(rate, state.base, g_at, rng)
        points = np.vstack([self.data, events])
        K = state.kernel(points)
        u = np.concatenate([np.full(n, 0.5), np.full(len(events), -0.5)])
        conditional = gaussian_conditional(K, np.concatenate([omega_data, omega_events]), u, state.mu0)
        g = conditional.draw(rng)
        mu0 = sample_mu0(conditional.L, g, rng, self.mu0_prior)
        state = GibbsState(
            events, g[:n], g[n:], omega_data, omega_events, rate, mu0, state.kernel, state.base, conditional.L
        )
        if (iteration + 1) % self.hyper_every == 0:
            state = self._update_kernel(state, points, g, rng)
            state = self._update_base(state, points, rng)
        return state

    def _log_kernel_prior(self, kernel: SquaredExponential) -> float:
        centre = np.log(np.concatenate([[1.0], self.scale]))
        return float(-0.5 * np.sum(((kernel.log_parameters() - centre) / HYPER_PRIOR_SD) ** 2))

    def _update_kernel(self, state, points, g, rng) -> GibbsState:
        proposal = SquaredExponential.from_log_parameters(
            state.kernel.log_parameters() + self.kernel_step * rng.standard_normal(1 + self.data.shape[1])
        )
        log_ratio = (
            log_gp_density(proposal, points, g, state.mu0) + self._log_kernel_prior(proposal)
            - log_gp_density(state.kernel, points, g, state.mu0) - self._log_kernel_prior(state.kernel)
        )  # fmt: skip
        self.proposed["kernel"] += 1
        if np.log(rng.random()) < log_ratio:
            self.accepted["kernel"] += 1
            return replace(state, kernel=proposal, chol=None)
        return state

    def _update_base(self, state, points, rng) -> GibbsState:
        values = state.base.parameters()
        proposal = GaussianBase.from_parameters(
            values + self.base_step * rng.standard_normal(len(values)), state.base.dim
        )
        log_ratio = float(np.sum(proposal.logpdf(points)) - np.sum(state.base.logpdf(points)))
        self.proposed["base"] += 1
        if np.log(rng.random()) < log_ratio:
            self.accepted["base"] += 1
            return replace(state, base=proposal)
        return state

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
            n_normaliser: int = 4096, density_every: int = 1,
            progress: bool = False) -> GibbsRun:  # fmt: skip
        """Run the sampler; keep the hyperparameters, lambda, M and (at ``at``, every ``density_every``
        kept iteration) the density. Ctrl-C stops it early and keeps what was drawn (``interrupted``).

        Returns a :class:`GibbsRun`: the dict of kept values, which is also a one-chain Result."""
        from tqdm.auto import tqdm

        started = time.perf_counter()
        rng = np.random.default_rng(seed)
        state = self.init(rng)
        record: dict[str, list] = {k: [] for k in ("rate", "n_events", "mu0", "amplitude", "lengthscales",
                                                     "base_mean", "base_chol", "density")}  # fmt: skip
        interrupted = False
        with tqdm(total=warmup + iterations, disable=not progress, desc="Gibbs", leave=False) as bar:
            try:
                for i in range(warmup + iterations):
                    state = self.step(state, i, rng)
                    bar.update(1)
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
        out = {k: np.asarray(v) for k, v in record.items() if v}
        out["acceptance"] = {k: self.accepted[k] / max(self.proposed[k], 1) for k in self.accepted}
        out["interrupted"] = interrupted
        return GibbsRun(out, wall_seconds=time.perf_counter() - started)


def inference_groups(runs: list[dict]) -> dict:
    """Groups for ``stanaccel.diagnostics.to_inference_data`` from one or more ``GibbsSampler.run``
    outputs (one per chain, same lengths): lambda, M, mu0, the hyperparameters and the density."""
    names = [k for k in runs[0] if k not in ("acceptance", "interrupted")]
    posterior = {k: np.stack([run[k] for run in runs]) for k in names}
    posterior["lambda"] = posterior.pop("rate")
    attrs = {"sampler": "gp_density_gibbs", "exact": True}
    for kind in ("kernel", "base"):
        attrs[f"{kind}_acceptance"] = float(np.mean([run["acceptance"][kind] for run in runs]))
    return {"posterior": posterior, "attrs": attrs}


class GibbsRun(dict, Result):
    """What ``GibbsSampler.run`` returns: its dict of kept values, and a one-chain Result.

    The keys are as before: per kept iteration ``rate``, ``n_events``,
    ``mu0``, ``amplitude``, ``lengthscales`` (iterations, dim), ``base_mean``,
    ``base_chol`` and, when the run had output points, ``density``
    (iterations kept for the density, points); ``acceptance`` (of the
    hyperparameter updates) and ``interrupted``. As a
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
