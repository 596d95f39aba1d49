"""Stan data in and out: dicts of NumPy arrays and Stan JSON files.

Stan JSON is the format CmdStan, cmdstanpy and BridgeStan read; stanaccel
uses the Stan team's own serialiser (``stanio``, which cmdstanpy uses) so
that a data file written here reads the same everywhere. Where Stan refuses
data, or finds no start point on them, the errors here name the file, the
variable and the value at fault (:func:`data_error`, :func:`run_error`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import stanio

from stanaccel.stan.errors import StanDataError, StanError, StanEvaluationError, out_of_memory

StanData = Mapping[str, Any] | str | Path | None

INT_RANGE = (-(2**31), 2**31 - 1)
"""Stan's int is 32 bits. Its JSON reader takes a whole number beyond these as a real, and then says
only "int variable contained non-int values"."""

EXTREME = 1e150
"""A data value beyond ±EXTREME, or nonzero within ±1/EXTREME, is a suspect where the log density is not
finite: its square (or its reciprocal's) overflows a double (largest 1.8e308) to infinity."""

EXTREME_RANGE = "beyond ±1e150 or nonzero within ±1e-150"
""":data:`EXTREME` in words, for messages."""


def data_to_json(data: StanData) -> str:
    """Return Stan JSON text for a dict, a JSON file path, JSON text, or None."""
    if data is None:
        return "{}"
    if isinstance(data, Mapping):
        return stanio.dump_stan_json(data)
    path = _data_path(data)
    if path is None:
        return str(data)
    path = _data_file(path)
    try:
        return path.read_text(encoding="utf-8-sig")  # a byte-order mark allowed
    except UnicodeDecodeError as error:
        raise _not_utf8(path, error) from None


def data_digest(data: Mapping[str, Any]) -> str:
    """A digest of the data's names, types, shapes and bytes (fast: no JSON), to key what is built once."""
    digest = hashlib.sha1()
    for name in sorted(data):
        try:
            array = np.asarray(data[name])
        except ValueError:  # ragged nested lists
            array = None
        if array is None or array.dtype == object:
            digest.update(f"{name}={data[name]!r};".encode())
        else:
            digest.update(f"{name}:{array.dtype}:{array.shape};".encode())
            digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def read_data(path: str | Path) -> dict[str, Any]:
    """Read a Stan JSON data file into a dict, its lists of numbers as NumPy arrays.

    Arrays, not nested lists: at 10^5 observations every later step (the
    checks, the subsets, the JSON text for Stan) is a third faster on them.
    A list that is not a rectangle of numbers stays a list.

    Raises
    ------
    FileNotFoundError, IsADirectoryError
        No such file, or a folder.
    ValueError
        The file is not JSON, or not a JSON object (naming the file and the place), or it gives a
        variable twice (Stan refuses that; Python's JSON reader would keep the last silently).
    """
    path = _data_file(path)
    try:
        with open(path, encoding="utf-8-sig") as handle:  # a byte-order mark allowed
            data = json.load(handle, object_pairs_hook=lambda pairs: _one_each(pairs, path))
    except json.JSONDecodeError as error:
        raise ValueError(
            f"data file {path}: not valid JSON: {error.msg} at line {error.lineno} column {error.colno}; "
            'Stan data are a JSON object such as {"N": 3, "y": [1.5, 2.0, 0.1]}'
        ) from None
    except UnicodeDecodeError as error:
        raise _not_utf8(path, error) from None
    if not isinstance(data, dict):
        raise ValueError(
            f"data file {path}: expected a JSON object of variable name -> value, not a {type(data).__name__}"
        )
    return {name: _as_array(value) for name, value in data.items()}


def _data_path(data: StanData) -> Path | None:
    """The file that ``data`` names: a Path, or a string that is not JSON text (which starts with "{")."""
    if isinstance(data, Path) or (isinstance(data, str) and not data.lstrip().startswith("{")):
        return Path(data)
    return None


def _not_utf8(path: Path, error: UnicodeDecodeError) -> ValueError:
    """The error for a data file that is not UTF-8 text, naming the byte."""
    return ValueError(
        f"data file {path}: not UTF-8 text (byte {error.object[error.start]:#04x} at offset {error.start}: "
        f"{error.reason}): is it a JSON data file? Stan JSON is UTF-8: save it as UTF-8"
    )


def _data_file(path: str | Path) -> Path:
    """``path``, if it names a file; else FileNotFoundError or IsADirectoryError saying what is expected."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(
            f"Stan data file {path} is a folder: give the JSON data file itself, such as {path / 'data.json'}"
        )
    if not path.is_file():
        raise FileNotFoundError(f"Stan data file not found: {path}")
    return path


def _one_each(pairs: list[tuple[str, Any]], path: Path) -> dict[str, Any]:
    """A JSON object's pairs as a dict, refusing a name given twice (Stan refuses it; json keeps the last)."""
    found: dict[str, Any] = {}
    for name, value in pairs:
        if name in found:
            raise ValueError(
                f"data file {path}: {name!r} is given twice; Stan refuses a repeated name (Python's JSON "
                "reader would keep the last one silently): keep one"
            )
        found[name] = value
    return found


def _as_array(value: Any) -> Any:
    """A JSON list of numbers (nested to any depth, rectangular) as an int or float array; else ``value``."""
    if not isinstance(value, list):
        return value
    try:
        array = np.asarray(value)
    except ValueError:  # ragged
        return value
    return array if array.dtype.kind in "if" else value


def write_data(path: str | Path, data: Mapping[str, Any]) -> Path:
    """Write a dict of arrays and scalars as a Stan JSON data file."""
    stanio.write_stan_json(str(path), data)
    return Path(path)


def data_error(message: str, data: StanData, text: str, program: str) -> StanError:
    """The error to raise where Stan refuses ``data`` (its JSON ``text``) for ``program``: Stan's message,
    with the data file and the value at fault named where Stan names neither.

    Stan names the variable, but says only "non-int values" of an int
    beyond 32 bits or written as a real (3.0), "mismatch in number
    dimensions" of a missing vector, and ``std::bad_alloc`` of a size that
    exhausts the memory (:class:`StanMemoryError`).
    """
    values = data if isinstance(data, Mapping) else _parsed(text)
    stage = "while reading its data and running its transformed data block"
    memory = out_of_memory(message, program, stage, int_values(values or {}))
    if memory is not None:
        return memory
    explained = None if values is None else _explained(message.removeprefix("Exception: "), values)
    if message.startswith("Error in JSON parsing"):  # Stan's, over four lines
        explained = " ".join(message.split())
    path = _data_path(data)
    source = f"data file {path}: " if path is not None else ""
    return StanDataError(source + (explained or message))


@contextlib.contextmanager
def data_file_named(path: str | Path | None) -> Iterator[None]:
    """Name the data file ``path`` in a :class:`StanDataError` raised inside.

    Where a file's data reach Stan as a dict (read, and ``beta`` added, see
    :func:`~stanaccel.sampling.program.prepare_data`), Stan's message cannot name it.
    """
    try:
        yield
    except StanDataError as error:
        if path is None or str(error).startswith("data file "):
            raise
        raise StanDataError(f"data file {path}: {error}") from None


def run_error(what: str, message: str, detail: str, data_json: str, program: str) -> StanError:
    """The error to raise where a run of a Stan service (``what``: "NUTS chain 0") failed with ``message``.

    A :class:`StanMemoryError` where Stan ran out of memory; else a
    :class:`StanEvaluationError` with Stan's message and its last messages
    (``detail``), and, where no start point was found, the data values that
    may be why (see :func:`suspect_values`).
    """
    values = _parsed(data_json) or {}
    memory = out_of_memory(message, program, f"while running {what}", int_values(values))
    if memory is not None:
        return memory
    cause = suspect_values(values) if "Initialization failed" in message else ""
    return StanEvaluationError(f"{what} failed: {message}\n{detail}".strip() + cause)


def int_values(data: Mapping[str, Any]) -> dict[str, int]:
    """The data's int scalars (the sizes a program declares its variables with)."""
    return {
        name: int(value)
        for name, value in data.items()
        if isinstance(value, int | np.integer) and not isinstance(value, bool)
    }


def nonfinite_values(data: Mapping[str, Any]) -> list[str]:
    """Each data variable holding NaN or infinity, as ``"y[4] = nan"`` (its first such entry, 1-based)."""
    return _first_entries(data, lambda a: ~np.isfinite(a))


def extreme_values(data: Mapping[str, Any]) -> list[str]:
    """Each data variable holding a finite value beyond ±:data:`EXTREME` or nonzero within ±1/EXTREME,
    as ``"y[3] = 1e+300"`` (its first such entry, 1-based)."""

    def extreme(array: np.ndarray) -> np.ndarray:
        magnitude = np.abs(array)
        return np.isfinite(array) & ((magnitude > EXTREME) | ((magnitude < 1 / EXTREME) & (magnitude > 0)))

    return _first_entries(data, extreme)


def suspect_values(data: Mapping[str, Any]) -> str:
    """For a program that found no point to start from: the data values that may be why, or ""."""
    found = nonfinite_values(data) + extreme_values(data)
    if not found:
        return ""
    return (
        f"\nThe data hold {'; '.join(found)}: NaN, infinity, or a value {EXTREME_RANGE} (where arithmetic "
        "overflows) often leaves the log density infinite at every start; correct or rescale those values"
    )


def _first_entries(data: Mapping[str, Any], test) -> list[str]:
    """Each variable's first entry (1-based) where ``test`` of its float array holds: ``"y[3] = 1e+300"``."""
    found = []
    for name, value in data.items():
        try:
            array = np.asarray(value, dtype=float)
        except (TypeError, ValueError, OverflowError):
            continue
        bad = np.argwhere(test(array))
        if len(bad):
            index = "".join(f"[{i + 1}]" for i in bad[0])
            more = f" and {len(bad) - 1} more" if len(bad) > 1 else ""
            found.append(f"{name}{index} = {array[tuple(bad[0])]:g}{more}")
    return found


def _parsed(data: Mapping[str, Any] | str) -> Mapping[str, Any] | None:
    """The data as a mapping (JSON text parsed); None for text that is not a JSON object."""
    if isinstance(data, Mapping):
        return data
    try:
        parsed = json.loads(data)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _explained(message: str, data: Mapping[str, Any]) -> str | None:
    """Stan's message on data it refused, rewritten to name the value at fault; None if it needs no help."""
    twice = re.match(r"Attempt to redefine variable: (\w+)", message)
    if twice:
        return f"data variable {twice[1]} is given twice; Stan refuses a repeated name: keep one"
    text = re.match(r"Variable: (\w+), error: string values not allowed", message)
    if text:
        return _text_value(text[1], data.get(text[1]))
    bounds = _out_of_bounds(message, data)
    if bounds:
        return bounds
    named = re.search(r"variable name=(\w+)", message)
    if named is None:
        return None
    name = named[1]
    line = re.search(r"\(in ('.*?', line \d+, column \d+ to column \d+)\)", message)
    where = f" (declared in {line[1]})" if line else ""
    if name not in data and ("variable does not exist" in message or "dims found=()" in message):
        return f"data variable {name}{where} is missing: the program declares it, so the data must give it"
    shapes = re.search(r"dims declared=(\(.*?\)); dims found=(\(.*?\))", message)
    if "mismatch in" in message and shapes:
        sizes = ", ".join(f"{k} = {v}" for k, v in list(int_values(data).items())[:8])
        given = f" (the data's int values: {sizes})" if sizes else ""
        return (
            f"data variable {name}{where} has the shape {shapes[2]} in the data, but the program declares "
            f"{shapes[1]}{given}"
        )
    if "int variable contained non-int values" in message and name in data:
        fault = _not_an_int(data[name])
        if fault:
            entry, why = fault
            return f"data variable {name}{entry}{where}: {why}"
    return None


STAN_TEXT_NUMBERS = ("NaN", "Inf", "-Inf", "Infinity", "-Infinity")
"""The strings Stan's JSON reader takes as numbers; any other string in the data it refuses."""


def _text_value(name: str, value: Any) -> str:
    """Why Stan refused ``name``'s value for holding a string: its first string entry, and what to write."""
    found = next(
        ((at, v) for at, v in _entries(value) if isinstance(v, str) and v not in STAN_TEXT_NUMBERS), None
    )
    numbers = ", ".join(f'"{t}"' for t in STAN_TEXT_NUMBERS)
    if found is None:
        return f"data variable {name} holds text; Stan data are numbers (the only text it reads is {numbers})"
    at, entry = found
    try:
        number = float(entry)
    except ValueError:
        number = math.nan
    written = (
        f": write {number:g} without the quotes" if math.isfinite(number) else f"; give {name} as numbers"
    )
    index = "".join(f"[{i}]" for i in at)
    return (
        f"data variable {name}{index} = {json.dumps(entry)} is text, and Stan data are numbers{written} (the "
        f"only text Stan reads as a number is {numbers})"
    )


def _out_of_bounds(message: str, data: Mapping[str, Any]) -> str | None:
    """Stan's message on a data value outside its declared bounds (or a declared type it does not fit,
    such as ``cov_matrix``), in plain words naming the variable; None for another message, or one about a
    variable that is not in the data (a transformed data variable's)."""
    found = re.match(
        r"(?:[\w:]+: )?(\w+)((?:\[\d+(?:, ?\d+)*\])*) (is .*?)"
        r"(?: \(in ('.*?', line \d+, column \d+ to column \d+)\))?\.?$",
        message,
    )
    if found is None or found[1] not in data:
        return None
    name, index, what, line = found[1], found[2], found[3].rstrip("."), found[4]
    what = re.sub(r"-?\d+\.\d{6}\b", lambda number: f"{float(number[0]):g}", what)  # 9.000000 -> 9
    where = f" (in {line})" if line else ""
    if ", but must be " in what:
        return (
            f"data variable {name}{index} {what}: outside the bounds the program declares for it{where}; "
            "correct the data, or the declaration"
        )
    return (
        f"data variable {name}{index} {what}, which its declaration{where} does not allow: correct the data"
    )


def _not_an_int(value: Any) -> tuple[str, str] | None:
    """The first entry of ``value`` (an int variable's) that Stan cannot read as an int, as ``(" = 1.5",
    why)`` (``"[2] = 1.5"`` in an array); None if there is none."""
    value = value.tolist() if isinstance(value, np.ndarray | np.generic) else value
    low, high = INT_RANGE
    written_as_real = None
    for at, number in _entries(value):
        entry = "".join(f"[{i}]" for i in at) + f" = {number!r}"
        if isinstance(number, bool) or not isinstance(number, int | float):
            continue
        if isinstance(number, float) and not math.isfinite(number):
            return entry, "an int holds whole numbers, not infinity or NaN"
        if isinstance(number, float) and not number.is_integer():
            return entry, "not a whole number, and the program declares it int"
        if not low <= number <= high:
            return (
                entry,
                f"beyond Stan's int range, {low} to {high} (32 bits); declare it real, or give it in "
                "larger units",
            )
        if isinstance(number, float) and written_as_real is None:
            written_as_real = (
                entry,
                (
                    "given as a real, and the program declares it int; Stan reads a number with a decimal "
                    f"point or an exponent (such as {number!r} or 1e3) as a real: write {int(number)}"
                ),
            )
    return written_as_real


def _entries(value: Any, at: tuple[int, ...] = ()):
    """The entries of nested lists, each with its 1-based index."""
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from _entries(item, (*at, i + 1))
    else:
        yield at, value
