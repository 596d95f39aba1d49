"""What one latent leapfrog step costs, against the Stan gradient it wraps.

For logistic regression (N = 20000 and N = 270, K = 30) with a linear
autoencoder trained on a short NUTS warm-up, times 2000 calls each of: the
Stan gradient of the original program, the approximate AE-HMC's latent
potential and gradient (chain rule through the NumPy decoder), and the exact
mode's (which adds the auxiliary term: one encoder pass and one encoder
J^T v). The difference between the last two is the exact mode's price per
leapfrog step.

Run: .venv/bin/python benchmarks/latent_step_cost.py
"""

from __future__ import annotations

import time

import numpy as np

from stanaccel.datasets import generate
from stanaccel.latent import Autoencoder, AutoencoderHMC
from stanaccel.programs import program_path
from stanaccel.stan import StanModel, compile_program
from stanaccel.stan.nuts import sample_nuts

CALLS = 2000


def per_call(function) -> float:
    start = time.perf_counter()
    for _ in range(CALLS):
        function()
    return (time.perf_counter() - start) / CALLS


def main() -> None:
    program = compile_program(program_path("logistic"))
    for n in (20000, 270):
        model = StanModel(program, generate("logistic", N=n, K=30, collinear=15, seed=1).data)
        pilot = sample_nuts(model, chains=2, warmup=150, draws=1, seed=1, progress=False)
        maps = Autoencoder.fit(pilot.warmup_unconstrained[:, 50:], latent_dim=15, seed=0).maps()
        z, residual = maps.latent_mean, np.zeros(model.dim)
        q = maps.decode(z)
        gradient = per_call(lambda q=q, model=model: model.log_density_gradient(q))
        times = {}
        for exact in (False, True):
            kernel = AutoencoderHMC(model, maps, 0.1, 10, exact=exact)
            times[exact] = per_call(lambda kernel=kernel, z=z, r=residual: kernel._potential(z, r))
        print(
            f"N={n}: Stan gradient {gradient * 1e6:.1f} us; latent potential and gradient: approximate "
            f"{times[False] * 1e6:.1f} us, exact {times[True] * 1e6:.1f} us "
            f"(auxiliary term {(times[True] - times[False]) * 1e6:.1f} us)"
        )


if __name__ == "__main__":
    main()
