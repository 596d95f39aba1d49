"""The Stan baseline of the GP density model (``stan/gp_density.stan``): its data, and a NUTS fit.

The Stan program samples an APPROXIMATION of the model
p(x) = sigma(g(x)) pi(x) / Z, Z = E_pi[sigma(g)]:

- g is sparse (a predictive process): it is a random variable only at L
  fixed inducing points (by default from ``inducing_points``: k-means
  centres of the data and draws from the fitted base Gaussian),
  non-centred; at every other point (data, normaliser points, output
  points) g is the GP's conditional mean given those L values. The fitted g
  is a combination of L kernel functions, not a full GP draw.
- Z is a Monte Carlo estimate from R fixed points: standard-normal eps
  moved through the learned base measure (a reparameterised sample) and,
  by default half of them, points fixed around the data (drawn from the
  data's Gaussian with its sd inflated by ``FIXED_INFLATION``), combined
  with balance-heuristic importance weights. Both sets are quasi-random by
  default. The error falls as 1/sqrt(R) or faster; it is a fixed function
  of the parameters, shared by every draw.

Each gradient costs O((N + R) L D + R D^2 + L^3), so thousands of points
are cheap; the output points only enter generated quantities.

Why g is not represented freely at the sample: an earlier version gave g
its own value at every datum and normaliser point. With a finite normaliser
sample that likelihood is unbounded (g rises at the data and falls at the R
points); NUTS on it degenerated on a 100-point 1-D mixture (R = 100:
amplitude about 3e4, step size 1e-4, divergences, non-finite density
draws).

Why the fixed normaliser points: with only points that move with the base
(``fixed_fraction=0``) the posterior is still improper. The base measure
can shrink until part of the data lies beyond every normaliser point; g is
then free to rise there and fall at all R points, and the amplitude runs
away (150-point 1-D mixture, R = 500: amplitude above 1e3, log Z below
-1000, step size about 1e-4). Fixed points around the data keep every datum
inside the normaliser sample, whatever the base does.

Why quasi-random points: the sampler seeks out parameters where Z is
underestimated (the likelihood gains N times the log error), so the
normaliser's error matters more than its 1/sqrt(R) suggests. On a
150-point 1-D mixture with R = 300, the fitted density integrated to about
1.17 with pseudo-random points and to 1.007 with quasi-random ones.

Hyperpriors as the Gibbs sampler's (``stanaccel.gpdensity.gibbs``).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from scipy.special import ndtri
from scipy.stats import qmc

from stanaccel.gpdensity.base_measure import GaussianBase
from stanaccel.gpdensity.gibbs import check_data
from stanaccel.gpdensity.inducing import inducing_points
from stanaccel.results import Result
from stanaccel.seeds import spawn_seeds

PROGRAM = "gp_density"
FIXED_INFLATION = 1.5  # sd of the fixed normaliser points' Gaussian, relative to the data's


class StanBaselineFit(dict, Result):
    """What ``fit_stan_baseline`` returns: its dict (keys as there), and a Result.

    As a :class:`~stanaccel.results.Result` (``draws()``, ``summary()``,
    ``metrics()``, ``to_inference_data()``, ``save(path)``) its posterior is
    the NUTS draws of ``density`` (chains, draws, G), ``log_z``,
    ``amplitude``, ``lengthscale`` (chains, draws, dim) and ``mu0``; its
    sample_stats are those of the sampling run. ``exact`` is False: NUTS
    samples an approximation of the model (sparse g, Monte Carlo normaliser;
    see the module docstring). The full Stan output (``g_raw``, the base
    measure, warm-up, adaptation) is in ``fit["fits"][1]``, a ``NutsFit``.
    """

    POSTERIOR = ("density", "log_z", "amplitude", "lengthscale", "mu0")

    def inference_groups(self) -> dict[str, Any]:
        """Groups for ``stanaccel.diagnostics.to_inference_data``."""
        groups: dict[str, Any] = {"posterior": {k: self[k] for k in self.POSTERIOR if k in self}}
        fits = self.get("fits")
        if fits:
            groups["sample_stats"] = fits[-1].sample_stats
        groups["attrs"] = {
            "sampler": "Stan NUTS",
            "method": "stan_baseline",
            "exact": False,
            "note": "NUTS on an approximation of the model: sparse g, Monte Carlo normaliser",
            **{k: self[k] for k in ("divergences", "wall_seconds") if k in self},
        }
        return groups

    def _metrics_arguments(self) -> dict[str, Any]:
        names = ("wall_seconds", "sampling_seconds", "gradient_evaluations")
        return {k: self[k] for k in names if k in self}


def _points(values, dim: int, name: str) -> np.ndarray:
    """Points as a finite (n, dim) array (a 1-D array counts as n points when dim is 1)."""
    points = np.asarray(values, dtype=float)
    if points.ndim == 1 and dim == 1:
        points = points[:, None]
    if points.ndim != 2 or points.shape[1] != dim:
        raise ValueError(
            f"{name} must be an (n, {dim}) array of points like the data, not shape {points.shape}"
        )
    if not np.all(np.isfinite(points)):
        raise ValueError(f"{name} has NaN or infinite entries")
    return points


def standard_normal_draws(n: int, dim: int, quasi: bool, seed) -> np.ndarray:
    """n standard-normal points in dim dimensions: pseudo-random, or (``quasi``) a scrambled Halton
    sequence mapped through the normal quantile function, which fills space more evenly."""
    if not quasi:
        return np.random.default_rng(seed).standard_normal((n, dim))
    uniform = qmc.Halton(dim, scramble=True, seed=np.random.default_rng(seed)).random(n)
    return ndtri(np.clip(uniform, 1e-12, 1 - 1e-12))


def stan_data(
    data: np.ndarray,
    *,
    n_inducing: int = 30,
    n_normaliser: int = 500,
    at: np.ndarray | None = None,
    seed: int = 0,
    mu0_sd: float = 2.0,
    inducing: np.ndarray | None = None,
    fixed_fraction: float = 0.5,
    quasi: bool = True,
) -> dict[str, Any]:
    """Stan data for ``gp_density.stan``.

    Parameters
    ----------
    data : ndarray (N, dim) or (N,)
        The observations.
    n_inducing : int
        L, the number of inducing points (ignored when ``inducing`` is given).
    n_normaliser : int
        R, the number of fixed Monte Carlo points of the normaliser.
    at : ndarray (G, dim), optional
        Output points, where the program reports ``log_density``.
    seed : int
        Seeds the inducing points and the normaliser's standard-normal draws.
    mu0_sd : float
        The sd of mu0's Gaussian prior.
    inducing : ndarray (L, dim), optional
        The inducing points; default ``inducing_points(data, n_inducing, GaussianBase.fit(data), seed)``.
    fixed_fraction : float
        The share of the R normaliser points fixed around the data (drawn from
        q0 = N(data mean, (FIXED_INFLATION sd)^2 data covariance)); the rest
        are standard-normal eps moved through the learned base measure. 0
        gives the plain reparameterised estimator, whose posterior is improper
        (see the module docstring).
    quasi : bool
        Quasi-random normaliser points (a scrambled Halton sequence through the
        normal quantile function) rather than pseudo-random ones.
    """
    data = check_data(data)
    dim = data.shape[1]
    if n_normaliser < 1:
        raise ValueError(f"n_normaliser must be at least 1, not {n_normaliser}")
    if not mu0_sd > 0:
        raise ValueError(f"mu0_sd must be positive, not {mu0_sd}")
    if inducing is None:
        if n_inducing < 2:
            raise ValueError(f"n_inducing must be at least 2, not {n_inducing}")
        inducing = inducing_points(data, n_inducing, GaussianBase.fit(data), seed)
    inducing = _points(inducing, dim, "inducing")
    if len(inducing) < 2:
        raise ValueError(f"need at least 2 inducing points, not {len(inducing)}")
    at = np.empty((0, dim)) if at is None else _points(at, dim, "at")
    if not 0 <= fixed_fraction <= 1:
        raise ValueError(f"fixed_fraction must be in [0, 1], not {fixed_fraction}")
    n_fixed = int(round(fixed_fraction * n_normaliser))
    eps = standard_normal_draws(n_normaliser - n_fixed, dim, quasi, [seed, 1])
    fitted = GaussianBase.fit(data)
    q0 = GaussianBase(fitted.mean, FIXED_INFLATION * fitted.chol)
    fixed = q0.mean + standard_normal_draws(n_fixed, dim, quasi, [seed, 2]) @ q0.chol.T
    return {
        "N": len(data),
        "D": dim,
        "x": data,
        "L": len(inducing),
        "inducing": inducing,
        "R_base": len(eps),
        "eps": eps,
        "R_fixed": n_fixed,
        "fixed_points": fixed,
        "q0_mean": q0.mean,
        "q0_chol": q0.chol,
        "G": len(at),
        "at": at,
        "scale": data.std(axis=0),
        "mu0_sd": float(mu0_sd),
    }


def initial_values(values: dict[str, Any], chains: int, seed: int = 0) -> list[dict[str, Any]]:
    """One start per chain near the fitted base Gaussian, jittered (constrained values)."""
    rng = np.random.default_rng([seed, 3])
    base = GaussianBase.fit(values["x"])
    starts = []
    for _ in range(chains):
        jitter = rng.uniform(-0.2, 0.2, size=2 + values["D"])
        starts.append(
            {
                "mu0": float(jitter[0]),
                "amplitude": float(np.exp(jitter[1])),
                "lengthscale": values["scale"] * np.exp(jitter[2:]),
                "base_mean": base.mean,
                "base_chol": base.chol,
                "g_raw": rng.uniform(-0.2, 0.2, size=values["L"]),
            }
        )
    return starts


def fit_stan_baseline(
    data: np.ndarray,
    *,
    at: np.ndarray,
    n_inducing: int = 30,
    n_normaliser: int = 500,
    chains: int = 2,
    warmup: int = 500,
    draws: int = 500,
    seed: int = 0,
    fixed_fraction: float = 0.5,
    quasi: bool = True,
    progress: bool = False,
) -> StanBaselineFit:
    """Fit the Stan baseline by Stan's NUTS and return the density at ``at``.

    Chains start near the fitted base Gaussian (amplitude 1, lengthscales the
    data's sd, mu0 0, g_raw 0, each jittered), not at Stan's random inits,
    which put the base measure anywhere in (-2, 2)^D. Warm-up and sampling
    run as two calls (the second continues from the first's adapted step
    sizes, metrics and last points), so each is timed. Other arguments as
    ``stan_data``.

    Returns
    -------
    StanBaselineFit, a dict (and a Result) with
        ``density`` : ndarray (chains, draws, G), exp(log_density) per draw;
        ``density_mean`` : ndarray (G,), the posterior mean density;
        ``log_z`` : ndarray (chains, draws), the Monte Carlo log normaliser;
        ``amplitude`` (chains, draws), ``lengthscale`` (chains, draws, dim), ``mu0`` (chains, draws);
        ``divergences`` : int, in the sampling phase;
        ``warmup_divergences`` : int;
        ``step_size`` : float, mean adapted step size over chains;
        ``warmup_seconds``, ``sampling_seconds``, ``wall_seconds`` : float;
        ``gradient_evaluations`` : int, warm-up and sampling;
        ``stan_data`` : the data the program ran on;
        ``fits`` : the two ``NutsFit`` (warm-up, sampling).
    """
    from stanaccel.programs import program_path
    from stanaccel.stan import StanModel, compile_program
    from stanaccel.stan.nuts import sample_nuts

    if at is None:
        raise ValueError("at (the output points) is required")
    values = stan_data(
        data,
        n_inducing=n_inducing,
        n_normaliser=n_normaliser,
        at=at,
        seed=seed,
        fixed_fraction=fixed_fraction,
        quasi=quasi,
    )
    if chains < 1 or warmup < 1 or draws < 1:
        raise ValueError(f"chains, warmup and draws must be at least 1, not {chains}, {warmup}, {draws}")
    model = StanModel(compile_program(program_path(PROGRAM)), values)
    seeds = spawn_seeds(seed, ["warmup", "sampling"])
    inits = initial_values(values, chains, seed)
    start = time.perf_counter()
    warm = sample_nuts(
        model, inits=inits, chains=chains, warmup=warmup, draws=0, seed=seeds["warmup"], progress=progress
    )
    warmup_seconds = time.perf_counter() - start
    start = time.perf_counter()
    fit = sample_nuts(
        model, warmup_from=warm.warmup_state(), draws=draws, seed=seeds["sampling"], progress=progress
    )
    sampling_seconds = time.perf_counter() - start
    variables = fit.stan_variables()
    density = np.exp(variables["log_density"])
    out = {
        "density": density,
        "density_mean": density.mean(axis=(0, 1)),
        "log_z": variables["log_z"],
        "amplitude": variables["amplitude"],
        "lengthscale": variables["lengthscale"],
        "mu0": variables["mu0"],
        "divergences": int(fit.sample_stats["diverging"].sum()),
        "warmup_divergences": int(warm.warmup_sample_stats["diverging"].sum()),
        "step_size": float(np.mean(warm.step_size)),
        "warmup_seconds": warmup_seconds,
        "sampling_seconds": sampling_seconds,
        "wall_seconds": warmup_seconds + sampling_seconds,
        "gradient_evaluations": warm.gradient_evaluations + fit.gradient_evaluations,
        "stan_data": values,
        "fits": (warm, fit),
    }
    return StanBaselineFit(out)
