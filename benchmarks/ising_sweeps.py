"""Sweeps per second of the Ising samplers on the paper's 60x60 ferromagnet, and their acceptance rates.

One sweep is one ``step``: about N = 3600 sites touched by the intracluster
moves, N exchange attempts for Kawasaki, one cluster update for
Swendsen-Wang. Chains start with half the spins flipped; the compiled
samplers are warmed up first, so the first-call compile time (printed
separately) is not counted.

Run: .venv/bin/python benchmarks/ising_sweeps.py [STEPS]
"""

from __future__ import annotations

import sys
import time

import numpy as np

from stanaccel.ising import (
    IntraclusterMoves,
    KawasakiExchange,
    SwendsenWang,
    constrained_start,
    ferromagnet_2d,
    run_chain,
)


def main() -> None:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    model = ferromagnet_2d()
    start = constrained_start(model, model.n // 2, np.random.default_rng(0))
    samplers = {
        "IM k=90, bias 0": IntraclusterMoves(model, 90),
        "IM k=90, bias 1 x beta": IntraclusterMoves(model, 90, bias=model.beta),
        "IM k=10, bias 0": IntraclusterMoves(model, 10),
        "Kawasaki": KawasakiExchange(model),
        "Swendsen-Wang": SwendsenWang(model),
    }
    began = time.perf_counter()
    for kernel in samplers.values():
        run_chain(kernel, start, 1, np.random.default_rng(0))
    print(f"first calls (compile or load the Numba cache): {time.perf_counter() - began:.2f} s")
    print(f"{model.name}, beta {model.beta:.4f}, {steps} steps from half the spins flipped")
    print(f"{'sampler':24s} {'sweeps/s':>9s} {'ms/sweep':>9s} {'accept':>7s} {'final E':>8s}")
    for name, kernel in samplers.items():
        run = run_chain(kernel, start, steps, np.random.default_rng(1))
        rate = steps / run.seconds
        print(f"{name:24s} {rate:9.0f} {1000 / rate:9.3f} {run.acceptance:7.3f} {run.energy[-1]:8.0f}")


if __name__ == "__main__":
    main()
