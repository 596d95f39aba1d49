"""The GP density model's variational method against the truth on the bundled densities, at several N.

Draws the data as the density study does (``workflows/density_1d.toml`` and
``density_2d.toml``: seed 11 for ``bimodal_1d``, 12 for ``mixture_2d``; 13 for
``mixture_3d``; a pool of the largest N whose first N points are each data
set, then 2000 test points), fits ``VariationalDensity(data, n_inducing=L,
seed=seed).fit(500)`` and prints, per N: the seconds, the iterations, the
Hellinger distance of the mean density (400 draws) to the truth on a grid (300
points in 1-D, 40^2 in 2-D, 30^3 in 3-D) and its mass there, the test log
likelihood per point (the truth's beside it), the bound per point, the
largest fall of the bound and of the objective (bound plus log hyperprior)
between iterations, and the fit's mass check and early-stop reason.

Run: .venv/bin/python benchmarks/density_variational.py mixture_2d 500 1000 3000
"""

from __future__ import annotations

import sys
import time
import warnings

import numpy as np

from stanaccel.gpdensity import VariationalDensity
from stanaccel.gpdensity.synthetic import distances, target

SETTINGS = {  # seed, inducing points, grid points per axis for the distances
    "bimodal_1d": (11, 50, 300),
    "mixture_2d": (12, 60, 40),
    "mixture_3d": (13, 60, 30),
}


def main() -> None:
    name = sys.argv[1] if len(sys.argv) > 1 else "mixture_2d"
    sizes = sorted(int(n) for n in sys.argv[2:]) or [500, 1000, 3000]
    seed, n_inducing, per_axis = SETTINGS[name]
    truth = target(name)
    rng = np.random.default_rng(seed)
    pool, test = truth.sample(sizes[-1], rng), truth.sample(2000, rng)
    grid, cell = truth.grid(per_axis)
    print(f"{name}: truth's test log likelihood {np.mean(truth.logpdf(test)):.3f} per point")
    print(
        "| N | seconds | iterations | Hellinger | mass | test loglik | bound / N | largest fall "
        "(bound, objective) | mass check | stopped |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n in sizes:
        started = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fit = VariationalDensity(pool[:n], n_inducing=n_inducing, seed=seed).fit(500)
        seconds = time.perf_counter() - started
        density = fit.density_draws(np.vstack([grid, test]), 400, np.random.default_rng(seed)).mean(0)
        on_grid = density[: len(grid)]
        hellinger = distances(truth, on_grid, grid, cell)["hellinger"]
        falls = [max(0.0, -np.diff(t).min()) if len(t) > 1 else 0.0 for t in (fit.elbo, fit.objective)]
        stopped = fit.stopped or "; ".join(str(w.message) for w in caught)
        print(f"| {n} | {seconds:.1f} | {fit.iterations} | {hellinger:.3f} | {np.sum(on_grid) * cell:.3f} "
              f"| {np.mean(np.log(density[len(grid):])):.3f} | {fit.elbo[-1] / n:.4f} "
              f"| {falls[0]:.2g}, {falls[1]:.2g} | {fit.mass:.4f} | {stopped} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
