"""The placed tempering ladder against the fixed geometric one, with pt on Stan programs.

For each posterior: `stanaccel.sampling.sample(program, data, "pt", ...)` three times with the same seed.
"before" is the ladder used before placement existed: `schedule_rounds = 0`, i.e. the geometric ladder
of 6 levels above the target down to beta = 1/8. "placed to 1/8" places a ladder over the same span
(`beta_min = 0.125`), "after" is the default placed ladder, down to the prior; "after, 2 inner steps"
the same with two inner moves per level and scan (closer to the theory's perfect exploration, at twice
the cost of a scan). Each run prints:

- the number of levels and the global barrier Lambda (after: the schedule's estimate; before: the sum
  of the kept run's rejection rates);
- the round trips per scan beside the theory's rate for the ladder run, 1 / (2 + 2 sum r / (1 - r)) over
  its measured pair rejections r, and the limit 1 / (2 + 2 Lambda) of many levels;
- the round trips per second of sampling, and per second charged (warm-up and placing included);
- the log evidence with its Monte Carlo error, against the exact value where one is known;
- the right-mode share (bimodal only), truth 0.65.

Posteriors:

- `bimodal`: the tests' two-mode program (modes 12 sd apart);
- `mvn`: the bundled mvn_mean (N = 20, D = 3), conjugate;
- `gp`: the bundled gp_ard (N = 64, D = 3, the tempering study's quick size).

Run: .venv/bin/python benchmarks/tempering_schedule.py [--draws 1000] [NAME ...]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

from stanaccel.datasets import generate
from stanaccel.datasets.mvn_mean import exact_log_evidence
from stanaccel.kernels.schedule import limit_rate, round_trip_rate
from stanaccel.programs import program_path
from stanaccel.sampling import sample
from stanaccel.stan import compile_program

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.sampling.programs import BIMODAL, BIMODAL_LOG_EVIDENCE  # noqa: E402

LADDERS = (
    ("before", {"schedule_rounds": 0}),
    ("placed to 1/8", {"beta_min": 0.125}),
    ("after", {}),
    ("after, 2 inner steps", {"inner_steps": 2}),
)


def posteriors(folder: Path) -> dict:
    path = folder / "bimodal.stan"
    path.write_text(BIMODAL)
    mvn = generate("mvn_mean", N=20, D=3, seed=7).data
    return {
        "bimodal": (compile_program(path), {}, BIMODAL_LOG_EVIDENCE),
        "mvn": (compile_program(program_path("mvn_mean")), mvn, exact_log_evidence(mvn)),
        "gp": (compile_program(program_path("gp_ard")), generate("gp_ard", N=64, D=3, seed=7).data, None),
    }


def row(name: str, label: str, result, exact) -> str:
    metrics = result.metrics()
    statistics = metrics["method_statistics"]
    schedule = metrics.get("schedule")
    barrier = schedule["barrier"] if schedule else float(np.mean(statistics["communication_barrier"]))
    trips = int(np.sum(statistics["round_trips"]))
    rate = float(np.mean(statistics["round_trip_rate"]))
    theory = float(np.mean([round_trip_rate(1 - np.asarray(a)) for a in statistics["swap_acceptance"]]))
    sampling, charged = metrics["sampling_seconds"], metrics["wall_seconds"]
    levels = len(result.config.betas) if result.config.betas else result.config.levels + 1
    cells = [name, label, str(levels), f"{barrier:.2f}", f"{rate:.3f}", f"{theory:.3f}",
             f"{limit_rate(barrier):.3f}", f"{trips / sampling:.1f}", f"{trips / charged:.1f}"]  # fmt: skip
    if "log_evidence" in statistics:
        chains, errors = np.asarray(statistics["log_evidence"]), np.asarray(statistics["log_evidence_mcse"])
        mcse = np.sqrt(np.sum(errors**2)) / len(errors)
        cells.append(f"{chains.mean():.3f} ± {mcse:.3f}" + ("" if exact is None else f" ({exact:.3f})"))
    else:
        cells.append("")
    if name == "bimodal":
        theta = result.to_inference_data().posterior["theta"].values[..., 0]
        cells.append(f"{np.mean(theta > 0):.3f}")
    else:
        cells.append("")
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("names", nargs="*", default=["bimodal", "mvn", "gp"])
    parser.add_argument("--draws", type=int, default=1000)
    args = parser.parse_args()
    print("| posterior | ladder | levels | barrier | round trips / scan | theory | limit | per s sampling "
          "| per s charged | log evidence (exact) | right mode |")  # fmt: skip
    print("|---" * 11 + "|")
    with tempfile.TemporaryDirectory() as folder:
        chosen = posteriors(Path(folder))
        for name in args.names:
            program, data, exact = chosen[name]
            for label, settings in LADDERS:
                result = sample(
                    program, data, "pt", {"draws": args.draws, **settings}, seed=2, progress=False
                )
                print(row(name, label, result, exact), flush=True)


if __name__ == "__main__":
    main()
