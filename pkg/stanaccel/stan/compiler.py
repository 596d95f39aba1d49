"""Compile a Stan program into a loadable Python extension, with caching.

``stanc`` translates the program to C++; the C++ compiler builds it into an
object file, which is linked with stanaccel's bridge (``bridge.cpp``, built
once per machine and cached) into one Python extension module per program.
Both builds are cached by content hash (see :mod:`stanaccel.stan.cache`), so a
program compiles once per machine and later loads in well under a second.
"""

from __future__ import annotations

import importlib.util
import logging
import re
import subprocess
import sysconfig
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from stanaccel.stan.cache import build_once, cache_dir, content_hash
from stanaccel.stan.errors import StanCompileError
from stanaccel.stan.toolchain import Toolchain, find_toolchain

logger = logging.getLogger(__name__)

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


def read_program(program: str | Path) -> tuple[str, str]:
    """Return (code, model name) for a ``.stan`` path or a program string.

    The model name is ``<file stem>_model``, or ``anon_model`` for a string.
    """
    looks_like_path = isinstance(program, Path) or (
        "\n" not in program and "{" not in program and program.strip().endswith(".stan")
    )
    if looks_like_path:
        path = Path(program)
        if not path.is_file():
            raise FileNotFoundError(f"Stan program file not found: {path}")
        return path.read_text(), model_name_for(path.stem)
    return str(program), "anon_model"


def model_name_for(stem: str) -> str:
    """A valid C++ identifier for the model's name, as stanc would choose."""
    name = re.sub(r"\W", "_", stem)
    if not name or name[0].isdigit():
        name = "m_" + name
    return f"{name}_model"


def stanc(code: str, name: str, toolchain_stanc: Path) -> tuple[str, str]:
    """Translate Stan code to C++; return (C++ code, warnings).

    Raises
    ------
    StanCompileError
        With stanc's message, which gives the line and column of the problem.
    """
    with tempfile.TemporaryDirectory(prefix="stanaccel-stanc-") as tmp:
        label = f"{name.removesuffix('_model')}.stan"
        source = Path(tmp) / label
        source.write_text(code)
        target = Path(tmp) / f"{name}.cpp"
        process = subprocess.run(
            [str(toolchain_stanc), "--name", name, f"--filename-in-msg={label}", "--o", target.name, label],
            cwd=tmp,  # relative paths: stanc records its flags in the C++, which is the cache key
            capture_output=True,
            text=True,
            timeout=120,
        )
        if process.returncode != 0:
            message = (process.stderr or process.stdout).strip().replace(str(source), source.name)
            raise StanCompileError(message)
        return target.read_text(), process.stderr.strip()


def compile_program(program: str | Path) -> CompiledProgram:
    """Compile (or fetch from the cache) and load a Stan program.

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
        No C++ compiler, or the C++ build failed.
    """
    code, name = read_program(program)
    toolchain = find_toolchain()
    cpp, warnings = stanc(code, name, toolchain.stanc)
    if warnings:
        logger.info("stanc warnings for %s:\n%s", name, warnings)
    bridge = bridge_object(toolchain)
    key = content_hash(cpp, BRIDGE_SOURCE.read_text(), toolchain.identity())
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    module = f"_stanaccel_{name}_{key}"
    library = cache_dir() / "models" / f"{module}{suffix}"

    def build(tmp_library: Path) -> None:
        logger.info("compiling Stan program %s (about a minute)", name)
        with tempfile.TemporaryDirectory(prefix="stanaccel-build-") as tmp:
            cpp_path = Path(tmp) / f"{name}.cpp"
            cpp_path.write_text(cpp)
            obj = Path(tmp) / f"{name}.o"
            toolchain.run_compiler(
                [*toolchain.compile_flags(), "-c", str(cpp_path), "-o", str(obj)], f"program {name}"
            )
            init_path = Path(tmp) / "module_init.cpp"
            init_path.write_text(MODULE_INIT.format(module=module))
            toolchain.run_compiler(
                [*toolchain.compile_flags(), "-c", str(init_path), "-o", str(init_path.with_suffix(".o"))],
                f"program {name} (module init)",
            )
            toolchain.run_compiler(
                [
                    str(obj),
                    str(init_path.with_suffix(".o")),
                    str(bridge),
                    "-o",
                    str(tmp_library),
                    *toolchain.link_flags(),
                ],
                f"program {name} (link)",
            )

    built = build_once(library, build)
    return CompiledProgram(name, code, library, load_module(module, library), warnings, built)


def bridge_object(toolchain: Toolchain) -> Path:
    """The bridge compiled to an object file, built once per toolchain and cached."""
    source = BRIDGE_SOURCE.read_text()
    key = content_hash(source, toolchain.identity())
    target = cache_dir() / "bridge" / f"bridge-{key}.o"

    def build(tmp_object: Path) -> None:
        logger.info("compiling stanaccel's Stan bridge (once per machine, about a minute)")
        toolchain.run_compiler(
            [*toolchain.compile_flags(), "-c", str(BRIDGE_SOURCE), "-o", str(tmp_object)],
            "stanaccel's Stan bridge",
        )

    build_once(target, build)
    return target


def load_module(module: str, library: Path) -> ModuleType:
    """Load a built extension once per process (a second load would clash)."""
    with _load_lock:
        if library not in _loaded:
            spec = importlib.util.spec_from_file_location(module, library)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            _loaded[library] = module
        return _loaded[library]
