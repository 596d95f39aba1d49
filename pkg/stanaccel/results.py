"""One result type: the same verbs for every method's output.

A NUTS fit (:class:`~stanaccel.stan.nuts.NutsFit`), a kernel run
(:class:`~stanaccel.kernels.driver.KernelRun`) and the GP density fits
(:mod:`stanaccel.gpdensity`) each describe their draws by
``inference_groups()`` (see :mod:`stanaccel.diagnostics.inference_data`).
:class:`Result` turns that one method into the verbs a user reaches for, as
cmdstanpy's fit objects offer them:

- ``draws()``: the posterior draws as one NumPy array, ``column_names()``
  naming its columns as Stan does (``b[1]``, ``m[2,1]``);
- ``to_inference_data()``: ArviZ InferenceData (made once, then cached);
- ``summary()``: ArviZ's summary table of the posterior;
- ``metrics()``: ESS, R-hat and ESS per second (:func:`~stanaccel.diagnostics.convergence_metrics`);
- ``save(path)``: a netCDF file (an error naming the path where it cannot be written).

Why a mixin: the result classes stay what they are (dataclasses, or the
dicts the GP density functions have always returned) and gain the verbs by
one base class and, for ``metrics()``, a hook naming their cost
(``_metrics_arguments()``). Samplers in ``kernels/`` and ``stan/`` import
this module, so it imports nothing heavy: ArviZ and the diagnostics package
are loaded inside the methods that need them.
"""

from __future__ import annotations

import os
import reprlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from stanaccel.names import stan_names

if TYPE_CHECKING:
    import arviz
    import pandas

_CACHE = "_result_inference_data"  # the instance attribute holding the InferenceData, once made


@dataclass
class Quantities:
    """Named values at each draw of a run, as a sampler's ``constrain`` function may give them.

    :func:`stanaccel.stan.quantities.stan_quantities` gives them for a Stan
    program (parameters, transformed parameters, generated quantities); a
    Python target's ``constrain`` gives a plain dict, which is ``posterior`` alone.

    Attributes
    ----------
    posterior : dict of ndarray (chains, draws, ...)
        The variables of the posterior group.
    log_likelihood : dict of ndarray (chains, draws, ...)
        The variables of the ``log_likelihood`` group (``log_lik``), if any.
    failed : ndarray (chains, draws) of bool, optional
        Draws whose values could not be computed (a ``reject`` in generated
        quantities): their values are NaN.
    error : str, optional
        The first such draw's error message.
    """

    posterior: dict[str, np.ndarray]
    log_likelihood: dict[str, np.ndarray] = field(default_factory=dict)
    failed: np.ndarray | None = None
    error: str | None = None

    @classmethod
    def of(cls, values: Quantities | dict[str, np.ndarray]) -> Quantities:
        """``values`` as Quantities: a dict is the posterior alone."""
        return values if isinstance(values, Quantities) else cls(dict(values))


class Result(ABC):
    """The verbs shared by every result; a subclass provides ``inference_groups()`` (abstract).

    The InferenceData is built on the first call of ``to_inference_data()``
    (or of a verb that needs it) and kept on the instance, outside any
    dataclass field, so it takes no part in ``==`` or ``repr``. A result is
    not changed after it is made; one that is changed afterwards should be
    converted with ``stanaccel.diagnostics.to_inference_data`` instead.
    """

    __slots__ = ()  # adds no fields: dataclass subclasses keep their __init__, == and repr

    @abstractmethod
    def inference_groups(self) -> dict[str, Any]:
        """Groups for ``stanaccel.diagnostics.to_inference_data``; every subclass provides them."""

    def _metrics_arguments(self) -> dict[str, Any]:
        """Keyword arguments of ``convergence_metrics`` that describe this result's cost.

        ``wall_seconds``, ``sampling_seconds``, ``gradient_evaluations``, as
        far as the result knows them; none by default.
        """
        return {}

    def to_inference_data(self) -> arviz.InferenceData:
        """The result as ArviZ InferenceData, made on the first call and then reused.

        Every call returns the same object; copy it before changing it.
        """
        cached = getattr(self, _CACHE, None)
        if cached is not None:
            return cached
        from stanaccel.diagnostics import to_inference_data

        idata = to_inference_data(self.inference_groups())  # the groups: a result may itself be a dict
        try:
            object.__setattr__(self, _CACHE, idata)
        except AttributeError:  # a subclass with __slots__ and no __dict__: no cache
            pass
        return idata

    def summary(self, **kwargs: Any) -> pandas.DataFrame:
        """ArviZ's summary of the posterior group: one row per scalar parameter.

        Columns mean, sd, HDI, MCSE, ESS bulk and tail, R-hat. Keyword
        arguments go to :func:`stanaccel.diagnostics.summary` (``var_names``).
        """
        from stanaccel.diagnostics import summary

        return summary(self.to_inference_data(), **kwargs)

    def metrics(self) -> dict[str, Any]:
        """ESS (bulk, tail), R-hat and efficiency: :func:`stanaccel.diagnostics.convergence_metrics`.

        Returns the JSON-ready dict with ``ess_bulk_min``, ``ess_tail_min``,
        ``rhat_max`` (NaN for one chain), per-parameter values, and, where the
        result knows its cost, ``ess_per_second`` and ``ess_per_1000_gradients``;
        ``converged`` (False when R-hat, ESS, divergences or tree depth say the
        draws are not to be trusted) and ``warnings``, the reasons
        (:func:`stanaccel.diagnostics.convergence_warnings`).
        """
        from stanaccel.diagnostics import convergence_metrics

        return convergence_metrics(self.to_inference_data(), **self._metrics_arguments())

    def save(self, path: str | Path) -> Path:
        """Write the InferenceData to a netCDF file at ``path``, creating its folder; returns ``path``.

        ``arviz.from_netcdf`` reads it back. The file is written beside
        ``path`` and renamed onto it, so it is never seen half written.

        Raises
        ------
        TypeError, ValueError
            ``path`` is no file name (not a str or Path; empty, or ``.``).
        stanaccel.diagnostics.files.OutputError
            ``path`` cannot be written (a full disk, a folder in its place,
            no permission): the message names it and says why. Nothing is
            written elsewhere; the result is unchanged, to save again.
        """
        from stanaccel.diagnostics.files import save_netcdf

        if not isinstance(path, str | os.PathLike):
            raise TypeError(
                f"save(path): path must be a netCDF file's name, a str or Path such as 'fit.nc'; "
                f"not {type(path).__name__} ({reprlib.repr(path)})"
            )
        if Path(path).name in ("", "..") or str(path).endswith(os.sep):
            raise ValueError(
                f"save(path): path = {str(path)!r} names no file: give a file name such as 'fit.nc'"
            )
        return save_netcdf(self.to_inference_data(), path)

    def draws(self, *, concat_chains: bool = False) -> np.ndarray:
        """The posterior group's draws as one array.

        Returns
        -------
        ndarray (chains, draws, n), or (chains * draws, n) with ``concat_chains``
            The posterior variables in the order of ``inference_groups()["posterior"]``,
            each flattened in row-major (C) order after its (chain, draw) axes
            and set side by side, so ``n`` is the number of scalars.
            :meth:`column_names` names the columns. For a Stan program these are
            its parameters, transformed parameters and generated quantities;
            ``log_lik`` is in the ``log_likelihood`` group, not here.
        """
        posterior = self.inference_groups()["posterior"]
        columns = []
        for value in posterior.values():
            array = np.asarray(value)
            columns.append(array.reshape(*array.shape[:2], int(np.prod(array.shape[2:], dtype=int))))
        out = np.concatenate(columns, axis=-1)
        return out.reshape(-1, out.shape[-1]) if concat_chains else out

    def column_names(self) -> list[str]:
        """The name of each column of :meth:`draws`, as Stan names the scalars: ``b[1]``, ``m[1,2]``.

        Indices count from 1 in row-major order (the last index fastest),
        as ``draws()`` flattens each variable and as ``summary()`` names its rows.
        """
        names = []
        for name, value in self.inference_groups()["posterior"].items():
            names += stan_names(name, np.shape(value)[2:])
        return names
