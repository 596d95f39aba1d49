"""Where the Stan toolchain lives and how C++ is compiled against it.

CmdStan cannot be installed from the package registries, so stanaccel builds
each program with what the ``httpstan`` wheel ships: ``stanc``, the Stan,
Stan Math, Eigen, Boost, Sundials and TBB headers and libraries. The
flags below are the ones httpstan's own headers are built for. pybind11 comes
from its own package, not from httpstan: the copy httpstan ships (2.9)
predates NumPy 2 and builds arrays with zero strides under it.

The C++ compiler is looked up only when something must be built
(:attr:`Toolchain.cxx` is lazy), and a built program's cache key does not
include the compiler's identity (:meth:`Toolchain.identity`). So a machine
without a compiler, or with another version of it, loads every program
already in the cache: the extension's binary interface is fixed by the
flags, Python, pybind11 and httpstan, which are in the key, and a compiler
upgrade need not discard every build. The compiler's version is recorded in
each artefact's manifest, for information. The bridge object, which is only
used when building, does carry the compiler's version in its key, so one
link never mixes object files from two compilers.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import sysconfig
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from stanaccel.signals import refuse_after_stop
from stanaccel.stan.errors import StanBuildError

MACROS = (
    "-DBOOST_DISABLE_ASSERTS",
    "-DBOOST_PHOENIX_NO_VARIADIC_EXPRESSION",
    "-DSTAN_THREADS",
    "-D_REENTRANT",
    "-D_GLIBCXX_USE_CXX11_ABI=0",
)
OPTIONS = ("-O3", "-std=c++17", "-fPIC", "-Wno-deprecated-declarations", "-Wno-ignored-attributes")
LIBRARIES = ("-ltbb", "-lsundials_cvodes", "-lsundials_idas", "-lsundials_kinsol", "-lsundials_nvecserial")


@dataclass(frozen=True)
class Toolchain:
    """The compilers, headers and libraries used to build a Stan program."""

    stanc: Path
    include_dir: Path
    library_dir: Path
    httpstan_version: str

    @functools.cached_property
    def cxx(self) -> str:
        """The C++ compiler, found on first use (see :func:`find_compiler`).

        Raises
        ------
        StanBuildError
            No compiler exists; only building needs one, never loading.
        """
        return find_compiler()

    def compile_flags(self) -> list[str]:
        """Flags for compiling one translation unit to an object file."""
        import pybind11

        python_include = sysconfig.get_paths()["include"]
        # pybind11's own headers first, ahead of the older copy inside httpstan's include folder.
        return [
            *OPTIONS,
            *MACROS,
            f"-I{pybind11.get_include()}",
            f"-I{self.include_dir}",
            f"-I{python_include}",
        ]

    def link_flags(self) -> list[str]:
        """Flags for linking object files into a Python extension module."""
        lib = str(self.library_dir)
        return ["-shared", f"-L{lib}", *LIBRARIES, f"-Wl,-rpath,{lib}"]

    def identity(self) -> str:
        """Text that changes whenever the binary interface of a build made with this toolchain would.

        It leaves out the compiler's identity, so that a cached program loads
        without a compiler (see the module's notes).
        """
        import pybind11

        return "\n".join(
            [
                self.httpstan_version,
                pybind11.__version__,
                sysconfig.get_config_var("EXT_SUFFIX") or "",
                *self.compile_flags(),
                *self.link_flags(),
            ]
        )

    def run_compiler(self, args: list[str], what: str) -> float:
        """Run the C++ compiler; return the CPU seconds of its processes (a build's cost on a busy machine).

        A failure raises :class:`StanBuildError` with the end of its output.
        A stop (``KeyboardInterrupt``) while it runs ends it, with what it
        started, and every other compiler running (:func:`stop_compilers`);
        after a stop signal none starts.
        """
        refuse_after_stop("the C++ compiler")
        command = [self.cxx, *args]
        # Its own process group: the driver's cc1plus and as are ended with it (a signal to the driver
        # alone leaves them compiling on), and a terminal's Ctrl-C is this process's to handle.
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, process_group=0
        )
        with _compilers_lock:
            _compilers.add(process)
        try:
            with process.stdout:
                output = process.stdout.read()
            _, status, usage = os.wait4(process.pid, 0)  # the rusage of the driver and what it ran
        except KeyboardInterrupt:
            stop_compilers()
            _reap(process)
            raise
        finally:
            with _compilers_lock:
                _compilers.discard(process)
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            tail = "\n".join(output.strip().splitlines()[-60:])
            raise StanBuildError(f"C++ build of {what} failed ({self.cxx}):\n{tail}")
        return usage.ru_utime + usage.ru_stime


_compilers: set[subprocess.Popen] = set()
"""The C++ compilers running (a first build runs two: the program's and, in a thread, the bridge's)."""
_compilers_lock = threading.Lock()
COMPILER_GRACE = 5.0
"""Seconds a stopped compiler gets to end on SIGTERM (its driver removes its temp files), then SIGKILL."""


def stop_compilers() -> None:
    """End every C++ compiler this process runs, each with the processes it started: the run was stopped.

    Each runs in its own process group, which gets SIGTERM. The thread that
    ran one sees it fail; a build's background compile (the bridge's, which
    takes minutes) ends instead of being waited for.
    """
    with _compilers_lock:
        running = list(_compilers)
    for process in running:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)


@contextlib.contextmanager
def compilers_end_on_stop() -> Iterator[None]:
    """A stop (``KeyboardInterrupt``) in the block ends every running compiler before anything waits for one.

    For a build whose other thread compiles: leaving it waits for that thread.
    """
    try:
        yield
    except KeyboardInterrupt:
        stop_compilers()
        raise


def _reap(process: subprocess.Popen) -> None:
    """Wait for a stopped compiler to end (SIGKILL to its group after :data:`COMPILER_GRACE` seconds)."""
    try:
        process.wait(COMPILER_GRACE)
    except subprocess.TimeoutExpired:  # it ignores SIGTERM (started where the stop signals were ignored)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@functools.cache
def compiler_version(cxx: str) -> str:
    """The first line of ``cxx --version``."""
    process = subprocess.run([cxx, "--version"], capture_output=True, text=True)
    return process.stdout.splitlines()[0] if process.stdout else cxx


def find_compiler() -> str:
    """The C++ compiler: ``$CXX`` if set, else ``g++`` or ``c++`` on the PATH."""
    candidates = [os.environ["CXX"]] if os.environ.get("CXX") else ["g++", "c++"]
    for name in candidates:
        found = shutil.which(name)
        if found:
            return found
    raise StanBuildError(
        f"no C++ compiler found (looked for {', '.join(candidates)}): stanaccel compiles "
        "each Stan program to C++; install one (Debian: apt-get install g++) or set CXX"
    )


def find_toolchain() -> Toolchain:
    """Locate httpstan's stanc, headers and libraries (the compiler is found lazily)."""
    try:
        import httpstan
    except ImportError as exc:  # pragma: no cover - httpstan is a declared dependency
        raise StanBuildError("the httpstan package (Stan's toolchain) is not installed") from exc
    root = Path(httpstan.__file__).parent
    stanc = root / "stanc"
    if not stanc.exists():  # pragma: no cover
        raise StanBuildError(f"httpstan at {root} ships no stanc binary")
    return Toolchain(
        stanc=stanc,
        include_dir=root / "include",
        library_dir=root / "lib",
        httpstan_version=httpstan.__version__,
    )
