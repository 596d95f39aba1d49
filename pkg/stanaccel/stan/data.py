"""Stan data in and out: dicts of NumPy arrays and Stan JSON files.

Stan JSON is the format CmdStan, cmdstanpy and BridgeStan read; stanaccel
uses the Stan team's own serialiser (``stanio``, which cmdstanpy uses) so
that a data file written here reads the same everywhere.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import stanio

StanData = Mapping[str, Any] | str | Path | None


def data_to_json(data: StanData) -> str:
    """Return Stan JSON text for a dict, a JSON file path, JSON text, or None."""
    if data is None:
        return "{}"
    if isinstance(data, Mapping):
        return stanio.dump_stan_json(data)
    text = str(data)
    if isinstance(data, Path) or not text.lstrip().startswith("{"):
        path = Path(text)
        if not path.is_file():
            raise FileNotFoundError(f"Stan data file not found: {path}")
        return path.read_text()
    return text


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
    FileNotFoundError
        No such file.
    ValueError
        The file is not JSON, or not a JSON object (naming the file and the place).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Stan data file not found: {path}")
    try:
        with open(path) as handle:
            data = json.load(handle)
    except json.JSONDecodeError as error:
        raise ValueError(
            f"data file {path}: not valid JSON: {error.msg} at line {error.lineno} column {error.colno}; "
            'Stan data are a JSON object such as {"N": 3, "y": [1.5, 2.0, 0.1]}'
        ) from None
    except UnicodeDecodeError as error:
        raise ValueError(f"data file {path}: not a JSON text file ({error.reason})") from None
    if not isinstance(data, dict):
        raise ValueError(
            f"data file {path}: expected a JSON object of variable name -> value, not a {type(data).__name__}"
        )
    return {name: _as_array(value) for name, value in data.items()}


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
