"""Draws to ArviZ InferenceData.

Diagnostics read draws and know no sampler: a result object takes part by
offering ``inference_groups()``, a dict of group name to a dict of arrays
with leading (chain, draw) axes, plus an optional ``"attrs"`` dict. Groups
outside ArviZ's schema are kept as they are: ``unconstrained_posterior``
(per draw) and ``adaptation`` (per chain: step size, inverse metric).

Every dimension after (chain, draw) is numbered from 1, as Stan numbers
array elements, so ``summary()`` names a row ``b[1]`` for Stan's ``b[1]``
(ArviZ's ``index_origin=1``; its default coordinates count from 0). A Stan
program's ``log_lik`` is the ``log_likelihood`` group
(:mod:`stanaccel.stan.quantities`), where ``arviz.loo`` reads it.
"""

from __future__ import annotations

import warnings
from typing import Any, Protocol

import numpy as np
import xarray as xr

from stanaccel.diagnostics._arviz import az

STANDARD_GROUPS = (
    "posterior",
    "sample_stats",
    "log_likelihood",
    "warmup_posterior",
    "warmup_sample_stats",
    "warmup_log_likelihood",
)
WARMUP_GROUPS = ("warmup_posterior", "warmup_sample_stats", "warmup_log_likelihood")
INDEX_ORIGIN = 1  # Stan's: b[1] is the first element of b
PER_CHAIN_GROUPS = ("adaptation",)  # one value per chain (step size, inverse metric), no draw axis


class HasInferenceGroups(Protocol):
    def inference_groups(self) -> dict[str, Any]: ...


def to_inference_data(result: HasInferenceGroups | dict[str, Any]) -> az.InferenceData:
    """Convert a sampler result (or its groups dict) to InferenceData.

    Warm-up groups are kept whenever they hold draws.
    """
    groups = result if isinstance(result, dict) else result.inference_groups()
    attrs = {k: _attr_value(v) for k, v in groups.get("attrs", {}).items()}
    standard = {g: groups[g] for g in STANDARD_GROUPS if groups.get(g)}
    has_warmup = any(_n_draws(standard.get(g)) for g in WARMUP_GROUPS)
    if not has_warmup:
        for group in WARMUP_GROUPS:
            standard.pop(group, None)
    with warnings.catch_warnings():
        # ArviZ guesses the axes when there are fewer draws than chains (a run stopped early);
        # ours are always (chain, draw, ...), so the guess's warning says nothing here.
        warnings.filterwarnings("ignore", message="More chains .* than draws")
        idata = az.from_dict(**standard, save_warmup=has_warmup, index_origin=INDEX_ORIGIN)
    extra = {g: v for g, v in groups.items() if g not in STANDARD_GROUPS and g != "attrs" and v}
    if extra:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*group is not defined in the InferenceData scheme")
            warnings.filterwarnings("ignore", message="More chains .* than draws")
            for name, values in extra.items():
                if name in PER_CHAIN_GROUPS:
                    dataset = _per_chain_dataset(values, attrs)
                else:
                    dataset = az.dict_to_dataset(values, attrs=attrs, index_origin=INDEX_ORIGIN)
                idata.add_groups({name: dataset})
    for group in idata.groups():  # az.from_dict drops attrs in ArviZ 0.23
        idata[group].attrs.update(attrs)
    return idata


def _per_chain_dataset(values: dict[str, Any], attrs: dict) -> xr.Dataset:
    """A dataset of per-chain values (ArviZ's helpers assume a draw axis)."""
    variables, coords = {}, {}
    for key, value in values.items():
        array = np.asarray(value)
        dims = ["chain"] + [f"{key}_dim_{i}" for i in range(array.ndim - 1)]
        variables[key] = (dims, array)
        coords.update(
            {dim: np.arange(size) + INDEX_ORIGIN for dim, size in zip(dims[1:], array.shape[1:], strict=True)}
        )
    n_chains = len(np.asarray(next(iter(values.values()))))
    return xr.Dataset(variables, coords={"chain": np.arange(n_chains), **coords}, attrs=attrs)


def _n_draws(group: dict | None) -> int:
    if not group:
        return 0
    first = np.asarray(next(iter(group.values())))
    return first.shape[1] if first.ndim >= 2 else 0


def _attr_value(value: Any) -> Any:
    """netCDF attributes must be numbers, strings or arrays of them."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float, str, np.number)):
        return value
    return str(value)
