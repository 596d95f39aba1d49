"""How far the automatic approximations are from the posterior as N grows: subsets against control variates.

A Bayesian logistic regression (K = 5 correlated predictors, pairwise
correlation 0.5, N(0, 5^2) priors), the bundled ``logistic`` program, its
likelihood multiplied by ``beta`` (the data: the tests' ``logistic_data`` in
``tests/sampling/programs.py``, shared so that the two cannot drift apart).
For N = 10^3, 10^4, 10^5 and m = 100, 1000 the script prints the sd of
log pi - log pi* over posterior draws (100 draws of a short Stan NUTS run),
which sets the discretizing chain's mark-move acceptance (about 2 Phi(-sd / sqrt 2)), for

- ``{ kind = "subset", m }``: m observations, their likelihood scaled by N/m;
- ``{ kind = "control-variate", m }``: the same subset corrected by
  second-order Taylor control variates about the mode;
- ``{ kind = "laplace" }``: the Gaussian at the mode (no m);

with pi*'s cost relative to pi (one value) and the seconds its set-up took
(the mode and its Hessian, found once per posterior, and each control-variate
approximation's Taylor coefficients; charged to a run).

``--dc`` then runs ``dc`` over ``{ kind = "control-variate", m = 100 }``
against Stan NUTS at N = 10^4 (4 chains x 1000 draws, the same warm-up
length), and prints each one's ESS per second with everything charged.

Run: .venv/bin/python benchmarks/approximation_spread.py [--dc] [--sizes 1000,10000,100000]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

from stanaccel.approx import ApproximationPair, KeepConstants
from stanaccel.programs import program_path
from stanaccel.sampling import ApproximationWarning, make_config, sample
from stanaccel.sampling.config import Approximation
from stanaccel.sampling.program import approximation, automatic_setup
from stanaccel.stan import StanModel, compile_program

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository, for the tests' programs
from tests.sampling.programs import logistic_data  # noqa: E402

OBSERVATIONS = {"count": "N", "fields": ["X", "y"]}


def spreads(program: Path, sizes: list[int], ms: list[int], seed: int = 1) -> list[dict]:
    """One row per N and approximation: sd of log pi - log pi* over NUTS draws, cost, set-up time."""
    compiled = compile_program(program)
    rows = []
    for n in sizes:
        data = {**logistic_data(n, seed=seed), "beta": 1.0}
        model = StanModel(compiled, data)
        fit = sample(
            program, data, "nuts", {"chains": 2, "warmup": 300, "draws": 200}, seed=seed, progress=False
        )
        draws = fit.run.draws_unconstrained.reshape(-1, model.dim)
        points = draws[np.random.default_rng(seed).choice(len(draws), 100, replace=False)]
        exact = KeepConstants(model)
        specs = [Approximation.parse({"kind": "laplace"})]
        for m in ms:
            specs += [Approximation.parse({"kind": k, "m": m}) for k in ("subset", "control-variate")]
        for spec in specs:
            if spec.m is not None and spec.m >= n:
                continue
            config = make_config("dc", {"approx": spec, "observations": OBSERVATIONS})
            setup = automatic_setup(spec, model, data, config, seed) if spec.kind != "subset" else None
            approx = approximation(spec, model, data, config, seed)
            pair = ApproximationPair(exact, approx)
            rows.append(
                {
                    "N": n,
                    "approximation": spec.label,
                    "sd": pair.discrepancy(points)["log_ratio_sd"],
                    "cost": pair.cost(points[:20], repeats=20)["relative_cost"],
                    "mode": setup.mode_seconds if setup else 0.0,
                    "taylor": setup.seconds if setup else 0.0,
                }
            )
    return rows


def print_spreads(rows: list[dict], ms: list[int]) -> None:
    """Subset and control variates side by side, per N and m."""
    print("\nsd of log pi - log pi* over 100 posterior draws (logistic regression, K = 5)")
    print("| N | m | subset | control-variate | laplace | cv cost / pi | mode s | cv Taylor s |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    by = {(r["N"], r["approximation"]): r for r in rows}
    for n in sorted({r["N"] for r in rows}):
        lap = by[(n, "laplace")]
        for m in ms:
            if (n, f"subset m={m}") not in by:
                continue
            sub, cv = by[(n, f"subset m={m}")], by[(n, f"control-variate m={m}")]
            print(
                f"| {n} | {m} | {sub['sd']:.3g} | {cv['sd']:.3g} | {lap['sd']:.3g} | {cv['cost']:.3g} "
                f"| {lap['mode']:.2f} | {cv['taylor']:.2f} |"
            )


def dc_against_nuts(program: Path, n: int = 10_000, m: int = 100, seed: int = 3) -> None:
    """dc over control variates against Stan NUTS on one posterior: ESS/s with everything charged."""
    data = {**logistic_data(n, seed=seed), "beta": 1.0}
    runs = {
        "Stan NUTS": ("nuts", {}),
        f"dc (hmc) over control-variate m={m}": (
            "dc",
            {"inner": "hmc", "approx": {"kind": "control-variate", "m": m}, "observations": OBSERVATIONS},
        ),
    }
    print(f"\nN = {n}: 4 chains x (1000 warm-up + 1000 draws), seed {seed}")
    print("| run | ESS/s charged | sampling only | seconds (charged) | min bulk ESS | worst R-hat |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, (method, settings) in runs.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ApproximationWarning)
            result = sample(program, data, method, settings, seed=seed, progress=False)
        metrics = result.metrics()
        shown = ", ".join(f"{k} {v:.1f}" for k, v in result.charged_seconds.items()) or "its own warm-up"
        print(
            f"| {name} | {metrics['ess_per_second']:.1f} | {metrics['ess_per_second_sampling']:.1f} "
            f"| {metrics['wall_seconds']:.1f} ({shown}) | {metrics['ess_bulk_min']:.0f} "
            f"| {metrics['rhat_max']:.3f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="values of N, comma-separated")
    parser.add_argument("--m", default="100,1000", help="subset sizes, comma-separated")
    parser.add_argument("--dc", action="store_true", help="also run dc over control variates against NUTS")
    args = parser.parse_args()
    program = program_path("logistic")
    ms = [int(m) for m in args.m.split(",")]
    rows = spreads(program, [int(n) for n in args.sizes.split(",")], ms)
    print_spreads(rows, ms)
    if args.dc:
        dc_against_nuts(program)


if __name__ == "__main__":
    main()
