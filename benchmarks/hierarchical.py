"""A hierarchical model as users write it: ``--method auto`` against ``--method nuts``, process by process.

A robust regression with group effects, written as a Stan user writes it
(no ``beta``, no ``observations``): y_i ~ student_t(nu, alpha + x_i b +
u[g_i], sigma), K = 5 predictors, J = 12 groups with non-centred effects
u = tau * z, 21 parameters. The data are drawn here (NumPy, ``--seed``),
N = 10^4 by default: about 830 observations a group, which pin each u
down, so the non-centred form is an inverted funnel (z = u / tau falls as
1 / tau), and ``auto`` says so and advises the centred form. The same
model written centred (``u ~ normal(0, tau)``) runs too (``--forms``), so
that the advice is measured: every ratio is to NUTS on the first form, the
program as the user wrote it.

Each method runs as its own ``stanaccel sample`` process (4 chains x 1000
draws, the same seed), after one ``stanaccel compile`` charged to neither.
Per run: what auto chose, ESS = the worst over the parameters of min(bulk,
tail) (the run's metrics' ``ess_min``), seconds charged (its metrics'
``wall_seconds``: warm-up, pilots, sampling), the process's wall clock, ESS
per second both ways and its ratio to NUTS's, and the worst |z| of a
parameter's mean (alpha, b, sigma, nu, tau and u, which both forms have)
against NUTS's, z = (mean - mean_nuts) / sqrt(mcse^2 + mcse_nuts^2), with
the Bonferroni limit (family-wise 1%).

Run: .venv/bin/python benchmarks/hierarchical.py [FOLDER] [--n 10000] [--methods nuts,auto]
     [--forms non-centred,centred] [--seed 1] [--data-seed 5] [--chains 4] [--draws 1000]
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy.stats import norm

from stanaccel.diagnostics._arviz import az, numpy_path
from stanaccel.stan import write_data

PROGRAM = """
data {
  int<lower=1> N;
  int<lower=1> K;
  int<lower=1> J;
  matrix[N, K] X;
  array[N] int<lower=1, upper=J> g;
  vector[N] y;
}
parameters {
  real alpha;
  vector[K] b;
  real<lower=0> sigma;
  real<lower=1> nu;
  real<lower=0> tau;
  vector[J] z;
}
transformed parameters {
  vector[J] u = tau * z;
}
model {
  alpha ~ normal(0, 5);
  b ~ normal(0, 2);
  sigma ~ exponential(1);
  nu ~ gamma(2, 0.1);
  tau ~ normal(0, 1);
  z ~ std_normal();
  y ~ student_t(nu, alpha + X * b + u[g], sigma);
}
"""
CENTRED = PROGRAM.replace(
    "  vector[J] z;\n}\ntransformed parameters {\n  vector[J] u = tau * z;\n}", "  vector[J] u;\n}"
)
CENTRED = CENTRED.replace("  z ~ std_normal();", "  u ~ normal(0, tau);")
FORMS = {"non-centred": PROGRAM, "centred": CENTRED}
PARAMETERS = ["alpha", "b", "sigma", "nu", "tau", "u"]
"""The quantities both forms have, compared against NUTS on the first form."""


def robust_data(n: int, seed: int, k: int = 5, groups: int = 12) -> dict:
    """Data from the model: correlated predictors, group effects of sd 0.5, Student-t noise (nu = 4)."""
    rng = np.random.default_rng(seed)
    cov = 0.5 ** np.abs(np.subtract.outer(np.arange(k), np.arange(k)))
    x = rng.multivariate_normal(np.zeros(k), cov, size=n)
    g = rng.integers(1, groups + 1, size=n)
    u = 0.5 * rng.standard_normal(groups)
    y = 1.0 + x @ rng.normal(0, 1, size=k) + u[g - 1] + 0.8 * rng.standard_t(4, size=n)
    return {"N": n, "K": k, "J": groups, "X": x, "g": g, "y": y}


def run(method: str, form: str, folder: Path, args) -> dict:
    """One ``stanaccel sample`` process: its metrics, draws, and wall clock."""
    output = folder / f"{form}-{method}.nc"
    command = [sys.executable, "-m", "stanaccel.cli", "sample", str(folder / f"robust-{form}.stan"), "--data",
               str(folder / "robust.json"), "--method", method, "--chains", str(args.chains), "--draws",
               str(args.draws), "--seed", str(args.seed), "-q", "-o", str(output)]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - start
    (folder / f"{form}-{method}.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise SystemExit(f"{method} failed ({shlex.join(command)}):\n{done.stderr[-2000:]}")
    metrics = json.loads((folder / f"{form}-{method}.metrics.json").read_text())
    # an older stanaccel has no ess_min
    metrics.setdefault("ess_min", min(metrics["ess_bulk_min"], metrics["ess_tail_min"]))
    metrics["ess_per_second"] = metrics["ess_min"] / metrics["wall_seconds"]
    return {"method": method, "form": form, "metrics": metrics, "wall": wall, "idata": az.from_netcdf(output)}


@numpy_path()
def worst_z(idata, reference) -> tuple[float, float]:
    """The worst |z| of a parameter's mean against the reference run's, and the Bonferroni limit."""
    ours = az.summary(idata, var_names=PARAMETERS, kind="all", round_to="none")
    theirs = az.summary(reference, var_names=PARAMETERS, kind="all", round_to="none")
    z = (ours["mean"] - theirs["mean"]) / np.sqrt(ours["mcse_mean"] ** 2 + theirs["mcse_mean"] ** 2)
    return float(np.max(np.abs(z))), float(norm.isf(0.01 / (2 * len(z))))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", help="work folder (default: a temporary one)")
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--methods", default="nuts,auto")
    parser.add_argument(
        "--forms", default="non-centred,centred", help=f"of {', '.join(FORMS)}; the first is the baseline"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data-seed", type=int, default=5)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--draws", type=int, default=1000)
    args = parser.parse_args(argv)
    folder = Path(args.folder or tempfile.mkdtemp(prefix="stanaccel-hierarchical-"))
    folder.mkdir(parents=True, exist_ok=True)
    write_data(folder / "robust.json", robust_data(args.n, args.data_seed))
    runs = []
    for form in args.forms.split(","):
        (folder / f"robust-{form}.stan").write_text(FORMS[form])
        start = time.perf_counter()
        compile_command = [
            sys.executable,
            "-m",
            "stanaccel.cli",
            "compile",
            str(folder / f"robust-{form}.stan"),
        ]
        subprocess.run(compile_command, check=True, capture_output=True)
        print(f"robust regression ({form}), N = {args.n}; compiled in {time.perf_counter() - start:.0f} s "
              f"(charged to neither); work folder {folder}", flush=True)  # fmt: skip
        runs += [run(method, form, folder, args) for method in args.methods.split(",")]
    nuts = runs[0]
    print("\n| form | run | chose | ESS bulk / tail | ESS (min) | s charged | process s | ESS/s charged "
          "| x NUTS charged | x NUTS process | worst z vs NUTS |")  # fmt: skip
    print("| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in runs:
        m, base = r["metrics"], nuts["metrics"]
        charged = m["ess_per_second"] / base["ess_per_second"]
        process = (m["ess_min"] / r["wall"]) / (base["ess_min"] / nuts["wall"])
        z, limit = worst_z(r["idata"], nuts["idata"]) if r is not nuts else (0.0, 0.0)
        chose = m.get("auto", {}).get("chosen", "")
        print(f"| {r['form']} | {r['method']} | {chose} | "
              f"{m['ess_bulk_min']:.0f} / {m['ess_tail_min']:.0f} | "
              f"{m['ess_min']:.0f} | {m['wall_seconds']:.1f} | {r['wall']:.1f} | {m['ess_per_second']:.3g} | "
              f"{charged:.2f} | "
              f"{process:.2f} | {'-' if r is nuts else f'{z:.2f} (limit {limit:.2f})'} |")  # fmt: skip
    for r in runs:
        if "auto" in r["metrics"]:
            auto = r["metrics"]["auto"]
            funnel = (auto.get("funnel") or {}).get("message", "none")
            print(f"\n{r['form']}: {auto['reason']}\nfunnel: {funnel}")
            print(f"charged: {r['metrics']['charged_seconds']}")


if __name__ == "__main__":
    main()
