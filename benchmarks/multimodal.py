"""A worked multimodal example: a two-component normal mixture whose labels can switch, NUTS against pt.

The program leaves the two means unordered, so the posterior has two modes of equal mass, one per
labelling: by symmetry P(mu[1] < mu[2]) = 0.5 and E[mu[1]] = E[mu[2]] exactly. NUTS's chains each settle
in one labelling and report the share of chains that did; pt with default settings (the ladder placed down
to the prior) moves between them. Both run with 4 chains and the same seed, and for each the script prints
the share of draws with mu[1] < mu[2] with its Monte Carlo error, the posterior means of mu, the largest
R-hat, the seconds charged, the modes check's message, and for pt its ladder and log evidence. Then
NUTS's share for seeds 1 to 10.

The data: 60 draws, half from N(-2, 1) and half from N(2, 1) (seed 1).

Run: .venv/bin/python benchmarks/multimodal.py [--draws 1000] [--seed 2]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import arviz as az
import numpy as np

from stanaccel.sampling import sample
from stanaccel.stan import compile_program

MIXTURE = """
data {
  int<lower=1> N;
  vector[N] y;
  real<lower=0, upper=1> beta;
}
parameters {
  vector[2] mu;  // not ordered: swapping the labels gives the same fit
  real<lower=0> sigma;
  real<lower=0, upper=1> lambda;
}
model {
  mu ~ normal(0, 5);
  sigma ~ lognormal(0, 1);
  lambda ~ beta(2, 2);
  for (n in 1:N) {
    target += beta * log_mix(lambda, normal_lpdf(y[n] | mu[1], sigma), normal_lpdf(y[n] | mu[2], sigma));
  }
}
"""


def mixture_data() -> dict:
    rng = np.random.default_rng(1)
    y = np.concatenate([rng.normal(-2, 1, 30), rng.normal(2, 1, 30)])
    return {"N": len(y), "y": y.tolist()}


def describe(label: str, result) -> None:
    idata = result.to_inference_data()
    mu = idata.posterior["mu"].values  # (chains, draws, 2)
    shares = (mu[..., 0] < mu[..., 1]).mean(axis=1)
    metrics = result.metrics()
    rhat = float(az.rhat(idata).to_array().max())
    mcse = az.mcse((mu[..., 0] < mu[..., 1]).astype(float)).item()
    print(f"{label}: P(mu[1] < mu[2]) = {shares.mean():.3f} ± {mcse:.3f} (truth 0.5; per chain "
          f"{np.round(shares, 2)})")  # fmt: skip
    means = np.round(mu.reshape(-1, 2).mean(axis=0), 3)
    seconds = metrics["wall_seconds"]
    print(f"  E[mu] = {means} (truth: equal), largest R-hat {rhat:.2f}, {seconds:.0f} s charged")
    if "modes" in metrics:
        print(f"  modes: {metrics['modes']['message']}")
    if "schedule" in metrics:
        schedule = metrics["schedule"]
        statistics = metrics["method_statistics"]
        errors = np.asarray(statistics["log_evidence_mcse"])
        error = np.sqrt(np.sum(errors**2)) / len(errors)
        print(f"  ladder: {schedule['levels']} levels, barrier {schedule['barrier']:.2f}; "
              f"round trips {int(np.sum(statistics['round_trips']))}; log evidence "
              f"{np.mean(statistics['log_evidence']):.3f} ± {error:.3f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "mixture.stan"
        path.write_text(MIXTURE)
        program, data = compile_program(path), mixture_data()
        for method in ("nuts", "pt"):
            result = sample(program, data, method, {"draws": args.draws}, seed=args.seed, progress=False)
            describe(method, result)
        shares = []
        for seed in range(1, 11):
            nuts = sample(program, data, "nuts", {"draws": args.draws}, seed=seed, progress=False)
            mu = nuts.to_inference_data().posterior["mu"].values
            shares.append(float((mu[..., 0] < mu[..., 1]).mean()))
        print(f"nuts, seeds 1-10: P(mu[1] < mu[2]) = {np.round(shares, 2)}")


if __name__ == "__main__":
    main()
