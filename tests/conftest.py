"""Shared fixtures: the bundled Stan programs, compiled once per machine (cached)."""

import json
import math
import re
import signal
from datetime import UTC, datetime

import pytest

from stanaccel.datasets import generate
from stanaccel.programs import program_path
from stanaccel.stan import StanModel, compile_program
from stanaccel.stan.cache import BUILT_AT_FORMAT, cache_dir

# A program whose every block can fail: the error paths of evaluation. The model rejects
# above 3, the transformed parameter's bound fails above 6 (in log density and write_array
# alike), and generated quantities reject above 2 (write_array only).
REJECT_PROGRAM = """
parameters {
  real y;
}
transformed parameters {
  real<upper=6> z = y;
}
model {
  if (y > 3) reject("y is ", y, ", above the limit 3");
  y ~ normal(0, 1);
}
generated quantities {
  real w = normal_rng(y, 1);
  if (y > 2) reject("generated quantities: y is ", y, ", above 2");
}
"""


@pytest.fixture(scope="session")
def mvn_program():
    return compile_program(program_path("mvn_mean"))


@pytest.fixture(scope="session")
def gp_program():
    return compile_program(program_path("gp_ard"))


@pytest.fixture(scope="session")
def logistic_program():
    return compile_program(program_path("logistic"))


@pytest.fixture(scope="session")
def logistic_latent_program():
    return compile_program(program_path("logistic_latent"))


@pytest.fixture(scope="session")
def reject_program(tmp_path_factory):
    # A file name with spaces and non-ASCII letters, as a user's file system allows.
    path = tmp_path_factory.mktemp("programs") / "rég modèle.stan"
    path.write_text(REJECT_PROGRAM)
    return compile_program(path)


@pytest.fixture(scope="session")
def mvn_data():
    return generate("mvn_mean", N=20, D=3, seed=7).data


@pytest.fixture(scope="session")
def mvn_model(mvn_program, mvn_data):
    return StanModel(mvn_program, mvn_data)


@pytest.fixture(scope="session")
def gp_data():
    return generate("gp_ard", N=24, D=2, seed=3).data


@pytest.fixture(scope="session")
def gp_model(gp_program, gp_data):
    return StanModel(gp_program, gp_data)


@pytest.fixture(scope="session")
def logistic_model(logistic_program):
    return StanModel(logistic_program, generate("logistic", N=60, K=3, seed=5).data)


@pytest.fixture
def sigint_handled():
    """Python's own Ctrl-C handler, for tests that interrupt a run.

    A shell that starts a command in the background makes it ignore SIGINT,
    and Python then never installs its handler (``_thread.interrupt_main``
    would do nothing); set it for the test and restore what was there.
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


CHECK_SECONDS = 2.0
"""A test longer than this (set-up, call and tear-down, with the compile cache warm) is marked
``@pytest.mark.slow``: ``make check`` runs the others, in under two minutes."""

_seconds: dict[str, float] = {}


def pytest_runtest_logreport(report):
    _seconds[report.nodeid] = _seconds.get(report.nodeid, 0.0) + report.duration


_STARTED = pytest.StashKey[datetime]()
SHARED_BUILDS = {"bridge": "the bridge", "model_header": "the precompiled header"}


def pytest_sessionstart(session):
    session.config.stash[_STARTED] = datetime.now(UTC)


def builds_since(started: datetime) -> list[tuple[float, float, str]]:
    """(CPU seconds, seconds, what) of each build the shared compile cache recorded since ``started``.

    From the manifests' ``built_at``, ``cpu_seconds`` (NaN where a build did not record them) and
    ``seconds``: Stan programs by name, the bridge, the precompiled header; the most CPU first. The
    seconds are each build's own wall time: builds overlap, with each other and the tests.
    """
    builds = []
    for manifest in cache_dir().glob("**/*.json"):
        try:
            record = json.loads(manifest.read_text())
            built_at = datetime.strptime(record["built_at"], BUILT_AT_FORMAT)
            seconds = float(record["seconds"])
            cpu = float(record.get("cpu_seconds", "nan"))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if built_at >= started.replace(microsecond=0):
            program = re.match(r"_stanaccel_(.+)_model_[0-9a-f]{20}\.", record.get("artefact", ""))
            what = program.group(1) if program else manifest.name.split("-")[0].split(".")[0]
            builds.append((cpu, seconds, SHARED_BUILDS.get(what, what)))
    return sorted(builds, key=lambda build: (-build[0] if not math.isnan(build[0]) else 0.0, -build[1]))


def pytest_terminal_summary(terminalreporter, config):
    """The Stan builds of this run (what a cold run pays beyond a warm one); in a run without the slow
    tests (``make check``), the tests that should have been marked slow."""
    builds = builds_since(config.stash[_STARTED]) if _STARTED in config.stash else []
    if builds:
        total = sum(build[0] for build in builds if not math.isnan(build[0]))
        terminalreporter.write_sep("-", f"{len(builds)} Stan builds in this run: {total:.0f} CPU-seconds")
        for cpu, seconds, what in builds:
            shown = "     ?" if math.isnan(cpu) else f"{cpu:6.1f}"  # a manifest of an older stanaccel
            terminalreporter.write_line(f"{shown} CPU-s {seconds:6.1f} s  {what}")
    if "not slow" not in (config.option.markexpr or ""):
        return
    over = sorted(((s, node) for node, s in _seconds.items() if s > CHECK_SECONDS), reverse=True)
    if over:
        terminalreporter.write_sep("-", f"over {CHECK_SECONDS:g} s: mark these @pytest.mark.slow")
        for seconds, node in over:
            terminalreporter.write_line(f"{seconds:6.1f} s  {node}")
