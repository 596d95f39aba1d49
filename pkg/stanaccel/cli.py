"""The ``stanaccel`` command line.

- ``stanaccel nuts PROGRAM --data FILE``: Stan's NUTS; writes InferenceData
  (netCDF) and prints the ArviZ summary.
- ``stanaccel sample PROGRAM --data FILE --method M``: any stanaccel sampler
  after Stan's NUTS warm-up (settings by ``--set key=value`` or ``--config
  FILE.toml``); writes InferenceData and metrics, prints the ArviZ summary.
- ``stanaccel run WORKFLOW.toml``: run a workflow file.
- ``stanaccel report OUTPUT_DIR``: one self-contained HTML page of a
  workflow's outputs (``OUTPUT_DIR/report.html``).
- ``stanaccel compile PROGRAM``: compile (or find in the cache) a program.

Exit status: 0 on success; 1 when an output could not be written (the draws
then went to a rescue file, whose path is printed; or a report misses a step's
outputs); 2 for bad input (the message names it); 128 + the signal's number
when stopped by one, after writing what was drawn: 130 for Ctrl-C (SIGINT),
143 for SIGTERM (``kill``, ``timeout``, SLURM, ``docker stop``), 129 for
SIGHUP (a closed terminal); see :mod:`stanaccel.signals`.
``nuts`` and ``sample`` lock their output file from the start: a second run on
the same file is refused (exit status 2). Before anything is compiled, they
refuse an output that would replace one of the run's input files, a device,
or a file that is not netCDF (exit status 2), or that a full disk cannot
take (exit status 1).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import signal
import sys
import warnings
from pathlib import Path

INTERRUPTED = 130
"""The exit status after Ctrl-C; another stop signal gives 128 + its number (:func:`_stopped_status`)."""
BAD_INPUT = 2
OUTPUT_FAILED = 1
OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS})
"""An ``OSError`` of these is the disk's (full, over quota, failing, read-only): exit status 1, not 2."""
NUTS_DEFAULTS = {"chains": 4, "warmup": 1000}
EXECUTOR_HELP = (
    "serial (default), threads[:N], processes[:N], dask:local[:N] (a local Dask cluster of N processes) "
    "or dask:ADDRESS (a running scheduler, such as dask:tcp://host:8786; pip install "
    "'stanaccel[distributed]'); the draws are the same on each"
)


def _warmup(text: str) -> int | str:
    """An argparse type: NUTS warm-up iterations, or a warm-up's name (checked with the settings)."""
    try:
        return int(text)
    except ValueError:
        return text


def _seed(below: int):
    """An argparse type: a non-negative integer below ``below`` (argparse names the option)."""

    def seed(text: str) -> int:
        from stanaccel.seeds import check_seed

        try:
            return check_seed(int(text), "seed", below)
        except ValueError:
            limit = "2**32" if below == 2**32 else "2**63"
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a seed: expected a non-negative integer below {limit}"
            ) from None

    seed.__name__ = "seed"
    return seed


def _output_lock(output: Path) -> contextlib.AbstractContextManager[None]:
    """Hold a lock on the output file (``.NAME.lock`` beside it) from before the warm-up to the last write.

    Two runs writing one file would mix their writes into an unreadable
    file: the second is refused at once, naming the first one's process id.
    """
    from stanaccel.atomic import exclusive_lock

    target = Path(os.path.realpath(output))  # one file has one lock, whatever link or path names it
    lock = target.with_name(f".{target.name}.lock")
    return exclusive_lock(lock, f"output file {output}", "another output file (-o)")


def _inputs(args: argparse.Namespace) -> list[tuple[str, Path | str | None]]:
    """The files a run of ``nuts`` or ``sample`` reads, each with what it is: none may be its output."""
    borrowed = args.warmup_from if isinstance(args.warmup_from, list) else [args.warmup_from]
    return [
        ("Stan program", _program(args.program)),
        ("data file", args.data),
        ("--config file", getattr(args, "config", None)),
        *(("--warmup-from file", file) for file in borrowed),
    ]


def _output(args: argparse.Namespace, default: str, inputs: list[tuple[str, Path | str | None]]) -> Path:
    """The output file (-o, else ``default``), checked before anything is compiled: writable, and
    replacing none of the run's ``inputs`` (what each is, its path) nor a file that is not netCDF."""
    from stanaccel.diagnostics.files import check_output

    if args.output == "":
        raise ValueError(f"--output (-o) is empty: give a file name, or leave the option out for {default}")
    return check_output(default if args.output is None else args.output, inputs)


def _nuts(args: argparse.Namespace) -> int:
    _check_nuts_arguments(args)
    output = _output(args, f"{Path(args.program).stem}-nuts.nc", _inputs(args))
    with _output_lock(output):
        return _nuts_into(args, output)


def _nuts_into(args: argparse.Namespace, output: Path) -> int:
    from stanaccel.diagnostics import convergence_metrics, summary, to_inference_data
    from stanaccel.diagnostics.files import save_or_rescue
    from stanaccel.sampling.program import Program, check_finite_data, check_parameters, prepare_data
    from stanaccel.stan import StanModel, compile_program
    from stanaccel.stan.data import data_file_named
    from stanaccel.stan.nuts import WarmupState, continued_settings, sample_nuts

    warmup_from = WarmupState.from_netcdf(args.warmup_from) if args.warmup_from else None
    if warmup_from is not None and args.chains is not None and args.chains > len(warmup_from.step_size):
        held = len(warmup_from.step_size)
        raise ValueError(
            f"--chains {args.chains}: {args.warmup_from} has {held} chains, and each chain continues one of "
            f"them; give --chains {held} or fewer (or leave it out), or run a new warm-up (without "
            "--warmup-from) for more chains"
        )
    program = _program(args.program)
    source = Program.of(program, args.include_path or ())  # its #include files inlined
    check_parameters(source)  # before it is compiled
    data = prepare_data(source, args.data)  # beta = 1 where declared
    with data_file_named(args.data):  # Stan's message on the data names their file
        model = StanModel(compile_program(program, args.include_path or ()), data)
    check_finite_data(model, data, f"data file {args.data}")
    check_parameters(source, model.dim)
    given = {k: getattr(args, k) for k in NUTS_DEFAULTS if getattr(args, k) is not None}
    settings = given if warmup_from is not None else {**NUTS_DEFAULTS, **given}
    # A borrowed warm-up of another program is refused here; one made on other data is adapted again.
    shown = continued_settings(warmup_from, model, given)[0] if warmup_from is not None else settings
    chains, warmup = shown["chains"], shown["warmup"]
    source = f" (adaptation from {args.warmup_from})" if warmup_from is not None else ""
    print(
        f"stanaccel nuts: {model.name}, {chains} chains x ({warmup} warm-up + {args.draws}) iterations"
        f"{source}",
        file=sys.stderr,
        flush=True,
    )
    fit = sample_nuts(
        model,
        warmup_from=warmup_from,
        draws=args.draws,
        thin=args.thin,
        seed=args.seed,
        delta=args.delta,
        max_depth=args.max_depth,
        progress=not args.quiet,
        **({} if warmup_from is not None else {"metric": args.metric}),
        **settings,
    )
    idata = to_inference_data(fit)
    saved = save_or_rescue(idata, output)
    written = saved.path
    _say_rescued("nuts", saved)
    if fit.interrupted:
        warmup_done = fit.warmup_unconstrained.shape[1]
        stage = "" if fit.adapted else f", warm-up stopped after {warmup_done} iterations"
        notes = _asides("" if fit.adapted else "not adapted", _dropped(fit.dropped_draws))
        print(
            f"{_stopped()}: wrote {written} with {fit.num_draws} draws per chain{stage}{notes}",
            file=sys.stderr,
        )
        return _stopped_status()
    print(summary(idata).to_string())
    borrowed = (warmup_from.seconds or 0.0) if warmup_from is not None else 0.0
    metrics = convergence_metrics(
        idata, wall_seconds=fit.wall_seconds + borrowed, gradient_evaluations=fit.gradient_evaluations
    )
    if warmup_from is not None:
        print(_borrowed_line(warmup_from, args.warmup_from))
    print(
        f"{fit.chains} chains x {fit.num_draws} draws in {fit.wall_seconds + borrowed:.2f} s; "
        f"ESS bulk min {metrics['ess_bulk_min']:.0f}, tail min {metrics['ess_tail_min']:.0f}, R-hat max "
        f"{metrics['rhat_max']:.3f}, {_ess_per_second(metrics)}, {metrics.get('divergences', 0)} "
        f"divergences, {metrics.get('max_tree_depth_hits', 0)} at the "
        f"largest tree depth; {_verdict(metrics)}; wrote {_wrote(saved)}"
    )
    _print_warnings(metrics)
    return OUTPUT_FAILED if saved.rescued else 0


def _say_rescued(command: str, saved) -> None:
    """Where the draws went when the output could not be written (a full disk): on stderr, at once."""
    if saved.rescued:
        print(
            f"stanaccel {command}: could not write {saved.asked} ({saved.problem}); wrote the draws to "
            f"{saved.path}",
            file=sys.stderr,
            flush=True,
        )


def _dropped(count: int) -> str:
    """What a stopped run's chains lost to be equal: the draws of faster chains beyond the slowest's."""
    if not count:
        return ""
    return f"the faster chains' {count} draws beyond the slowest chain's were dropped to keep them equal"


def _asides(*notes: str) -> str:
    """Notes in one parenthesis, " (a; b)", leaving out empty ones; empty if all are."""
    shown = [note for note in notes if note]
    return f" ({'; '.join(shown)})" if shown else ""


def _wrote(saved) -> str:
    """The file written, its size and the seconds the writing took: "fit.nc (161 MB in 1.8 s)"."""
    return f"{saved.path} ({saved.size / 1e6:.3g} MB in {saved.seconds:.1f} s)"


def _stopped() -> str:
    """How a stopped run's message starts: "interrupted" (Ctrl-C), "stopped by SIGTERM"."""
    from stanaccel.signals import describe, received

    signum = received()
    return "interrupted" if signum in (None, signal.SIGINT) else f"stopped by {describe(signum)}"


def _stopped_status() -> int:
    """The exit status of a run a signal stopped: 128 + its number (130 for Ctrl-C, 143 for SIGTERM)."""
    from stanaccel.signals import received

    return 128 + (received() or signal.SIGINT)


def _check_nuts_arguments(args: argparse.Namespace) -> None:
    """``stanaccel nuts``'s numbers, checked before any file is read or the program compiled."""
    for key in ("chains", "draws", "thin", "max_depth"):
        value = getattr(args, key)
        if value is not None and value < 1:
            raise ValueError(f"--{key.replace('_', '-')}: {key} = {value}: must be at least 1")
    if args.warmup is not None and args.warmup_from and args.warmup < 0:
        raise ValueError(f"--warmup: warmup = {args.warmup}: must be at least 0")
    if args.warmup is not None and not args.warmup_from and args.warmup < 1:
        raise ValueError(
            f"--warmup: warmup = {args.warmup}: must be at least 1 NUTS warm-up iteration: the draws start "
            f"from what the warm-up adapts (step size, metric, start points), and {args.warmup} iterations "
            f"adapt none of it; give more iterations (the default is {NUTS_DEFAULTS['warmup']}), or an "
            "earlier warm-up instead (--warmup-from FILE)"
        )
    if not 0 < args.delta < 1:
        raise ValueError(f"--delta: delta = {args.delta}: the target acceptance rate must be in (0, 1)")


def _borrowed_line(state, source: str) -> str:
    """Whether the borrowed warm-up's time is charged (like with like: NUTS pays for its own)."""
    if state.seconds is None:
        return f"the warm-up from {source} records no time: it is not charged, so ESS/s flatters this run"
    return f"the warm-up from {source} took {state.seconds:.2f} s: charged to this run"


def _verdict(metrics: dict) -> str:
    """The verdict: converged, or NOT CONVERGED and where to read why."""
    return "converged" if metrics["converged"] else "NOT CONVERGED, see the WARNING below"


def _ess_per_second(metrics: dict) -> str:
    """ESS per second (the worst of bulk and tail ESS), marked unreliable for a run that has not converged."""
    value = f"{metrics['ess_per_second']:.3g} ESS/s (min of bulk and tail)"
    return value if metrics["converged"] else f"{value} (UNRELIABLE: not converged)"


def _print_warnings(metrics: dict) -> None:
    """The kernel statistics and the WARNING block, on stdout with the summary so they are seen."""
    from stanaccel.diagnostics.metrics import statistics_lines, warning_block

    for line in statistics_lines(metrics):
        print(line)
    block = warning_block(metrics)
    if block:
        print(block)


def _sample(args: argparse.Namespace) -> int:
    from stanaccel.stan.compiler import read_program

    # A missing file (or #include file) named now, before ArviZ's import (1.3 s).
    read_program(_program(args.program), args.include_path or ())
    from stanaccel.diagnostics.files import check_output, metrics_file

    method, settings, sources = _sample_settings(args)
    inputs = _inputs(args)
    output = _output(args, f"{Path(args.program).stem}-{method}.nc", inputs)
    check_output(metrics_file(output), inputs, "metrics file", netcdf=False)  # beside the output
    with _output_lock(output):
        return _sample_into(args, output, method, settings, sources)


def _sample_into(
    args: argparse.Namespace, output: Path, method: str, settings: dict, sources: dict[str, str]
) -> int:
    from stanaccel.sampling.engine import sample
    from stanaccel.sampling.result import write_result

    warmup_from = args.warmup_from
    if warmup_from and len(warmup_from) == 1:
        warmup_from = warmup_from[0]
    try:
        result = sample(
            _program(args.program),
            args.data,
            method,
            settings,
            seed=args.seed,
            warmup_from=warmup_from,
            progress=not args.quiet,
            sources=sources,
            log=lambda line: print(f"stanaccel sample: {line}", file=sys.stderr, flush=True),
            executor=args.executor,
            tune=_tune_options(args),
            include_paths=args.include_path or (),
        )
    except KeyboardInterrupt as stop:  # stopped before it had draws to keep (a stopped sampler returns them)
        why = f" ({stop})" if str(stop) else ""
        print(f"{_stopped()}: no draws were kept{why}; {output} was not written", file=sys.stderr)
        return _stopped_status()
    saved, metrics = write_result(result, output)
    written = saved.path
    _say_rescued("sample", saved)
    if metrics is None:
        kept, asked = len(getattr(result.run, "positions", ())), result.config.chains  # a kernel run's
        fewer = f"{kept} of {asked} chains: the others had not begun" if 0 < kept < asked else ""
        notes = _asides(fewer, _dropped(result.dropped_draws))
        print(
            f"{_stopped()}: wrote {written} with {result.num_draws} draws per chain{notes}", file=sys.stderr
        )
        return _stopped_status()
    print(result.summary().to_string())
    if "auto" in metrics:
        print(metrics["auto"]["reason"])
    charged = ", ".join(f"{k} {v:.1f} s" for k, v in result.charged_seconds.items()) or "nothing"
    print(
        f"{metrics['sampler']} ({'exact' if metrics['exact'] else 'APPROXIMATE'} sampler; "
        f"{_verdict(metrics)}): "
        f"{metrics['chains']} chains x {metrics['draws_per_chain']} draws; "
        f"ESS bulk min {metrics['ess_bulk_min']:.0f}, tail min "
        f"{metrics['ess_tail_min']:.0f}, R-hat max {metrics['rhat_max']:.3f}, acceptance "
        f"{metrics['acceptance']:.2f}; {metrics['wall_seconds']:.1f} s with {charged} charged, "
        f"{_ess_per_second(metrics)}; wrote {_wrote(saved)}"
    )
    _print_warnings(metrics)
    return OUTPUT_FAILED if saved.rescued else 0


def _tune_options(args: argparse.Namespace) -> dict | None:
    """The ``tune`` argument of ``sample`` from --tune and the --tune-* options (None: no tuning)."""
    from stanaccel.sampling.config import parse_assignment

    options = {
        key: getattr(args, f"tune_{key}")
        for key in ("budget", "draws", "chains", "objective")
        if getattr(args, f"tune_{key}") is not None
    }
    if args.tune_space:
        options["space"] = dict(parse_assignment(text) for text in args.tune_space)
    return options if args.tune or options else None


def _sample_settings(args: argparse.Namespace) -> tuple[str, dict, dict[str, str]]:
    """The method, its settings and where each came from: --config file, then --set, then the flags."""
    import tomllib

    from stanaccel.sampling.config import ConfigError, parse_assignment

    settings: dict = {}
    sources: dict[str, str] = {}
    method = args.method
    if args.config:
        path = Path(args.config)
        if not path.is_file():
            raise FileNotFoundError(f"config file not found: {path}")
        try:
            table = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from None
        file_method = table.pop("method", None)
        if method is None:
            method = file_method
        settings.update(table)
        sources.update({k: str(path) for k in table})
    for text in args.set or []:
        key, value = parse_assignment(text)
        settings[key] = value
        sources[key] = f"--set {text}"
    for key in ("chains", "draws", "warmup"):
        if getattr(args, key) is not None:
            settings[key] = getattr(args, key)
            sources[key] = f"--{key}"
    return method or "nuts", settings, sources


def _run(args: argparse.Namespace) -> int:
    from stanaccel.workflow import WorkflowInterrupted, run_workflow

    try:
        context = run_workflow(
            args.workflow,
            output=args.output,
            seed=args.seed,
            progress=not args.quiet,
            cache=False if args.recompute else None,
            executor=args.executor,
        )
    except WorkflowInterrupted as stop:  # the message names the signal
        print(f"interrupted: {stop}", file=sys.stderr)
        return _stopped_status()
    print(f"workflow {context.workflow.name} done; outputs in {context.output}")
    return 0


def _report(args: argparse.Namespace) -> int:
    from stanaccel.diagnostics.report import report

    written = report(args.output_dir, args.output)
    for line in written.left_out.values():
        print(f"stanaccel report: warning: {line}", file=sys.stderr)
    in_progress = written.state.startswith("run in progress")
    if written.state:  # a run not done: in progress (a note), or killed, interrupted or failed
        print(f"stanaccel report: {'note' if in_progress else 'warning'}: {written.state}", file=sys.stderr)
    left_out = len(written.left_out)
    print(
        f"wrote {written.path}"
        + (f" without {left_out} step(s) whose outputs are missing or unreadable" if left_out else "")
    )
    return 1 if left_out or (written.state and not in_progress) else 0


def _compile(args: argparse.Namespace) -> int:
    from stanaccel.stan import compile_program

    program = compile_program(_program(args.program), args.include_path or ())
    state = "built" if program.built else "found in cache"
    print(f"{program.name}: {state} at {program.library}")
    if program.warnings:
        print(program.warnings)
    return 0


def _program(text: str) -> Path:
    """A ``.stan`` path, or the name of a bundled program.

    Raises
    ------
    FileNotFoundError, IsADirectoryError
        No such file, or a folder: the message says what is expected.
    """
    path = Path(text)
    expected = f"give a Stan program file (.stan) or a bundled program's name ({_bundled_programs()})"
    if path.is_dir():
        raise IsADirectoryError(f"Stan program {text!r} is a folder: {expected}")
    if path.is_file():
        return path
    if path.suffix == ".stan" or len(path.parts) > 1:
        raise FileNotFoundError(f"Stan program file not found: {text!r}; {expected}")
    from stanaccel.programs import bundled_programs, program_path

    if text not in bundled_programs():
        raise FileNotFoundError(
            f"no Stan program file {text!r} and no bundled program of that name: {expected}"
        )
    return program_path(text)


def _bundled_programs() -> str:
    from stanaccel.programs import bundled_programs

    return ", ".join(bundled_programs())


class _HelpFormatter(argparse.HelpFormatter):
    """Show each option's default where it has one."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default not in (None, False, argparse.SUPPRESS) and "%(default)" not in text:
            text += " (default: %(default)s)"
        return text


class _SampleHelpFormatter(_HelpFormatter):
    """Defaults shown, and the epilog's list of settings kept on its lines."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "".join(indent + line for line in text.splitlines(keepends=True))


class _ListHelpFormatter(_HelpFormatter):
    """Defaults shown, paragraphs wrapped, and a text of several lines (a list) kept on its lines."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" not in text:
            return super()._fill_text(text, width, indent)
        return "".join(indent + line for line in text.splitlines(keepends=True))


class _Parser(argparse.ArgumentParser):
    """A command's parser whose options and epilog are added on first use (``fill``).

    Building the whole command line then costs nothing for the commands not
    run: ``sample``'s options list the table of methods, and ``run``'s epilog
    the workflow actions, whose imports take most of a second each.
    """

    def __init__(self, *args, fill=None, **kwargs):
        super().__init__(*args, **kwargs)
        self._fill = fill

    def filled(self) -> _Parser:
        """This parser with its options added."""
        if self._fill is not None:
            fill, self._fill = self._fill, None
            fill(self)
        return self

    def parse_known_args(self, args=None, namespace=None):
        return super(_Parser, self.filled()).parse_known_args(args, namespace)

    def format_help(self) -> str:
        return super(_Parser, self.filled()).format_help()

    def format_usage(self) -> str:
        return super(_Parser, self.filled()).format_usage()


INCLUDE_PATH_HELP = (
    "a folder to look for the files of the program's #include lines in, after the program's own folder; "
    "repeat for more"
)


def build_parser() -> argparse.ArgumentParser:
    from stanaccel import __version__

    parser = argparse.ArgumentParser(
        prog="stanaccel",
        description="Faster, honest Bayesian sampling of Stan programs.",
        epilog=(
            "Run 'stanaccel COMMAND --help' for a command's options. A PROGRAM is a .stan file "
            f"or the name of a bundled program ({_bundled_programs()}). The first use of a program "
            "compiles it (up to a minute); later uses load it from the cache ($STANACCEL_CACHE)."
        ),
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"stanaccel {__version__}")
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", help="what to do", parser_class=_Parser
    )

    nuts = sub.add_parser(
        "nuts",
        help="run Stan's NUTS on a program",
        description="Run Stan's NUTS (warm-up, then sampling), write the InferenceData as netCDF and "
        "print the ArviZ summary. Ctrl-C stops the chains and writes the draws made so far. Plain Stan NUTS, "
        "as CmdStan runs it: no modes check (chains that all settle in one of several modes agree, and "
        "R-hat cannot tell); 'stanaccel sample --method auto' checks.",
        formatter_class=_HelpFormatter,
    )
    nuts.add_argument("program", help=f"a .stan file or a bundled program ({_bundled_programs()})")
    nuts.add_argument("--data", help="Stan JSON data file (stanaccel.stan.write_data writes one)")
    nuts.add_argument("--include-path", action="append", metavar="DIR", help=INCLUDE_PATH_HELP)
    nuts.add_argument(
        "--chains", type=int, help="number of chains (default 4; with --warmup-from, the file's)"
    )
    nuts.add_argument(
        "--warmup",
        type=int,
        help="warm-up iterations per chain (default 1000; with --warmup-from, 0, or 300 where that warm-up "
        "was made on other data or cannot be checked)",
    )
    nuts.add_argument("--draws", type=int, default=1000, help="draws per chain after warm-up")
    nuts.add_argument("--thin", type=int, default=1, help="keep every THIN-th draw")
    nuts.add_argument(
        "--seed", type=_seed(2**32), default=1, help="random seed (chain c uses Stan's stream c+1)"
    )
    nuts.add_argument(
        "--metric", choices=["diag", "dense"], default="diag", help="the metric adapted in warm-up"
    )
    nuts.add_argument("--delta", type=float, default=0.8, help="target acceptance rate of step adaptation")
    nuts.add_argument("--max-depth", type=int, default=10, help="largest tree depth")
    nuts.add_argument(
        "--warmup-from",
        metavar="FILE",
        help="netCDF file of an earlier stanaccel nuts or sample run (its --output): sample on from its "
        "last draws with its warm-up's adapted step sizes and metric, without a new warm-up if it was made "
        "on this program and data (otherwise a short one from it: see --warmup)",
    )
    nuts.add_argument("--output", "-o", help="netCDF file for the InferenceData (default: PROGRAM-nuts.nc)")
    nuts.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    nuts.set_defaults(func=_nuts)

    sample = sub.add_parser(
        "sample",
        help="run any stanaccel sampler on a program",
        description="Run the warm-up on a program (Stan's NUTS warm-up, or the method's default cheap one, "
        "a Laplace approximation), tune the chosen sampler from it (and train an "
        "autoencoder for the latent methods), run the chains, write the InferenceData (netCDF, with the "
        "settings used and whether the method is exact) and its metrics (FILE.metrics.json), and print the "
        "ArviZ summary. A setting you give wins over one tuned from the warm-up, which wins over the "
        "default.",
        formatter_class=_SampleHelpFormatter,
        fill=_sample_options,
    )
    sample.set_defaults(func=_sample)

    run = sub.add_parser(
        "run",
        help="run a workflow file",
        description="Run the steps of a workflow file (TOML) in order; every table and key is checked "
        "before the first step runs. A step completed earlier in the same output folder with unchanged "
        "settings, seed and input files is loaded, not rerun (run.json says which). Ctrl-C stops the "
        "current step, which keeps its partial outputs, and records the stop in run.json.",
        formatter_class=_ListHelpFormatter,
        fill=_run_epilog,
    )
    run.add_argument("workflow", help="a workflow .toml file")
    run.add_argument("--output", "-o", help="output folder (default: the file's [workflow] output)")
    run.add_argument(
        "--seed",
        type=_seed(2**63),
        help="workflow seed, from which each step's derives (default: the file's)",
    )
    run.add_argument(
        "--executor",
        metavar="SPEC",
        help=f"where the studies' sampler runs and sample steps' chains go: {EXECUTOR_HELP} "
        "(default: the file's [workflow] executor, else serial)",
    )
    run.add_argument("--quiet", "-q", action="store_true", help="no progress bars")
    run.add_argument(
        "--recompute", action="store_true", help="run every step, even those completed earlier unchanged"
    )
    run.set_defaults(func=_run)

    report = sub.add_parser(
        "report",
        help="write the HTML report of a workflow's outputs",
        description="Write one self-contained HTML page of a workflow output folder (run.json and one folder "
        "per step): for each sampler its metrics, ESS per second against Stan NUTS, kernel statistics, the "
        "ArviZ summary, trace and rank plots, and R-hat and ESS against wall time; each study's tables and "
        "figures. The page loads nothing from the network.",
        formatter_class=_HelpFormatter,
    )
    report.add_argument("output_dir", metavar="OUTPUT_DIR", help="the output folder of `stanaccel run`")
    report.add_argument(
        "--output",
        "-o",
        metavar="FILE",
        help="the HTML file, ending in .html, not one of the run's own (default: OUTPUT_DIR/report.html)",
    )
    report.set_defaults(func=_report)

    comp = sub.add_parser(
        "compile",
        help="compile a Stan program (cached)",
        description="Compile a Stan program, or find it in the cache, and print where it is.",
        formatter_class=_HelpFormatter,
    )
    comp.add_argument("program", help=f"a .stan file or a bundled program ({_bundled_programs()})")
    comp.add_argument("--include-path", action="append", metavar="DIR", help=INCLUDE_PATH_HELP)
    comp.set_defaults(func=_compile)
    return parser


def _sample_options(sample: argparse.ArgumentParser) -> None:
    """``stanaccel sample``'s options and its epilog (the settings of each method in the table)."""
    from stanaccel.sampling.config import AUTO, OBJECTIVES, keys, warmup_default_text
    from stanaccel.sampling.methods import METHODS

    sample.epilog = "Settings of each method (--set KEY=VALUE; see the README's table):\n" + "\n".join(
        f"  {m}: {', '.join(k for k in keys(m) if k not in ('chains', 'draws', 'warmup'))}" for m in METHODS
    )
    sample.add_argument("program", help=f"a .stan file or a bundled program ({_bundled_programs()})")
    sample.add_argument("--data", help="Stan JSON data file")
    sample.add_argument("--include-path", action="append", metavar="DIR", help=INCLUDE_PATH_HELP)
    sample.add_argument("--method", "-m", choices=[*METHODS, AUTO], metavar="METHOD",
                        help=f"the sampler: {', '.join(METHODS)} (default: --config's or nuts); or {AUTO}: "
                        "short pilots of the exact methods, the one of highest projected ESS/s "
                        "(everything charged) run in full (settings: chains, draws, pilot_draws, "
                        "observations)")  # fmt: skip
    sample.add_argument("--set", action="append", metavar="KEY=VALUE",
                        help="a setting, its value read as TOML (n_steps=20, inner=mh, "
                        "'observations={count=\"N\", fields=[\"x\", \"y\"]}'); repeat for more")  # fmt: skip
    sample.add_argument(
        "--config", metavar="FILE.toml", help="settings from a TOML file (--set wins over it)"
    )
    sample.add_argument("--chains", type=int, help="number of chains (default 4)")
    sample.add_argument("--draws", type=int, help="draws per chain (default 1000)")
    sample.add_argument(
        "--warmup",
        type=_warmup,
        help="NUTS warm-up iterations per chain, or 'nuts' (1000 of them), 'pathfinder' or 'laplace': "
        f"a cheap Gaussian warm-up for the methods that take one (default: {warmup_default_text()})",
    )
    sample.add_argument(
        "--seed", type=_seed(2**63), default=1, help="random seed; every part of the run derives from it"
    )
    sample.add_argument("--warmup-from", nargs="+", metavar="FILE",
                        help="an earlier warm-up instead of a new one: a netCDF file of stanaccel nuts or "
                        "sample, or CmdStan CSV files")  # fmt: skip
    sample.add_argument(
        "--output", "-o", help="netCDF file for the InferenceData (default: PROGRAM-METHOD.nc)"
    )
    sample.add_argument("--executor", metavar="SPEC", help=f"where the chains run: {EXECUTOR_HELP}")
    sample.add_argument("--quiet", "-q", action="store_true", help="no progress bars")
    tune = sample.add_argument_group(
        "tuning by Bayesian optimisation",
        "--tune (or any --tune-* option) tunes the method's settings on short runs after the warm-up; "
        "their time is charged to the run",
    )
    tune.add_argument("--tune", action="store_true", help="tune the settings (default space per method)")
    tune.add_argument(
        "--tune-budget",
        type=int,
        metavar="N",
        help="trials, at least 4 (default 16): two measure the default setting, one repeats the best",
    )
    tune.add_argument("--tune-draws", type=int, metavar="N", help="draws per chain of a trial (default 200)")
    tune.add_argument("--tune-chains", type=int, metavar="N", help="chains of a trial (default 2)")
    tune.add_argument("--tune-objective", choices=OBJECTIVES,
                      help="what a trial maximises (default ess-per-second)")  # fmt: skip
    tune.add_argument("--tune-space", action="append", metavar="KEY=RANGE",
                      help="a setting to tune and its range, as TOML: 'n_steps={int=[1, 30]}', "
                      "'step_size={log=[0.01, 0.5]}', 'jump={choices=[1, 2, 4, 8]}'; "
                      "repeat for more (default: the method's own space)")  # fmt: skip


def _run_epilog(run: argparse.ArgumentParser) -> None:
    """``stanaccel run``'s epilog: the actions a step may name."""
    from stanaccel.workflow.actions import actions_help

    run.epilog = "The actions a step may name (its action key):\n" + actions_help()


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """stanaccel's own warnings as one plain line (``stanaccel: CheckpointWarning: ...``).

    Python's format adds the source file and line that raised it, which
    tells a user of the command line nothing; other packages' warnings keep it.
    """
    if category.__module__.startswith("stanaccel"):
        print(f"stanaccel: {category.__name__}: {message}", file=file or sys.stderr)
    else:
        (file or sys.stderr).write(warnings.formatwarning(message, category, filename, lineno, line))


def main(argv: list[str] | None = None) -> int:
    from stanaccel.signals import stop_on_signals

    with stop_on_signals():  # SIGTERM and SIGHUP stop a run as Ctrl-C does, keeping its draws
        try:
            return _main(argv)
        except KeyboardInterrupt:  # while importing or parsing, before a command handles it
            print(f"stanaccel: {_stopped()}", file=sys.stderr)
            return _stopped_status()


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    from stanaccel.errors import OutputFailed
    from stanaccel.extras import MissingExtraError
    from stanaccel.stan.compiler import enable_build_messages
    from stanaccel.stan.errors import StanError

    enable_build_messages()  # a first compile takes a minute: say so
    warnings.showwarning = _show_warning

    try:
        return args.func(args)
    except (StanError, ValueError, OSError, MissingExtraError) as exc:
        print(f"stanaccel {args.command}: error: {exc}", file=sys.stderr)
        disk = isinstance(exc, OutputFailed) or getattr(exc, "errno", None) in OUTPUT_ERRNOS
        return OUTPUT_FAILED if disk else BAD_INPUT  # a full disk is no bad input
    except KeyboardInterrupt:
        print(f"stanaccel: {_stopped()}", file=sys.stderr)
        return _stopped_status()


if __name__ == "__main__":
    sys.exit(main())
