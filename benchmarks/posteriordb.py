"""posteriordb: ``stanaccel sample --method auto`` against ``--method nuts`` on its reference posteriors.

posteriordb (https://github.com/stan-dev/posteriordb, BSD-3) is a set of
Stan programs, their data and, for some, reference draws (10 chains x 1000
thinned draws of Stan's NUTS). Nothing of it is committed here but the
names of the posteriors with reference draws (``posteriordb_names.txt``
beside this script, from which the script says when a local copy has
posteriors it does not know). Point the script at a local copy with
``--posteriordb DIR`` or ``$POSTERIORDB`` (the clone, or its
``posterior_database`` folder).

For each posterior with reference draws (or those of ``--posteriors``) the
script unzips the program and the data to a work folder, compiles the
program once with ``stanaccel compile`` (its time is reported on its own and
charged to neither run), then runs the command line, each as its own
process timed by the wall clock: ``stanaccel sample PROGRAM --data DATA
--method nuts`` first, then ``--method auto``, with the same chains, draws
and seed, ``-q``. A run past ``--timeout`` is killed and recorded as
skipped, as is a posterior whose program stanc refuses (the reason is the
first line of the error); a run that crashes is recorded as failed, with
its reason.

Each run is scored from its draws (:func:`score`): ESS = the worst over the
parameters the reference draws hold of min(bulk ESS, tail ESS) (ArviZ), per
second charged (the run's ``wall_seconds`` from its metrics: warm-up,
pilots, set-ups and sampling) and per second of the process's wall clock
(start-up, imports, loading the compiled program and writing the files
included); the table gives auto / NUTS for both. (The metrics' own
``ess_min`` covers every posterior variable, generated quantities too; it
is in the JSON.) Runs of under ``--repeat-under`` seconds charged (10) are
timer noise as much as speed, so both methods run again with the same
seed until either's runs add up to ``--repeat-under`` seconds, up to
``--repeats`` times each (9), and the ESS per second are the medians
(:func:`median_run`). Each run's draws are checked against the reference
draws (:func:`check`): for every parameter z = (mean - ref mean) /
sqrt(mcse^2 + ref mcse^2) (ArviZ MCSEs), passing when the worst |z| is
under the Bonferroni limit norm.isf(0.01 / (2 n)) for the n parameters;
an sd passes when within 15% of the reference's, or its z (with the MCSEs
of the sds) under the same limit.

It prints one Markdown table, a row per posterior, then the spread of the
ratio auto / NUTS (worst, median, best) and the share of posteriors where
auto beats NUTS; ``--markdown FILE`` writes the same text, and every row
goes to a JSON file (``--json``, default ``FOLDER/posteriordb.json``,
rewritten after each posterior) that ``--rerender`` turns back into the
table without running anything.

Run: .venv/bin/python benchmarks/posteriordb.py [FOLDER] --posteriordb DIR [--posteriors a,b,c]
     [--chains 4] [--draws 1000] [--seed 1] [--timeout 1200] [--markdown out.md] [--json rows.json]
     .venv/bin/python benchmarks/posteriordb.py --rerender rows.json [--markdown out.md]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import norm

from stanaccel.diagnostics._arviz import az, numpy_path

NAMES_FILE = Path(__file__).with_name("posteriordb_names.txt")
"""The posteriors of posteriordb with reference draws, one name a line (names only)."""
METHODS = ("nuts", "auto")  # NUTS first: every ratio is against it
ALPHA = 0.01
"""Family-wise error rate of the checks against the reference draws (Bonferroni over the parameters)."""
SD_TOLERANCE = 0.15
"""An sd within this relative distance of the reference's passes whatever its z."""
GET_POSTERIORDB = (
    "get a local posteriordb with `git clone https://github.com/stan-dev/posteriordb` (then pass "
    "--posteriordb posteriordb) or `pip install posteriordb` (its PosteriorDatabaseGithub downloads a copy; "
    "pass the posterior_database folder it downloads to), or set $POSTERIORDB"
)


# --- posteriordb -------------------------------------------------------------------------------------


def find_database(given: str | None) -> Path:
    """The ``posterior_database`` folder of ``given`` (the clone or that folder), else of ``$POSTERIORDB``.

    Raises
    ------
    SystemExit
        Neither names a posteriordb; the message says how to get one.
    """
    text = given or os.environ.get("POSTERIORDB")
    if not text:
        raise SystemExit(f"posteriordb.py: no posteriordb given (--posteriordb DIR or $POSTERIORDB): "
                         f"{GET_POSTERIORDB}")  # fmt: skip
    root = Path(text).expanduser()
    for folder in (root / "posterior_database", root):
        if (folder / "posteriors").is_dir() and (folder / "models").is_dir():
            return folder
    source = "--posteriordb" if given else "$POSTERIORDB"
    raise SystemExit(f"posteriordb.py: {source} {text} is not a posteriordb (it has no "
                     f"posterior_database/posteriors folder): {GET_POSTERIORDB}")  # fmt: skip


def known_names(path: Path = NAMES_FILE) -> list[str]:
    """The names in ``posteriordb_names.txt`` (blank lines and ``#`` comments ignored)."""
    if not path.is_file():
        return []
    lines = (line.strip() for line in path.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def posteriors_with_reference(database: Path) -> dict[str, dict]:
    """Each posterior that names reference draws: its name -> its JSON (model_name, data_name, ...)."""
    out = {}
    for path in sorted((database / "posteriors").glob("*.json")):
        info = json.loads(path.read_text())
        if info.get("reference_posterior_name"):
            out[info["name"]] = info
    return out


def reference_path(database: Path, info: dict) -> Path:
    return (
        database / "reference_posteriors" / "draws" / "draws" / f"{info['reference_posterior_name']}.json.zip"
    )


def unzip_json(path: Path) -> Any:
    """The JSON of a posteriordb ``.json.zip`` (one member)."""
    with zipfile.ZipFile(path) as archive:
        return json.loads(archive.read(archive.namelist()[0]))


def read_reference(path: Path) -> dict[str, np.ndarray]:
    """Reference draws: each posteriordb name (``b[2,1]``) -> a (chain, draw) array."""
    chains = unzip_json(path)
    return {name: np.array([chain[name] for chain in chains], dtype=float) for name in chains[0]}


def prepare(database: Path, info: dict, folder: Path) -> tuple[Path, Path]:
    """Write the posterior's program (``<model>.stan``) and data (``data.json``) to ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    program = folder / f"{info['model_name']}.stan"
    program.write_text((database / "models" / "stan" / f"{info['model_name']}.stan").read_text())
    data = folder / "data.json"
    data.write_text(json.dumps(unzip_json(database / "data" / "data" / f"{info['data_name']}.json.zip")))
    return program, data


# --- names: ours (a variable's array) and posteriordb's ("b[2,1]", 1-based) -------------------------------

NAME = re.compile(r"^\s*([^\[\]\s]+)\s*(?:\[([\d,\s]+)\])?\s*$")


def parse_name(name: str) -> tuple[str, tuple[int, ...]]:
    """A posteriordb (Stan) name to our variable and its 0-based index: ``"b[2,1]"`` -> ``("b", (1, 0))``.

    The index is the element's position in the variable's array (``b[i, j]``
    is row i, column j), whatever the order Stan writes its CSV columns in.
    """
    match = NAME.match(name)
    if match is None:
        raise ValueError(f"not a Stan name: {name!r}")
    variable, index = match.groups()
    return variable, tuple(int(i) - 1 for i in index.split(",")) if index else ()


def stan_name(variable: str, index: tuple[int, ...]) -> str:
    """Our variable and 0-based index to the posteriordb (Stan) name: ``("b", (1, 0))`` -> ``"b[2,1]"``."""
    return f"{variable}[{','.join(str(i + 1) for i in index)}]" if index else variable


def as_draws(draws: Any) -> Mapping[str, np.ndarray]:
    """Each variable's (chain, draw, ...) array, from InferenceData (its posterior), a Dataset or a dict."""
    if isinstance(draws, az.InferenceData):
        draws = draws.posterior
    if hasattr(draws, "data_vars"):  # an xarray Dataset, dims (chain, draw, ...)
        return {str(k): np.asarray(draws[k].values) for k in draws.data_vars}
    return {k: np.asarray(v) for k, v in draws.items()}


def column(draws: Mapping[str, np.ndarray], name: str) -> np.ndarray:
    """The (chain, draw) draws of one scalar named as posteriordb names it (``"b[2,1]"``).

    Raises
    ------
    KeyError
        No such variable, or the index is out of its shape.
    """
    variable, index = parse_name(name)
    if variable not in draws:
        raise KeyError(name)
    array = draws[variable]
    shape = array.shape[2:]
    if not index and math.prod(shape) == 1:  # a one-element vector named without an index
        return array.reshape(array.shape[:2])
    if len(index) != len(shape) or any(i >= n or i < 0 for i, n in zip(index, shape, strict=True)):
        raise KeyError(name)
    return array[(slice(None), slice(None), *index)]


def stan_columns(draws: Any) -> dict[str, np.ndarray]:
    """Every scalar of the draws by its posteriordb name (``b[1,1]``, ``b[1,2]``, ...), each (chain, draw)."""
    out = {}
    for variable, array in as_draws(draws).items():
        for index in np.ndindex(*array.shape[2:]):
            out[stan_name(variable, index)] = array[(slice(None), slice(None), *index)]
    return out


def columns_of(draws: Any, names: list[str] | None = None) -> tuple[dict[str, np.ndarray], list[str]]:
    """The named scalars' (chain, draw) draws (all of them if ``names`` is None), and the names not found."""
    if names is None:
        return stan_columns(draws), []
    draws = as_draws(draws)
    found, missing = {}, []
    for name in names:
        try:
            found[name] = column(draws, name)
        except KeyError:
            missing.append(name)
    return found, missing


# --- scoring and checking ---------------------------------------------------------------------------------


def _scalar(value: Any) -> float:
    return float(np.ravel(value)[0])


def ess_bulk_tail(x: np.ndarray) -> tuple[float, float]:
    """ArviZ's bulk and tail ESS of one scalar's (chain, draw) draws (NaN for a constant)."""
    with numpy_path():
        return _scalar(az.ess(x, method="bulk")), _scalar(az.ess(x, method="tail"))


def score(
    draws: Any, charged_seconds: float, process_seconds: float, names: list[str] | None = None
) -> dict[str, Any]:
    """ESS = the worst over the parameters of min(bulk ESS, tail ESS), and it per second both ways.

    Parameters
    ----------
    draws : InferenceData, xarray Dataset or dict of (chain, draw, ...) arrays
    charged_seconds : float
        The time charged to the run (its metrics' ``wall_seconds``).
    process_seconds : float
        The wall clock of the run's process.
    names : list of str, optional
        The scalars to score, named as posteriordb names them (``b[2,1]``);
        default every scalar of the draws. A constant one (NaN ESS) is left out.
    """
    columns, missing = columns_of(draws, names)
    ess = {name: ess_bulk_tail(x) for name, x in columns.items()}
    ess = {name: pair for name, pair in ess.items() if all(np.isfinite(pair))}
    if not ess:
        worst, bulk, tail, value = None, math.nan, math.nan, math.nan
    else:
        worst = min(ess, key=lambda name: min(ess[name]))
        bulk = min(b for b, _ in ess.values())
        tail = min(t for _, t in ess.values())
        value = min(ess[worst])
    return {
        "ess": value,
        "ess_bulk_min": bulk,
        "ess_tail_min": tail,
        "worst": worst,
        "ess_per_charged_second": value / charged_seconds if charged_seconds > 0 else math.nan,
        "ess_per_process_second": value / process_seconds if process_seconds > 0 else math.nan,
        "parameters": len(columns),
        "missing": missing,
    }


def _moments(x: np.ndarray) -> tuple[float, float, float, float]:
    """Mean, its MCSE, sd, its MCSE (ArviZ) of a (chain, draw) array."""
    with numpy_path():
        mcse_mean, mcse_sd = _scalar(az.mcse(x, method="mean")), _scalar(az.mcse(x, method="sd"))
    return float(np.mean(x)), mcse_mean, float(np.std(x, ddof=1)), mcse_sd


def _z(value: float, mcse: float, ref: float, ref_mcse: float) -> float:
    scale = math.hypot(mcse, ref_mcse)
    if scale > 0:
        return (value - ref) / scale
    return 0.0 if value == ref else math.inf


def check(draws: Any, reference: Mapping[str, np.ndarray], alpha: float = ALPHA) -> dict[str, Any]:
    """Every reference parameter's mean and sd from ``draws`` against the reference draws'.

    Means: z = (mean - ref mean) / sqrt(mcse^2 + ref mcse^2), passing when
    every |z| is under the Bonferroni limit ``norm.isf(alpha / (2 n))``. Sds:
    each passes when within :data:`SD_TOLERANCE` of the reference's or its z
    (with the sds' MCSEs) under the same limit. A parameter the draws lack
    fails the check and is listed in ``missing``.
    """
    columns, missing = columns_of(draws, list(reference))
    limit = float(norm.isf(alpha / (2 * max(len(reference), 1))))
    z_means, z_sds, relative = {}, {}, {}
    for name, x in columns.items():
        mean, mcse, sd, mcse_sd = _moments(x)
        ref_mean, ref_mcse, ref_sd, ref_mcse_sd = _moments(reference[name])
        z_means[name] = _z(mean, mcse, ref_mean, ref_mcse)
        z_sds[name] = _z(sd, mcse_sd, ref_sd, ref_mcse_sd)
        relative[name] = sd / ref_sd - 1 if ref_sd > 0 else (0.0 if sd == 0 else math.inf)
    bad_sds = [n for n in columns if not (abs(relative[n]) < SD_TOLERANCE or abs(z_sds[n]) < limit)]
    worst = max(z_means, key=lambda n: abs(z_means[n]), default=None)
    worst_sd = max(relative, key=lambda n: abs(relative[n]), default=None)
    return {
        "limit": limit,
        "worst_z": abs(z_means[worst]) if worst else math.nan,
        "worst_z_name": worst,
        "means_pass": bool(worst is not None and abs(z_means[worst]) < limit and not missing),
        "worst_sd_relative": relative[worst_sd] if worst_sd else math.nan,
        "worst_sd_name": worst_sd,
        "sd_failures": {n: {"relative": relative[n], "z": z_sds[n]} for n in bad_sds},
        "sd_pass": bool(columns and not bad_sds and not missing),
        "missing": missing,
    }


# --- running the command line -----------------------------------------------------------------------------


def stanaccel_command() -> list[str]:
    """The ``stanaccel`` command line in this interpreter (the ``stanaccel`` console script's module)."""
    return [sys.executable, "-m", "stanaccel.cli"]


def run_process(command: list[str], timeout: float, log: Path) -> tuple[int | None, float, str]:
    """Run ``command`` in its own process group; its exit status (None: killed at ``timeout``), its wall
    seconds (time.perf_counter) and its stderr. Its stdout and stderr go to ``log``.out / ``log``.err."""
    out, err = log.with_suffix(".out"), log.with_suffix(".err")
    with out.open("w") as stdout, err.open("w") as stderr:
        start = time.perf_counter()
        process = subprocess.Popen(command, stdout=stdout, stderr=stderr, start_new_session=True)
        try:
            status = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            status = None
            os.killpg(process.pid, signal.SIGKILL)  # the group: the run and any compiler it started
            process.wait()
        except BaseException:  # Ctrl-C: the run is in its own session, so stop it here
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise
        seconds = time.perf_counter() - start
    return status, seconds, err.read_text(errors="replace")


def error_reason(stderr: str) -> str:
    """The first line of a failed run's error: the CLI's ``error:`` line (stanc's location and its last
    line, for a stanc message), else a traceback's exception, else the last line of stderr."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for i, line in enumerate(lines):
        if re.match(r"^stanaccel( \w+)?: error:", line):
            text = line.split("error:", 1)[1].strip()
            rest = [r for r in lines[i + 1 :] if not r.startswith(("stanaccel", "Traceback"))]
            if text.endswith(":") and rest:  # stanc: "Syntax error in 'x.stan', line 3, ...:", the code, why
                rules = [j for j, r in enumerate(rest) if set(r) == {"-"}]
                why = rest[rules[-1] + 1] if rules and rules[-1] + 1 < len(rest) else rest[-1]
                text = f"{text} {why}"
            return text or (rest[0] if rest else "error")
    if any(line.startswith("Traceback") for line in lines):
        return lines[-1]
    return lines[-1] if lines else "no error message"


def compile_once(program: Path, timeout: float) -> dict[str, Any]:
    """``stanaccel compile PROGRAM`` (or the cache's copy), timed: charged to neither run."""
    command = [*stanaccel_command(), "compile", str(program)]
    status, seconds, stderr = run_process(command, timeout, program.with_name("compile"))
    if status is None:
        return {"status": "skipped", "reason": f"compile timed out after {timeout:g} s", "seconds": seconds}
    if status != 0:
        return {
            "status": "skipped",
            "reason": f"does not compile: {error_reason(stderr)}",
            "seconds": seconds,
        }
    built = "found in cache" not in program.with_name("compile.out").read_text()
    return {"status": "ok", "seconds": seconds, "built": built}


def short_reason(reason: str) -> str:
    """auto's reason in a few words: the projected ESS/s of the chosen method and the others."""
    text = reason.removeprefix("auto: ")
    match = re.match(r"chose \S+ \(projected (\S+) ESS/s(?:; ([^)]*))?\):\s*(.*)", text)
    if match is None:
        if "no pilot gave a usable estimate" in text:
            return "no usable pilot"
        return text if len(text) <= 60 else text[:57] + "..."
    mine, others, why = match.groups()
    out = f"proj. {mine}" + (f" vs {others}" if others else "")
    if "disagree about the modes" in why:
        out += "; modes disagree"
    return out


def sample_run(
    method: str, program: Path, data: Path, reference: dict[str, np.ndarray], args: argparse.Namespace
) -> dict[str, Any]:
    """One ``stanaccel sample`` process: its status, seconds, metrics, score and check."""
    output = program.with_name(f"{method}.nc")
    metrics_path = output.with_name(f"{method}.metrics.json")
    for stale in (output, metrics_path):
        stale.unlink(missing_ok=True)  # an earlier run's files must not pass for this one's
    command = [
        *stanaccel_command(), "sample", str(program), "--data", str(data), "--method", method,
        "--chains", str(args.chains), "--draws", str(args.draws), "--seed", str(args.seed), "-q",
        "-o", str(output),
    ]  # fmt: skip
    status, seconds, stderr = run_process(command, args.timeout, output.with_suffix(""))
    run: dict[str, Any] = {"method": method, "command": shlex.join(command), "process_seconds": seconds}
    if status is None:
        return {**run, "status": "skipped", "reason": f"timed out after {args.timeout:g} s"}
    if status != 0 or not metrics_path.is_file():
        why = error_reason(stderr)
        if status == 2:  # bad input: stanaccel refused the program, the data or the settings
            return {**run, "status": "skipped", "reason": f"refused: {why}"}
        return {**run, "status": "failed", "reason": f"exit {status}: {why}"}
    metrics = json.loads(metrics_path.read_text())
    idata = az.from_netcdf(output)
    draws = as_draws(idata)
    idata.close()
    charged = float(metrics["wall_seconds"])
    run.update(
        status="ok",
        charged_seconds=charged,
        charged=metrics.get("charged_seconds", {}),
        converged=bool(metrics.get("converged", False)),
        rhat_max=metrics.get("rhat_max"),
        metrics_ess_min=metrics.get("ess_min"),
        metrics_ess_per_second=metrics.get("ess_per_second"),
        sampler=metrics.get("sampler"),
        score=score(draws, charged, seconds, list(reference)),
        check=check(draws, reference),
    )
    if "auto" in metrics:
        reason = metrics["auto"].get("reason", "")
        run["auto"] = {
            "chosen": metrics["auto"].get("chosen"),
            "reason": reason,
            "short": short_reason(reason),
        }
    return run


def benchmark(name: str, info: dict, database: Path, folder: Path, args: argparse.Namespace) -> dict:
    """One posterior's row: compile, NUTS, auto, and the ratios."""
    row: dict[str, Any] = {"posterior": name, "status": "ok"}
    path = reference_path(database, info)
    if not path.is_file():
        return {**row, "status": "skipped", "reason": "reference draws absent"}
    reference = read_reference(path)
    row["params"] = len(reference)
    program, data = prepare(database, info, folder / name)
    row["compile"] = compile_once(program, args.timeout)
    print(f"{name}: compile {row['compile']['seconds']:.1f} s ({row['compile'].get('reason', 'ok')})",
          flush=True)  # fmt: skip
    if row["compile"]["status"] != "ok":
        return {**row, "status": "skipped", "reason": row["compile"]["reason"]}
    runs: dict[str, list[dict]] = {method: [] for method in METHODS}
    while True:
        for method in METHODS:
            runs[method].append(sample_run(method, program, data, reference, args))
            print(f"{name}: {method} {run_line(runs[method][-1])}", flush=True)
        if not short(runs, args):
            break
    for method in METHODS:
        row[method] = median_run(runs[method])
    nuts, auto = row["nuts"], row["auto"]
    if nuts["status"] == auto["status"] == "ok":
        for key, which in (
            ("ratio_charged", "ess_per_charged_second"),
            ("ratio_process", "ess_per_process_second"),
        ):
            mine, theirs = auto["score"][which], nuts["score"][which]
            row[key] = mine / theirs if theirs > 0 else math.nan
    return row


def short(runs: dict[str, list[dict]], args: argparse.Namespace) -> bool:
    """Whether to run both methods again: each ran fine, neither's runs so far add up to
    ``--repeat-under`` seconds charged, and each ran fewer than ``--repeats`` times.

    A 0.15 s run thus runs ``--repeats`` times, a 4 s one three times, a 12 s one once: the
    timer's noise (tens of milliseconds a process) shrinks against the seconds measured.
    """
    latest = [method_runs[-1] for method_runs in runs.values()]
    return (
        len(runs[METHODS[0]]) < args.repeats
        and all(run["status"] == "ok" for run in latest)
        and max(sum(run["charged_seconds"] for run in method_runs) for method_runs in runs.values())
        < args.repeat_under
    )


def median_run(runs: list[dict]) -> dict:
    """The first run, its ESS per second (both ways) the median over ``runs``, each repeat listed.

    Seconds under ten are timer noise as much as speed (a 0.1 s run measured
    0.05 s in one process and 0.08 s in the next with the same draws), so
    short runs are repeated with the same seed and the medians compared.
    """
    first = runs[0]
    if len(runs) == 1:
        return first
    keys = ("ess_per_charged_second", "ess_per_process_second")
    repeats = [
        {
            "charged_seconds": run["charged_seconds"],
            "process_seconds": run["process_seconds"],
            "ess": run["score"]["ess"],
            **{key: run["score"][key] for key in keys},
            **({"chosen": run["auto"]["chosen"]} if "auto" in run else {}),
        }
        for run in runs
    ]
    medians = {key: float(np.median([r[key] for r in repeats])) for key in keys}
    return {**first, "score": {**first["score"], **medians}, "repeats": repeats}


def run_line(run: dict) -> str:
    """A run's progress line."""
    if run["status"] != "ok":
        return f"{run['status']} after {run['process_seconds']:.1f} s: {run['reason']}"
    s, c = run["score"], run["check"]
    chose = f"chose {run['auto']['chosen']}, " if "auto" in run else ""
    return (
        f"{chose}{run['charged_seconds']:.1f} s charged, {run['process_seconds']:.1f} s process; "
        f"ESS {s['ess']:.0f} (bulk {s['ess_bulk_min']:.0f}, tail {s['ess_tail_min']:.0f}, {s['worst']}), "
        f"{s['ess_per_charged_second']:.1f} ESS/s charged; worst |z| {c['worst_z']:.2f} "
        f"({c['worst_z_name']}, limit {c['limit']:.2f}), sd {'ok' if c['sd_pass'] else 'FAIL'}"
        + ("" if run["converged"] else "; NOT CONVERGED by its own checks")
    )


# --- the report --------------------------------------------------------------------------------------------


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _num(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:.{digits}g}"


def check_cell(run: dict) -> str:
    """The check of one run: worst |z| of the means against its limit; the sds."""
    if run.get("status") != "ok":
        return f"{run.get('status', '-')}"
    c = run["check"]
    means = f"{_num(c['worst_z'])} {'<' if c['means_pass'] else '> FAIL'} {c['limit']:.2f}"
    if c["missing"]:
        means += f" (missing {', '.join(c['missing'][:3])})"
    if c["sd_pass"]:
        sds = "sd ok"
    else:
        bad = ", ".join(f"{n} {v['relative']:+.0%}" for n, v in list(c["sd_failures"].items())[:2])
        sds = f"sd FAIL ({bad})" if bad else "sd FAIL"
    return f"{means}; {sds}"


def render(rows: list[dict], meta: dict) -> str:
    """The Markdown: settings, the table, the ratio's spread and the share where auto beats NUTS."""
    lines = [
        f"$ python benchmarks/posteriordb.py {meta['argv']}",
        "",
        f"posteriordb at {meta['database']}; {meta['chains']} chains x {meta['draws']} draws, "
        f"seed {meta['seed']}, timeout {meta['timeout']:g} s a run. ESS = the worst over the "
        "reference's parameters of min(bulk, tail) ESS; ESS/s charged = ESS / the run's seconds "
        "charged (warm-up, pilots, set-ups, sampling); process wall = the whole `stanaccel sample` "
        "process (start-up and files included; the compile is done before and not included). "
        "Ratios are auto / NUTS. Check: worst |z| of the means against the reference draws, under "
        f"the Bonferroni limit at 1%; sd ok: every sd within {SD_TOLERANCE:.0%} of the reference's "
        "or its |z| under the limit. (nc): not converged by the run's own checks. Until either method's "
        f"runs added up to {meta.get('repeat_under', 10):g} s charged, both ran again with the same seed, up "
        f"to {meta.get('repeats', 1)} times each, and the ESS/s and the ratios are the medians (the timer's "
        "noise is as large as the speed there).",
        *(["", *(f"note: {note}" for note in meta.get("notes", []))] if meta.get("notes") else []),
        "",
        "| posterior | params | auto chose (why) | NUTS ESS | NUTS ESS/s charged | auto ESS/s charged "
        "| auto/NUTS charged | auto/NUTS process wall | auto check | NUTS check |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for row in rows:
        name = _cell(row["posterior"])
        if row["status"] != "ok":
            lines.append(f"| {name} | {row.get('params', '-')} | skipped: {_cell(row['reason'])} "
                         "| | | | | | | |")  # fmt: skip
            continue
        nuts, auto = row["nuts"], row["auto"]

        def per_second(run: dict) -> str:
            if run["status"] != "ok":
                return f"{run['status']}: {_cell(run['reason'])}"
            return _num(run["score"]["ess_per_charged_second"]) + ("" if run["converged"] else " (nc)")

        chose = (
            f"{auto['auto']['chosen']} ({_cell(auto['auto']['short'])})"
            if auto["status"] == "ok" and "auto" in auto
            else "-"
        )
        nuts_ess = _num(nuts["score"]["ess"], 4) if nuts["status"] == "ok" else "-"
        repeated = f" (median of {len(nuts['repeats'])})" if "repeats" in nuts else ""
        lines.append(
            f"| {name} | {row['params']} | {chose} | {nuts_ess} | {per_second(nuts)} "
            f"| {per_second(auto)} | {_num(row.get('ratio_charged'))}{repeated} "
            f"| {_num(row.get('ratio_process'))}{repeated} "
            f"| {_cell(check_cell(auto))} | {_cell(check_cell(nuts))} |"
        )
    lines += ["", *summary(rows)]
    compiles = [r for r in rows if "compile" in r]
    if compiles:
        lines += [
            "",
            "Compiles (charged to neither run): "
            + ", ".join(
                f"{r['posterior']} {r['compile']['seconds']:.0f} s"
                + ("" if r["compile"].get("built", True) else " (cached)")
                for r in compiles
            ),
        ]
    return "\n".join(lines)


def summary(rows: list[dict]) -> list[str]:
    """The spread of each ratio over the posteriors where both ran, and the share where auto wins."""
    lines = []
    ok = [r for r in rows if r["status"] == "ok"]
    for key, label in (("ratio_charged", "charged"), ("ratio_process", "process wall")):
        ratios = sorted(r[key] for r in ok if math.isfinite(r.get(key, math.nan)))
        if not ratios:
            lines.append(f"- auto / NUTS, {label}: no posterior where both ran")
            continue
        wins = sum(ratio > 1 for ratio in ratios)
        lines.append(
            f"- auto / NUTS, {label}: worst {ratios[0]:.3g}, median {float(np.median(ratios)):.3g}, best "
            f"{ratios[-1]:.3g}; auto beats NUTS on {wins} of {len(ratios)} posteriors "
            f"({wins / len(ratios):.0%})"
        )
    runs = [r[m] for r in ok for m in METHODS if r.get(m, {}).get("status") == "ok"]
    failing = [f"{r['posterior']} ({m})" for r in ok for m in METHODS
               if r.get(m, {}).get("status") == "ok" and not (r[m]["check"]["means_pass"]
                                                              and r[m]["check"]["sd_pass"])]  # fmt: skip
    lines.append(f"- checks against the reference draws: {len(runs) - len(failing)} of {len(runs)} runs pass"
                 + (f"; failing: {', '.join(failing)}" if failing else ""))  # fmt: skip
    skipped = [r for r in rows if r["status"] != "ok"]
    not_run = [f"{r['posterior']} ({m}: {r[m]['status']})" for r in ok for m in METHODS
               if r.get(m, {}).get("status") != "ok"]  # fmt: skip
    lines.append(f"- posteriors: {len(rows)}, of which {len(skipped)} skipped"
                 + (f"; runs skipped or failed: {', '.join(not_run)}" if not_run else ""))  # fmt: skip
    return lines


def name_notes(local: list[str], known: list[str]) -> list[str]:
    """Notes on the local posteriordb's posteriors with reference draws that the names file does not list,
    and on those it lists that the local copy lacks."""
    notes = []
    new = sorted(set(local) - set(known))
    gone = sorted(set(known) - set(local))
    if new:
        notes.append(f"the local posteriordb has {len(new)} posterior(s) with reference draws that "
                     f"{NAMES_FILE.name} does not list (a newer posteriordb?): {', '.join(new)}")  # fmt: skip
    if gone:
        notes.append(f"{len(gone)} posterior(s) listed in {NAMES_FILE.name} are not in the local posteriordb "
                     f"(an older copy?): {', '.join(gone)}")  # fmt: skip
    return notes


def write_outputs(text: str, args: argparse.Namespace) -> None:
    print("\n" + text)
    if args.markdown:
        Path(args.markdown).write_text(text + "\n")


def save_rows(path: Path, rows: list[dict], meta: dict) -> None:
    path.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1, default=_jsonable) + "\n")


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON: {type(value).__name__}")


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "folder",
        nargs="?",
        default=None,
        help="work folder for the programs, data and runs (default: a new temporary one)",
    )
    parser.add_argument(
        "--posteriordb",
        default=None,
        help="a local posteriordb: the clone or its posterior_database folder (default: $POSTERIORDB)",
    )
    parser.add_argument(
        "--posteriors", default=None, help="names, comma-separated (default: all with reference draws)"
    )
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--draws", type=int, default=1000, help="draws per chain")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=1200, help="seconds a run (and a compile) may take")
    parser.add_argument(
        "--repeats",
        type=int,
        default=9,
        help="runs of each method at most, where they are short (default 9; the median is scored)",
    )
    parser.add_argument(
        "--repeat-under",
        type=float,
        default=10.0,
        help="both methods run again until either's runs add up to this many seconds charged (default 10)",
    )
    parser.add_argument("--markdown", default=None, help="also write the table to this Markdown file")
    parser.add_argument("--json", default=None, help="the rows as JSON (default: FOLDER/posteriordb.json)")
    parser.add_argument(
        "--rerender",
        metavar="JSON",
        default=None,
        help="print (and --markdown) an earlier run's table from its JSON",
    )
    args = parser.parse_args(argv)
    if args.rerender:
        saved = json.loads(Path(args.rerender).read_text())
        write_outputs(render(saved["rows"], saved["meta"]), args)
        return saved["rows"]
    database = find_database(args.posteriordb)
    if importlib.util.find_spec("stanaccel") is None:
        parser.error(
            f"stanaccel is not importable by {sys.executable}: run this with the virtualenv's python"
        )
    available = posteriors_with_reference(database)
    notes = name_notes(list(available), known_names())
    for note in notes:
        print(f"note: {note}", flush=True)
    names = args.posteriors.split(",") if args.posteriors else list(available)
    unknown = [n for n in names if n not in available]
    if unknown:
        parser.error(f"no posterior with reference draws named {unknown} in {database}")
    folder = Path(args.folder) if args.folder else Path(tempfile.mkdtemp(prefix="stanaccel-posteriordb-"))
    folder.mkdir(parents=True, exist_ok=True)
    json_path = Path(args.json) if args.json else folder / "posteriordb.json"
    print(f"work folder {folder}; rows to {json_path}", flush=True)
    meta = {
        "argv": shlex.join(sys.argv[1:] if argv is None else argv),
        "database": str(database),
        "chains": args.chains,
        "draws": args.draws,
        "seed": args.seed,
        "timeout": args.timeout,
        "repeats": args.repeats,
        "repeat_under": args.repeat_under,
        "notes": notes,
    }
    rows = []
    for name in names:
        start = time.perf_counter()
        rows.append(benchmark(name, available[name], database, folder, args))
        if rows[-1]["status"] != "ok":
            print(f"{name}: skipped: {rows[-1]['reason']}", flush=True)
        print(f"{name}: took {time.perf_counter() - start:.0f} s", flush=True)
        save_rows(json_path, rows, meta)  # after each posterior: a long run's rows survive a stop
    write_outputs(render(rows, meta), args)
    return rows


if __name__ == "__main__":
    main()
