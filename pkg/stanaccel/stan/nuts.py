"""Stan's own NUTS (``stan::services``) for warm-up and sampling.

Each chain runs Stan's ``hmc_nuts_{diag,dense}_e[_adapt]`` service in its own
thread (the bridge releases the GIL), with in-memory writers, so several
chains run in parallel and return NumPy arrays. Chain ``c`` uses Stan's RNG
stream ``(seed, c + 1)``, as CmdStan does, so a seed reproduces a run
exactly. Ctrl-C stops every chain and keeps the draws made so far. Each chain
has a progress bar (iterations per second, time left) on a terminal.

Given a ``checkpoint`` folder, a run is made resumable: each chain's warm-up
and then its sampling in chunks are checkpointed as they end, and the same
call after a Ctrl-C or a kill continues from them to the same draws
(:mod:`stanaccel.stan.chunks`).
"""

from __future__ import annotations

import difflib
import json
import os
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from stanaccel.results import Result
from stanaccel.seeds import check_seed
from stanaccel.stan.chunks import CHUNK_DRAWS, chunked_chains
from stanaccel.stan.data import run_error
from stanaccel.stan.errors import StanError, StanEvaluationError
from stanaccel.stan.model import StanModel, Variables, unflatten
from stanaccel.stan.provenance import READAPT_ITERATIONS, Provenance, borrowed_mismatch
from stanaccel.stan.quantities import generated_names, split_log_likelihood, transformed_names
from stanaccel.stan.services import SAMPLER_COLUMNS, chain_settings, init_texts, run_threads


@dataclass
class NutsSettings:
    """Settings of Stan's NUTS, with CmdStan's defaults."""

    chains: int = 4
    warmup: int = 1000
    draws: int = 1000
    thin: int = 1
    seed: int = 1
    metric: str = "diag"
    adapt: bool = True
    step_size: float = 1.0
    step_size_jitter: float = 0.0
    max_depth: int = 10
    delta: float = 0.8
    gamma: float = 0.05
    kappa: float = 0.75
    t0: float = 10.0
    init_buffer: int = 75
    term_buffer: int = 50
    window: int = 25
    init_radius: float = 2.0

    @classmethod
    def check_names(cls, settings: dict[str, Any]) -> None:
        """Refuse a name among ``settings`` that is no setting, suggesting the nearest and listing them all.

        Raises
        ------
        ValueError
            An unknown name (``chians``): the message names it, the nearest setting and every one.
        """
        known = [f.name for f in fields(cls)]
        for name in settings:
            if name not in known:
                close = difflib.get_close_matches(name, known, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ValueError(f"unknown NUTS setting {name!r}{hint}; the settings are {', '.join(known)}")

    def check(self) -> None:
        """Raise ValueError naming the first setting of the wrong type or out of range."""
        check_seed(self.seed, "seed", below=2**32)  # Stan's RNG takes an unsigned 32-bit seed
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type == "int" and (isinstance(value, bool) or not isinstance(value, int | np.integer)):
                raise ValueError(f"{f.name} = {value!r}: expected an integer")
            if f.type == "float" and (
                isinstance(value, bool)
                or not isinstance(value, int | float | np.integer | np.floating)
                or not np.isfinite(value)
            ):
                raise ValueError(f"{f.name} = {value!r}: expected a finite number")
            if f.type == "bool" and not isinstance(value, bool | np.bool_):
                raise ValueError(f"{f.name} = {value!r}: expected True or False")
        if self.metric not in ("diag", "dense"):
            raise ValueError(f"metric must be 'diag' or 'dense', not {self.metric!r}")
        for name in ("chains", "thin", "max_depth"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")
        for name in ("warmup", "draws"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be non-negative, not {getattr(self, name)}")
        if not 0 < self.delta < 1:
            raise ValueError(f"delta (target acceptance) must be in (0, 1), not {self.delta}")
        if self.step_size <= 0:
            raise ValueError(f"step_size must be positive, not {self.step_size}")


@dataclass
class WarmupState:
    """What a warm-up leaves behind, enough to sample without adapting again.

    Attributes
    ----------
    step_size : ndarray (chains,)
        NaN where the warm-up adapted none: a cheap (Laplace or Pathfinder)
        warm-up for a method that moves without a step size, such as ``mh``,
        leaves only its metric and points (see :attr:`has_step_size`).
    inv_metric : ndarray (chains, dim) for "diag" or (chains, dim, dim) for "dense"
    metric : str
        "diag" or "dense".
    positions : ndarray (chains, dim)
        The last unconstrained point of each chain.
    seconds : float or None
        The warm-up's wall time, where it was recorded (a stanaccel NUTS run,
        ``NutsFit.warmup_seconds``, or a ``stanaccel sample`` run's warm-up);
        None where not (CmdStan CSV files, netCDF files of an older
        stanaccel, or a run that borrowed its warm-up from one of those). A
        run that borrows the warm-up is charged it.
    warmup : str
        The warm-up that made it: "nuts" (Stan's NUTS warm-up, or CmdStan's),
        or a cheap one, "laplace" or "pathfinder" (its Gaussian's diagonal is
        the metric).
    provenance : Provenance or None
        The program and data it was made on, checked when it is borrowed
        (:func:`~stanaccel.stan.provenance.borrowed_mismatch`); None where
        not recorded (a file of an older stanaccel): it cannot be checked,
        and :func:`sample_nuts` adapts again from it.
    origin : str or None
        The file (or files) it was read from, for messages; None for one made in this process.
    """

    step_size: np.ndarray
    inv_metric: np.ndarray
    metric: str
    positions: np.ndarray
    seconds: float | None = None
    warmup: str = "nuts"
    provenance: Provenance | None = None
    origin: str | None = None

    @property
    def has_step_size(self) -> bool:
        """Whether the warm-up adapted a step size for every chain (NUTS can then continue at once)."""
        return bool(np.size(self.step_size)) and bool(np.all(np.isfinite(self.step_size)))

    @classmethod
    def from_netcdf(cls, path: str | Path) -> WarmupState:
        """The warm-up saved in a netCDF file of ``stanaccel nuts`` or ``stanaccel sample``.

        A ``sample`` file holds the NUTS warm-up it was tuned from (step size
        and inverse metric per chain) and each chain's last draw.

        Reads the ``adaptation`` group (step size, inverse metric and last
        unconstrained point of each chain) and the metric type.

        A file of a cheap warm-up's run (``stanaccel sample --method mh``,
        whose default warm-up is a Laplace approximation) holds its metric
        and points with no step size (NaN), and ``warmup`` names it.

        The program and data the run was made on (its :class:`Provenance`)
        come with it where the file records them.

        Raises
        ------
        FileNotFoundError, IsADirectoryError
            No such file, or a folder.
        ValueError
            The file cannot be read (damaged, or no netCDF file), holds no
            NUTS adaptation, or its warm-up was stopped before adaptation
            finished (its step size and metric are the initial ones, not adapted).
        """
        import xarray as xr

        path = Path(path)
        if path.is_dir():
            raise IsADirectoryError(
                f"warm-up file {path} is a folder: give the netCDF file of an earlier run (the file that "
                "stanaccel nuts or stanaccel sample wrote with --output)"
            )
        if not path.is_file():
            raise FileNotFoundError(f"warm-up file not found: {path}")
        try:
            adaptation = xr.load_dataset(path, group="adaptation")
        except (OSError, ValueError) as exc:
            raise ValueError(_unreadable(path, exc) or _no_adaptation(path)) from exc
        missing = {"step_size", "inv_metric", "last_position"} - set(adaptation.data_vars)
        if missing or "metric" not in adaptation.attrs:
            raise ValueError(
                f"{path} holds no complete NUTS adaptation (missing {sorted(missing) or ['metric']}); "
                "was it written by stanaccel nuts or stanaccel sample?"
            )
        if not int(adaptation.attrs.get("adapted", 0)):
            raise ValueError(
                f"the warm-up in {path} was stopped before adaptation finished, so its step size and "
                "metric are not adapted; run the warm-up again"
            )
        return cls(
            step_size=adaptation["step_size"].values.astype(float),
            inv_metric=adaptation["inv_metric"].values.astype(float),
            metric=str(adaptation.attrs["metric"]),
            positions=adaptation["last_position"].values.astype(float),
            seconds=float(adaptation.attrs["warmup_seconds"])
            if "warmup_seconds" in adaptation.attrs
            else None,
            warmup=str(adaptation.attrs.get("warmup_kind", "nuts")),
            provenance=Provenance.from_attrs(adaptation.attrs),
            origin=str(path),
        )


def _unreadable(path: Path, error: Exception) -> str | None:
    """Why a netCDF file cannot be read (damaged, cut short, not netCDF-4), or None: it reads, and
    ``error`` (loading its ``adaptation`` group) means that it holds none."""
    import h5netcdf

    try:
        with h5netcdf.File(path, "r") as file:
            groups = set(file.groups)
    except (OSError, ValueError) as reading:
        return (
            f"{path} cannot be read ({reading}): it is damaged (cut short, say by a full disk or a copy "
            "that stopped) or is no netCDF-4 file, as stanaccel writes; give another warm-up file, or run "
            "the run that wrote it again"
        )
    if "adaptation" in groups:
        return (
            f"{path} is damaged: its 'adaptation' group cannot be read ({error}); run the run that wrote "
            "it again"
        )
    return None


def _no_adaptation(path: Path) -> str:
    """Why a netCDF file without an ``adaptation`` group is no warm-up source: its run kept none, or it
    is older than the group (a file of this stanaccel records ``stanaccel_version``)."""
    import xarray as xr

    try:
        with xr.open_dataset(path, group="posterior") as posterior:  # its attributes, not its draws
            attrs = dict(posterior.attrs)
    except (OSError, ValueError):
        attrs = {}
    if "stanaccel_version" in attrs:
        return (
            f"{path} holds no warm-up to continue from (no 'adaptation' group): its run "
            f"({attrs.get('sampler', 'a sampler')} on {attrs.get('program', 'its program')}) made none that "
            "a Stan program's run can take; use a file of stanaccel nuts or stanaccel sample on a Stan "
            "program, or CmdStan CSV files"
        )
    return (
        f"{path} holds no NUTS adaptation (no 'adaptation' group), so it cannot be a warm-up source: "
        "use a netCDF file written by stanaccel nuts or stanaccel sample (a sample file of an older "
        "stanaccel has none), or CmdStan CSV files"
    )


@dataclass
class NutsFit(Result):
    """Draws and diagnostics of a NUTS run, as NumPy arrays with (chain, draw) axes.

    A :class:`~stanaccel.results.Result`: ``draws()``, ``summary()``, ``metrics()``,
    ``to_inference_data()``, ``save(path)``. Stan's services write every
    quantity of the program at each iteration (generated quantities with the
    chain's RNG, so a seed reproduces them); the InferenceData's groups are
    those of every method (:mod:`stanaccel.stan.quantities`): parameters,
    transformed parameters and generated quantities in the posterior,
    ``log_lik`` in ``log_likelihood``, and a draw whose generated quantities
    rejected (NaN) marked in ``sample_stats["quantities_failed"]``.

    Attributes
    ----------
    param_names : list of str
        Flat constrained names (parameters, transformed parameters, generated quantities).
    variables : list of (name, dims)
        The Stan variables those flat columns make up.
    draws_constrained, warmup_constrained : ndarray (chains, draws, len(param_names))
    draws_unconstrained, warmup_unconstrained : ndarray (chains, draws, dim)
    sample_stats, warmup_sample_stats : dict of ndarray (chains, draws)
        ``lp``, ``acceptance_rate``, ``step_size``, ``tree_depth``, ``n_steps``,
        ``diverging``, ``energy``, and ``failed``: transitions that ended where the
        program rejected a proposal (its log density threw: a ``reject``, a
        domain error), which Stan counts as divergent and ``diverging`` does not.
    step_size : ndarray (chains,)
        Step size after adaptation (or as given).
    inv_metric : ndarray (chains, dim) or (chains, dim, dim)
        Inverse metric after adaptation (or as given).
    chain_seconds : ndarray (chains,)
        Wall time of each chain, warm-up included.
    wall_seconds : float
        Wall time of the whole run.
    messages : list of list of str
        Stan's messages per chain (rejections, warnings).
    interrupted : bool
        True if the run was stopped early; the arrays hold what was drawn.
    dropped_draws : int
        Of a stopped run, the draws (warm-up draws included) that chains made beyond the
        slowest chain's, all chains together: dropped to keep the chains equal.
    adapted : bool
        True if ``step_size`` and ``inv_metric`` are usable for more
        sampling: adapted by a finished warm-up, or given (no adaptation
        asked). False when a warm-up was stopped before it finished.
    transformed, generated : list of str
        The names of the program's transformed parameters and generated quantities.
    provenance : Provenance or None
        The program and data of the run, recorded in its file (a later run that
        borrows its warm-up is checked against them).
    resumed_draws : ndarray (chains,) or None
        Of a checkpointed run, the kept draws each chain took from its checkpoints.
    """

    param_names: list[str]
    variables: Variables
    draws_constrained: np.ndarray
    draws_unconstrained: np.ndarray
    warmup_constrained: np.ndarray
    warmup_unconstrained: np.ndarray
    sample_stats: dict[str, np.ndarray]
    warmup_sample_stats: dict[str, np.ndarray]
    step_size: np.ndarray
    inv_metric: np.ndarray
    chain_seconds: np.ndarray
    wall_seconds: float
    settings: NutsSettings
    messages: list[list[str]] = field(default_factory=list)
    interrupted: bool = False
    dropped_draws: int = 0
    adapted: bool = True
    transformed: list[str] = field(default_factory=list)
    generated: list[str] = field(default_factory=list)
    provenance: Provenance | None = None
    resumed_draws: np.ndarray | None = None

    @property
    def chains(self) -> int:
        return self.draws_unconstrained.shape[0]

    @property
    def num_draws(self) -> int:
        return self.draws_unconstrained.shape[1]

    @property
    def gradient_evaluations(self) -> int:
        """Leapfrog steps (one gradient each) over warm-up and sampling, all chains."""
        return int(self.sample_stats["n_steps"].sum() + self.warmup_sample_stats["n_steps"].sum())

    @property
    def warmup_seconds(self) -> float:
        """The warm-up's share of ``wall_seconds``, by its share of the gradient evaluations."""
        warm = int(self.warmup_sample_stats["n_steps"].sum()) if "n_steps" in self.warmup_sample_stats else 0
        return float(self.wall_seconds * warm / max(self.gradient_evaluations, 1))

    def draws(self, *, inc_warmup: bool = False, concat_chains: bool = False) -> np.ndarray:
        """Every Stan column, (chains, draws, params) or (chains*draws, params), in Stan's order.

        These are ``param_names`` (parameters, transformed parameters and
        generated quantities, ``log_lik`` included, arrays column-major as in
        CmdStan's CSV); :meth:`column_names` names them as Stan prints them.
        """
        out = self.draws_constrained
        if inc_warmup:
            out = np.concatenate([self.warmup_constrained, out], axis=1)
        return out.reshape(-1, out.shape[-1]) if concat_chains else out

    def column_names(self) -> list[str]:
        """The names of :meth:`draws`'s columns as Stan prints them: ``v[1]`` for ``v.1``, ``m[1,2]``."""
        return [_bracketed(name) for name in self.param_names]

    @property
    def quantities_failed(self) -> np.ndarray | None:
        """(chains, draws): draws whose generated quantities failed (a ``reject``), which Stan writes NaN.

        A draw counts when all its generated quantities are NaN; None for a
        program without transformed parameters or generated quantities (a
        draw's transformed parameters never fail: NUTS keeps no draw where
        the density is undefined).
        """
        if not self.transformed and not self.generated:
            return None
        values = self.stan_variables()
        if not self.generated:
            return np.zeros((self.chains, self.num_draws), dtype=bool)
        quantities = [values[name] for name in self.generated]
        # (chains, draws, scalars): the scalars counted, as -1 cannot be inferred from 0 draws
        nan = [np.isnan(q).reshape(*q.shape[:2], int(np.prod(q.shape[2:]))) for q in quantities]
        nan = np.concatenate(nan, axis=-1)
        return nan.all(axis=-1) if nan.shape[-1] else np.zeros(nan.shape[:2], dtype=bool)

    def _metrics_arguments(self) -> dict[str, Any]:
        """The run's cost for ``metrics()``: wall time and gradient evaluations (warm-up included)."""
        return {"wall_seconds": self.wall_seconds, "gradient_evaluations": self.gradient_evaluations}

    def stan_variables(self, *, inc_warmup: bool = False) -> dict[str, np.ndarray]:
        """Every variable as (chains, draws, *dims)."""
        return unflatten(self.draws(inc_warmup=inc_warmup), self.variables)

    def stan_variable(self, name: str, *, inc_warmup: bool = False) -> np.ndarray:
        """One variable, draws of all chains stacked: (chains*draws, *dims)."""
        variables = self.stan_variables(inc_warmup=inc_warmup)
        if name not in variables:
            raise KeyError(f"no variable {name!r}; the fit has {sorted(variables)}")
        value = variables[name]
        return value.reshape(-1, *value.shape[2:])

    def inference_groups(self) -> dict[str, Any]:
        """Groups for ``stanaccel.diagnostics.to_inference_data``."""
        posterior, log_likelihood = split_log_likelihood(self.stan_variables(), self.generated)
        warmup, warmup_log_likelihood = split_log_likelihood(
            unflatten(self.warmup_constrained, self.variables), self.generated
        )
        stats, failed = dict(self.sample_stats), self.quantities_failed
        if failed is not None:
            stats["quantities_failed"] = failed
        return {
            "posterior": posterior,
            "log_likelihood": log_likelihood,
            "sample_stats": stats,
            "warmup_posterior": warmup,
            "warmup_log_likelihood": warmup_log_likelihood,
            "warmup_sample_stats": self.warmup_sample_stats,
            "unconstrained_posterior": {"theta_unc": self.draws_unconstrained},
            "adaptation": {
                "step_size": self.step_size,
                "inv_metric": self.inv_metric,
                "last_position": self.last_unconstrained(),
            },
            "attrs": {
                "sampler": "Stan NUTS",
                "exact": True,
                "metric": self.settings.metric,
                "max_depth": self.settings.max_depth,  # to count the transitions that hit it
                "seed": self.settings.seed,
                "wall_seconds": self.wall_seconds,
                "warmup_seconds": self.warmup_seconds,
                "gradient_evaluations": self.gradient_evaluations,
                "interrupted": self.interrupted,
                "adapted": self.adapted,
                **({} if failed is None else {"quantities_failed": int(failed.sum())}),
                **({} if self.provenance is None else self.provenance.attrs()),
            },
        }

    def warmup_state(self) -> WarmupState:
        """Step sizes, inverse metrics and last points, to continue without re-adapting.

        Raises
        ------
        ValueError
            The warm-up was stopped before adaptation finished.
        """
        if not self.adapted:
            raise ValueError("the warm-up was stopped before adaptation finished; there is no adaptation")
        return WarmupState(
            self.step_size.copy(),
            self.inv_metric.copy(),
            self.settings.metric,
            self.last_unconstrained(),
            self.warmup_seconds,
            provenance=self.provenance,
        )

    def last_unconstrained(self) -> np.ndarray:
        """The last unconstrained draw of each chain, (chains, dim): a start for later runs.

        NaN for a run stopped before its first draw.
        """
        both = np.concatenate([self.warmup_unconstrained, self.draws_unconstrained], axis=1)
        if both.shape[1] == 0:
            return np.full((both.shape[0], both.shape[2]), np.nan)
        return both[:, -1, :]


def sample_nuts(
    model: StanModel,
    *,
    inits: Any = None,
    inv_metric: np.ndarray | None = None,
    warmup_from: WarmupState | str | Path | None = None,
    progress: bool = True,
    checkpoint: str | Path | None = None,
    checkpoint_draws: int = CHUNK_DRAWS,
    **settings: Any,
) -> NutsFit:
    """Run Stan's NUTS on a model, several chains in parallel threads.

    Parameters
    ----------
    model : StanModel
        The posterior to sample.
    inits : None, dict, list of dict, or ndarray
        None for Stan's random inits (uniform in ``(-init_radius, init_radius)``
        on the unconstrained scale); a dict of constrained values for every
        chain; one dict per chain; or unconstrained points, shape (dim,) or
        (chains, dim).
    inv_metric : ndarray, optional
        Initial (or, with ``adapt=False``, fixed) inverse metric: (dim,) for
        ``metric="diag"``, (dim, dim) for ``"dense"``, or one per chain.
    warmup_from : WarmupState, str or Path, optional
        Continue from an earlier warm-up (``NutsFit.warmup_state()``, a
        netCDF file written from a NUTS run such as ``stanaccel nuts
        --output``, or a CmdStan run via
        ``stanaccel.stan.cmdstan.read_warmup``): its step
        sizes, inverse metrics, metric type and last points, one chain per
        warm-up chain unless ``chains`` asks for fewer. Made on this program
        and data, it is continued at once (no warm-up unless asked for); made
        on other data or another version of the program, or recording
        neither, it is a :class:`BorrowedWarmupWarning`, and Stan's NUTS
        warm-up runs :data:`~stanaccel.stan.provenance.READAPT_ITERATIONS`
        iterations from it first (see :func:`continued_settings`).
    progress : bool
        Show a progress bar (tqdm) per chain on stderr, if it is a terminal.
    checkpoint : path, optional
        A folder for each chain's checkpoint: its warm-up when it ends, then
        its draws every ``checkpoint_draws`` kept draws. A run given a folder
        with checkpoints of the same run (same settings, inits and metrics)
        continues from them to the same draws as a run never stopped. The
        sampling then runs in chunks, each seeded from ``(seed, chain,
        chunk)``, so its draws differ from an unchunked run's with the same
        seed (the warm-up's do not); see :mod:`stanaccel.stan.chunks`.
        ``chain_seconds`` and ``wall_seconds`` count every segment: the parts
        taken from checkpoints are charged the seconds they took when they ran
        (the longest chain's, as the chains run in parallel).
    checkpoint_draws : int
        Kept draws per chunk: what a kill can lose of each chain's sampling.
    **settings
        Fields of :class:`NutsSettings` (``chains``, ``warmup``, ``draws``,
        ``seed``, ``metric``, ``adapt``, ``step_size``, ``delta``, ...).

    Returns
    -------
    NutsFit

    Raises
    ------
    ValueError
        A setting unknown (with the nearest and every one), of the wrong type
        (``chains="2"``, ``seed=1.5``) or out of range; an ``inv_metric``
        entry that is not positive and finite (named, with its parameter), or
        a dense one not positive definite; a ``checkpoint`` that is a file; a
        borrowed warm-up of another program, of fewer chains than asked for,
        or without a step size where it would be continued at once.
    StanEvaluationError
        A chain that Stan cannot start from its given ``inits``: the message
        names the init and why (Stan's message, or the log density there).
    """
    if not isinstance(model, StanModel):
        raise TypeError(
            f"sample_nuts takes a StanModel (StanModel(program, data)), not {type(model).__name__} "
            f"({model!r:.80}); stanaccel.sampling.sample(program, data, 'nuts') takes a program file"
        )
    if not isinstance(warmup_from, WarmupState | str | Path | None):
        raise TypeError(
            f"warmup_from must be a netCDF file of an earlier run (a str or Path) or a WarmupState, "
            f"not {type(warmup_from).__name__} ({warmup_from!r:.80})"
        )
    NutsSettings.check_names(settings)
    NutsSettings(**settings).check()  # the caller's values, before a borrowed warm-up is read
    _check_checkpoint(checkpoint)
    step_sizes, borrowed_inits = None, False
    if isinstance(warmup_from, str | Path):
        warmup_from = WarmupState.from_netcdf(warmup_from)
    if warmup_from is not None:
        settings, mismatch = continued_settings(warmup_from, model, settings)
        if mismatch is None and not warmup_from.has_step_size:
            raise ValueError(
                f"the warm-up{_source(warmup_from)} is a {warmup_from.warmup} warm-up's metric and start "
                "points, with no step size (its run's method moves without one), and NUTS needs one to "
                "continue without a warm-up of its own: stanaccel sample --method nuts --warmup-from takes "
                "it (Stan's NUTS adapts the step size alone first), or run NUTS with its own warm-up"
            )
        if mismatch is not None:
            warnings.warn(_readapting(mismatch, settings), BorrowedWarmupWarning, stacklevel=2)
        chains = settings["chains"]
        borrowed_inits = inits is None
        inits = np.asarray(warmup_from.positions)[:chains] if inits is None else inits
        if inv_metric is None:
            inv_metric = np.asarray(warmup_from.inv_metric)[:chains]
        if warmup_from.has_step_size:
            step_sizes = np.asarray(warmup_from.step_size, dtype=float)[:chains]
    config = NutsSettings(**settings)
    config.check()
    if step_sizes is None or len(step_sizes) != config.chains:
        step_sizes = np.full(config.chains, config.step_size)
    inits_text = init_texts(model, inits, config.chains)
    metrics = _initial_metrics(model, inv_metric, config)
    metric_texts = [json.dumps({"inv_metric": m.tolist()}) for m in metrics]
    if checkpoint is not None:
        runs = chunked_chains(
            model, config, inits_text, metrics, step_sizes, Path(checkpoint), checkpoint_draws
        )
    else:
        runs = []
        for c in range(config.chains):
            one_chain = chain_settings(config, c, inits_text[c], metric_texts[c], step_sizes[c])
            runs.append(model.program.module.NutsChain(model._model, one_chain))
    resumed = None  # the kept draws each chain takes from its checkpoints (run.json records them)
    if checkpoint is not None:
        resumed = np.array([sum(p["iterations"] for p in r.saved["chunks"]) // config.thin for r in runs])
    start = time.perf_counter()
    initial = [r.iterations() for r in runs]
    interrupted = run_threads(runs, "NUTS", config.warmup + config.draws, progress, initial)
    wall = time.perf_counter() - start
    if checkpoint is not None:
        wall += max(run.seconds_before for run in runs)
    results = [run.result() for run in runs]
    errors = [(c, r) for c, r in enumerate(results) if r["error"]]
    if errors:
        c, r = errors[0]
        if inits is not None and "Initialization failed" in r["error"]:
            raise _init_error(model, c, inits, inits_text[c], r["messages"], borrowed_inits)
        detail = "\n".join(r["messages"][-10:])
        name = model.name.removesuffix("_model")
        raise run_error(f"NUTS chain {c}", r["error"], detail, model.data_json, name)
    stopped = interrupted or any(r["interrupted"] for r in results)
    fit = _assemble(model, config, results, metrics, step_sizes, wall, stopped)
    fit.resumed_draws = resumed
    return fit


class BorrowedWarmupWarning(UserWarning):
    """A borrowed warm-up was made on other data or another version of the program, or records neither:
    Stan's NUTS adapts again from it before drawing."""


def check_borrowed(state: WarmupState, model: StanModel) -> str | None:
    """Why a borrowed warm-up may not fit ``model``'s posterior, or None where it was made on it.

    The same number of parameters and, where it records them, the same
    parameters' names (:func:`~stanaccel.stan.provenance.borrowed_mismatch`);
    then other data, another version of the program, or nothing recorded
    to check are the reasons returned.

    Raises
    ------
    ValueError
        Another program: other parameters, or another number of them.
    """
    dim = np.shape(state.positions)[-1]
    if dim != model.dim:
        raise ValueError(
            f"the warm-up{_source(state)} has {dim} unconstrained parameters; {model.name} has {model.dim}: "
            "is it the same program?"
        )
    return borrowed_mismatch(state.provenance, model, _source(state))


def _source(state: WarmupState) -> str:
    """Where a warm-up came from, for messages: " in FILE", or nothing for one made in this process."""
    return f" in {state.origin}" if state.origin else ""


def continued_settings(
    state: WarmupState, model: StanModel, settings: dict[str, Any]
) -> tuple[dict[str, Any], str | None]:
    """The NUTS settings of a run continued from ``state``, and why it is adapted again (None: it is not).

    ``state`` is checked against ``model`` (:func:`check_borrowed`), and no
    more chains may be asked for than it has. Made on this program and data, it is continued
    at once: no warm-up, no adaptation (unless ``settings`` say otherwise).
    Otherwise (the second value says why) its points, metric and step size
    may be far from this posterior, and the early draws of chains started
    there would be a walk to it; Stan's NUTS warm-up then runs
    :data:`~stanaccel.stan.provenance.READAPT_ITERATIONS` iterations from
    them (``settings``' ``warmup`` wins), adapting step size and metric.

    Parameters
    ----------
    settings : dict
        Fields of :class:`NutsSettings` given by the caller; they win over the defaults above.

    Raises
    ------
    ValueError
        Another program (other parameters), or more chains asked for than ``state`` has.
    """
    mismatch = check_borrowed(state, model)
    held = len(state.step_size)
    chains = settings.get("chains", held)
    if chains > held:
        raise ValueError(
            f"the warm-up{_source(state)} has {held} chains and {chains} were asked for: each chain "
            f"continues one of its chains; ask for {held} or fewer (leave the number of chains out for "
            f"{held}), or run a new warm-up with more chains"
        )
    defaults = {"warmup": READAPT_ITERATIONS, "adapt": True} if mismatch else {"warmup": 0, "adapt": False}
    return {"chains": held, **defaults, **settings, "metric": state.metric}, mismatch


def _readapting(mismatch: str, settings: dict[str, Any]) -> str:
    """The warning that a borrowed warm-up does not fit: what runs before the draws are kept."""
    if not settings["warmup"]:
        return (
            f"{mismatch}; warmup = 0 asks for no warm-up, so the draws start at its points: the first ones "
            "may be a walk from its posterior to this one (give warm-up iterations to leave them out)"
        )
    adapting = "adapting step size and metric" if settings["adapt"] else "not adapting (adapt = False)"
    return (
        f"{mismatch}: its points, metric and step size may not fit this posterior, so Stan's NUTS warm-up "
        f"runs {settings['warmup']} iterations from them first, {adapting}; their draws are not kept, "
        "their time is charged"
    )


def _check_checkpoint(checkpoint: str | Path | None) -> None:
    """Refuse a ``checkpoint`` that is no folder's name, or names a file: each chunk would fail to write."""
    if checkpoint is None:
        return
    if not isinstance(checkpoint, str | os.PathLike):
        raise TypeError(
            f"checkpoint must be a folder (a str or Path) or None, not {type(checkpoint).__name__} "
            f"({checkpoint!r:.80})"
        )
    path = Path(checkpoint)
    if str(checkpoint) == "" or (path.exists() and not path.is_dir()):
        what = "is empty" if str(checkpoint) == "" else f"{path} is a file"
        raise ValueError(
            f"checkpoint {what}: give a folder for the chains' checkpoints (it is made if missing), "
            f"such as {path.parent / 'checkpoints'}"
        )


def _initial_metrics(model: StanModel, inv_metric: np.ndarray | None, config: NutsSettings) -> np.ndarray:
    """The initial inverse metric of each chain (identity by default), checked.

    Raises
    ------
    ValueError
        The wrong shape; a diagonal entry that is not positive and finite (named, with its
        parameter); a dense one that is not symmetric positive definite (the chain named).
    """
    dim = model.dim
    if inv_metric is None:
        inv_metric = np.ones(dim) if config.metric == "diag" else np.eye(dim)
    metric = np.asarray(inv_metric, dtype=float)
    single_ndim = 1 if config.metric == "diag" else 2
    per_chain = metric.ndim != single_ndim
    if not per_chain:
        metric = np.repeat(metric[None], config.chains, axis=0)
    expected = (config.chains, dim) if config.metric == "diag" else (config.chains, dim, dim)
    if metric.shape != expected:
        raise ValueError(f"inv_metric has shape {metric.shape}; {config.metric} metric needs {expected[1:]}")
    if config.metric == "diag":
        bad = np.argwhere(~(np.isfinite(metric) & (metric > 0)))
        if len(bad):
            c, j = bad[0]
            index = f"[{c}, {j}]" if per_chain else f"[{j}]"
            raise ValueError(
                f"inv_metric{index} = {metric[c, j]:g}: the inverse metric's entries must be positive and "
                "finite (each is the posterior's variance along an unconstrained coordinate, here "
                f"{model.param_unc_names()[j]}); give the variances, or leave inv_metric out (ones)"
            )
        return metric
    for c, matrix in enumerate(metric):
        chain = f" (chain {c})" if per_chain else ""
        if not np.all(np.isfinite(matrix)) or not np.allclose(matrix, matrix.T):
            raise ValueError(f"inv_metric{chain} must be a symmetric matrix of finite numbers")
        try:
            np.linalg.cholesky(matrix)
        except np.linalg.LinAlgError:
            raise ValueError(
                f"inv_metric{chain} is not positive definite (its smallest eigenvalue is "
                f"{np.linalg.eigvalsh(matrix)[0]:g}): a dense inverse metric is the posterior's covariance "
                "on the unconstrained scale; give one, or leave inv_metric out (the identity)"
            ) from None
    return metric


def _init_error(model: StanModel, chain: int, inits: Any, text: str, messages: list[str], borrowed: bool):
    """The error of a chain that Stan could not start from its given init (``text``, Stan JSON): the init,
    and why: the program's message, or the log density there."""
    reason = next(
        (line.removeprefix("Exception: ") for line in messages if line.startswith("Exception: ")), ""
    )
    reason = f"Stan refused it ({reason})" if reason else ""
    dicts = isinstance(inits, Mapping) or (isinstance(inits, list | tuple) and isinstance(inits[0], Mapping))
    if not reason and not dicts:  # unconstrained points
        points = np.atleast_2d(np.asarray(inits, dtype=float))
        point = points[chain if len(points) > 1 else 0]
        try:
            reason = f"the log density there is {model.log_density(point)}"
        except StanError as error:  # a domain error, a reject
            reason = f"the program rejected it ({error})"
    if not reason:
        gradient = any("Gradient evaluated at the initial value is not finite" in line for line in messages)
        reason = (
            "the gradient of the log density there is not finite"
            if gradient
            else "the log density there is not finite (-inf: zero probability, or NaN)"
        )
    whose = "the last point of the warm-up it continues" if borrowed else "its init"
    return StanEvaluationError(
        f"NUTS chain {chain} cannot start from {whose}, {text:.200}: {reason}. Give inits inside the support "
        "the program declares (the parameters' bounds) where the log density is finite, or leave inits out "
        "for Stan's random ones"
    )


def _assemble(
    model: StanModel,
    config: NutsSettings,
    results: list[dict],
    initial_metrics: np.ndarray,
    initial_step_sizes: np.ndarray,
    wall: float,
    interrupted: bool,
) -> NutsFit:
    """Stack chains into (chain, draw, ...) arrays; a stopped run keeps equal-length chains."""
    names = results[0]["sample_names"]
    n_sampler = len(SAMPLER_COLUMNS)
    dim = model.dim
    n_warm_rows = -(-config.warmup // config.thin) if config.warmup > 0 else 0
    made = [min(r["sample_rows"].shape[0], r["diagnostic_rows"].shape[0]) for r in results]
    rows = min(made)
    n_warm = min(rows, n_warm_rows)

    width = len(names) if names else n_sampler + model.param_num(include_tp=True, include_gq=True)
    if rows and names:
        sample = np.stack([r["sample_rows"][:rows] for r in results])
        diagnostic = np.stack([r["diagnostic_rows"][:rows, n_sampler : n_sampler + dim] for r in results])
    else:  # stopped before the first draw
        sample = np.zeros((len(results), 0, width))
        diagnostic = np.zeros((len(results), 0, dim))
    stats = {
        arviz_name: sample[:, :, i].astype(bool) if arviz_name == "diverging" else sample[:, :, i]
        for i, arviz_name in enumerate(SAMPLER_COLUMNS.values())
    }
    if stats["tree_depth"].size:
        stats["tree_depth"] = stats["tree_depth"].astype(int)
        stats["n_steps"] = stats["n_steps"].astype(int)
    # Stan ends a trajectory whose log density threw (a reject) as a divergence: counted apart, as "failed".
    stats["failed"] = np.stack([_rejected(r, sample.shape[1]) for r in results]) & stats["diverging"]
    stats["diverging"] = stats["diverging"] & ~stats["failed"]
    constrained = sample[:, :, n_sampler:]
    adapted = all(r["inv_metric"].size for r in results)
    warmup_finished = not (config.adapt and config.warmup > 0) or adapted
    if adapted:
        step_size = np.array([r["stepsize"] for r in results])
        inv_metric = np.stack([r["inv_metric"] for r in results])
        if config.metric == "diag":
            inv_metric = inv_metric[..., 0]
    else:
        step_size = initial_step_sizes
        inv_metric = initial_metrics
    return NutsFit(
        param_names=model.param_names(include_tp=True, include_gq=True),
        variables=model.variables(include_tp=True, include_gq=True),
        draws_constrained=constrained[:, n_warm:],
        draws_unconstrained=diagnostic[:, n_warm:],
        warmup_constrained=constrained[:, :n_warm],
        warmup_unconstrained=diagnostic[:, :n_warm],
        sample_stats={k: v[:, n_warm:] for k, v in stats.items()},
        warmup_sample_stats={k: v[:, :n_warm] for k, v in stats.items()},
        step_size=step_size,
        inv_metric=inv_metric,
        chain_seconds=np.array([r["seconds"] for r in results]),
        wall_seconds=wall,
        settings=config,
        messages=[list(r["messages"]) for r in results],
        interrupted=interrupted,
        dropped_draws=sum(made) - rows * len(made),
        adapted=warmup_finished,
        transformed=transformed_names(model),
        generated=generated_names(model),
        provenance=Provenance.of(model),
    )


def _rejected(result: dict, rows: int) -> np.ndarray:
    """(rows,) whether each of a chain's first ``rows`` transitions had a proposal the program rejected.

    Stan's Hamiltonian catches the error of a log density that throws (a ``reject``, a domain error),
    logs it and takes the energy there as infinite, which Stan's NUTS reports as a divergence; the bridge
    notes the transitions where that happened (``rejected``, none in a checkpoint of an older stanaccel).
    A log density that returns NaN is not told apart: it stays a divergence.
    """
    rejected = np.asarray(result.get("rejected", ()), dtype=bool)[:rows]
    return np.pad(rejected, (0, rows - len(rejected)))


def _bracketed(flat_name: str) -> str:
    """Stan's printed name of a flat column name: ``v[1]`` for ``v.1``, ``m[1,2]`` for ``m.1.2``."""
    name, *index = flat_name.split(".")
    return f"{name}[{','.join(index)}]" if index else name
