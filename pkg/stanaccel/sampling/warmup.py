"""The NUTS warm-up and what it adapts: the step size, metric, start points and draws the kernels start from.

:func:`warm_up` runs Stan's NUTS warm-up, or takes an earlier one
(:func:`read_warmup`: a ``WarmupState``, a netCDF file written by
stanaccel, CmdStan CSV files) and, for a method that needs draws, a short
NUTS pilot from it; it returns the :class:`Adaptation`. A borrowed
warm-up's recorded time is charged to the run (:func:`charge_borrowed`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from stanaccel.sampling.config import method_record
from stanaccel.stan import StanModel
from stanaccel.stan.nuts import NutsFit, WarmupState, sample_nuts


@dataclass
class Adaptation:
    """The warm-up's adapted values: what a NUTS warm-up (or a Python target's own) gives the kernels.

    Attributes
    ----------
    step_size : float or None
        The adapted step size (median over chains); None when nothing was adapted.
    inv_metric : ndarray (dim,) or (dim, dim)
        The adapted inverse metric (mean over chains).
    starts : ndarray (chains, dim)
        Where the warm-up's chains ended: the kernels' start points.
    draws : ndarray (n, dim) or None
        Warm-up draws after adaptation settled (for reference Gaussians and autoencoders).
    seconds : float
        The warm-up's time, charged to the sampler.
    laplace : (mean, eigenvalues, eigenvectors), optional
        A Laplace approximation N(mean, (I + V diag(eigenvalues) V^T)^-1) in
        whitened coordinates (the PDE posterior's MAP and Gauss-Newton
        Hessian): the reference of ``h-pcn`` and of the ``h-pcn`` inner kernel.
    whitened : bool
        The prior is N(0, I) in these coordinates (the PDE posterior): pCN's
        reference is that prior unless the user sets ``prior_sd``.
    warmup_state : WarmupState, optional
        The NUTS warm-up's per-chain step sizes and inverse metrics, saved
        with a ``sample`` result (its ``adaptation``) so that its file can be
        a later warm-up source.
    """

    step_size: float | None
    inv_metric: np.ndarray
    starts: np.ndarray
    draws: np.ndarray | None
    seconds: float
    laplace: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    whitened: bool = False
    warmup_state: WarmupState | None = None

    @property
    def covariance(self) -> np.ndarray:
        metric = np.asarray(self.inv_metric)
        return np.diag(metric) if metric.ndim == 1 else metric

    def settings(self, dim: int) -> dict[str, Any]:
        """Tuned values of the configuration keys (used where the user set none).

        Without an adapted step size (``step_size`` None: no warm-up tuned the
        kernels) the step size and MH scale are left to their defaults.
        """
        from stanaccel.latent import default_latent_dim

        tuned = {"latent_dim": default_latent_dim(dim)}
        if self.whitened:
            tuned["prior_sd"] = 1.0
        if self.step_size is not None:
            tuned.update(step_size=self.step_size, scale=2.38 / np.sqrt(dim))
        return tuned

    def gaussian(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean and covariance of the warm-up draws (a pCN reference), regularised to be positive definite."""
        if self.draws is None or len(self.draws) < 2:
            raise ValueError("a Gaussian reference needs warm-up draws")
        mean = self.draws.mean(axis=0)
        cov = np.atleast_2d(np.cov(self.draws, rowvar=False))
        return mean, cov + 1e-9 * np.trace(cov) / len(cov) * np.eye(len(cov))


def warmup_share(fit: NutsFit) -> float:
    """The warm-up's share of a NUTS run's time, estimated by its share of the gradient evaluations."""
    return float(fit.warmup_sample_stats["n_steps"].sum() / max(fit.gradient_evaluations, 1))


BORROWED = "warmup (borrowed)"
"""The ``charged_seconds`` entry of a warm-up taken from an earlier run (``warmup_from``)."""


def charge_borrowed(state: WarmupState, charged: dict[str, float], say) -> None:
    """Charge a borrowed warm-up's recorded seconds to this run, or say that it records none."""
    if state.seconds is None:
        say(
            "the warm-up borrowed (warmup_from) records no time (CmdStan CSV files, or a netCDF file "
            "written before stanaccel recorded it), so it is not charged: ESS per second leaves it out"
        )
    else:
        charged[BORROWED] = float(state.seconds)


def read_warmup(source: WarmupState | str | Path | list, model: StanModel) -> WarmupState:
    """A warm-up from a WarmupState, a stanaccel netCDF file, or CmdStan CSV files (or their folder)."""
    if isinstance(source, WarmupState):
        return source
    paths = [Path(p) for p in (source if isinstance(source, list | tuple) else [source])]
    if all(p.suffix == ".csv" for p in paths) or (len(paths) == 1 and paths[0].is_dir()):
        from stanaccel.stan.cmdstan import read_warmup as read_cmdstan

        return read_cmdstan(paths, model)
    if len(paths) != 1:
        raise ValueError(f"a warm-up is one netCDF file or CmdStan CSV files, not {source!r}")
    return WarmupState.from_netcdf(paths[0])


def warm_up(model, config, seeds, warmup_from, progress, say, charged, checkpoint=None) -> Adaptation:
    """Stan's NUTS warm-up (or an earlier one) and what it adapts; its time is added to ``charged``."""
    train_from = getattr(config, "train_from", 0.5)
    if warmup_from is None:
        say(
            f"Stan NUTS warm-up on {model.name.removesuffix('_model')}: {config.chains} chains x "
            f"{config.warmup} iterations"
        )
        fit = sample_nuts(
            model,
            chains=config.chains,
            warmup=config.warmup,
            draws=0,
            seed=seeds["nuts"],
            progress=progress,
            checkpoint=checkpoint_part(checkpoint, "warmup"),
        )
        if fit.interrupted:
            raise KeyboardInterrupt
        charged["warmup"] = fit.wall_seconds
        state = fit.warmup_state()
        first = int(train_from * fit.warmup_unconstrained.shape[1])
        draws = fit.warmup_unconstrained[:, first:]
    else:
        state = read_warmup(warmup_from, model)
        charge_borrowed(state, charged, say)
        if np.shape(state.positions)[-1] != model.dim:
            raise ValueError(
                f"the warm-up has {np.shape(state.positions)[-1]} unconstrained parameters; {model.name} "
                f"has {model.dim}: is it the same program?"
            )
        draws = None
        if method_record(config.method).needs_draws:
            pilot = max(100, config.warmup // 4)
            say(f"pilot: Stan NUTS, {pilot} draws per chain from the earlier warm-up (for {config.method})")
            fit = sample_nuts(
                model,
                warmup_from=state,
                draws=pilot,
                seed=seeds["pilot"],
                progress=progress,
                checkpoint=checkpoint_part(checkpoint, "pilot"),
            )
            if fit.interrupted:
                raise KeyboardInterrupt
            charged["pilot"] = fit.wall_seconds
            draws = fit.draws_unconstrained
            state = WarmupState(state.step_size, state.inv_metric, state.metric, fit.last_unconstrained())
    metric = np.mean(state.inv_metric, axis=0)
    flat = None if draws is None else draws.reshape(-1, model.dim)
    return Adaptation(
        float(np.median(state.step_size)),
        metric,
        np.asarray(state.positions),
        flat,
        sum(charged.values()),
        warmup_state=state,
    )


def checkpoint_part(checkpoint: str | Path | None, part: str) -> Path | None:
    """The checkpoint folder of one part of a run (warm-up, pilot, chains), or None without checkpoints."""
    return None if checkpoint is None else Path(checkpoint) / part
