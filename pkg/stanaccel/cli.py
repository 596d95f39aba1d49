"""The ``stanaccel`` command line.

- ``stanaccel nuts PROGRAM --data FILE``: Stan's NUTS; writes InferenceData
  (netCDF) and prints the ArviZ summary.
- ``stanaccel run WORKFLOW.toml``: run a workflow file.
- ``stanaccel compile PROGRAM``: compile (or find in the cache) a program.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _nuts(args: argparse.Namespace) -> int:
    from stanaccel.diagnostics import convergence_metrics, summary, to_inference_data
    from stanaccel.stan import StanModel
    from stanaccel.stan.nuts import sample_nuts

    model = StanModel(_program(args.program), args.data)
    fit = sample_nuts(
        model,
        chains=args.chains,
        warmup=args.warmup,
        draws=args.draws,
        thin=args.thin,
        seed=args.seed,
        metric=args.metric,
        delta=args.delta,
        max_depth=args.max_depth,
        progress=not args.quiet,
    )
    idata = to_inference_data(fit)
    output = Path(args.output or f"{Path(args.program).stem}-nuts.nc")
    output.parent.mkdir(parents=True, exist_ok=True)
    idata.to_netcdf(str(output))
    print(summary(idata).to_string())
    metrics = convergence_metrics(
        idata, wall_seconds=fit.wall_seconds, gradient_evaluations=fit.gradient_evaluations
    )
    divergences = int(fit.sample_stats["diverging"].sum())
    print(
        f"{fit.chains} chains x {fit.num_draws} draws in {fit.wall_seconds:.2f} s; "
        f"ESS bulk min {metrics['ess_bulk_min']:.0f}, R-hat max {metrics['rhat_max']:.3f}, "
        f"{divergences} divergences; wrote {output}"
    )
    if fit.interrupted:
        print("interrupted: the output holds the draws made before the stop", file=sys.stderr)
    return 0


def _run(args: argparse.Namespace) -> int:
    from stanaccel.workflow import run_workflow

    context = run_workflow(args.workflow, output=args.output, progress=not args.quiet)
    print(f"workflow {context.workflow.name} done; outputs in {context.output}")
    return 0


def _compile(args: argparse.Namespace) -> int:
    from stanaccel.stan import compile_program

    program = compile_program(_program(args.program))
    state = "built" if program.built else "found in cache"
    print(f"{program.name}: {state} at {program.library}")
    if program.warnings:
        print(program.warnings)
    return 0


def _program(text: str) -> Path:
    """A ``.stan`` path, or the name of a bundled program."""
    path = Path(text)
    if path.suffix == ".stan" or path.exists():
        return path
    from stanaccel.programs import program_path

    return program_path(text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="stanaccel", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    nuts = sub.add_parser("nuts", help="run Stan's NUTS on a program")
    nuts.add_argument("program", help="a .stan file or a bundled program name (gp_ard, mvn_mean, logistic)")
    nuts.add_argument("--data", help="Stan JSON data file")
    nuts.add_argument("--chains", type=int, default=4)
    nuts.add_argument("--warmup", type=int, default=1000)
    nuts.add_argument("--draws", type=int, default=1000)
    nuts.add_argument("--thin", type=int, default=1)
    nuts.add_argument("--seed", type=int, default=1)
    nuts.add_argument("--metric", choices=["diag", "dense"], default="diag")
    nuts.add_argument("--delta", type=float, default=0.8, help="target acceptance rate")
    nuts.add_argument("--max-depth", type=int, default=10)
    nuts.add_argument("--output", "-o", help="netCDF file for the InferenceData (default: PROGRAM-nuts.nc)")
    nuts.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    nuts.set_defaults(func=_nuts)

    run = sub.add_parser("run", help="run a workflow file")
    run.add_argument("workflow", help="a workflow .toml file")
    run.add_argument("--output", "-o", help="output folder (overrides the file's)")
    run.add_argument("--quiet", "-q", action="store_true", help="no progress bars")
    run.set_defaults(func=_run)

    comp = sub.add_parser("compile", help="compile a Stan program (cached)")
    comp.add_argument("program")
    comp.set_defaults(func=_compile)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from stanaccel.stan.errors import StanError

    try:
        return args.func(args)
    except (StanError, FileNotFoundError, ValueError) as exc:
        print(f"stanaccel {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("stanaccel: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
