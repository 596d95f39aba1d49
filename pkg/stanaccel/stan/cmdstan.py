"""An existing CmdStan run as a warm-up source, read with cmdstanpy.

A user who already ran CmdStan (or cmdstanpy, or anything that writes Stan
CSV) can start stanaccel's samplers from it: the adapted step size and
inverse metric of each chain, and its last draw as the starting point.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from stanaccel.stan.model import StanModel
from stanaccel.stan.nuts import WarmupState
from stanaccel.stan.provenance import Provenance

METRIC_TYPES = {"diag_e": "diag", "dense_e": "dense"}


def cmdstan_column(flat_name: str) -> str:
    """Stan's flat name ``theta.1.2`` as CmdStan's CSV column ``theta[1,2]``."""
    name, *indices = flat_name.split(".")
    return f"{name}[{','.join(indices)}]" if indices else name


def read_warmup(csv_files: str | Path | Sequence[str | Path], model: StanModel) -> WarmupState:
    """Read the adaptation and last draws of a CmdStan NUTS run.

    Parameters
    ----------
    csv_files : path or list of paths
        The Stan CSV output files (one per chain) or their folder.
    model : StanModel
        The same program, for mapping the last draws to the unconstrained space.

    Returns
    -------
    WarmupState
        Its provenance holds the program's name and parameters, with no
        digest of the data (a CSV file names its data file, not its
        contents): a run that borrows it adapts again (see
        :func:`~stanaccel.stan.nuts.continued_settings`).

    Raises
    ------
    ValueError
        The run did not adapt (no step size or metric), or its columns do not
        match the model's parameters.
    """
    import cmdstanpy

    files = [str(csv_files)] if isinstance(csv_files, str | Path) else [str(f) for f in csv_files]
    fit = cmdstanpy.from_csv(files if len(files) > 1 else files[0], method="sample")
    metric = METRIC_TYPES.get(fit.metric_type or "")
    if fit.step_size is None or fit.metric is None or metric is None:
        raise ValueError(
            f"CmdStan run in {files} has no adapted step size and metric (metric {fit.metric_type})"
        )
    columns = [cmdstan_column(n) for n in model.param_names()]
    missing = [c for c in columns if c not in fit.column_names]
    if missing:
        raise ValueError(f"CmdStan run lacks the model's parameters {missing[:5]}: is it the same program?")
    draws = fit.draws(concat_chains=False)  # (draws, chains, columns)
    index = [fit.column_names.index(c) for c in columns]
    last = draws[-1][:, index]  # (chains, parameters)
    positions = np.stack([model.param_unconstrain(row) for row in last])
    inv_metric = np.asarray(fit.metric, dtype=float)
    if inv_metric.shape[-1] != model.dim:  # the model's columns, and more: another program's
        raise ValueError(
            f"CmdStan run in {files} adapted a metric of {inv_metric.shape[-1]} unconstrained parameters; "
            f"{model.name} has {model.dim}: is it the same program?"
        )
    name = str(fit.metadata.cmdstan_config.get("model", "its program"))
    return WarmupState(np.atleast_1d(np.asarray(fit.step_size, dtype=float)), inv_metric, metric, positions,
                       provenance=Provenance(name, tuple(model.param_names())),
                       origin=", ".join(files))  # fmt: skip


__all__ = ["cmdstan_column", "read_warmup"]
