"""What a run costs after its last draw: the diagnostics, the summary and the writing of the outputs.

A posterior of ``--variables`` scalars (default 2,000, the shape of a
stochastic-volatility model with 1,000 latent states and its 1,000
transformed parameters) of 4 chains x 1000 AR(1) draws (autocorrelation
0.9; a fixed seed), as ``stanaccel sample`` handles it after sampling:

- ``summary``: the table it prints (:func:`stanaccel.diagnostics.summary`);
- ``metrics``: ESS (bulk, tail) and R-hat of every scalar and the verdict
  (:func:`stanaccel.diagnostics.convergence_metrics`);
- ``write netCDF``: the draws to ``fit.nc``; ``write metrics.json``.

Beside them, the same figures by ArviZ's own functions (``arviz.summary``,
``arviz.ess`` bulk and tail, ``arviz.rhat``), which stanaccel called until
it computed them over every scalar at once
(:mod:`stanaccel.diagnostics.convergence`); their values agree to 1e-10.

Run: .venv/bin/python benchmarks/diagnostics_time.py [--variables 2000] [--draws 1000] [--arviz]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from stanaccel.diagnostics import convergence_metrics, summary
from stanaccel.diagnostics._arviz import az, numpy_path
from stanaccel.diagnostics.files import json_text, save_or_rescue


def posterior(variables: int, chains: int, draws: int, seed: int = 1) -> az.InferenceData:
    """AR(1) draws of ``variables`` scalars: half in a vector ``h``, half in a vector ``y``."""
    rng = np.random.default_rng(seed)
    noise = rng.standard_normal((chains, draws, variables))
    x = np.empty_like(noise)
    x[:, 0] = noise[:, 0]
    for t in range(1, draws):
        x[:, t] = 0.9 * x[:, t - 1] + noise[:, t]
    half = variables // 2
    return az.from_dict({"h": x[:, :, :half], "y": x[:, :, half:]})


def timed(label: str, function, rows: list) -> object:
    start = time.perf_counter()
    value = function()
    rows.append((label, time.perf_counter() - start))
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variables", type=int, default=2000)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--arviz", action="store_true", help="also time ArviZ's per-variable functions")
    args = parser.parse_args()
    idata = posterior(args.variables, args.chains, args.draws)
    rows: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory() as folder:
        timed("summary", lambda: summary(idata), rows)
        metrics = timed("metrics", lambda: convergence_metrics(idata, wall_seconds=1.0), rows)
        timed("write netCDF", lambda: save_or_rescue(idata, Path(folder) / "fit.nc"), rows)
        timed(
            "write metrics.json",
            lambda: (Path(folder) / "fit.metrics.json").write_text(json_text(metrics)),
            rows,
        )
    print(f"{args.variables} scalars, {args.chains} chains x {args.draws} draws")
    print(f"{'stanaccel':<24}{'seconds':>10}")
    for label, seconds in rows:
        print(f"  {label:<22}{seconds:>10.2f}")
    print(f"  {'total':<22}{sum(s for _, s in rows):>10.2f}")
    if args.arviz:
        theirs: list[tuple[str, float]] = []
        with numpy_path():
            timed("arviz.summary", lambda: az.summary(idata), theirs)
            timed("arviz.ess bulk", lambda: az.ess(idata, method="bulk"), theirs)
            timed("arviz.ess tail", lambda: az.ess(idata, method="tail"), theirs)
            timed("arviz.rhat", lambda: az.rhat(idata), theirs)
        print(f"{'ArviZ, per variable':<24}{'seconds':>10}")
        for label, seconds in theirs:
            print(f"  {label:<22}{seconds:>10.2f}")
        print(f"  {'total':<22}{sum(s for _, s in theirs):>10.2f}")


if __name__ == "__main__":
    main()
