"""The GP density Gibbs sampler on a density it was not built on: its traces and its distance to the truth.

Draws N = 300 points (seed 42) from the three-bump mixture 0.5 N(-2.2, 0.6^2)
+ 0.3 N(0.6, 0.5^2) + 0.2 N(3.0, 0.9^2) (or from the bundled ``bimodal_1d``),
runs ``GibbsSampler(data).run(400, warmup=100, seed=3)`` and prints the
trace of M (latent events), mu0, lambda, the lengthscale and the amplitude
every 40 kept sweeps, their mean, range and bulk ESS, the bulk ESS of the
density where the truth has mass (M mixes slowly, the density need not:
it does not depend on the direction M moves along), the kernel update's
acceptance, the seconds per sweep, and the Hellinger distances to the truth
of the Gibbs estimate, of the variational method (500 iterations) and of
the base Gaussian alone.

Run: .venv/bin/python benchmarks/density_gibbs_traces.py [three_bumps|bimodal_1d]
"""

from __future__ import annotations

import sys
import time

import numpy as np

from stanaccel.diagnostics.metrics import bulk_ess
from stanaccel.gpdensity import GaussianBase, GibbsSampler, VariationalDensity
from stanaccel.gpdensity.synthetic import Mixture, distances, target

TARGETS = {
    "three_bumps": Mixture(
        np.array([0.5, 0.3, 0.2]), np.array([[-2.2], [0.6], [3.0]]), np.array([[[0.36]], [[0.25]], [[0.81]]])
    ),
    "bimodal_1d": target("bimodal_1d"),
}


def main() -> None:
    name = sys.argv[1] if len(sys.argv) > 1 else "three_bumps"
    truth = TARGETS[name]
    data = truth.sample(300, np.random.default_rng(42))
    grid, cell = truth.grid(300)
    start = time.perf_counter()
    run = GibbsSampler(data).run(400, warmup=100, seed=3, at=grid, density_every=5)
    seconds = time.perf_counter() - start
    traces = {
        "M": run["n_events"],
        "mu0": run["mu0"],
        "lambda": run["rate"],
        "lengthscale": run["lengthscales"][:, 0],
        "amplitude": run["amplitude"],
    }
    print(f"{name}, N = 300: Gibbs 100 + 400 sweeps in {seconds:.1f} s ({seconds / 500:.3f} s a sweep), "
          f"kernel acceptance {run['acceptance']}")  # fmt: skip
    print("| sweep | " + " | ".join(traces) + " |")
    print("|---" * (len(traces) + 1) + "|")
    for i in range(0, 400, 40):
        print(f"| {i} | " + " | ".join(f"{v[i]:.3g}" for v in traces.values()) + " |")
    for key, values in traces.items():
        values = np.asarray(values, dtype=float)
        print(f"{key}: mean {values.mean():.3g}, range {values.min():.3g}-{values.max():.3g}, "
              f"bulk ESS {bulk_ess(values[None]):.0f}")  # fmt: skip
    density = run["density"]  # every 5th kept sweep
    mass = np.exp(truth.logpdf(grid)) > 0.05 * np.exp(truth.logpdf(grid)).max()
    ess = np.array([bulk_ess(density[None, :, i]) for i in np.flatnonzero(mass)])
    print(f"density where the truth is above 5% of its peak: bulk ESS of {len(density)} draws "
          f"{ess.min():.0f}-{ess.max():.0f} (median {np.median(ess):.0f})")  # fmt: skip
    gibbs = distances(truth, density.mean(axis=0), grid, cell)["hellinger"]
    start = time.perf_counter()
    fit = VariationalDensity(data, seed=0).fit(500)
    fit_seconds = time.perf_counter() - start
    draws = fit.density_draws(grid, 400, np.random.default_rng(1))
    variational = distances(truth, draws.mean(axis=0), grid, cell)["hellinger"]
    base = distances(truth, np.exp(GaussianBase.fit(data).logpdf(grid)), grid, cell)["hellinger"]
    print(f"Hellinger: Gibbs {gibbs:.3f}, variational {variational:.3f} ({fit_seconds:.1f} s), "
          f"base {base:.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
