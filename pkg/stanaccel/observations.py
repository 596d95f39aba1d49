"""Which data of a Stan program are per observation, so that samplers can subsample them.

Tempering by subsampling (SPT, STT) and subset approximations run the same
program on a subset of the observations. stanaccel cannot tell from a
program which data variables hold one entry per observation, so the user
declares it, the same way in Python, TOML and on the command line::

    observations = { count = "N", fields = ["x", "y"] }

``count`` names the integer data variable holding the number of
observations N, and ``fields`` the variables indexed by observation along
their first axis (a ``vector[N]``, an ``array[N] ...`` or a ``matrix[N, K]``).
The declaration is checked against the data's shapes before sampling. The
bundled programs declare theirs (:data:`BUNDLED`).
"""

from __future__ import annotations

import reprlib
from dataclasses import dataclass
from typing import Any

import numpy as np

EXAMPLE = 'observations = { count = "N", fields = ["x", "y"] }'


@dataclass(frozen=True)
class Observations:
    """The number of observations (``count``) and the data indexed by observation (``fields``)."""

    count: str
    fields: tuple[str, ...]

    @classmethod
    def parse(cls, value: Any, where: str = "observations") -> Observations:
        """From an Observations, or a mapping ``{"count": "N", "fields": ["x", "y"]}``.

        Raises
        ------
        ValueError
            Naming ``where`` and showing the expected form.
        """
        if isinstance(value, Observations):
            return value
        ok = isinstance(value, dict) and set(value) == {"count", "fields"}
        names = value.get("fields") if ok else None
        ok = ok and isinstance(value["count"], str) and isinstance(names, list | tuple) and len(names) > 0
        if not ok or not all(isinstance(n, str) for n in names):
            raise ValueError(
                f"{where} = {reprlib.repr(value)}: expected a table {EXAMPLE.split(' = ', 1)[1]}"
            )
        return cls(value["count"], tuple(names))

    def check(self, data: dict[str, Any], where: str = "observations") -> int:
        """The number of observations, after checking the declaration against ``data``.

        Raises
        ------
        ValueError
            A named variable is missing, ``count`` is not a positive integer,
            or a field's first axis does not have ``count`` entries.
        """
        have = ", ".join(sorted(data)) or "nothing"
        for name in (self.count, *self.fields):
            if name not in data:
                raise ValueError(f"{where}: the data have no variable {name!r} (they have {have})")
        n = data[self.count]
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 2:
            raise ValueError(f"{where}: count {self.count!r} must be an integer of at least 2, not {n!r}")
        for name in self.fields:
            shape = np.shape(data[name])
            if not shape or shape[0] != n:
                rows = f"has shape {shape}" if shape else "is a scalar"
                raise ValueError(
                    f"{where}: field {name!r} {rows}, but a field must have one entry per observation "
                    f"along its first axis ({self.count} = {n})"
                )
        return int(n)

    def take(self, data: dict[str, Any], indices) -> dict[str, Any]:
        """The data restricted to the observations at ``indices`` (``count`` set to their number)."""
        indices = np.asarray(indices, dtype=int)
        out = dict(data)
        for name in self.fields:
            out[name] = np.asarray(data[name])[indices]
        out[self.count] = len(indices)
        return out


BUNDLED = {
    "gp_ard": Observations("N", ("x", "y")),
    "mvn_mean": Observations("N", ("x",)),
    "logistic": Observations("N", ("X", "y")),
}
"""The declarations of the bundled programs, by name."""


def guess(data: dict[str, Any]) -> str:
    """A declaration that fits the data's shapes, for an error message's suggestion (or "")."""
    for name, value in data.items():
        if isinstance(value, int) and not isinstance(value, bool) and value >= 2:
            fields = [k for k, v in data.items() if np.ndim(v) >= 1 and np.shape(v)[0] == value]
            if fields:
                return f'observations = {{ count = "{name}", fields = {fields!r} }}'.replace("'", '"')
    return ""
