"""Which warm-up each method should default to: NUTS's (1000 iterations) against the Laplace one.

For every method whose table entry accepts a cheap warm-up, on small
posteriors, the same run twice, ``warmup = 1000`` and ``warmup = "laplace"``
(everything else at its default, 4 chains x 1000 draws, one seed), and per
run: seconds charged (everything: warm-up, set-up, tuning, sampling), the
smallest bulk ESS over the parameters, ESS per second, the worst |z| of a
parameter's mean, and the largest R-hat. The posteriors:

- ``regression``: a linear regression (tests/sampling/programs.py, N = 40,
  2 coefficients), Gaussian, its posterior known in closed form (z against
  the exact mean);
- ``hierarchical``: big_data.py's hierarchical logistic regression (20
  centred group intercepts, 10 slopes; the group scale makes it skewed) at
  ``--n`` observations, z against a Stan NUTS run's mean (MCSEs combined);
- ``bimodal``: y_i ~ N(theta^2, 1), y's mean 2, so theta has two equal
  modes near +-1.4 that only a tempered chain crosses; E[theta] = 0 exactly,
  and ``share+`` is the share of draws with theta > 0 (0.5 when both modes
  are visited in proportion). A Laplace warm-up starts every chain in one
  mode; NUTS's warm-up starts each chain in the mode its random start fell to.

The latent methods (ae-hmc, ae-pcn) need the ``latent`` extra (TensorFlow, Keras) and are skipped
without it.

Run: .venv/bin/python benchmarks/warmup_defaults.py [--posteriors regression,bimodal,hierarchical]
     [--methods mh,hmc,...] [--n 2000] [--seed 1] [FOLDER]
"""

from __future__ import annotations

import argparse
import math
import sys
import warnings
from pathlib import Path

import arviz as az
import numpy as np
from scipy.stats import norm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.sampling.programs, benchmarks.big_data

from benchmarks.big_data import HIERARCHICAL, make_data  # noqa: E402
from stanaccel.extras import latent_missing  # noqa: E402
from stanaccel.sampling import METHODS, ApproximationWarning, sample  # noqa: E402
from tests.sampling.programs import REGRESSION, regression_data, regression_posterior  # noqa: E402

BIMODAL = """
data {
  int<lower=1> N;
  vector[N] y;
  real<lower=0> beta;
}
parameters {
  real theta;
  vector[2] w;
}
model {
  theta ~ normal(0, 3);
  w ~ normal(0, 1);
  target += beta * normal_lpdf(y | square(theta), 1);
}
"""

CV = {"kind": "control-variate", "m": 10}
CV_BIG = {"kind": "control-variate", "m": 100}
# Per posterior: (program, parameters, observations' fields, per-method settings beyond the defaults).
POSTERIORS = {
    "regression": (
        REGRESSION,
        ["coef"],
        ["x", "y"],
        {"dc": {"approx": CV, "jump": 3}, "tt-approx": {"ladder": [CV, {"kind": "laplace"}]}},
    ),
    "hierarchical": (
        HIERARCHICAL,
        ["mu", "tau", "a", "w"],
        ["X", "y", "g"],
        {"dc": {"approx": CV_BIG, "inner": "hmc"}, "tt-approx": {"ladder": [CV_BIG, {"kind": "laplace"}]}},
    ),
    "bimodal": (BIMODAL, ["theta", "w"], ["y"], {}),
}
METHODS_OF = {
    "regression": [name for name, spec in METHODS.items() if spec.cheap_warmup],
    "hierarchical": ["mh", "hmc", "mala", "pcn", "imh", "pt", "tt", "dc", "tt-approx", "ae-hmc", "ae-pcn"],
    "bimodal": ["hmc", "pt", "tt", "spt", "stt", "ae-hmc", "ae-pcn"],
}


def data_of(posterior: str, n: int) -> dict:
    if posterior == "regression":
        return regression_data()
    if posterior == "bimodal":
        rng = np.random.default_rng(7)
        y = rng.normal(size=10)
        return {"N": 10, "y": y - y.mean() + 2.0, "beta": 1.0}
    return make_data("hierarchical", n)


def columns(posterior, params) -> dict[str, np.ndarray]:
    out = {}
    for p in params:
        x = posterior[p].values
        flat = x.reshape(x.shape[0], x.shape[1], -1)
        out.update({p if x.ndim == 2 else f"{p}[{i}]": flat[:, :, i] for i in range(flat.shape[2])})
    return out


def mean_mcse(x: np.ndarray) -> tuple[float, float]:
    return float(x.mean()), float(np.ravel(az.mcse(x, method="mean"))[0])


def run(program: Path, data: dict, method: str, settings: dict, seed: int, params: list[str]) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ApproximationWarning)
        result = sample(program, data, method, settings, seed=seed, progress=False)
    cols = columns(result.to_inference_data().posterior, params)
    warm = sum(v for k, v in result.charged_seconds.items() if k.startswith("warmup"))
    return {
        "seconds": result.wall_seconds,
        "warmup_s": warm,
        "used": result.reports.get("warmup", {}).get("used", "nuts"),
        "cols": cols,
        "ess": min(float(np.ravel(az.ess(x, method="bulk"))[0]) for x in cols.values()),
        "rhat": max(float(np.ravel(az.rhat(x))[0]) for x in cols.values()),
    }


def worst_z(row: dict, reference: dict[str, tuple[float, float]]) -> tuple[float, float]:
    """The largest |mean - reference| / sqrt(mcse^2 + mcse_ref^2), and its Bonferroni limit (1%)."""
    z = []
    for name, x in row["cols"].items():
        mean, mcse = mean_mcse(x)
        ref, ref_mcse = reference[name]
        z.append(abs(mean - ref) / math.hypot(mcse, ref_mcse))
    return max(z), float(norm.isf(0.01 / (2 * len(z))))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default="output/warmup_defaults")
    parser.add_argument("--posteriors", default="regression,bimodal,hierarchical")
    parser.add_argument("--methods", default=None, help="comma-separated (default: each posterior's list)")
    parser.add_argument("--n", type=int, default=2000, help="observations of the hierarchical posterior")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    folder = Path(args.folder)
    folder.mkdir(parents=True, exist_ok=True)
    print("| posterior | method | warmup | used | seconds | warm-up s | ESS bulk min | ESS/s | "
          "max abs z (limit) | R-hat max | share+ |")  # fmt: skip
    print("| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for posterior in args.posteriors.split(","):
        source, params, fields, extra = POSTERIORS[posterior]
        program = folder / f"{posterior}.stan"
        program.write_text(source)
        data = data_of(posterior, args.n)
        common = {"chains": 4, "draws": 1000}
        if posterior == "regression":
            mean, sd = regression_posterior(data)
            reference = {f"coef[{i}]": (mean[i], 0.0) for i in range(2)}
        elif posterior == "bimodal":
            reference = {"theta": (0.0, 0.0), "w[0]": (0.0, 0.0), "w[1]": (0.0, 0.0)}
        else:
            nuts = run(program, data, "nuts", {**common, "warmup": 1000}, args.seed, params)
            reference = {name: mean_mcse(x) for name, x in nuts["cols"].items()}
            print(f"| {posterior} | nuts | 1000 | nuts | {nuts['seconds']:.1f} | | {nuts['ess']:.0f} | "
                  f"{nuts['ess'] / nuts['seconds']:.0f} | | {nuts['rhat']:.3f} | |", flush=True)  # fmt: skip
        methods = args.methods.split(",") if args.methods else METHODS_OF[posterior]
        for method in methods:
            if METHODS[method].latent and latent_missing(method):
                print(f"| {posterior} | {method} | | skipped: {latent_missing(method)} | | | | | | | |")
                continue
            settings = {**common, **extra.get(method, {})}
            if {"approx", "ladder", "observations"} & set(METHODS[method].needs):
                settings["observations"] = {"count": "N", "fields": fields}
            for warmup in (1000, "laplace"):
                try:
                    row = run(program, data, method, {**settings, "warmup": warmup}, args.seed, params)
                except Exception as error:  # a row that fails is reported, not the end of the table
                    print(f"| {posterior} | {method} | {warmup} | failed: {str(error).splitlines()[0]} |")
                    continue
                z, limit = worst_z(row, reference)
                share = f"{(row['cols']['theta'] > 0).mean():.2f}" if posterior == "bimodal" else ""
                print(f"| {posterior} | {method} | {warmup} | {row['used']} | {row['seconds']:.1f} | "
                      f"{row['warmup_s']:.1f} | {row['ess']:.0f} | {row['ess'] / row['seconds']:.0f} | "
                      f"{z:.2f} ({limit:.2f}) | {row['rhat']:.3f} | {share} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
