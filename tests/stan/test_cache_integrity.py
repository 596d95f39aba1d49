"""The build cache survives damage, loads without a compiler, and says what it is doing.

One small program is built once, in a private cache (``STANACCEL_CACHE``),
by a subprocess; each damage case works on a copy of that cache, also in a
subprocess, so that a crash on loading a damaged library shows as an exit
code instead of killing pytest (and a library loaded here could not be
loaded again anyway). The private cache starts with a copy of the suite's
bridge object: compiling the bridge again (two minutes of a core) would test
nothing more, and the bridge's own first build, beside a program's, is read
from the suite's cache's manifests.
"""

import json
import math
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest

from stanaccel.stan.cache import BUILT_AT_FORMAT, build_once, cache_dir, file_sha256, locked, manifest_path
from stanaccel.stan.compiler import available_cores, bridge_object
from stanaccel.stan.toolchain import find_toolchain

PROGRAM = "parameters { real y; } model { y ~ normal(0, 1); }"
EXPECTED_LP = -0.5 * 0.5**2 - 0.5 * math.log(2 * math.pi)  # log N(0.5 | 0, 1)

# Compile (or load) PROGRAM, evaluate it at y = 0.5, print a JSON line with the
# outcome and the build messages, each with its time in seconds.
SCRIPT = """
import json, logging, sys
from stanaccel.stan import StanModel, compile_program
from stanaccel.stan.compiler import enable_build_messages

enable_build_messages()
timed = []

class Timed(logging.Handler):
    def emit(self, record):
        timed.append((record.relativeCreated / 1000, record.getMessage()))

logging.getLogger("stanaccel").addHandler(Timed())
program = compile_program(sys.argv[1])
lp = StanModel(program).log_density([0.5], propto=False)
print(json.dumps({"built": program.built, "library": str(program.library), "lp": lp, "messages": timed}))
"""


def run_program(
    cache: Path, *, no_compiler: bool = False, header: bool = False
) -> subprocess.CompletedProcess:
    """Run SCRIPT with ``cache`` as the cache; with no_compiler, PATH holds only Python's folder.

    Builds go without the precompiled header, as a user's first build does by default; with
    ``header``, a rebuild uses the one the suite shares (``make test`` sets ``STANACCEL_PCH``),
    linked into ``cache``: 10 s of compiling instead of 25.
    """
    env = {**os.environ, "STANACCEL_CACHE": str(cache)}
    if header and env.get("STANACCEL_PCH") == "1":
        (cache / "pch").symlink_to(cache_dir() / "pch", target_is_directory=True)
    else:
        env.pop("STANACCEL_PCH", None)
    if no_compiler:
        env.pop("CXX", None)
        env["PATH"] = str(Path(sys.executable).parent)
        assert shutil.which("g++", path=env["PATH"]) is None and shutil.which("c++", path=env["PATH"]) is None
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, PROGRAM], env=env, capture_output=True, text=True, timeout=600
    )


def outcome(process: subprocess.CompletedProcess) -> dict:
    """The JSON line printed by SCRIPT, after checking that it exited cleanly."""
    assert process.returncode == 0, f"exit code {process.returncode}; stderr:\n{process.stderr}"
    return json.loads(process.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def built_cache(tmp_path_factory, mvn_program):
    """A private cache in which PROGRAM was just built; and that run's outcome.

    The cache starts with a copy of the suite's bridge object and its manifest (``mvn_program``
    compiles the bridge on a cold cache, beside its own program as a first build does).
    """
    shared = bridge_object(find_toolchain())
    cache = tmp_path_factory.mktemp("stanaccel-cache")
    (cache / "bridge").mkdir()
    for artefact in (shared, manifest_path(shared)):
        shutil.copy2(artefact, cache / "bridge" / artefact.name)
    process = run_program(cache)
    return cache, outcome(process), process.stderr


def copy_of(built_cache, tmp_path) -> tuple[Path, Path]:
    """A copy of the built cache, and the path of the program's library in it."""
    cache, first, _ = built_cache
    copy = tmp_path / "cache"
    shutil.copytree(cache, copy)
    return copy, copy / Path(first["library"]).relative_to(cache)


@pytest.mark.slow
def test_first_build_is_announced(built_cache):
    cache, first, stderr = built_cache
    assert first["built"] is True
    assert first["lp"] == pytest.approx(EXPECTED_LP, rel=1e-12)
    assert (
        "stanaccel: compiling Stan program anon (up to a minute: the first build timed on this machine; "
        f"cached afterwards in {cache})"
    ) in stderr
    assert re.search(r"^stanaccel: compiled anon in \d+ s$", stderr, re.MULTILINE), stderr
    assert "bridge" not in stderr  # the cached bridge is linked, not compiled again


def _interval(manifest: Path) -> tuple[float, float] | None:
    """When the build recorded by ``manifest`` started and ended (Unix seconds); None if not timed."""
    record = json.loads(manifest.read_text())
    if "seconds" not in record:
        return None
    end = datetime.strptime(record["built_at"], BUILT_AT_FORMAT).timestamp()
    return end - float(record["seconds"]), end


@pytest.mark.skipif(available_cores() < 2, reason="the bridge is built concurrently only with 2+ cores")
@pytest.mark.slow
def test_bridge_and_first_program_compile_at_the_same_time(mvn_program):
    """The suite's bridge was compiled beside the program whose first build needed it (their manifests)."""
    bridge = _interval(manifest_path(bridge_object(find_toolchain())))
    if bridge is None:
        pytest.skip("the cached bridge was built by a stanaccel that did not time it (clear the cache)")
    programs = []
    for manifest in (cache_dir() / "models").glob("*.so.json"):
        if json.loads(manifest.read_text()).get("with_bridge") and (interval := _interval(manifest)):
            programs.append(interval)
    # Serially, the program's compile would start only after the bridge's ended (the bridge alone takes a
    # minute or more); the margin allows for a loaded machine and the manifests' whole seconds.
    beside = [p for p in programs if abs(p[0] - bridge[0]) < 6.0 and p[1] >= bridge[1] - 1.0]
    assert beside, (bridge, programs)  # and the program's link waited for the bridge


@pytest.mark.slow
def test_cached_program_has_a_manifest(built_cache):
    cache, first, _ = built_cache
    library = Path(first["library"])
    (bridge,) = (cache / "bridge").glob("bridge-*.o")
    for artefact in (library, bridge):
        record = json.loads(manifest_path(artefact).read_text())
        assert record["size"] == artefact.stat().st_size
        assert record["sha256"] == file_sha256(artefact)
        assert record["compiler"].startswith(("g++", "c++", "clang")), record
    assert json.loads(manifest_path(library).read_text())["cpu_seconds"] > 0  # its own compiles' CPU


def _truncate_to_half(library: Path) -> None:
    os.truncate(library, library.stat().st_size // 2)


def _truncate_to_zero(library: Path) -> None:
    os.truncate(library, 0)


def _garble_4_kib(library: Path) -> None:
    with open(library, "r+b") as handle:
        handle.seek(library.stat().st_size // 2)
        handle.write(b"\xa5" * 4096)


@pytest.mark.slow
def test_garbled_cached_program_is_rebuilt(built_cache, tmp_path):
    # 4 KiB overwritten: the size still matches, so only the SHA-256 finds it (it segfaulted on use).
    cache, library = copy_of(built_cache, tmp_path)
    _garble_4_kib(library)
    rebuilt = outcome(run_program(cache, header=True))
    assert rebuilt["built"] is True
    assert rebuilt["lp"] == pytest.approx(EXPECTED_LP, rel=1e-12)
    warnings = [m for _, m in rebuilt["messages"] if m.startswith(f"cached build of {library} is damaged")]
    assert len(warnings) == 1 and "SHA-256" in warnings[0] and warnings[0].endswith("; rebuilding"), warnings
    assert not any("bridge" in m for _, m in rebuilt["messages"]), "the intact bridge was rebuilt"
    assert outcome(run_program(cache))["built"] is False


@pytest.mark.parametrize(
    ("damage", "reason"),
    [(_truncate_to_half, "size"), (_truncate_to_zero, "size 0 != ")],
    ids=["truncated-to-half", "truncated-to-zero"],
)
@pytest.mark.slow
def test_truncated_cached_program_is_removed_not_loaded(built_cache, tmp_path, damage, reason):
    # Without a compiler the rebuild cannot happen, so this costs no compile: what matters is that
    # the damaged library is found and removed before loading (half of it gave a bus error).
    cache, library = copy_of(built_cache, tmp_path)
    damage(library)
    process = run_program(cache, no_compiler=True)
    assert process.returncode == 1, process.stderr
    assert f"cached build of {library} is damaged ({reason}" in process.stderr
    assert "StanBuildError: no C++ compiler found" in process.stderr
    assert not library.exists() and not manifest_path(library).exists()


@pytest.mark.slow
def test_cached_program_that_does_not_load_is_removed(built_cache, tmp_path):
    # Matches its manifest but is no library: import fails, the entry goes, and
    # the rebuild (here without a compiler) says why it cannot happen.
    cache, library = copy_of(built_cache, tmp_path)
    library.write_bytes(b"not a shared library\n" * 100)
    manifest = json.loads(manifest_path(library).read_text())
    manifest.update(size=library.stat().st_size, sha256=file_sha256(library))
    manifest_path(library).write_text(json.dumps(manifest))
    process = run_program(cache, no_compiler=True)
    assert process.returncode == 1
    assert f"cached build of {library} is damaged (it does not load: " in process.stderr
    assert "StanBuildError: no C++ compiler found" in process.stderr
    assert not library.exists() and not manifest_path(library).exists()


@pytest.mark.slow
def test_cached_program_loads_without_a_compiler(built_cache):
    cache, first, _ = built_cache
    loaded = outcome(run_program(cache, no_compiler=True))
    assert loaded["built"] is False
    assert loaded["library"] == first["library"]
    assert loaded["lp"] == pytest.approx(EXPECTED_LP, rel=1e-12)


def test_building_without_a_compiler_says_one_is_needed(tmp_path):
    process = run_program(tmp_path, no_compiler=True)
    assert process.returncode == 1
    assert "StanBuildError: no C++ compiler found (looked for g++, c++)" in process.stderr
    assert "install one (Debian: apt-get install g++) or set CXX" in process.stderr


# ---- the cache machinery alone, on small text artefacts --------------------------------------


def _write(text):
    def build(tmp):
        tmp.write_text(text)

    return build


def test_artefact_without_manifest_is_rebuilt(tmp_path, caplog):
    target = tmp_path / "artefact.o"
    target.write_text("left by an older stanaccel, or half copied")
    with caplog.at_level("WARNING", logger="stanaccel.stan.cache"):
        assert build_once(target, _write("fresh")) is True
    assert target.read_text() == "fresh"
    assert f"cached build of {target} is damaged (no manifest); rebuilding" in caplog.messages
    assert build_once(target, _write("again")) is False


def test_failed_build_leaves_nothing_that_looks_valid(tmp_path):
    target = tmp_path / "artefact.o"

    def crash(tmp):
        tmp.write_text("half")
        raise RuntimeError("compiler killed")

    with pytest.raises(RuntimeError, match="compiler killed"):
        build_once(target, crash)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["artefact.o.lock"]


def test_waiting_for_another_build_is_announced(tmp_path, caplog):
    target = tmp_path / "program.so"
    results = []
    with caplog.at_level("INFO", logger="stanaccel.stan.cache"):
        with locked(target):  # another build holds the lock
            waiter = threading.Thread(
                target=lambda: results.append(build_once(target, _write("built"), "Stan program demo"))
            )
            waiter.start()
            deadline = time.monotonic() + 10
            while not caplog.messages and time.monotonic() < deadline:
                time.sleep(0.01)
            assert results == []
        waiter.join(timeout=10)
    assert results == [True]
    lock = tmp_path / "program.so.lock"
    assert caplog.messages[0] == f"waiting for another process compiling Stan program demo (lock {lock})"


def test_build_messages_are_enabled_once(tmp_path):
    script = (
        "import logging\n"
        "from stanaccel.stan.compiler import enable_build_messages\n"
        "enable_build_messages()\n"
        "enable_build_messages()\n"
        "logging.getLogger('stanaccel.stan.compiler').info('compiling something')\n"
        "logging.getLogger('stanaccel.stan.compiler').debug('details')\n"
    )
    process = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert process.returncode == 0, process.stderr
    assert process.stderr == "stanaccel: compiling something\n"


def test_the_build_message_gives_the_time_builds_took_here(tmp_path, monkeypatch):
    from stanaccel.stan.compiler import RECENT_BUILDS, expected_build

    monkeypatch.setenv("STANACCEL_CACHE", str(tmp_path))
    models = tmp_path / "models"
    models.mkdir()
    assert expected_build() == "up to a minute: the first build timed on this machine"
    assert expected_build(with_bridge=True) == (
        "one to two minutes, the bridge beside it: the first build timed on this machine"
    )
    (models / "old.so.json").write_text(json.dumps({"built_at": "2026-12-01T10:00:00+0000"}))  # not timed
    assert expected_build().startswith("up to a minute")
    (models / "first.so.json").write_text(
        json.dumps({"built_at": "2026-12-02T10:00:00+0000", "seconds": 61.0, "with_bridge": True})
    )
    assert expected_build() == "about 61 s on this machine, as its last build took"  # only that one
    for i, seconds in enumerate([20.0, 30.0, 25.0, 90.0, 24.0, 26.0]):  # 20 s is the oldest, left out
        record = {"built_at": f"2026-12-03T10:00:0{i}+0000", "seconds": seconds, "with_bridge": False}
        (models / f"p{i}.so.json").write_text(json.dumps(record))
    assert RECENT_BUILDS == 5
    assert expected_build() == "about 26 s on this machine, as its last 5 builds took"  # 30 25 90 24 26
    assert expected_build(with_bridge=True).startswith("about 26 s and the bridge beside it")


@pytest.mark.slow
def test_the_precompiled_model_header_is_what_gcc_uses(monkeypatch):
    """With ``STANACCEL_PCH=1`` (as ``make test`` sets) the header is built once in the shared cache,
    and GCC, given the programs' own flags, takes it in place of the header (``-H`` marks it ``!``)."""
    from stanaccel.stan.compiler import MODEL_HEADER, PCH_ENV, precompiled_header
    from stanaccel.stan.toolchain import compiler_version, find_toolchain

    toolchain = find_toolchain()
    monkeypatch.delenv(PCH_ENV, raising=False)
    assert precompiled_header(toolchain) is None  # off by default
    monkeypatch.setenv(PCH_ENV, "1")
    if "clang" in compiler_version(toolchain.cxx):
        assert precompiled_header(toolchain) is None
        return
    folder = precompiled_header(toolchain)
    header = folder / f"{MODEL_HEADER}.gch"
    assert json.loads(manifest_path(header).read_text())["size"] == header.stat().st_size
    # -H names each header as GCC opens it, the precompiled one first; once it has, the rest of the check
    # (Stan Math's templates instantiated, 5 CPU-s) says nothing more, and the compiler is stopped.
    source = "#include <stan/model/model_header.hpp>\nint main() { return 0; }\n"
    flags = [*toolchain.compile_flags(), "-H", "-fsyntax-only", "-x", "c++", "-"]
    pipes = {"stdin": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    with subprocess.Popen([toolchain.cxx, "-I", str(folder), *flags], **pipes) as process:
        process.stdin.write(source)
        process.stdin.close()
        first = process.stderr.readline()
        process.kill()
    assert first.strip() == f"! {header}", first
