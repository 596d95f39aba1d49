"""The space of sampler settings a tuner searches, and its map to the unit cube.

A :class:`Space` is a list of dimensions, each a named setting:
:class:`Integer`, :class:`Real` (on a linear or log scale) or
:class:`Categorical`. The Gaussian process of the tuner works on the unit
cube, so each dimension maps its values to [0, 1] and back. The acquisition
is maximised over an explicit candidate set (:meth:`Space.candidates`): every
value of the discrete dimensions with a Sobol sample of the continuous ones.
"""

from __future__ import annotations

import difflib
import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import qmc

from stanaccel.errors import ConfigError

CANDIDATE_LIMIT = 20000
"""The largest candidate set :meth:`Space.candidates` makes."""


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


@dataclass(frozen=True)
class Integer:
    """An integer setting from ``low`` to ``high`` inclusive, spaced evenly on the unit interval."""

    name: str
    low: int
    high: int

    def __post_init__(self):
        _check_name(self.name)
        for bound in (self.low, self.high):
            if not isinstance(bound, numbers.Integral) or isinstance(bound, bool):
                raise ValueError(f"{self.name}: integer bounds expected, not {bound!r}")
        _check_bounds(self.name, self.low, self.high)
        object.__setattr__(self, "low", int(self.low))
        object.__setattr__(self, "high", int(self.high))

    def to_unit(self, values) -> np.ndarray:
        return (np.asarray(values, dtype=float) - self.low) / (self.high - self.low)

    def from_unit(self, unit) -> list[int]:
        values = np.rint(self.low + np.clip(unit, 0, 1) * (self.high - self.low))
        return [int(v) for v in values]

    def values(self, most: int | None = None) -> list[int]:
        """Every value, or ``most`` of them evenly spaced when there are more."""
        count = self.high - self.low + 1
        if most is None or count <= most:
            return list(range(self.low, self.high + 1))
        return sorted({int(v) for v in np.rint(np.linspace(self.low, self.high, most))})

    def random(self, n: int, rng: np.random.Generator) -> list[int]:
        return [int(v) for v in rng.integers(self.low, self.high, size=n, endpoint=True)]


@dataclass(frozen=True)
class Real:
    """A real setting in [``low``, ``high``], on a log scale when ``log`` (for scales and step sizes)."""

    name: str
    low: float
    high: float
    log: bool = False

    def __post_init__(self):
        _check_name(self.name)
        for bound in (self.low, self.high):
            if not _is_number(bound) or not math.isfinite(bound):
                raise ValueError(f"{self.name}: finite bounds expected, not {bound!r}")
        _check_bounds(self.name, self.low, self.high)
        object.__setattr__(self, "low", float(self.low))
        object.__setattr__(self, "high", float(self.high))
        if self.log and self.low <= 0:
            raise ValueError(f"{self.name}: a log scale needs a positive low bound, not {self.low!r}")

    def _scaled(self, values):
        return np.log(values) if self.log else np.asarray(values, dtype=float)

    def to_unit(self, values) -> np.ndarray:
        low, high = self._scaled([self.low, self.high])
        return (self._scaled(np.asarray(values, dtype=float)) - low) / (high - low)

    def from_unit(self, unit) -> list[float]:
        low, high = self._scaled([self.low, self.high])
        values = low + np.clip(unit, 0, 1) * (high - low)
        values = np.clip(np.exp(values) if self.log else values, self.low, self.high)
        return [float(v) for v in values]

    def random(self, n: int, rng: np.random.Generator) -> list[float]:
        return self.from_unit(rng.random(n))


@dataclass(frozen=True)
class Categorical:
    """A setting taking one of ``choices``.

    Numeric choices are points of the unit interval at their values scaled by
    the range of the choices (so the Gaussian process sees 0.2 as near 0.4),
    a single choice sits at 0. Other choices sit at their index scaled to [0,
    1], which tells the Gaussian process that neighbours in the listed order
    are alike: list them in an order that means something.
    """

    name: str
    choices: tuple

    def __post_init__(self):
        _check_name(self.name)
        choices = tuple(self.choices) if isinstance(self.choices, list | tuple) else None
        if not choices:
            raise ValueError(f"{self.name}: a categorical setting needs a non-empty list of choices")
        if len(set(choices)) != len(choices):
            raise ValueError(f"{self.name}: repeated choices in {list(choices)}")
        object.__setattr__(self, "choices", choices)

    @property
    def numeric(self) -> bool:
        return all(_is_number(c) for c in self.choices)

    def points(self) -> np.ndarray:
        """Each choice's point on the unit interval."""
        if self.numeric:
            values = np.array(self.choices, dtype=float)
            spread = values.max() - values.min()
            return (values - values.min()) / spread if spread > 0 else np.zeros(len(values))
        count = len(self.choices)
        return np.arange(count) / (count - 1) if count > 1 else np.zeros(1)

    def to_unit(self, values) -> np.ndarray:
        points = self.points()
        out = []
        for value in values:
            if value not in self.choices:
                raise ValueError(f"{self.name} = {value!r}: not one of {list(self.choices)}")
            out.append(points[self.choices.index(value)])
        return np.array(out, dtype=float)

    def from_unit(self, unit) -> list:
        """The choice whose point is nearest each unit value."""
        nearest = np.abs(np.asarray(unit, dtype=float)[:, None] - self.points()[None, :]).argmin(axis=1)
        return [self.choices[i] for i in nearest]

    def values(self, most: int | None = None) -> list:
        return list(self.choices)

    def random(self, n: int, rng: np.random.Generator) -> list:
        return [self.choices[i] for i in rng.integers(len(self.choices), size=n)]


Dimension = Integer | Real | Categorical


def _check_name(name) -> None:
    if not isinstance(name, str) or not name:
        raise ValueError(f"a dimension's name must be a non-empty string, not {name!r}")


def _check_bounds(name: str, low, high) -> None:
    if not low < high:
        raise ValueError(f"{name}: empty range, low {low!r} must be below high {high!r}")


class Space:
    """The settings a tuner searches: named dimensions, mapped to the unit cube in their order.

    Parameters
    ----------
    dimensions : list of Integer, Real, Categorical
        At least one, with distinct names.
    """

    def __init__(self, dimensions: list[Dimension]):
        self.dimensions = list(dimensions)
        if not self.dimensions:
            raise ValueError("a tuning space needs at least one dimension")
        for dimension in self.dimensions:
            if not isinstance(dimension, Integer | Real | Categorical):
                raise ValueError(f"not a dimension (Integer, Real or Categorical): {dimension!r}")
        names = [d.name for d in self.dimensions]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"a tuning space names each setting once; repeated: {', '.join(repeated)}")

    def __repr__(self) -> str:
        return f"Space({self.dimensions!r})"

    @property
    def names(self) -> list[str]:
        return [d.name for d in self.dimensions]

    @property
    def continuous(self) -> list[int]:
        """The indices of the :class:`Real` dimensions."""
        return [i for i, d in enumerate(self.dimensions) if isinstance(d, Real)]

    @classmethod
    def from_dict(cls, table: dict, where: str = "space") -> Space:
        """A space from a workflow file's table, one key per setting.

        ``{"walk_length": {"int": [1, 300]}, "step_size": {"log": [1e-3, 1.0]},
        "gamma": {"choices": [0.0, 0.2]}, "x": {"real": [0, 1]}}``. Errors are
        :class:`ConfigError` naming the key.
        """
        if not isinstance(table, dict) or not table:
            raise ConfigError(f"{where}: expected a non-empty table of settings to tune")
        forms = "{ int = [LOW, HIGH] }, { real = [LOW, HIGH] }, { log = [LOW, HIGH] } or { choices = [...] }"
        dimensions = []
        for name, spec in table.items():
            shown = f"{where}.{name}"
            if not isinstance(spec, dict) or len(spec) != 1:
                raise ConfigError(f"{shown}: expected one of {forms}")
            ((form, value),) = spec.items()
            try:
                if form == "choices":
                    if not isinstance(value, list | tuple):
                        raise ValueError(f"{name}: expected a list of choices, not {value!r}")
                    dimensions.append(Categorical(name, tuple(value)))
                elif form in ("int", "real", "log"):
                    if not isinstance(value, list | tuple) or len(value) != 2:
                        raise ValueError(f"{name}: expected [LOW, HIGH], not {value!r}")
                    if form == "int":
                        dimensions.append(Integer(name, *value))
                    else:
                        dimensions.append(Real(name, *value, log=form == "log"))
                else:
                    raise ValueError(f"{name}: unknown form {form!r}; expected {forms}")
            except ValueError as error:
                raise ConfigError(f"{shown}: {error}") from None
        return cls(dimensions)

    def check(
        self,
        method: str | None = None,
        *,
        keys: Callable[[str], list[str]] | None = None,
        check_setting: Callable[[str, str, Any], Any] | None = None,
    ) -> Space:
        """Check that every dimension is a setting of ``method`` and inside its allowed values.

        Without a method, the space needs nothing more than the checks made
        when it was built. With one, the caller says what the method takes
        (the tuning package knows no sampler): ``keys(method)`` lists its
        settings and ``check_setting(method, name, value)`` raises
        :class:`ConfigError` for a value it refuses (``--tune`` passes
        :func:`stanaccel.sampling.config.keys` and
        :func:`~stanaccel.sampling.config.check_setting`). Returns the space;
        raises :class:`ConfigError` naming the setting and the method.
        """
        if method is None:
            return self
        if keys is None or check_setting is None:
            raise TypeError("Space.check(method) needs keys= and check_setting= (the method's settings)")
        allowed = keys(method)
        for dimension in self.dimensions:
            name = dimension.name
            if name not in allowed:
                close = difflib.get_close_matches(name, allowed, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ConfigError(
                    f"tuning space: {name!r} is not a setting of method {method!r}; "
                    f"allowed: {', '.join(allowed)}{hint}"
                )
            values = (
                dimension.choices if isinstance(dimension, Categorical) else (dimension.low, dimension.high)
            )
            for value in values:
                try:
                    check_setting(method, name, value)
                except ConfigError as error:
                    raise ConfigError(f"tuning space for method {method!r}: {error}") from None
        return self

    def contains(self, settings: dict) -> bool:
        """Whether ``settings`` has a value for every dimension, inside its range or among its choices."""
        for d in self.dimensions:
            if d.name not in settings:
                return False
            value = settings[d.name]
            if isinstance(d, Categorical):
                if value not in d.choices:
                    return False
            elif not _is_number(value) or not d.low <= value <= d.high:
                return False
            elif isinstance(d, Integer) and value != int(value):
                return False
        return True

    def to_unit(self, settings: list[dict]) -> np.ndarray:
        """The settings as points of the unit cube, (n, d), in the order of :attr:`names`."""
        for row in settings:
            missing = [n for n in self.names if n not in row]
            if missing:
                raise ValueError(f"settings {row} lack {', '.join(missing)}")
        columns = [d.to_unit([row[d.name] for row in settings]) for d in self.dimensions]
        return np.column_stack(columns) if settings else np.empty((0, len(self.dimensions)))

    def from_unit(self, unit: np.ndarray) -> list[dict]:
        """The settings at points of the unit cube (rounded to integers, nearest choices)."""
        unit = np.atleast_2d(np.asarray(unit, dtype=float))
        columns = [d.from_unit(unit[:, i]) for i, d in enumerate(self.dimensions)]
        return [dict(zip(self.names, values, strict=True)) for values in zip(*columns, strict=True)]

    def random(self, n: int, rng: np.random.Generator) -> list[dict]:
        """``n`` settings drawn uniformly (log Reals uniform on the log scale), for random search."""
        columns = [d.random(n, rng) for d in self.dimensions]
        return [dict(zip(self.names, values, strict=True)) for values in zip(*columns, strict=True)]

    def sobol(self, n: int, seed: int = 0) -> np.ndarray:
        """``n`` points of a scrambled Sobol sample of the unit cube, (n, d)."""
        return _sobol(len(self.dimensions), n, seed)

    def candidates(self, n_continuous: int = 1024, seed: int = 0, limit: int = CANDIDATE_LIMIT) -> np.ndarray:
        """The candidate set of the acquisition, as points of the unit cube, (n, d).

        Every combination of the values of the Integer and Categorical
        dimensions (the grid), each with ``n_continuous`` points of a
        scrambled Sobol sample of the Real dimensions. At most ``limit``
        points: when the grid alone is larger, each Integer keeps fewer of
        its values, evenly spaced (the largest halved until the grid fits);
        when the grid times ``n_continuous`` is larger, each grid point gets
        its own ``limit // grid`` consecutive points of one Sobol sequence,
        so every grid value is kept and the continuous sample still covers
        the box.
        """
        discrete = [i for i, d in enumerate(self.dimensions) if not isinstance(d, Real)]
        continuous = self.continuous
        grid = self._grid(discrete, limit)
        if not continuous:
            return grid
        per_point = max(1, min(n_continuous, limit // len(grid)))
        sample = _sobol(len(continuous), per_point * len(grid), seed)
        out = np.empty((per_point * len(grid), len(self.dimensions)))
        out[:, discrete] = np.repeat(grid[:, discrete], per_point, axis=0)
        out[:, continuous] = sample
        return out

    def _grid(self, discrete: list[int], limit: int) -> np.ndarray:
        """Every combination of the discrete dimensions' values (integers thinned to fit ``limit``)."""
        counts = {i: len(self.dimensions[i].values()) for i in discrete}
        integers = [i for i in discrete if isinstance(self.dimensions[i], Integer)]
        while math.prod(counts.values()) > limit and any(counts[i] > 2 for i in integers):
            largest = max(integers, key=counts.get)
            counts[largest] = max(2, counts[largest] // 2)
        axes = [self.dimensions[i].to_unit(self.dimensions[i].values(counts[i])) for i in discrete]
        grid = np.zeros((math.prod(len(a) for a in axes), len(self.dimensions)))
        if discrete:
            mesh = np.meshgrid(*axes, indexing="ij")
            grid[:, discrete] = np.column_stack([m.ravel() for m in mesh])
        return grid


def _sobol(d: int, n: int, seed: int) -> np.ndarray:
    """The first ``n`` points of a scrambled Sobol sequence in d dimensions (drawn as a power of 2)."""
    sampler = qmc.Sobol(d, scramble=True, seed=seed)
    return sampler.random_base2(max(0, math.ceil(math.log2(max(n, 1)))))[:n]
