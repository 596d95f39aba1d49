"""Compile a Stan program into a loadable Python extension, with caching.

``stanc`` translates the program to C++; the C++ compiler builds it into an
object file, which is linked with stanaccel's bridge (``bridge.cpp``, built
once per machine and cached) into one Python extension module per program.
Both builds are cached by content hash (see :mod:`stanaccel.stan.cache`), so a
program compiles once per machine and later loads in well under a second.
Loading a cached program needs no C++ compiler (see
:mod:`stanaccel.stan.toolchain`).

On a machine's first build the bridge is compiled in a second thread while
the program's own C++ compiles (the compiler runs as a subprocess, so the
two use two cores); the link waits for both. On two idle cores this cut the
first build of ``gp_ard`` from 58 s (one after the other) to 33 s.

A build takes about a minute, so it is announced: messages go to the
``stanaccel.stan`` logger at INFO level (compiling, compiled in how long,
waiting for another process's build of the same program) and WARNING (a
damaged cache entry rebuilt). Unless logging is configured, Python shows
the warnings but drops the rest; a command-line program calls
:func:`enable_build_messages` to see them all.

A precompiled header of Stan's ``model_header.hpp`` (which the generated
C++ includes first) is built where ``$STANACCEL_PCH`` is ``1``
(:data:`PCH_ENV`; GCC only): it makes each program's compile 7 to 10 s
shorter (``gp_ard`` 27 s to 18 s), but building it takes 26 s and 800 MB of
disk, so it pays back only from the fourth program built. ``make test``
turns it on (the suite builds some twenty programs); by default it is off.
On a first build it is made while the bridge compiles, before the program.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from stanaccel.stan.cache import build_once, cache_dir, content_hash, damage, discard
from stanaccel.stan.errors import StanBuildError, StanCompileError
from stanaccel.stan.toolchain import Toolchain, compiler_version, find_toolchain

logger = logging.getLogger(__name__)

MESSAGES_LOGGER = "stanaccel.stan"
PCH_ENV = "STANACCEL_PCH"
"""Set to ``1`` to build and use a precompiled header of Stan's model header (:func:`precompiled_header`)."""
BRIDGE_SOURCE = Path(__file__).with_name("bridge.cpp")
MODULE_INIT = """#include <Python.h>
extern "C" PyObject *stanaccel_create_module(const char *name);
extern "C" PyMODINIT_FUNC PyInit_{module}(void) {{ return stanaccel_create_module("{module}"); }}
"""

_loaded: dict[Path, ModuleType] = {}
_load_lock = threading.Lock()


@dataclass(frozen=True)
class CompiledProgram:
    """A Stan program compiled and loaded into this process.

    Attributes
    ----------
    name : str
        The model name (``<file stem>_model`` for a file).
    code : str
        The Stan program text.
    library : Path
        The built extension module in the cache.
    module : ModuleType
        The loaded extension; ``module.Model(data_json, seed)`` is one instance.
    warnings : str
        stanc's warnings, if any.
    built : bool
        True if this call built the program, False if it came from the cache.
    """

    name: str
    code: str
    library: Path
    module: ModuleType
    warnings: str
    built: bool

    def __reduce__(self):
        """Pickle by name, code and library: a loaded extension module does not pickle.

        Another process (a Dask worker, a spawned process) rebuilds the
        program with :func:`load_compiled`, a load from the compile cache,
        never a compile when the cache holds the build.
        """
        return load_compiled, (self.name, self.code, str(self.library))


def enable_build_messages() -> None:
    """Show build messages (compiling, compiled, waiting, damaged cache) on stderr.

    A first build is a minute of silence otherwise: nothing configures
    logging in a command-line run, so the INFO messages of the
    ``stanaccel.stan`` logger go nowhere. This sets that logger to INFO and,
    unless a handler already receives its messages (on it, on ``stanaccel``
    or on the root logger), attaches one writing ``stanaccel: <message>``
    lines to stderr. Calling it again adds nothing.
    """
    messages = logging.getLogger(MESSAGES_LOGGER)
    if not messages.isEnabledFor(logging.INFO):
        messages.setLevel(logging.INFO)
    if not messages.hasHandlers():
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("stanaccel: %(message)s"))
        messages.addHandler(handler)


def read_program(program: str | Path) -> tuple[str, str, str]:
    """Return (code, model name, label) for a ``.stan`` path or a program string.

    The model name is ``<file stem>_model`` made a C++ identifier, or
    ``anon_model`` for a string; the label names the program in messages:
    the file's own name (any name its file system allows), or ``anon.stan``.
    A string without braces cannot be Stan code (every program has a block),
    so it is read as a path.

    Raises
    ------
    FileNotFoundError
        The path names no file; the message says what is expected.
    """
    looks_like_path = isinstance(program, Path) or "{" not in program
    if looks_like_path:
        path = Path(program)
        if not path.is_file():
            raise FileNotFoundError(
                f"Stan program file not found: {str(path)!r} (give a .stan file, the program text, or for "
                "a bundled program stanaccel.programs.program_path(name))"
            )
        return path.read_text(), model_name_for(path.stem), path.name
    return str(program), "anon_model", "anon.stan"


def model_name_for(stem: str) -> str:
    """A valid C++ and Python module identifier for the model's name, as stanc would choose.

    ASCII only: a non-ASCII extension module name needs another init symbol
    (PEP 489's punycode ``PyInitU_``), so ``rég modèle`` becomes ``r_g_mod_le``.
    """
    name = re.sub(r"\W", "_", stem, flags=re.ASCII)
    if not name or name[0].isdigit():
        name = "m_" + name
    return f"{name}_model"


@functools.lru_cache(maxsize=64)
def stanc(code: str, name: str, toolchain_stanc: Path, label: str | None = None) -> tuple[str, str]:
    """Translate Stan code to C++; return (C++ code, warnings).

    ``label`` names the program in stanc's messages (the user's file name);
    it is not part of the C++, so the cache key does not depend on it. The
    translation is kept for the process: each run of a program (each
    ``sample`` call) translates it to find its build, and stanc costs about
    40 ms of CPU a call.

    Raises
    ------
    StanCompileError
        With stanc's message, which gives the file, line and column of the problem.
    """
    with tempfile.TemporaryDirectory(prefix="stanaccel-stanc-") as tmp:
        source_name = f"{name.removesuffix('_model')}.stan"
        source = Path(tmp) / source_name
        source.write_text(code)
        target = Path(tmp) / f"{name}.cpp"
        process = subprocess.run(
            [str(toolchain_stanc), "--name", name, f"--filename-in-msg={source_name}", "--o", target.name,
             source_name],
            cwd=tmp,  # relative paths: stanc records its flags in the C++, which is the cache key
            capture_output=True,
            text=True,
            timeout=120,
        )  # fmt: skip
        if process.returncode != 0:
            raise StanCompileError(_relabel(process.stderr or process.stdout, source, label or source_name))
        return target.read_text(), process.stderr.strip()


def _relabel(message: str, source: Path, label: str) -> str:
    """stanc's message with the temporary file's name replaced by the user's file name."""
    message = message.strip().replace(str(source), label)
    return message.replace(f"'{source.name}'", f"'{label}'")


@functools.lru_cache(maxsize=64)
def program_info(code: str, label: str = "program.stan") -> dict:
    """What a program declares, from ``stanc --info``: its data (``inputs``) and parameters.

    Each of ``inputs``, ``parameters``, ``transformed parameters`` and
    ``generated quantities`` maps a name to ``{"type": "int" | "real" | ...,
    "dimensions": n}`` (n array and vector dimensions together).

    Raises
    ------
    StanCompileError
        The program does not compile; the message names it by ``label``.
    """
    with tempfile.TemporaryDirectory(prefix="stanaccel-stanc-") as tmp:
        source = Path(tmp) / "program.stan"
        source.write_text(code)
        process = subprocess.run(
            [str(find_toolchain().stanc), "--info", source.name], cwd=tmp, capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip
    if process.returncode != 0:
        raise StanCompileError(_relabel(process.stderr or process.stdout, source, label))
    return json.loads(process.stdout)


def compile_program(program: str | Path) -> CompiledProgram:
    """Compile (or fetch from the cache) and load a Stan program.

    A cached build that does not match its recorded size and SHA-256, or
    does not load, is rebuilt (with a warning).

    Parameters
    ----------
    program : str or Path
        A path to a ``.stan`` file, or the program text itself.

    Returns
    -------
    CompiledProgram
        The loaded program; build instances with :class:`stanaccel.stan.StanModel`.

    Raises
    ------
    StanCompileError
        The program does not compile (stanc's message, with line and column).
    StanBuildError
        It must be built and there is no C++ compiler, the C++ build failed,
        or the fresh build does not load.
    """
    code, name, label = read_program(program)
    toolchain = find_toolchain()
    cpp, warnings = stanc(code, name, toolchain.stanc, label)
    if warnings:
        logger.info("stanc warnings for %s:\n%s", name, warnings)
    key = content_hash(cpp, BRIDGE_SOURCE.read_text(), toolchain.identity())
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    module = f"_stanaccel_{name}_{key}"
    library = cache_dir() / "models" / f"{module}{suffix}"
    what = f"Stan program {name.removesuffix('_model')}"

    def build(tmp_library: Path) -> dict[str, str]:
        return build_program(toolchain, cpp, name, module, tmp_library)

    built = build_once(library, build, what)
    seen = library.stat()
    try:
        loaded = load_module(module, library)
    except ImportError as exc:
        if built:
            raise StanBuildError(f"the freshly built {library} does not load: {exc}") from exc
        discard(library, f"it does not load: {exc}", seen, what)
        built = build_once(library, build, what)
        loaded = load_module(module, library)
    return CompiledProgram(name, code, library, loaded, warnings, built)


def build_program(
    toolchain: Toolchain, cpp: str, name: str, module: str, tmp_library: Path
) -> dict[str, str]:
    """Build one program's extension module at ``tmp_library``; return notes for its manifest.

    On a machine with two or more cores, the bridge object (if not cached
    yet) compiles in a second thread while the program's C++ compiles here.
    """
    label = name.removesuffix("_model")
    cxx = toolchain.cxx  # no compiler: say so before starting anything
    with_bridge = not bridge_object_path(toolchain).is_file()
    logger.info(
        "compiling Stan program %s (%s; cached afterwards in %s)",
        label,
        expected_build(with_bridge),
        cache_dir(),
    )
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="stanaccel-build-") as tmp, ThreadPoolExecutor(1) as pool:
        bridge = pool.submit(bridge_object, toolchain) if available_cores() > 1 else None
        cpp_path = Path(tmp) / f"{name}.cpp"
        cpp_path.write_text(cpp)
        obj = Path(tmp) / f"{name}.o"
        header = precompiled_header(toolchain)
        cpu = toolchain.run_compiler(
            [*(["-I", str(header)] if header else []), *toolchain.compile_flags(), "-c", str(cpp_path),
             "-o", str(obj)],
            f"program {name}",
        )  # fmt: skip
        init_path = Path(tmp) / "module_init.cpp"
        init_path.write_text(MODULE_INIT.format(module=module))
        cpu += toolchain.run_compiler(
            [*toolchain.compile_flags(), "-c", str(init_path), "-o", str(init_path.with_suffix(".o"))],
            f"program {name} (module init)",
        )
        cpu += toolchain.run_compiler(
            [
                str(obj),
                str(init_path.with_suffix(".o")),
                str(bridge.result() if bridge else bridge_object(toolchain)),
                "-o",
                str(tmp_library),
                *toolchain.link_flags(),
            ],
            f"program {name} (link)",
        )
    seconds = time.perf_counter() - start
    logger.info("compiled %s in %.0f s", label, seconds)
    return {
        "compiler": compiler_version(cxx),
        "seconds": round(seconds, 1),
        "cpu_seconds": round(cpu, 1),  # the program's own compile and link, not the bridge's
        "with_bridge": with_bridge,
    }


RECENT_BUILDS = 5
"""The build message's estimate is the median of this many of the latest program builds."""


def expected_build(with_bridge: bool = False) -> str:
    """How long a program's build will take on this machine, measured from its earlier builds.

    The median of the latest :data:`RECENT_BUILDS` builds recorded in the
    cache's manifests (their ``seconds``), those that also built the bridge
    left out unless there are no others. Before any build here, says that
    this one is timed for the next ones' estimate.
    """
    builds = []
    for manifest in (cache_dir() / "models").glob("*.json"):
        try:
            record = json.loads(manifest.read_text())
            builds.append((bool(record.get("with_bridge")), record["built_at"], float(record["seconds"])))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # an older manifest, with no seconds
    plain = [b for b in builds if not b[0]] or builds
    if not plain:
        # A first build compiles the bridge beside the program (`make demo`: 70 s and 85 s, two cores).
        length = "one to two minutes, the bridge beside it" if with_bridge else "up to a minute"
        return f"{length}: the first build timed on this machine"
    recent = sorted(plain, key=lambda b: b[1])[-RECENT_BUILDS:]
    seconds = sorted(b[2] for b in recent)
    median = (seconds[(len(seconds) - 1) // 2] + seconds[len(seconds) // 2]) / 2
    extra = " and the bridge beside it" if with_bridge else ""
    took = "its last build took" if len(recent) == 1 else f"its last {len(recent)} builds took"
    return f"about {median:.0f} s{extra} on this machine, as {took}"


def available_cores() -> int:
    """How many CPU cores this process may use."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def bridge_object_path(toolchain: Toolchain) -> Path:
    """Where the bridge's object file for this toolchain and compiler is cached (built or not)."""
    key = content_hash(BRIDGE_SOURCE.read_text(), toolchain.identity(), compiler_version(toolchain.cxx))
    return cache_dir() / "bridge" / f"bridge-{key}.o"


def bridge_object(toolchain: Toolchain) -> Path:
    """The bridge compiled to an object file, built once per toolchain and compiler, and cached."""
    version = compiler_version(toolchain.cxx)
    target = bridge_object_path(toolchain)

    def build(tmp_object: Path) -> dict[str, str]:
        logger.info("compiling stanaccel's Stan bridge (once per machine: one to three minutes on one core)")
        start = time.perf_counter()
        cpu = toolchain.run_compiler(
            [*toolchain.compile_flags(), "-c", str(BRIDGE_SOURCE), "-o", str(tmp_object)],
            "stanaccel's Stan bridge",
        )
        seconds = time.perf_counter() - start
        logger.info("compiled stanaccel's Stan bridge in %.0f s", seconds)
        return {"compiler": version, "seconds": round(seconds, 1), "cpu_seconds": round(cpu, 1)}

    build_once(target, build, "stanaccel's Stan bridge")
    return target


MODEL_HEADER = "stan/model/model_header.hpp"


def precompiled_header(toolchain: Toolchain) -> Path | None:
    """The folder of a precompiled ``model_header.hpp``, built once and cached; None unless asked for.

    Asked for by ``$STANACCEL_PCH=1``, and only with GCC, which looks for
    ``<header>.gch`` in each include folder before the header itself: the
    folder goes first on the include path. It is built with the programs'
    own flags (GCC uses it only where they match, and silently falls back
    to the header where they do not), keyed by them and the compiler.
    """
    if os.environ.get(PCH_ENV) != "1":
        return None
    version = compiler_version(toolchain.cxx)
    if not version.startswith(("g++", "c++")) or "clang" in version:
        return None
    key = content_hash(toolchain.identity(), version)
    folder = cache_dir() / "pch" / key
    target = folder / f"{MODEL_HEADER}.gch"

    def build(tmp_header: Path) -> dict[str, str]:
        logger.info("compiling Stan's model header once, to speed up the builds after it (%s)", PCH_ENV)
        start = time.perf_counter()
        cpu = toolchain.run_compiler(
            [*toolchain.compile_flags(), "-x", "c++-header", str(toolchain.include_dir / MODEL_HEADER),
             "-o", str(tmp_header)],
            "Stan's model header (precompiled)",
        )  # fmt: skip
        seconds = time.perf_counter() - start
        logger.info("compiled Stan's model header in %.0f s", seconds)
        return {"compiler": version, "seconds": round(seconds, 1), "cpu_seconds": round(cpu, 1)}

    target.parent.mkdir(parents=True, exist_ok=True)
    build_once(target, build, "Stan's precompiled model header")
    return folder


_rebuilt: dict[tuple[str, str], CompiledProgram] = {}


def load_compiled(name: str, code: str, library: str | Path) -> CompiledProgram:
    """A program unpickled in another process: its cached build loaded, once per process.

    The build at ``library`` is loaded when it is intact (it matches its
    manifest), as on the machine that pickled it or on nodes sharing its
    cache folder. Otherwise (a node with a cache of its own) the program is
    compiled from ``code`` with :func:`compile_program`, which finds it in
    that node's cache or builds it there once.
    """
    key = (name, code)
    with _load_lock:
        known = _rebuilt.get(key)
    if known is not None:
        return known
    library = Path(library)
    if damage(library) is None:
        module = load_module(library.name.split(".")[0], library)
        program = CompiledProgram(name, code, library, module, "", False)
    else:
        with tempfile.TemporaryDirectory(prefix="stanaccel-program-") as tmp:
            path = Path(tmp) / f"{name.removesuffix('_model')}.stan"
            path.write_text(code)
            program = compile_program(path)
    with _load_lock:
        return _rebuilt.setdefault(key, program)


def load_module(module: str, library: Path) -> ModuleType:
    """Load a built extension once per process (a second load would clash)."""
    with _load_lock:
        if library not in _loaded:
            spec = importlib.util.spec_from_file_location(module, library)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            _loaded[library] = module
        return _loaded[library]
