"""Stochastic volatility: ``stanaccel sample --method auto`` against its peers on a latent-state posterior
with 1000 latent states.

The posterior is the stochastic-volatility model of Stan's user guide (the
non-centred form) on T = 1000 returns simulated here with NumPy's
``default_rng(1)``: log volatilities h[1] = mu + sigma / sqrt(1 - phi^2) z[1],
h[t] = mu + phi (h[t-1] - mu) + sigma z[t], z standard normal, and returns
y[t] ~ normal(0, exp(h[t] / 2)), with mu = -1, phi = 0.95, sigma = 0.25.
Its 1003 parameters (mu, phi, sigma and the 1000 standardised states
h_std) and cheap gradient are the shape of a latent-state model that the
posteriordb set lacks: many latent parameters, a few hyperparameters that
mix slowly, and a gradient so cheap that a method's overheads (pilots,
set-ups) weigh. It is here to hold ``auto`` to its target on such a model:
at least 0.9x the best converged peer in ESS (the worst over the parameters
of min(bulk, tail) ESS) per second charged.

There are no published reference draws, so the script makes them once, in
its work folder, with Stan's NUTS (``stanaccel sample --method nuts``, 4
chains x 5000 draws, seed 20261206, to ``reference.nc``; reused when
present), and stops unless every parameter's rank-normalised R-hat in them
is under 1.01. It then runs ``posteriordb.py`` beside it on this one
posterior (:func:`posteriordb.benchmark_posterior`): the program compiled
once (charged to no run), each run of ``--peers`` with each seed of
``--seeds`` as its own timed process, scored, checked against the
reference draws and reported exactly as there, nutpie included (run by
``posteriordb.py --run-nutpie``, nutpie's Python-function model over
stanaccel's ``StanModel``). It prints the same Markdown table, with one row
(``stochastic_volatility-1000``), and writes the row as JSON (``--json``,
default ``FOLDER/stochastic_volatility.json``) that ``posteriordb.py
--rerender`` turns back into the table.

Run: .venv/bin/python benchmarks/stochastic_volatility.py [FOLDER] [--peers nuts,nutpie,auto]
     [--seeds 1,2,3] [--chains 4] [--draws 1000] [--timeout 1200] [--markdown out.md] [--json rows.json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shlex
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

# posteriordb.py beside this script, by its path: benchmarks/ is not a package
_spec = importlib.util.spec_from_file_location(
    "benchmark_posteriordb", Path(__file__).with_name("posteriordb.py")
)
pdb = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = pdb
_spec.loader.exec_module(pdb)

NAME = "stochastic_volatility-1000"
"""The posterior's row name: the model and its number of latent states."""
T = 1000
"""Latent states (and returns)."""
TRUTH = {"mu": -1.0, "phi": 0.95, "sigma": 0.25}
"""The parameters the returns are simulated with."""
DATA_SEED = 1
"""The seed of NumPy's ``default_rng`` that simulates the returns."""
REFERENCE_SEED = 20261206
REFERENCE_CHAINS = 4
REFERENCE_DRAWS = 5000
PROGRAM = """\
data {
  int<lower=0> T;
  vector[T] y;
}
parameters {
  real mu;
  real<lower=-1, upper=1> phi;
  real<lower=0> sigma;
  vector[T] h_std;
}
transformed parameters {
  vector[T] h = h_std * sigma;
  h[1] /= sqrt(1 - phi * phi);
  h += mu;
  for (t in 2:T) {
    h[t] += phi * (h[t - 1] - mu);
  }
}
model {
  phi ~ uniform(-1, 1);
  sigma ~ cauchy(0, 5);
  mu ~ cauchy(0, 10);
  h_std ~ std_normal();
  y ~ normal(0, exp(h / 2));
}
"""
"""The stochastic-volatility model of Stan's user guide, non-centred."""


def simulate(
    n: int = T, mu: float = TRUTH["mu"], phi: float = TRUTH["phi"], sigma: float = TRUTH["sigma"]
) -> dict:
    """The program's data: ``n`` returns from a stationary AR(1) log volatility (``default_rng(1)``)."""
    rng = np.random.default_rng(DATA_SEED)
    z = rng.standard_normal(n)
    h = np.empty(n)
    h[0] = mu + sigma / np.sqrt(1 - phi**2) * z[0]
    for t in range(1, n):
        h[t] = mu + phi * (h[t - 1] - mu) + sigma * z[t]
    y = rng.normal(0.0, np.exp(h / 2))
    return {"T": n, "y": y.tolist()}


def parameter_names(n: int = T) -> list[str]:
    """The parameters as posteriordb names them: ``mu``, ``phi``, ``sigma``, ``h_std[1]``..``h_std[n]``."""
    return ["mu", "phi", "sigma", *(f"h_std[{t}]" for t in range(1, n + 1))]


def prepare(folder: Path) -> tuple[Path, Path]:
    """Write the program (``sv.stan``) and the simulated data (``sv.json``) to ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    program = folder / "sv.stan"
    program.write_text(PROGRAM)
    data = folder / "sv.json"
    data.write_text(json.dumps(simulate()))
    return program, data


def reference_draws(program: Path, data: Path, timeout: float) -> dict[str, np.ndarray]:
    """The reference draws of the parameters, each (chain, draw): Stan's NUTS run once into
    ``reference.nc`` beside the program (reused when present).

    Raises
    ------
    SystemExit
        The reference run failed or timed out, lacks a parameter, or some parameter's rank-normalised
        R-hat is not under :data:`posteriordb.RHAT_MAX`.
    """
    path = program.with_name("reference.nc")
    if path.is_file():
        print(f"reference draws: reusing {path}", flush=True)
    else:
        command = [
            *pdb.stanaccel_command(), "sample", str(program), "--data", str(data), "--method", "nuts",
            "--chains", str(REFERENCE_CHAINS), "--draws", str(REFERENCE_DRAWS), "--seed", str(REFERENCE_SEED),
            "-o", str(path), "-q",
        ]  # fmt: skip
        print(f"reference draws: {shlex.join(command)}", flush=True)
        status, seconds, stderr = pdb.run_process(command, timeout, path.with_suffix(""))
        if status != 0:
            path.unlink(missing_ok=True)
            why = f"timed out after {timeout:g} s" if status is None else pdb.error_reason(stderr)
            raise SystemExit(f"stochastic_volatility.py: the reference run failed: {why}")
        print(f"reference draws: {seconds:.0f} s", flush=True)
    idata = pdb.az.from_netcdf(path)
    reference, missing = pdb.columns_of(idata, parameter_names())
    idata.close()
    if missing:
        raise SystemExit(
            f"stochastic_volatility.py: {path} lacks {', '.join(missing[:3])}: delete it and rerun"
        )
    rhats = {name: pdb.rank_rhat(x) for name, x in reference.items()}
    worst = max(rhats, key=lambda name: rhats[name] if np.isfinite(rhats[name]) else np.inf)
    if not rhats[worst] < pdb.RHAT_MAX:
        raise SystemExit(
            f"stochastic_volatility.py: the reference draws in {path} did not converge: R-hat "
            f"{rhats[worst]:.3f} ({worst}), not under {pdb.RHAT_MAX}"
        )
    print(f"reference draws: worst R-hat {rhats[worst]:.4f} ({worst})", flush=True)
    return reference


def main(argv: list[str] | None = None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "folder",
        nargs="?",
        default=None,
        help="work folder for the files and runs (default: a new temporary one)",
    )
    parser.add_argument(
        "--peers",
        type=pdb.listed,
        default=list(pdb.RUNS),
        help=f"the runs, comma-separated (default: all: {','.join(pdb.RUNS)})",
    )
    parser.add_argument(
        "--seeds",
        type=lambda text: pdb.listed(text, int),
        default=[1, 2, 3],
        help="seeds, comma-separated; every run runs with each, and the medians are reported (default 1,2,3)",
    )
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--draws", type=int, default=1000, help="draws per chain")
    parser.add_argument(
        "--timeout",
        type=float,
        default=1200,
        help="seconds a run (and the compile, and the reference run) may take",
    )
    parser.add_argument("--markdown", default=None, help="also write the table to this Markdown file")
    parser.add_argument(
        "--json", default=None, help="the row as JSON (default: FOLDER/stochastic_volatility.json)"
    )
    args = parser.parse_args(argv)
    unknown = [name for name in args.peers if name not in pdb.RUNS]
    if unknown or not args.peers:
        parser.error(f"--peers: {unknown or 'none given'}: the runs are {', '.join(pdb.RUNS)}")
    if not args.seeds or len(set(args.seeds)) != len(args.seeds):
        parser.error(f"--seeds: {args.seeds}: give one or more different seeds")
    if (
        any(pdb.RUNS[name][0] == "nutpie" for name in args.peers)
        and importlib.util.find_spec("nutpie") is None
    ):
        parser.error(
            f"nutpie is not importable by {sys.executable}: install the peers extra "
            "(pip install -e '.[peers]'), or leave nutpie out with --peers"
        )
    folder = Path(args.folder) if args.folder else Path(tempfile.mkdtemp(prefix="stanaccel-sv-"))
    json_path = Path(args.json) if args.json else folder / "stochastic_volatility.json"
    print(f"work folder {folder}; row to {json_path}", flush=True)
    program, data = prepare(folder)
    reference = reference_draws(program, data, args.timeout)
    meta = {
        "script": "benchmarks/stochastic_volatility.py",
        "argv": shlex.join(argv),
        "commit": pdb.commit(),
        "source": (
            f"{NAME}: the stochastic-volatility model on T = {T} returns simulated with mu = "
            f"{TRUTH['mu']:g}, phi = {TRUTH['phi']:g}, sigma = {TRUTH['sigma']:g} "
            f"(default_rng({DATA_SEED})); "
            f"reference draws: Stan's NUTS, {REFERENCE_CHAINS} x {REFERENCE_DRAWS} draws, "
            f"seed {REFERENCE_SEED}"
        ),
        "peers": args.peers,
        "runs": {name: pdb.describe_run(name) for name in args.peers},
        "seeds": args.seeds,
        "chains": args.chains,
        "draws": args.draws,
        "timeout": args.timeout,
        "notes": [],
    }
    start = time.perf_counter()
    row = pdb.benchmark_posterior(NAME, program, data, reference, args)
    if row["status"] != "ok":
        print(f"{NAME}: skipped: {row['reason']}", flush=True)
    print(f"{NAME}: took {time.perf_counter() - start:.0f} s", flush=True)
    pdb.save_rows(json_path, [row], meta)
    pdb.write_outputs(pdb.render([row], meta), args)
    return row


if __name__ == "__main__":
    main()
