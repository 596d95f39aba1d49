"""What a warm-up was made on, recorded with it and checked when another run borrows it.

A NUTS run's file (and a ``stanaccel sample`` file's ``adaptation``) records
the program (the model's name, its parameters' names, a digest of its code)
and a digest of the data (:class:`Provenance`, netCDF attributes). A warm-up
borrowed from it (``warmup_from``) is for the same program: one whose
parameters differ is refused. Its step size, metric and last draws are those
of the posterior it was made on; on other data, or on another version of
the program, they may be far from this posterior, and chains started there
would keep their walk to it among the draws. :func:`borrowed_mismatch` says
why a borrowed warm-up cannot be taken as it is (or that it records nothing
to check), and :func:`~stanaccel.stan.nuts.sample_nuts` then adapts again
from it (:data:`READAPT_ITERATIONS`) before drawing.
"""

from __future__ import annotations

import hashlib
import json
import weakref
from typing import Any

import numpy as np

from stanaccel.stan.model import StanModel

READAPT_ITERATIONS = 300
"""Iterations of Stan's NUTS warm-up run from a borrowed warm-up that may not fit this posterior (made on
other data, another version of the program, or recording neither): from its points, metric and step
size, with Stan's default windows (a 75-iteration initial buffer, metric windows of 25, 50 and 100, a
50-iteration final buffer); their draws are warm-up draws, not kept. Measured (4 chains x 1000 draws,
8 seeds) on a normal model (mu, sigma; 100 observations) whose data moved its posterior from (0.94, 0.55)
to (58.8, 3.3), and on ``mvn_mean`` (D = 2) moved as far: continuing at once gave standard deviations 7
times the true ones (mvn_mean, with R-hat 1.00) or chains stuck, every transition divergent (the normal
model). 300 iterations gave standard deviations within 5% of the true ones, R-hat 1.00 and a mean bulk
ESS of 2992 and 3298 against 3159 and 3349 after a fresh 1000-iteration warm-up, for 50% and 35% of its
warm-up's gradient evaluations (74% and 68% of the whole run's); 150 iterations left R-hat at 1.01 on
mvn_mean and a mean bulk ESS of 2062 on the normal model."""

ATTRS = {
    "model": "model_name",
    "parameters": "parameter_names",
    "code": "program_digest",
    "data": "data_digest",
}
"""The netCDF attribute of each field of :class:`Provenance`."""


class Provenance:
    """The program and data a run (and its warm-up) was made on.

    Attributes
    ----------
    model : str
        The model's name (``<file stem>_model``).
    parameters : tuple of str
        The names of its parameters (flat, constrained: ``theta.1``), in Stan's order.
    code : str or None
        SHA-256 of the program's text; None where not recorded (CmdStan CSV files).
    data : str or None
        A digest of the data's values (:func:`data_values_digest`); None where not recorded.
        Of a model (:meth:`of`) it is computed when first read (a file written,
        a warm-up checked, the record pickled): on big data it costs about as
        much as reading them (2 s for 2 million numbers), which a run that
        saves nothing does not pay.
    """

    def __init__(self, model: str, parameters: tuple[str, ...], code: str | None = None,
                 data: str | None = None, *, data_json: str | None = None):  # fmt: skip
        self.model, self.parameters, self.code = model, tuple(parameters), code
        self._data, self._data_json = data, data_json

    @property
    def data(self) -> str | None:
        if self._data is None and self._data_json is not None:
            self._data, self._data_json = data_values_digest(self._data_json), None
        return self._data

    def _fields(self) -> tuple:
        return self.model, self.parameters, self.code, self.data

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Provenance) and self._fields() == other._fields()

    __hash__ = None  # its data digest may be computed later

    def __repr__(self) -> str:
        return f"Provenance(model={self.model!r}, parameters={self.parameters!r}, ...)"

    def __reduce__(self):
        return Provenance, self._fields()  # the digest, not the data

    @classmethod
    def of(cls, model: StanModel) -> Provenance:
        """The program and data of ``model`` (one record per instance; the data's digest when first read)."""
        known = _known.get(model)
        if known is None:
            code = hashlib.sha256(model.program.code.encode()).hexdigest()
            known = cls(model.name, tuple(model.param_names()), code, data_json=model.data_json)
            _known[model] = known
        return known

    def attrs(self) -> dict[str, str]:
        """As netCDF attributes (the parameters' names as a JSON list; a field not recorded left out)."""
        values = {"model": self.model, "parameters": json.dumps(list(self.parameters)),
                  "code": self.code, "data": self.data}  # fmt: skip
        return {ATTRS[key]: value for key, value in values.items() if value is not None}

    @classmethod
    def from_attrs(cls, attrs: dict[str, Any]) -> Provenance | None:
        """What :meth:`attrs` wrote; None for a file that records no program (an older stanaccel's)."""
        if ATTRS["model"] not in attrs or ATTRS["parameters"] not in attrs:
            return None
        return cls(
            str(attrs[ATTRS["model"]]),
            tuple(json.loads(str(attrs[ATTRS["parameters"]]))),
            str(attrs[ATTRS["code"]]) if ATTRS["code"] in attrs else None,
            str(attrs[ATTRS["data"]]) if ATTRS["data"] in attrs else None,
        )


_known: weakref.WeakKeyDictionary[StanModel, Provenance] = weakref.WeakKeyDictionary()


def data_values_digest(data_json: str) -> str:
    """SHA-256 of the data's values, as Stan reads them from their JSON text.

    Each variable's name, shape and values as float64 (so ``[1, 2]`` and
    ``[1.0, 2.0]``, which a ``real`` reads alike, and one file written with
    other spacing or another key order, digest alike); a value that is no
    rectangle of numbers (a tuple) by its JSON text.
    """
    data = json.loads(data_json)
    digest = hashlib.sha256()
    for name in sorted(data):
        value = data[name]
        try:
            array = np.asarray(value, dtype=float)
        except (TypeError, ValueError):  # tuples, ragged lists
            digest.update(f"{name}={json.dumps(value, sort_keys=True)};".encode())
            continue
        digest.update(f"{name}:{array.shape};".encode())
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def borrowed_mismatch(recorded: Provenance | None, model: StanModel, source: str = "") -> str | None:
    """Why a borrowed warm-up may not fit ``model``'s posterior, or None where it was made on it.

    Parameters
    ----------
    recorded : Provenance or None
        What the warm-up records (None: nothing, as in a file of an older stanaccel).
    source : str
        Where it came from, for the messages (" in FILE").

    Returns
    -------
    str or None
        None where it records this program's code and data; otherwise why
        not (other data, another version of the program, or nothing to
        check), for a message such as "the warm-up in a.nc was made on other data".

    Raises
    ------
    ValueError
        It was made on a program with other parameters.
    """
    here = Provenance.of(model)
    if recorded is None:
        return (
            f"the warm-up{source} records neither its program nor its data (a file of an older stanaccel, or "
            "a WarmupState made without its provenance), so whether it was made on this posterior cannot "
            "be checked"
        )
    if recorded.parameters != here.parameters:
        raise ValueError(
            f"the warm-up{source} was made on {recorded.model}, whose parameters are "
            f"{_names(recorded.parameters)}; {here.model}'s are {_names(here.parameters)}: a warm-up is for "
            "the same program (its step size, metric and points are per parameter); run a new warm-up "
            "(leave out the earlier one), or give one made on this program"
        )
    reasons = []
    if recorded.code is not None and recorded.code != here.code:
        reasons.append(f"on another version of the program ({recorded.model}'s code differs from this one's)")
    if recorded.data is None:
        reasons.append(
            "with data it records no digest of (CmdStan CSV files name their data file, not its contents), "
            "so whether they are this run's cannot be checked"
        )
    elif recorded.data != here.data:
        reasons.append("on other data than this run's")
    return f"the warm-up{source} was made " + " and ".join(reasons) if reasons else None


def _names(names: tuple[str, ...], shown: int = 6) -> str:
    """At most ``shown`` names, and how many more."""
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more
