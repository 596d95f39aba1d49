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

from stanaccel.stan.cache import build_once, cache_dir, check_build_room, content_hash, damage, discard
from stanaccel.stan.errors import StanBuildError, StanCompileError
from stanaccel.stan.toolchain import Toolchain, compiler_version, compilers_end_on_stop, find_toolchain

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


def read_program(program: str | Path, include_paths=()) -> tuple[str, str, str]:
    """Return (code, model name, label) for a ``.stan`` path or a program string.

    The model name is ``<file stem>_model`` made a C++ identifier, or
    ``anon_model`` for a string; the label names the program in messages:
    the file's own name (any name its file system allows), or ``anon.stan``.
    A string without braces cannot be Stan code (every program has a block),
    so it is read as a path. The code has the files its ``#include`` lines
    name inlined (:func:`resolve_includes`), found in the program's own
    folder and then in ``include_paths``: it is the whole program.

    Raises
    ------
    TypeError
        ``program`` is no path or text, or ``include_paths`` no folders.
    FileNotFoundError, IsADirectoryError
        The path names no file, or a folder; an include path is not a folder;
        the message says what is expected.
    StanCompileError
        An ``#include`` names a file found in none of the folders (stanc's
        message, naming them).
    """
    text, name, label, folder = read_source(program)
    return resolve_includes(text, include_folders(folder, include_paths), label), name, label


def read_source(program: str | Path) -> tuple[str, str, str, Path | None]:
    """(code as written, model name, label, folder) for a ``.stan`` path or a program string (see
    :func:`read_program`); the folder is the file's own, absolute (None for a string)."""
    if not isinstance(program, str | os.PathLike):
        raise TypeError(
            f"program must be a .stan file (a str or Path) or the program text; not {type(program).__name__} "
            f"({program!r:.60})"
        )
    looks_like_path = not isinstance(program, str) or "{" not in program
    if looks_like_path:
        path = Path(program)
        if path.is_dir():
            raise IsADirectoryError(
                f"Stan program {str(path)!r} is a folder: give a .stan file or the program text"
            )
        if not path.is_file():
            raise FileNotFoundError(
                f"Stan program file not found: {str(path)!r} (give a .stan file, the program text, or for "
                "a bundled program stanaccel.programs.program_path(name))"
            )
        return path.read_text(), model_name_for(path.stem), path.name, path.resolve().parent
    return str(program), "anon_model", "anon.stan", None


INCLUDE = re.compile(r"^[ \t]*#include\b", re.MULTILINE)
"""An ``#include`` line of a Stan program (stanc reads the file it names in its place)."""


def include_folders(folder: Path | None, include_paths=()) -> tuple[Path, ...]:
    """The folders an ``#include`` is looked for in, in order: the program's own ``folder`` (as cmdstanpy
    does), then ``include_paths`` (one folder, or a list), absolute and each once.

    Raises
    ------
    TypeError
        ``include_paths`` is not a folder or a list of them.
    FileNotFoundError
        An include path is not a folder.
    """
    paths = [include_paths] if isinstance(include_paths, str | os.PathLike) else include_paths
    if not isinstance(paths, list | tuple) or not all(isinstance(p, str | os.PathLike) for p in paths):
        raise TypeError(
            f"include_paths must be a folder (a str or Path) or a list of them; not {include_paths!r:.60}"
        )
    folders = [] if folder is None else [folder]
    for path in map(Path, paths):
        if not path.is_dir():
            raise FileNotFoundError(
                f"include path {str(path)!r} is not a folder (include_paths, --include-path)"
            )
        if path.resolve() not in folders:
            folders.append(path.resolve())
    return tuple(folders)


def resolve_includes(code: str, folders: tuple[Path, ...], label: str = "program.stan") -> str:
    """``code`` with the file each ``#include`` names inlined, as stanc reads it (looked for in
    ``folders``, in order; nested includes too); ``code`` itself where it has none.

    stanc does the inlining (``--canonicalize=includes``, which also formats the program): it searches
    as it does when it translates, and a missing or broken file is its message, naming the file, the
    line of the ``#include`` and the folders.

    Raises
    ------
    StanCompileError
        stanc's message.
    """
    if not INCLUDE.search(code):
        return code
    flags = ["--auto-format", "--canonicalize=includes"]
    return _run_stanc(code, "program.stan", find_toolchain().stanc, label, folders, flags)


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
def stanc(
    code: str,
    name: str,
    toolchain_stanc: Path,
    label: str | None = None,
    folders: tuple[Path, ...] = (),
    inlined: str | None = None,
) -> tuple[str, str]:
    """Translate Stan code to C++; return (C++ code, warnings).

    ``label`` names the program in stanc's messages (the user's file name);
    it is not part of the C++, so the cache key does not depend on it. The
    translation is kept for the process: each run of a program (each
    ``sample`` call) translates it to find its build, and stanc costs about
    40 ms of CPU a call. ``folders`` are where its ``#include`` files are
    (:func:`include_folders`; given only to a program that has one, so that
    the others' C++ is as before), and ``inlined`` the program with them
    inlined (:func:`resolve_includes`): part of the kept translation's key,
    so that an edited included file is translated again. The C++, the
    build's cache key, holds the included code, and names each folder by
    its own name, not its place (the key does not change when a project
    moves).

    Raises
    ------
    StanCompileError
        With stanc's message, which gives the file, line and column of the problem.
    """
    source_name = f"{name.removesuffix('_model')}.stan"
    target = f"{name}.cpp"
    flags = ["--name", name, f"--filename-in-msg={source_name}"]
    return _run_stanc(code, source_name, toolchain_stanc, label, folders, flags, ["--o", target], target)


def _run_stanc(
    code: str,
    source_name: str,
    toolchain_stanc: Path,
    label: str | None,
    folders: tuple[Path, ...],
    flags: list[str],
    last_flags: list[str] | tuple = (),
    output: str | None = None,
):
    """Run stanc on ``code`` (written as ``source_name`` in a temporary folder) with ``flags``, the
    include paths, then ``last_flags``; return (the ``output`` file's text, warnings), or its stdout
    where ``output`` is None. Each folder is linked in the temporary folder under its own name, and
    stanc's messages name it by its path.

    Raises
    ------
    StanCompileError
        stanc's message, the program named by ``label``.
    """
    with tempfile.TemporaryDirectory(prefix="stanaccel-stanc-") as tmp:
        source = Path(tmp) / source_name
        source.write_text(code)
        links: dict[str, Path] = {}
        for folder in folders:
            link = folder.name or "root"
            while link in links or link in (source_name, output):
                link += "_"
            links[link] = folder
            (Path(tmp) / link).symlink_to(folder, target_is_directory=True)
        include = [f"--include-paths={','.join(links)}"] if links else []
        process = subprocess.run(
            [str(toolchain_stanc), *flags, *include, *last_flags, source_name],
            cwd=tmp,  # relative paths: stanc records its flags in the C++, which is the cache key
            capture_output=True,
            text=True,
            timeout=120,
        )
        if process.returncode != 0:
            message = _relabel(process.stderr or process.stdout, source, label or source_name)
            raise StanCompileError(_relabel_folders(message, links))
        if output is None:
            return process.stdout
        return (Path(tmp) / output).read_text(), process.stderr.strip()


def _relabel_folders(message: str, links: dict[str, Path]) -> str:
    """stanc's message with each include folder's link named by the folder's path."""
    for link, folder in links.items():
        message = message.replace(f"'{link}/", f"'{folder}/")
    searched = ", ".join(map(str, links.values())) + " (the program's own folder, then include_paths)"
    return (
        re.sub(r"Current include paths: .*", f"Include paths searched: {searched}", message)
        if links
        else message
    )


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


def translate(program: str | Path, include_paths=()) -> tuple[str, str, str, str, str]:
    """(code, model name, label, C++, stanc's warnings) of a program (see :func:`read_program`): the C++
    is the build's cache key (:func:`compile_program`), so it holds every included file's code.

    A program with an ``#include`` is translated from its own text with the include folders (stanc's
    messages then name the included file and line); the code is the program with them inlined.

    Raises
    ------
    StanCompileError
        stanc's message (an ``#include`` found in none of the folders among them).
    """
    text, name, label, folder = read_source(program)
    folders = include_folders(folder, include_paths)
    code = resolve_includes(text, folders, label)
    toolchain = find_toolchain()
    if INCLUDE.search(text):  # the files it includes are found in the folders, and key the translation
        cpp, warnings = stanc(text, name, toolchain.stanc, label, folders, code)
    else:
        cpp, warnings = stanc(text, name, toolchain.stanc, label)
    return code, name, label, cpp, warnings


def compile_program(program: str | Path, include_paths=()) -> CompiledProgram:
    """Compile (or fetch from the cache) and load a Stan program.

    A cached build that does not match its recorded size and SHA-256, or
    does not load, is rebuilt (with a warning).

    Parameters
    ----------
    program : str or Path
        A path to a ``.stan`` file, or the program text itself.
    include_paths : str, Path or list of them
        Folders to look for the files of its ``#include`` lines in, after
        the program's own folder (:func:`include_folders`).

    Returns
    -------
    CompiledProgram
        Its ``code`` is the whole program, its included files inlined.
        The loaded program; build instances with :class:`stanaccel.stan.StanModel`.

    Raises
    ------
    StanCompileError
        The program does not compile (stanc's message, with line and column),
        or an ``#include`` names a file in none of the folders.
    StanBuildError
        It must be built and there is no C++ compiler, the C++ build failed,
        or the fresh build does not load.
    """
    code, name, label, cpp, warnings = translate(program, include_paths)
    toolchain = find_toolchain()
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
    check_build_room(tmp_library.parent)  # a full disk: say so before, not after, the minute of compiling
    with_bridge = not bridge_object_path(toolchain).is_file()
    logger.info(
        "compiling Stan program %s (%s; cached afterwards in %s)",
        label,
        expected_build(with_bridge),
        cache_dir(),
    )
    start = time.perf_counter()
    with (
        tempfile.TemporaryDirectory(prefix="stanaccel-build-") as tmp,
        ThreadPoolExecutor(1) as pool,
        compilers_end_on_stop(),  # a stop: the bridge's compile ends too, not waited for (minutes)
    ):
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
PCH_ROOM = 1_000_000_000
"""Free bytes the precompiled header's build wants in the cache folder (it measured 770 MB)."""


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
        check_build_room(tmp_header.parent, PCH_ROOM)
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
