"""The GP density Gibbs sampler's normaliser: M's and lambda's bulk ESS per sweep and per second, with and
without the normaliser move, on the three densities of the GP density benchmarks.

The densities: the three-bump mixture of ``density_gibbs_traces.py``, the bundled ``bimodal_1d`` and
``mixture_2d``. For each, N = 300 points (seed 42),
``GibbsSampler(data, normaliser_every=1).run(SWEEPS, warmup=100, seed=3)`` (``--off``: with
``normaliser_every=0``, the sweep without the move), and prints the seconds
per sweep, M's and lambda's mean and bulk ESS (ArviZ, one chain), ESS per 100 sweeps and per second
(wall time of the kept sweeps and the warm-up together), the move's acceptance, and the Hellinger
distance of the posterior-mean density (every 5th kept sweep) to the truth; then, below the table,
the ESS per 100 sweeps of mu0 and the hyperparameters and M's correlation with the base measure's sd.

Run: .venv/bin/python benchmarks/density_gibbs_normaliser.py [--off] [--sweeps 400] [NAME ...]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from stanaccel.diagnostics.metrics import bulk_ess
from stanaccel.gpdensity import GibbsSampler
from stanaccel.gpdensity.synthetic import Mixture, distances, target

TARGETS = {
    "three_bumps": Mixture(
        np.array([0.5, 0.3, 0.2]), np.array([[-2.2], [0.6], [3.0]]), np.array([[[0.36]], [[0.25]], [[0.81]]])
    ),
    "bimodal_1d": target("bimodal_1d"),
    "mixture_2d": target("mixture_2d"),
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("names", nargs="*", default=list(TARGETS))
    parser.add_argument("--off", action="store_true", help="without the normaliser move")
    parser.add_argument("--sweeps", type=int, default=400)
    parser.add_argument("--fixed-base", action="store_true", help="keep the base measure at the data's fit")
    parser.add_argument("--n", type=int, default=300)
    args = parser.parse_args()
    settings = {"normaliser_every": 0 if args.off else 1, "learn_base": not args.fixed_base}
    print("| density | s / sweep | M mean | M ESS | per 100 sweeps | per s | lambda mean | lambda ESS "
          "| per 100 sweeps | per s | move acceptance | Hellinger |")  # fmt: skip
    print("|---" * 12 + "|")
    others = []
    for name in args.names:
        truth = TARGETS[name]
        data = truth.sample(args.n, np.random.default_rng(42))
        grid, cell = truth.grid(300 if truth.dim == 1 else 60)
        start = time.perf_counter()
        run = GibbsSampler(data, **settings).run(args.sweeps, warmup=100, seed=3, at=grid, density_every=5,
                                                  n_normaliser=1024)  # fmt: skip
        seconds = time.perf_counter() - start
        hellinger = distances(truth, run["density"].mean(axis=0), grid, cell)["hellinger"]
        cells = [name, f"{seconds / (args.sweeps + 100):.3f}"]
        for key in ("n_events", "rate"):
            values = np.asarray(run[key], dtype=float)
            ess = bulk_ess(values[None])
            per_sweep, per_second = 100 * ess / args.sweeps, ess / seconds
            cells += [f"{values.mean():.4g}", f"{ess:.0f}", f"{per_sweep:.1f}", f"{per_second:.2f}"]
        cells += [f"{run['acceptance'].get('normaliser', float('nan')):.2f}", f"{hellinger:.3f}"]
        print("| " + " | ".join(cells) + " |", flush=True)
        series = {"mu0": run["mu0"], "base sd": run["base_chol"][:, 0, 0],
                  "base mean": run["base_mean"][:, 0], "amplitude": run["amplitude"],
                  "lengthscale": run["lengthscales"][:, 0]}  # fmt: skip
        ess = ", ".join(f"{k} {100 * bulk_ess(np.asarray(v, dtype=float)[None]) / args.sweeps:.1f}"
                        for k, v in series.items())  # fmt: skip
        correlation = np.corrcoef(run["n_events"], series["base sd"])[0, 1]
        others.append(f"{name}: ESS per 100 sweeps {ess}; corr(M, base sd) {correlation:.2f}")
    print("\n".join(others))


if __name__ == "__main__":
    main()
