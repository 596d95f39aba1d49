"""Every ``stanaccel sample`` method on a Stan program that stanaccel does not bundle, against NUTS.

The program is a robust (Student-t) linear regression written here, as a
user would: its likelihood is multiplied by ``beta`` (so it can be tempered)
and its observations are declared for subsampling; a latent program for the
``latent-nuts`` pipeline is written beside it. The script writes both and
the data to a folder (default ``output/user_program``), runs each method in
one process, and prints each method's command line and its ESS per second
against Stan NUTS on the same posterior in the same run (with the warm-up,
pilot, training and tuning charged, and sampling only).

Run: .venv/bin/python benchmarks/user_program_vs_nuts.py [FOLDER] [--quick]
"""

from __future__ import annotations

import shlex
import sys
import warnings
from pathlib import Path

import numpy as np

from stanaccel.sampling import ApproximationWarning, sample
from stanaccel.stan import write_data

PROGRAM = """
data {
  int<lower=2> N;
  int<lower=1> K;
  matrix[N, K] X;
  vector[N] y;
  real<lower=0> beta;
}
parameters {
  real alpha;
  vector[K] b;
  real<lower=0> sigma;
}
model {
  alpha ~ normal(0, 5);
  b ~ normal(0, 2);
  sigma ~ normal(0, 2);
  target += beta * student_t_lpdf(y | 4, alpha + X * b, sigma);
}
"""

LATENT = """
data {
  int<lower=2> N;
  int<lower=1> K;
  matrix[N, K] X;
  vector[N] y;
  real<lower=0> beta;
  int<lower=1> latent_dim;
  int<lower=1> hidden;
  matrix[hidden, latent_dim] W1;
  vector[hidden] b1;
  int<lower=0, upper=1> hidden_tanh;
  matrix[K + 2, hidden] W2;
  vector[K + 2] b2;
  vector[K + 2] location;
  vector<lower=0>[K + 2] scale;
}
parameters {
  vector[latent_dim] z;
}
model {
  vector[hidden] h = W1 * z + b1;
  if (hidden_tanh) {
    h = tanh(h);
  }
  vector[K + 2] theta = location + scale .* (W2 * h + b2);
  real alpha = theta[1];
  vector[K] b = theta[2:(K + 1)];
  real sigma = exp(theta[K + 2]);
  target += theta[K + 2];  // log Jacobian of sigma = exp(theta[K + 2])
  alpha ~ normal(0, 5);
  b ~ normal(0, 2);
  sigma ~ normal(0, 2);
  target += beta * student_t_lpdf(y | 4, alpha + X * b, sigma);
}
"""

# A cheap approximation with the same parameters: a normal likelihood of the same scale (the t(4)
# with scale sigma has variance 2 sigma^2) through sufficient statistics, O(K^2) per evaluation.
APPROXIMATION = """
data {
  int<lower=2> N;
  int<lower=1> K;
  matrix[K + 1, K + 1] ZtZ;
  vector[K + 1] Zty;
  real yty;
  real<lower=0> beta;
}
parameters {
  real alpha;
  vector[K] b;
  real<lower=0> sigma;
}
model {
  vector[K + 1] w = append_row(alpha, b);
  alpha ~ normal(0, 5);
  b ~ normal(0, 2);
  sigma ~ normal(0, 2);
  real squares = yty - 2 * dot_product(w, Zty) + quad_form(ZtZ, w);  // sum of (y - alpha - X b)^2
  target += beta * (-N * log(sigma) - squares / (4 * square(sigma)));
}
"""

OBSERVATIONS = '{count="N", fields=["X", "y"]}'


def methods(folder: Path, n: int) -> list[tuple[str, dict]]:
    subset = {"kind": "subset", "m": n // 2}
    observations = {"count": "N", "fields": ["X", "y"]}
    program = {"program": str(folder / "robust_normal.stan"), "data": str(folder / "robust_normal.json")}
    return [
        ("nuts", {}),
        ("mh", {}),
        ("hmc", {}),
        ("pcn", {}),
        ("pt", {"inner": "hmc"}),
        ("tt", {"inner": "hmc"}),
        ("spt", {"inner": "hmc", "observations": observations}),
        ("stt", {"inner": "hmc", "observations": observations}),
        ("dc", {"approx": subset, "observations": observations, "moves": 2, "jump": 5}),
        (
            "tt-approx",
            {"ladder": [subset], "observations": observations, "inner_steps": 5},
        ),
        ("dc", {"approx": program, "moves": 2, "jump": 5}),
        ("tt-approx", {"ladder": [program], "inner_steps": 5}),
        ("ae-hmc", {"exact": True}),
        ("ae-pcn", {"exact": True}),
        ("latent-nuts", {"latent_program": str(folder / "robust_latent.stan")}),
    ]


def command(method: str, settings: dict) -> str:
    parts = ["stanaccel", "sample", "robust.stan", "--data", "robust.json", "--method", method]
    for key in ("warmup", "draws"):
        parts += [f"--{key}", str(settings.pop(key))]
    for key, value in settings.items():
        text = OBSERVATIONS if key == "observations" else _toml(value)
        text = value if isinstance(value, str) and value.isidentifier() else text  # --set inner=hmc
        parts += ["--set", f"{key}={text}"]
    return " ".join(shlex.quote(p) for p in parts)


def _toml(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={_toml(v)}" for k, v in value.items()) + "}"
    if isinstance(value, str) and "/" in value:
        return f'"{Path(value).name}"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return f'"{value}"' if isinstance(value, str) else str(value)


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    quick = "--quick" in sys.argv
    folder = Path(args[0] if args else "output/user_program")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "robust.stan").write_text(PROGRAM)
    (folder / "robust_latent.stan").write_text(LATENT)
    rng = np.random.default_rng(2026)
    n, k = (200, 3) if quick else (500, 5)
    X = rng.normal(size=(n, k))
    y = 0.5 + X @ rng.normal(size=k) + rng.standard_t(4, size=n)
    write_data(folder / "robust.json", {"N": n, "K": k, "X": X, "y": y})
    (folder / "robust_normal.stan").write_text(APPROXIMATION)
    Z = np.column_stack([np.ones(n), X])
    write_data(folder / "robust_normal.json", {"N": n, "K": k, "ZtZ": Z.T @ Z, "Zty": Z.T @ y, "yty": y @ y})
    common = {"warmup": 300, "draws": 300} if quick else {"warmup": 1000, "draws": 1000}
    rows = []
    for method, settings in methods(folder, n):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ApproximationWarning)
            result = sample(
                folder / "robust.stan",
                folder / "robust.json",
                method,
                {**common, **settings},
                seed=1,
                progress=False,
            )
        metrics = result.metrics()
        approx = settings.get("approx", (settings.get("ladder") or [{}])[0])
        label = method + (" (program)" if "program" in approx else " (subset)" if approx else "")
        rows.append((label, settings, metrics))
        print(f"{label}: ESS/s {metrics['ess_per_second']:.3g}, R-hat {metrics['rhat_max']:.3f}", flush=True)
    nuts = rows[0][2]
    print(f"\nrobust regression, N = {n}, K = {k}; {common['warmup']} warm-up + {common['draws']} draws x 4")
    header = ["method", "exact", "ESS bulk min", "R-hat max", "seconds (charged)", "ESS/s", "vs NUTS",
              "ESS/s sampling", "vs NUTS"]  # fmt: skip
    print("| " + " | ".join(header) + " |\n" + "|---" * len(header) + "|")
    for method, _, m in rows:
        cells = [
            method,
            m["exact"],
            f"{m['ess_bulk_min']:.0f}",
            f"{m['rhat_max']:.3f}",
            f"{m['wall_seconds']:.1f} ({sum(m['charged_seconds'].values()):.1f})",
            f"{m['ess_per_second']:.3g}",
            f"{m['ess_per_second'] / nuts['ess_per_second']:.3g}",
            f"{m['ess_per_second_sampling']:.3g}",
            f"{m['ess_per_second_sampling'] / nuts['ess_per_second_sampling']:.3g}",
        ]
        print("| " + " | ".join(map(str, cells)) + " |")
    print("\nCommands (in the folder):")
    for label, settings, _ in rows:
        print(command(label.split()[0], {**common, **settings}))


if __name__ == "__main__":
    main()
