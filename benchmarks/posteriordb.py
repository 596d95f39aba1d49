"""posteriordb: ``stanaccel sample --method auto`` against its peers on posteriordb's reference posteriors.

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
charged to no run), then runs, on that compiled program, each run of
:data:`RUNS` (or those of ``--peers``) once per seed of ``--seeds`` (three
different seeds by default; the seeds in the outer loop, so that a slow
minute of the machine falls on every run alike), each as its own process
timed by the wall clock, with the same chains (4), warm-up (1000
iterations; ``auto`` chooses its own) and draws:

- ``nuts``: ``stanaccel sample --method nuts``, Stan's NUTS with the
  diagonal metric (Stan's default);
- ``nuts-dense``: the same with ``--set metric=dense``;
- ``nutpie``: nutpie (PyPI ``nutpie``, the ``peers`` extra) with its default
  adaptation, and ``nutpie-lowrank``: with
  ``low_rank_modified_mass_matrix=True``. Both run this script's
  ``--run-nutpie`` mode (:func:`run_nutpie`): nutpie's Python-function model
  (``nutpie.compiled_pyfunc.from_pyfunc``) over stanaccel's own
  ``StanModel`` of the same compiled program and data, so each gradient
  pays a Python call (a C-level link would be faster); its chains run in
  nutpie's threads (as many as the CPUs, up to the chains), as Stan's do in
  stanaccel's. Its seconds charged are those of its ``nutpie.sample`` call
  (warm-up, sampling and its conversion to InferenceData; nutpie's
  statistics hold no timing) and of mapping the kept draws to the
  constrained parameters, transformed parameters and generated quantities
  afterwards; its gradients are the
  ``StanModel``'s count;
- ``auto``: ``stanaccel sample --method auto``.

A run past ``--timeout`` is killed and recorded as skipped (and that run is
not tried with the other seeds), as is a posterior whose program stanc
refuses (the reason is the first line of the error); a run that crashes is
recorded as failed, with its reason.

Each run is scored from its draws (:func:`score`): ESS = the worst over the
parameters the reference draws hold of min(bulk ESS, tail ESS) (ArviZ), per
second charged (``stanaccel sample``: the run's ``wall_seconds`` from its
metrics: warm-up, pilots, set-ups and sampling), per second of the process's
wall clock (start-up, imports, loading the compiled program and writing the
files included), and per 1000 gradient evaluations (the metrics'
``evaluations``; "-" where a run does not report them: for ``auto`` they
are those its metrics count, of the sampler it chose, not its pilots' nor
its Laplace warm-up's, so that figure flatters it). Short runs
were once repeated with one seed until they added up to ten seconds; the
three seeds replace that: every figure is the median over the seeds.

A run is converged when the worst rank-normalised R-hat over the reference's
parameters is under 1.01 and its draws pass the check against the reference
draws (:func:`check`): for every parameter z = (mean - ref mean) /
sqrt(mcse^2 + ref mcse^2) (ArviZ MCSEs), passing when the worst |z| is
under the Bonferroni limit norm.isf(0.01 / (2 n)) for the n parameters; an
sd passes when within 15% of the reference's, or its z (with the MCSEs of
the sds) under the same limit. A method counts on a posterior only where
its runs of every seed converged; otherwise its cell says why it failed
(the first failing seed's reason), and it is neither a baseline nor a win.

It prints one Markdown table, a row per posterior, with each method's
median ESS per second charged, per second of process wall and per 1000
gradients, and auto / the best converged peer (every run but ``auto``) and
auto / ``nuts`` (Stan's default NUTS); then the spread of auto / best peer
over the posteriors (worst, median, best), the share of posteriors where
``auto`` is ahead (a failed ``auto`` is behind; a converged one with no
converged peer ahead) and the median of auto / ``nuts``. The header names
the commit (``git describe --dirty``) the run measured. ``--markdown FILE``
writes the same text, and every row goes to a JSON file (``--json``,
default ``FOLDER/posteriordb.json``, rewritten after each posterior) that
``--rerender`` turns back into the table without running anything.

Run: .venv/bin/python benchmarks/posteriordb.py [FOLDER] --posteriordb DIR [--posteriors a,b,c]
     [--peers nuts,nutpie,auto] [--seeds 1,2,3] [--chains 4] [--draws 1000] [--timeout 1200]
     [--markdown out.md] [--json rows.json]
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
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import norm

from stanaccel.diagnostics._arviz import az, numpy_path

NAMES_FILE = Path(__file__).with_name("posteriordb_names.txt")
"""The posteriors of posteriordb with reference draws, one name a line (names only)."""
RUNS = {
    "nuts": ("stanaccel", ("--method", "nuts")),
    "nuts-dense": ("stanaccel", ("--method", "nuts", "--set", "metric=dense")),
    "nutpie": ("nutpie", ()),
    "nutpie-lowrank": ("nutpie", ("--low-rank",)),
    "auto": ("stanaccel", ("--method", "auto")),
}
"""The runs on each posterior: name -> (runner, its arguments). ``stanaccel`` runs ``stanaccel sample``,
``nutpie`` this script's ``--run-nutpie``; each gets the program, data, chains, draws, seed and output."""
AUTO = "auto"
"""The run measured against the others, its peers."""
STAN_DEFAULT = "nuts"
"""Stan's default NUTS (diagonal metric), the second ratio's baseline."""
WARMUP = 1000
"""Warm-up iterations of nutpie, as of Stan's NUTS (its default)."""
RHAT_MAX = 1.01
"""A run converged only where every reference parameter's rank-normalised R-hat is under this."""
ALPHA = 0.01
"""Family-wise error rate of the checks against the reference draws (Bonferroni over the parameters)."""
SD_TOLERANCE = 0.15
"""An sd within this relative distance of the reference's passes whatever its z."""
MEASURES = ("ess", "ess_per_charged_second", "ess_per_process_second", "ess_per_1000_gradients")
"""What each run's score holds and the seeds' medians report."""
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


def rank_rhat(x: np.ndarray) -> float:
    """ArviZ's rank-normalised split R-hat of one scalar's (chain, draw) draws (NaN for a constant)."""
    with numpy_path():
        return _scalar(az.rhat(x, method="rank"))


def score(
    draws: Any,
    charged_seconds: float,
    process_seconds: float,
    names: list[str] | None = None,
    gradients: int | None = None,
) -> dict[str, Any]:
    """ESS = the worst over the parameters of min(bulk ESS, tail ESS), per second both ways and per
    1000 gradients; and the worst R-hat.

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
    gradients : int, optional
        The run's gradient evaluations; without them ``ess_per_1000_gradients`` is None.
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
    rhats = {name: rank_rhat(x) for name, x in columns.items()}
    rhats = {name: r for name, r in rhats.items() if np.isfinite(r)}
    rhat_worst = max(rhats, key=rhats.get, default=None)
    return {
        "ess": value,
        "ess_bulk_min": bulk,
        "ess_tail_min": tail,
        "worst": worst,
        "ess_per_charged_second": value / charged_seconds if charged_seconds > 0 else math.nan,
        "ess_per_process_second": value / process_seconds if process_seconds > 0 else math.nan,
        "ess_per_1000_gradients": 1000 * value / gradients if gradients else None,
        "gradients": gradients,
        "rhat_max": rhats[rhat_worst] if rhat_worst else math.nan,
        "rhat_worst": rhat_worst,
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


def run_command(
    name: str, program: Path, data: Path, seed: int, output: Path, args: argparse.Namespace
) -> list[str]:
    """The command line of run ``name`` (:data:`RUNS`) of ``program`` on ``data`` with ``seed``, writing
    its draws to ``output`` (netCDF) and its metrics beside it (``.metrics.json``)."""
    runner, arguments = RUNS[name]
    common = ["--chains", str(args.chains), "--draws", str(args.draws), "--seed", str(seed),
              "-o", str(output)]  # fmt: skip
    if runner == "stanaccel":
        return [*stanaccel_command(), "sample", str(program), "--data", str(data), *arguments, *common, "-q"]
    script = str(Path(__file__).resolve())
    return [sys.executable, script, "--run-nutpie", str(program), "--data", str(data), *arguments, *common]


def sample_run(
    name: str,
    seed: int,
    program: Path,
    data: Path,
    reference: dict[str, np.ndarray],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """One run's process: its status, seconds, metrics, score, check and why it failed (None: converged)."""
    output = program.with_name(f"{name}-seed{seed}.nc")
    metrics_path = output.with_suffix(".metrics.json")
    for stale in (output, metrics_path):
        stale.unlink(missing_ok=True)  # an earlier run's files must not pass for this one's
    command = run_command(name, program, data, seed, output, args)
    status, seconds, stderr = run_process(command, args.timeout, output.with_suffix(""))
    run: dict[str, Any] = {
        "name": name,
        "seed": seed,
        "command": shlex.join(command),
        "process_seconds": seconds,
    }
    if status is None:
        return {**run, "status": "skipped", "reason": f"timed out after {args.timeout:g} s"}
    if status != 0 or not metrics_path.is_file():
        why = error_reason(stderr)
        if status == 2:  # bad input: the runner refused the program, the data or the settings
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
        converged_by_its_checks=bool(metrics.get("converged", False)),
        sampler=metrics.get("sampler"),
        score=score(draws, charged, seconds, list(reference), metrics.get("evaluations")),
        check=check(draws, reference),
    )
    run["failure"] = failure(run)
    if "auto" in metrics:
        reason = metrics["auto"].get("reason", "")
        run["auto"] = {
            "chosen": metrics["auto"].get("chosen"),
            "sampler": metrics["auto"].get("sampler"),
            "reason": reason,
            "short": short_reason(reason),
        }
    return run


def failure(run: dict) -> str | None:
    """Why a run that ran is not converged (R-hat, then its check against the reference), or None."""
    s, c = run["score"], run["check"]
    if not math.isfinite(s["rhat_max"]) or s["rhat_max"] >= RHAT_MAX:
        return f"R-hat {s['rhat_max']:.3f} ({s['rhat_worst']})"
    if c["missing"]:
        return f"lacks {', '.join(c['missing'][:3])}"
    if not c["means_pass"]:
        return f"mean of {c['worst_z_name']} off, |z| {c['worst_z']:.2f} > {c['limit']:.2f}"
    if not c["sd_pass"]:
        name, bad = next(iter(c["sd_failures"].items()))
        return f"sd of {name} {bad['relative']:+.0%}"
    return None


def over_seeds(runs: list[dict]) -> dict[str, Any]:
    """One method on one posterior: its runs (one a seed), the medians of :data:`MEASURES` over them, and
    its status: ``ok`` where every seed's run converged, else the first seed's reason why not."""
    out: dict[str, Any] = {"seeds": runs, "status": "ok"}
    for run in runs:
        if run["status"] != "ok":
            return {**out, "status": run["status"], "reason": f"seed {run['seed']}: {run['reason']}"}
    for key in MEASURES:
        values = [run["score"][key] for run in runs]
        out[key] = None if None in values else float(np.median(values))
    failed = [run for run in runs if run["failure"]]
    if failed:
        out.update(status="failed", reason=f"seed {failed[0]['seed']}: {failed[0]['failure']}")
    return out


def ratios(methods: dict[str, dict]) -> dict[str, Any]:
    """auto / the best converged peer (ESS per second charged, and per second of process wall: each its
    own best), that peer's name, and auto / Stan's default NUTS; absent where either did not converge."""
    out: dict[str, Any] = {}
    auto = methods.get(AUTO, {})
    peers = {name: m for name, m in methods.items() if name != AUTO and m["status"] == "ok"}
    for key, measure in (("charged", "ess_per_charged_second"), ("process", "ess_per_process_second")):
        best = max(peers, key=lambda name: peers[name][measure], default=None)
        out[f"best_peer_{key}"] = best
        if best is not None and auto.get("status") == "ok" and peers[best][measure] > 0:
            out[f"ratio_{key}"] = auto[measure] / peers[best][measure]
    nuts = peers.get(STAN_DEFAULT)
    if nuts is not None and auto.get("status") == "ok" and nuts["ess_per_charged_second"] > 0:
        out["ratio_nuts"] = auto["ess_per_charged_second"] / nuts["ess_per_charged_second"]
    return out


def benchmark(name: str, info: dict, database: Path, folder: Path, args: argparse.Namespace) -> dict:
    """One posterior's row: its reference draws, its program and data in ``folder``/``name``, then
    :func:`benchmark_posterior`."""
    path = reference_path(database, info)
    if not path.is_file():
        return {"posterior": name, "status": "skipped", "reason": "reference draws absent"}
    reference = read_reference(path)
    program, data = prepare(database, info, folder / name)
    return benchmark_posterior(name, program, data, reference, args)


def benchmark_posterior(
    name: str, program: Path, data: Path, reference: dict[str, np.ndarray], args: argparse.Namespace
) -> dict:
    """One posterior's row: compile ``program``, every run of ``args.peers`` with every seed on ``data``
    (their files beside the program), each scored against ``reference``, and the ratios."""
    row: dict[str, Any] = {"posterior": name, "status": "ok", "params": len(reference)}
    row["compile"] = compile_once(program, args.timeout)
    print(f"{name}: compile {row['compile']['seconds']:.1f} s ({row['compile'].get('reason', 'ok')})",
          flush=True)  # fmt: skip
    if row["compile"]["status"] != "ok":
        return {**row, "status": "skipped", "reason": row["compile"]["reason"]}
    runs: dict[str, list[dict]] = {method: [] for method in args.peers}
    for seed in args.seeds:
        for method in args.peers:
            if runs[method] and runs[method][-1]["status"] == "skipped":
                continue  # timed out or refused: the other seeds would too
            runs[method].append(sample_run(method, seed, program, data, reference, args))
            print(f"{name}: {method} seed {seed}: {run_line(runs[method][-1])}", flush=True)
    row["methods"] = {method: over_seeds(method_runs) for method, method_runs in runs.items()}
    row.update(ratios(row["methods"]))
    return row


def run_line(run: dict) -> str:
    """A run's progress line."""
    if run["status"] != "ok":
        return f"{run['status']} after {run['process_seconds']:.1f} s: {run['reason']}"
    s, c = run["score"], run["check"]
    chose = f"chose {run['auto']['chosen']}, " if "auto" in run else ""
    gradients = f", {s['gradients']} gradients" if s["gradients"] else ""
    return (
        f"{chose}{run['charged_seconds']:.1f} s charged, {run['process_seconds']:.1f} s process{gradients}; "
        f"ESS {s['ess']:.0f} (bulk {s['ess_bulk_min']:.0f}, tail {s['ess_tail_min']:.0f}, {s['worst']}), "
        f"{s['ess_per_charged_second']:.1f} ESS/s charged; R-hat {s['rhat_max']:.3f}; worst |z| "
        f"{c['worst_z']:.2f} ({c['worst_z_name']}, limit {c['limit']:.2f}), "
        f"sd {'ok' if c['sd_pass'] else 'FAIL'}" + (f"; FAILED: {run['failure']}" if run["failure"] else "")
    )


# --- nutpie's runs (this script's --run-nutpie mode) ------------------------------------------------------


def nutpie_model(model: Any) -> Any:
    """nutpie's Python-function model of a stanaccel ``StanModel``: its log density and gradient on the
    unconstrained space (-inf where Stan says the density is undefined: nutpie rejects that step), each
    draw kept as it is (``unconstrained``): :func:`constrained_draws` maps the kept ones afterwards,
    not nutpie's warm-up draws too."""
    from nutpie.compiled_pyfunc import from_pyfunc

    from stanaccel.stan.errors import StanDomainError

    def make_log_density():
        def log_density(x: np.ndarray) -> tuple[float, np.ndarray]:
            try:
                return model.log_density_gradient(x)
            except StanDomainError:
                return -math.inf, np.zeros_like(x)

        return log_density

    def make_expand(seed1: int, seed2: int, chain: int):
        return lambda x: {"unconstrained": x.copy()}

    return from_pyfunc(
        model.dim, make_log_density, make_expand, [np.dtype("float64")], [(model.dim,)], ["unconstrained"]
    )


def constrained_draws(model: Any, unconstrained: np.ndarray, seed: int) -> dict[str, np.ndarray]:
    """Each variable's (chain, draw, ...) draws: the parameters, transformed parameters and generated
    quantities of (chain, draw, dim) unconstrained draws, as ``stanaccel sample`` writes them (NaN
    where a generated quantity rejects)."""
    from stanaccel.stan.errors import StanEvaluationError

    size = model.param_num(include_tp=True, include_gq=True)
    rng = np.random.default_rng(seed)  # the generated quantities' seeds
    flat = np.empty((*unconstrained.shape[:2], size))
    for index in np.ndindex(*unconstrained.shape[:2]):
        try:
            flat[index] = model.param_constrain(
                unconstrained[index], include_tp=True, include_gq=True, seed=int(rng.integers(2**32))
            )
        except StanEvaluationError:
            flat[index] = math.nan
    return model.unflatten(flat, include_tp=True, include_gq=True)


def run_nutpie(argv: list[str]) -> int:
    """``--run-nutpie PROGRAM --data DATA ...``: nutpie on the compiled program, written as ``stanaccel
    sample`` writes its runs (the draws to ``-o``, netCDF; ``wall_seconds`` and ``evaluations`` beside).

    Its seconds charged are those of ``nutpie.sample`` (warm-up, sampling, its InferenceData) and of
    mapping the kept draws to the constrained space with their generated quantities.
    """
    parser = argparse.ArgumentParser(prog="posteriordb.py --run-nutpie", description=run_nutpie.__doc__)
    parser.add_argument("program")
    parser.add_argument("--data", default=None)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=WARMUP)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--low-rank", action="store_true", help="low_rank_modified_mass_matrix=True")
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args(argv)
    import nutpie

    from stanaccel.stan.errors import StanError
    from stanaccel.stan.model import StanModel

    try:
        model = StanModel(Path(args.program), Path(args.data) if args.data else None)
    except (StanError, OSError) as error:  # the program or data refused: exit 2, as `stanaccel sample`
        print(f"{type(error).__name__}: {error}", file=sys.stderr)
        return 2
    compiled = nutpie_model(model)
    start = time.perf_counter()
    idata = nutpie.sample(
        compiled,
        chains=args.chains,
        tune=args.warmup,
        draws=args.draws,
        seed=args.seed,
        progress_bar=False,
        low_rank_modified_mass_matrix=args.low_rank,
    )
    sampled = time.perf_counter()
    posterior = constrained_draws(model, idata.posterior["unconstrained"].values, args.seed)
    seconds = time.perf_counter() - start
    output = Path(args.output)
    az.from_dict(posterior=posterior).to_netcdf(output)
    adaptation = "low-rank" if args.low_rank else "diagonal"
    metrics = {
        "sampler": f"nutpie {nutpie.__version__} ({adaptation} mass matrix; Python-function model)",
        "seed": args.seed,
        "chains": args.chains,
        "warmup": args.warmup,
        "draws_per_chain": args.draws,
        "wall_seconds": seconds,
        "sampling_seconds": sampled - start,
        "evaluations": model.n_gradient,
        "divergences": int(idata.sample_stats["diverging"].values.sum()),
    }
    output.with_suffix(".metrics.json").write_text(json.dumps(metrics, indent=1) + "\n")
    print(
        f"nutpie: {seconds:.2f} s ({sampled - start:.2f} s in nutpie.sample), {model.n_gradient} gradients, "
        f"{metrics['divergences']} divergences"
    )
    return 0


# --- the report --------------------------------------------------------------------------------------------


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _num(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:.{digits}g}"


def method_cell(method: dict | None) -> str:
    """A method's cell: its medians (ESS/s charged / ESS/s process wall / ESS per 1000 gradients), or why
    it does not count."""
    if method is None:
        return "-"
    if method["status"] != "ok":
        return f"{method['status']}: {_cell(method['reason'])}"
    return " / ".join(
        _num(method[key])
        for key in ("ess_per_charged_second", "ess_per_process_second", "ess_per_1000_gradients")
    )


def chose_cell(method: dict | None) -> str:
    """What ``auto`` chose with each seed (``nuts-dense/nuts/imh``: ``nuts-dense`` is NUTS with a dense
    metric, from a cheap warm-up's fit, its own warm-up's draws or Stan's adaptation)."""
    if method is None:
        return "-"
    chosen = [
        f"{run['auto']['chosen']}-dense" if "dense metric" in (run["auto"].get("sampler") or "") else
        run["auto"]["chosen"]
        for run in method["seeds"]
        if "auto" in run
    ]  # fmt: skip
    return "/".join(str(c) for c in chosen) or "-"


def render(rows: list[dict], meta: dict) -> str:
    """The Markdown: settings, the table, the ratios' spread and the share where auto is ahead."""
    names = meta["peers"]
    peers = [name for name in names if name != AUTO]
    # another script's rows (stochastic_volatility.py) name their script and where the posterior is from
    script = meta.get("script", "benchmarks/posteriordb.py")
    source = meta.get("source") or f"posteriordb at {meta['database']}"
    lines = [
        f"$ python {script} {meta['argv']}",
        "",
        f"At commit {meta['commit']}; {source}; {meta['chains']} chains x "
        f"{meta['draws']} draws (warm-up {WARMUP}; auto its own), "
        f"seeds {', '.join(map(str, meta['seeds']))}, "
        f"timeout {meta['timeout']:g} s a run. Runs: "
        + "; ".join(f"{name}: {meta['runs'][name]}" for name in names)
        + ". Each method's cell is the median over the seeds of ESS per second charged / ESS per second "
        "of process wall / ESS per 1000 gradient evaluations, where ESS = the worst over the reference's "
        "parameters of min(bulk, tail) ESS. Seconds charged: `stanaccel sample`'s (warm-up, pilots, "
        "set-ups, sampling); nutpie's `sample` call (warm-up, sampling) and the constraining of the kept "
        "draws. Process wall: the whole process (start-up, imports, loading the compiled program, files; "
        "the compile is done before and not included). Gradients: auto's are its chosen sampler's, its "
        "pilots' and warm-up's not counted. A method counts only where every seed's run converged: R-hat "
        f"(rank-normalised, worst over the reference's parameters) under {RHAT_MAX}, and every mean within "
        "the Bonferroni limit at 1% of the reference's and every sd within "
        f"{SD_TOLERANCE:.0%} or that limit; otherwise its cell says why (the first failing seed). "
        "Ratios are of ESS per second: auto / the best converged peer (each measure its own best), and "
        f"auto / {STAN_DEFAULT} (Stan's default NUTS, diagonal metric).",
        *(["", *(f"note: {note}" for note in meta.get("notes", []))] if meta.get("notes") else []),
        "",
        f"| posterior | params | auto chose | {' | '.join(names)} | best peer | auto / best peer "
        f"| auto / best peer, process wall | auto / {STAN_DEFAULT} |",
        f"| --- | ---: | --- | {' | '.join('---:' for _ in names)} | --- | ---: | ---: | ---: |",
    ]
    for row in rows:
        name = _cell(row["posterior"])
        if row["status"] != "ok":
            blanks = " |" * (len(names) + 4)
            lines.append(f"| {name} | {row.get('params', '-')} | skipped: {_cell(row['reason'])} |{blanks}")
            continue
        methods = row["methods"]
        cells = " | ".join(method_cell(methods.get(n)) for n in names)
        best = row.get("best_peer_charged") or (f"none of {len(peers)} converged" if peers else "-")
        lines.append(
            f"| {name} | {row['params']} | {chose_cell(methods.get(AUTO))} | {cells} | {best} "
            f"| {_num(row.get('ratio_charged'))} | {_num(row.get('ratio_process'))} "
            f"| {_num(row.get('ratio_nuts'))} |"
        )
    lines += ["", *summary(rows, names)]
    compiles = [r for r in rows if "compile" in r]
    if compiles:
        lines += [
            "",
            "Compiles (charged to no run): "
            + ", ".join(
                f"{r['posterior']} {r['compile']['seconds']:.0f} s"
                + ("" if r["compile"].get("built", True) else " (cached)")
                for r in compiles
            ),
        ]
    return "\n".join(lines)


def summary(rows: list[dict], names: list[str]) -> list[str]:
    """The spread of auto / best peer over the posteriors, the share where auto is ahead, auto / Stan's
    default NUTS, and how often each method converged and was the best peer."""
    lines = []
    ran = [r for r in rows if r["status"] == "ok"]
    with_auto = [r for r in ran if AUTO in r["methods"]]
    for key, label in (("charged", "ESS/s charged"), ("process", "ESS/s process wall")):
        ratios = sorted(
            r[f"ratio_{key}"] for r in with_auto if math.isfinite(r.get(f"ratio_{key}", math.nan))
        )
        ahead = sum(
            r["methods"][AUTO]["status"] == "ok" and (r.get(f"ratio_{key}", math.inf) > 1) for r in with_auto
        )
        spread = (
            f"worst {ratios[0]:.3g}, median {float(np.median(ratios)):.3g}, best {ratios[-1]:.3g} over the "
            f"{len(ratios)} posteriors where auto and a peer converged"
            if ratios
            else "no posterior where auto and a peer converged"
        )
        share = f"{ahead} of {len(with_auto)} posteriors ({ahead / len(with_auto):.0%})" if with_auto else "-"
        lines.append(f"- auto / best converged peer, {label}: {spread}; auto ahead on {share}")
    to_nuts = [r["ratio_nuts"] for r in with_auto if math.isfinite(r.get("ratio_nuts", math.nan))]
    if to_nuts:
        lines.append(
            f"- auto / {STAN_DEFAULT} (Stan's default NUTS), ESS/s charged: median "
            f"{float(np.median(to_nuts)):.3g} over the {len(to_nuts)} posteriors where both converged"
        )
    counts = []
    for name in names:
        tried = [r for r in ran if name in r["methods"]]
        converged = sum(r["methods"][name]["status"] == "ok" for r in tried)
        best = sum(r.get("best_peer_charged") == name for r in tried)
        counts.append(
            f"{name} {converged} of {len(tried)}" + (f" (best peer on {best})" if name != AUTO else "")
        )
    lines.append(f"- converged on every seed: {', '.join(counts)}")
    ran_samplers = Counter(
        run["auto"].get("sampler") or run["auto"]["chosen"]
        for r in with_auto
        for run in r["methods"][AUTO]["seeds"]
        if "auto" in run
    )
    if ran_samplers:
        listed = ", ".join(f"{sampler} {n}" for sampler, n in ran_samplers.most_common())
        lines.append(f"- what auto ran in full, runs over every seed: {listed}")
    skipped = [r for r in rows if r["status"] != "ok"]
    lines.append(f"- posteriors: {len(rows)}, of which {len(skipped)} skipped")
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


def commit() -> str:
    """The commit of the checkout this script is in (``git describe --always --dirty``), or ``unknown``."""
    try:
        found = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return found.stdout.strip() if found.returncode == 0 and found.stdout.strip() else "unknown"


def describe_run(name: str) -> str:
    """How run ``name`` runs, in a few words (``stanaccel sample --method nuts``)."""
    runner, arguments = RUNS[name]
    command = "stanaccel sample" if runner == "stanaccel" else "posteriordb.py --run-nutpie"
    return f"`{command} {shlex.join(arguments)}`".replace(" `", "`")


def listed(text: str, kind: type = str) -> list:
    """A comma-separated list (``1,2,3``)."""
    return [kind(part.strip()) for part in text.split(",") if part.strip()]


def main(argv: list[str] | None = None) -> list[dict]:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--run-nutpie"]:
        raise SystemExit(run_nutpie(argv[1:]))
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
    parser.add_argument(
        "--peers",
        type=listed,
        default=list(RUNS),
        help=f"the runs, comma-separated (default: all: {','.join(RUNS)})",
    )
    parser.add_argument(
        "--seeds",
        type=lambda text: listed(text, int),
        default=[1, 2, 3],
        help="seeds, comma-separated; every run runs with each, and the medians are reported (default 1,2,3)",
    )
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--draws", type=int, default=1000, help="draws per chain")
    parser.add_argument("--timeout", type=float, default=1200, help="seconds a run (and a compile) may take")
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
    unknown = [name for name in args.peers if name not in RUNS]
    if unknown or not args.peers:
        parser.error(f"--peers: {unknown or 'none given'}: the runs are {', '.join(RUNS)}")
    if not args.seeds or len(set(args.seeds)) != len(args.seeds):
        parser.error(f"--seeds: {args.seeds}: give one or more different seeds")
    database = find_database(args.posteriordb)
    if importlib.util.find_spec("stanaccel") is None:
        parser.error(
            f"stanaccel is not importable by {sys.executable}: run this with the virtualenv's python"
        )
    if any(RUNS[name][0] == "nutpie" for name in args.peers) and importlib.util.find_spec("nutpie") is None:
        parser.error(
            f"nutpie is not importable by {sys.executable}: install the peers extra "
            "(pip install -e '.[peers]'), or leave nutpie out with --peers"
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
        "argv": shlex.join(argv),
        "commit": commit(),
        "database": str(database),
        "peers": args.peers,
        "runs": {name: describe_run(name) for name in args.peers},
        "seeds": args.seeds,
        "chains": args.chains,
        "draws": args.draws,
        "timeout": args.timeout,
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
