"""Every quantity of a Stan program at a run's draws: parameters, transformed and generated quantities.

Stan's own NUTS writes them as it samples (its services call the program's
``write_array`` at each iteration). Every other method samples the
unconstrained parameters only, and :func:`stan_quantities` calls
``write_array`` (:meth:`StanModel.param_constrain` with ``include_tp`` and
``include_gq``) once per kept draw after the chains end; the caller charges
that time to the run, as Stan's NUTS counts them in its time, so that ESS
per second compares the methods alike (on a program with 1,000 transformed
parameters they are no small part of a cheap iteration).

Generated quantities that draw random numbers (``normal_rng``) get Stan's
RNG seeded for each draw by :func:`stanaccel.seeds.draw_seeds` of the run's
seed, chain and draw: the same seed gives the same generated quantities.

The groups follow ArviZ's ``from_cmdstanpy``: the posterior holds parameters,
transformed parameters and generated quantities; a generated quantity named
``log_lik`` goes to the ``log_likelihood`` group instead (as
``from_cmdstanpy(log_likelihood="log_lik")`` puts it), where ``arviz.loo``
and ``arviz.waic`` read it.

A draw whose generated quantities raise a Stan error (a ``reject``, a
domain error, an index out of range) or whose transformed parameters fail
their constraints (possible for an approximate method) keeps its parameters,
and its other values are NaN, as Stan's services write them; it is counted
(``Quantities.failed``, with the first error), and the run goes on: an error
in the generated quantities never loses the draws.
"""

from __future__ import annotations

import numpy as np

from stanaccel.results import Quantities
from stanaccel.seeds import draw_seeds
from stanaccel.stan.errors import StanEvaluationError
from stanaccel.stan.model import StanModel

LOG_LIK = "log_lik"
"""The generated quantity that holds the pointwise log likelihood (ArviZ's and ``loo``'s convention)."""


def transformed_names(model: StanModel) -> list[str]:
    """The names of the program's transformed parameters, in declaration order."""
    return [name for name, _ in model.variables(include_tp=True)][len(model.variables()) :]


def generated_names(model: StanModel) -> list[str]:
    """The names of the program's generated quantities, in declaration order."""
    every = model.variables(include_tp=True, include_gq=True)
    return [name for name, _ in every][len(model.variables(include_tp=True)) :]


def split_log_likelihood(
    values: dict[str, np.ndarray], generated: list[str]
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(posterior, log_likelihood) of a program's named values: a generated ``log_lik`` goes to the second."""
    moved = {LOG_LIK} & set(generated)
    return (
        {k: v for k, v in values.items() if k not in moved},
        {k: v for k, v in values.items() if k in moved},
    )


def stan_quantities(model: StanModel, positions: np.ndarray, seed: int) -> Quantities:
    """Parameters, transformed parameters and generated quantities of each draw (see the module's notes).

    Parameters
    ----------
    model : StanModel
    positions : ndarray (chains, draws, dim)
        Unconstrained draws.
    seed : int
        The run's seed for generated quantities: draw d of chain c is written
        with Stan's RNG seeded ``draw_seeds(seed, c, draws)[d]``.

    Returns
    -------
    Quantities
        ``posterior`` and ``log_likelihood`` named as the program names them,
        shaped (chains, draws, *dims); ``failed`` (chains, draws) marks draws
        whose ``write_array`` raised, with ``error`` the first message
        (None for a program without transformed parameters or generated quantities).
    """
    positions = np.asarray(positions, dtype=float)
    chains, draws = positions.shape[:2]
    sizes = [
        model.param_num(),
        model.param_num(include_tp=True),
        model.param_num(include_tp=True, include_gq=True),
    ]
    flat = np.full((chains, draws, sizes[-1]), np.nan)
    failed = np.zeros((chains, draws), dtype=bool)
    error = None
    for c in range(chains):
        seeds = draw_seeds(seed, c, draws) if sizes[2] > sizes[1] else np.zeros(draws, dtype=int)
        for d in range(draws):
            try:
                flat[c, d] = model.param_constrain(
                    positions[c, d], include_tp=True, include_gq=True, seed=int(seeds[d])
                )
            except StanEvaluationError as exc:
                failed[c, d] = True
                error = error or str(exc)
                flat[c, d, : sizes[0]] = model.param_constrain(positions[c, d])
                try:  # the transformed parameters, where only the generated quantities failed
                    flat[c, d, : sizes[1]] = model.param_constrain(positions[c, d], include_tp=True)
                except StanEvaluationError:
                    pass
    values = model.unflatten(flat, include_tp=True, include_gq=True)
    posterior, log_likelihood = split_log_likelihood(values, generated_names(model))
    return Quantities(posterior, log_likelihood, failed if sizes[2] > sizes[0] else None, error)
