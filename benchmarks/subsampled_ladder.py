"""The subsampled tempering methods' placed ladder against the paper's fixed one, on the bundled GP.

For gp_ard (D = 3) at N = 64 and 128: `spt` and `stt` (HMC inner moves), each run twice with seed 2,
4 chains and 1000 draws: "paper" is the ladder of van de Meent, Paige and Wood (2014), 6 levels above
the target, geometric down to beta = 1/8 (`levels = 6, beta_min = 0.125`); "placed" gives no ladder.
A placed subsampled ladder keeps 6 levels (its barrier grows with its levels, so cannot count them),
at whole distinct subset sizes; stt's trajectories take the levels a pilot says they need, and the
ladder is shortened when even every subset size is not enough. Each run prints the levels, the hot end,
round trips per scan (spt) or the share of trajectories accepted (stt), and seconds charged (warm-up
and placing included) and of sampling.

Run: .venv/bin/python benchmarks/subsampled_ladder.py [--draws 1000] [N ...]
"""

from __future__ import annotations

import argparse

import numpy as np

from stanaccel.datasets import generate
from stanaccel.programs import program_path
from stanaccel.sampling import sample
from stanaccel.stan import compile_program

LADDERS = (("paper", {"levels": 6, "beta_min": 0.125}), ("placed", {}))


def row(n: int, method: str, label: str, result) -> str:
    metrics = result.metrics()
    statistics = metrics["method_statistics"]
    betas = result.config.betas or (0.125 ** (np.arange(7) / 6)).tolist()
    if method == "spt":
        trips = int(np.sum(statistics["round_trips"]))
        measure = f"{np.mean(statistics['round_trip_rate']):.3f} round trips / scan ({trips})"
    else:
        measure = f"{np.mean(statistics['tt_acceptance']):.3f} accepted"
    cells = [str(n), method, label, str(len(betas)), f"{betas[-1]:.3f}", measure,
             f"{metrics['wall_seconds']:.0f}", f"{metrics['sampling_seconds']:.0f}"]  # fmt: skip
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("sizes", nargs="*", type=int, default=[64, 128])
    parser.add_argument("--draws", type=int, default=1000)
    args = parser.parse_args()
    print("| N | method | ladder | levels | hot end | mixing | seconds charged | sampling |")
    print("|---" * 8 + "|")
    program = compile_program(program_path("gp_ard"))
    for n in args.sizes:
        data = generate("gp_ard", N=n, D=3, seed=7).data
        for method in ("spt", "stt"):
            for label, settings in LADDERS:
                settings = {"draws": args.draws, **settings}
                result = sample(program, data, method, settings, seed=2, progress=False)
                print(row(n, method, label, result), flush=True)


if __name__ == "__main__":
    main()
