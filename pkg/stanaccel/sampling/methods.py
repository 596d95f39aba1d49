"""The table of methods: one record per sampler, which everything that names a method reads.

A :class:`MethodSpec` says, for one method, its settings (its
:class:`~stanaccel.sampling.config.SamplerConfig` class, which also says
what it needs of the program and whether it is exact), how to build its
kernel from a :class:`~stanaccel.sampling.build.KernelFactory`, its label in
tables and messages, what it needs of the warm-up (draws; a step tuned after
it), its default ``--tune`` search space, its tempering family, the
acceptance the studies show for it and the studies that offer it.
:data:`METHODS` maps each name to its record, in the order the command
line, the README and ``stanaccel sample --help`` list them.

Adding a method is a kernel (``stanaccel.kernels``) and one entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from stanaccel.kernels.independence import IndependenceMetropolis
from stanaccel.kernels.mala import MALA
from stanaccel.kernels.pcn import with_step
from stanaccel.sampling.build import KernelFactory, hessian_pcn_move, hmc_move, mh_move, pcn_move
from stanaccel.sampling.config import (
    NUTS_WARMUP,
    TABLE,
    THIN_DOC,
    AEHMCConfig,
    AEPCNConfig,
    DCConfig,
    HMCConfig,
    HPCNConfig,
    LatentNutsConfig,
    MHConfig,
    NutsConfig,
    PCNConfig,
    PTConfig,
    SamplerConfig,
    SPTConfig,
    STTConfig,
    TTApproxConfig,
    TTConfig,
    _HMCStep,
    method_record,
    setting,
)


@dataclass(frozen=True)
class StepTuning:
    """A step tuned by Robbins-Monro after the warm-up, unless the user sets it or ``tune`` is 0.

    Attributes
    ----------
    key : str
        The setting tuned (its value before tuning is the start).
    target : float
        The acceptance rate aimed at.
    maximum : float
        The largest step (below 4 for pCN, where h = 4 means rho = 0).
    kernels : callable
        ``kernels(factory, density)`` returns ``make(h)``: the kernel with step ``h`` on ``density``.
    inner : bool
        The step of an inner kernel (``inner`` setting) moving on approximations, tuned on the
        cheapest one (a method's :attr:`MethodSpec.inner_step`).
    unless_warmed_up : bool
        A step NUTS's warm-up adapts (an HMC step size): tuned here only after a warm-up that adapted
        none (a cheap warm-up, which then runs no NUTS on pi for it).
    """

    key: str
    target: float
    maximum: float
    kernels: Callable[[KernelFactory, Any], Callable[[float], Any]]
    inner: bool = False
    unless_warmed_up: bool = False


@dataclass(frozen=True)
class MethodSpec:
    """One method: its settings, kernel, label, needs and default tuning space.

    Attributes
    ----------
    config : type
        Its settings (a :class:`~stanaccel.sampling.config.SamplerConfig`
        subclass, whose ``method`` is the method's name and whose ``needs``
        say what it needs of the program).
    label : str
        Its name in tables and messages; ``{inner}`` is replaced by the inner
        kernel's label, ``{exactness}`` by "exact" or "approximate".
    build : callable or None
        ``build(factory)``: a chain's kernel. None: Stan's NUTS samples (on
        the program, or on the latent program for a latent method).
    space : callable, optional
        ``space(tuned, beta_floor)``: the default ``--tune`` search space (a
        list of dimensions) around the warm-up's tuned values; None: none.
    step : StepTuning, optional
        A step tuned by Robbins-Monro after the warm-up.
    inner_step : StepTuning, optional
        Its step as the inner kernel of a method that moves on approximations
        (``dc``, ``tt-approx``), tuned on the cheapest approximation.
    move : callable, optional
        ``move(config, density, adaptation, beta=1.0, step=None)``: the method as
        the ``inner`` kernel of another (on a tempered level, an
        approximation), from that method's settings; None: it is not one.
        A tempering method's inner moves (MH, HMC) also take ``factor``, its
        level's factor on their scale or step.
    needs_draws : bool
        It needs warm-up draws (a fitted Gaussian reference, autoencoder
        training): with an earlier warm-up, a NUTS pilot makes them.
    needs_laplace : bool
        It needs a Laplace approximation, which only a Python target's warm-up
        (the PDE posterior's) makes; as the ``inner`` kernel too.
    latent : bool
        It trains an autoencoder on the warm-up draws.
    tempering : str, optional
        Its family of tempering over powers of the likelihood or subsets of the
        data: "swaps" (parallel tempering: a chain per level, neighbours swap)
        or "transitions" (tempered transitions: a trajectory up and down the
        ladder); None: it does not temper.
    acceptance_key : str, optional
        The statistic of its kernel's summary that is its acceptance of interest,
        shown in the studies' tables in place of its steps' (DC's mark moves,
        TT over approximations' trajectories); None: its steps' acceptance.
    cheap_warmup : bool
        It needs of the warm-up only a location, a scale, start points and
        draws, so its ``warmup`` setting may name a cheap one ("pathfinder",
        "laplace") instead of Stan's NUTS warm-up.
    default_warmup : str
        Its warm-up when the user sets no ``warmup``: "nuts" (Stan's NUTS
        warm-up, 1000 iterations) or a cheap one ("laplace", "pathfinder"; only
        with ``cheap_warmup``), the fastest sound one by the measurements in
        ``docs/own-program.md`` ("Each method's default warm-up",
        ``benchmarks/warmup_defaults.py``). An integer ``warmup`` always means
        NUTS iterations.
    studies : tuple of str
        The study workflows that offer it (``pde``, ``approximation``, ``tempering``, ``latent``).
    auto : str, optional
        Its role as a candidate of ``--method auto`` (:mod:`stanaccel.sampling.auto`):
        "own-warmup", piloted from the shared warm-up with a short step-size adaptation (Stan's NUTS, whose
        full run warms up on its own); "warm", piloted
        after the cheap warm-up the candidates share; "approximation", the same
        over the automatic approximation of the program (control variates where
        the observations are declared and the program has ``beta``, else
        Laplace); "modes", piloted only when the other pilots disagree about the
        posterior's modes. None: ``auto`` never tries it.
    auto_settings : tuple of (key, value)
        Settings ``auto`` gives it (its pilot's and its full run's).
    positive : bool
        Its kernel is a positive operator (Metropolis with proposals
        independent of the current point or positively correlated with it:
        random walk, pCN, independence), so it is never antithetic: its ESS
        per draw is at most 1, to which ``auto``'s race holds its pilot.
    gaussian : bool
        Its proposals come from a Gaussian fitted to the warm-up (pCN's
        reference, IMH's proposal), so that it mixes only as well as the
        posterior is near one: ``auto`` does not pilot it where the Laplace
        fit's Pareto k is in the tens (:data:`~stanaccel.sampling.auto.constants.HOPELESS_K`).
    """

    config: type[SamplerConfig]
    label: str
    build: Callable[[KernelFactory], Any] | None
    space: Callable[[dict[str, Any], float], list] | None = None
    step: StepTuning | None = None
    move: Callable[..., Any] | None = None
    inner_step: StepTuning | None = None
    needs_draws: bool = False
    needs_laplace: bool = False
    latent: bool = False
    tempering: str | None = None
    acceptance_key: str | None = None
    cheap_warmup: bool = False
    default_warmup: str = NUTS_WARMUP
    studies: tuple[str, ...] = ()
    auto: str | None = None
    auto_settings: tuple[tuple[str, Any], ...] = ()
    positive: bool = False
    gaussian: bool = False

    @property
    def name(self) -> str:
        return self.config.method

    @property
    def needs(self) -> tuple[str, ...]:
        """What it needs of the program: "beta", "observations", "approx", "ladder", "latent_program"."""
        return self.config.needs

    @property
    def exact(self) -> bool | None:
        """True: it leaves the posterior exactly invariant; False: never; None: its ``exact`` setting says."""
        if self.config.approximate:
            return False
        return None if "exact" in {f.name for f in fields(self.config)} else True

    @property
    def stan_nuts(self) -> bool:
        """Whether it is Stan's NUTS on the program itself (no kernel, no tuning from a warm-up)."""
        return self.build is None and not self.latent

    @property
    def is_inner(self) -> bool:
        """Whether it can be another method's ``inner`` kernel (it has a ``move``)."""
        return self.move is not None

    @property
    def approximations(self) -> bool:
        """Whether it moves on approximations of the posterior (``approx`` or a ``ladder``)."""
        return bool({"approx", "ladder"} & set(self.needs))

    def label_of(self, config: SamplerConfig) -> str:
        """The label of a configuration of this method, such as "TT (HMC)" or "AE-pCN (exact)"."""
        inner = getattr(config, "inner", None)
        return self.label.format(
            inner=METHODS[inner].label if inner else "",
            exactness="exact" if config.is_exact else "approximate",
        )

    def tuned_step(self, config: SamplerConfig) -> StepTuning | None:
        """The step tuned after the warm-up for ``config`` (None: none).

        A method that moves on approximations tunes its inner kernel's step
        there (the inner method's :attr:`inner_step`).
        """
        if self.step is None and self.approximations:
            return METHODS[config.inner].inner_step
        return self.step

    def step_key(self, config: SamplerConfig) -> str | None:
        """The setting of ``config``'s step, to lower when almost no proposal is accepted.

        The key of the step tuned after the warm-up (:meth:`tuned_step`), else
        of its step as an inner kernel (:attr:`inner_step`: HMC's step size),
        else of its inner kernel's; None where the table names no step (MH's
        scale, IMH's proposal, Stan's NUTS, which adapts its own).
        """
        inner = getattr(config, "inner", None)
        step = self.tuned_step(config) or self.inner_step or (METHODS[inner].inner_step if inner else None)
        return None if step is None else step.key

    def warmup_adapts_step(self, config: SamplerConfig) -> bool:
        """Whether a cheap warm-up must have Stan's NUTS adapt an HMC step size for ``config``.

        True when it moves with one (:meth:`uses_step_size`) on the posterior
        itself; an inner HMC moving on approximations has its step tuned
        there instead, at a fraction of the cost (:attr:`inner_step`).
        """
        step = self.tuned_step(config)
        return self.uses_step_size(config) and not (step and step.unless_warmed_up)

    def uses_step_size(self, config: SamplerConfig) -> bool:
        """Whether ``config`` moves with an HMC-type ``step_size`` (its own or its inner kernel's).

        After a cheap warm-up, which adapts no step size, such a method has
        one adapted for it (:mod:`stanaccel.sampling.warmup`).
        """
        inner = getattr(config, "inner", None)
        settings = METHODS[inner].config if inner else self.config
        return "step_size" in {f.name for f in fields(settings)}

    def uses_laplace(self, config: SamplerConfig) -> bool:
        """Whether ``config`` needs a Laplace approximation (the method's, or its inner kernel's)."""
        inner = getattr(config, "inner", None)
        return self.needs_laplace or bool(inner and METHODS[inner].needs_laplace)


def method_spec(method: str, where: str = "method") -> MethodSpec:
    """The record of ``method``, or a :class:`ConfigError` naming the methods there are."""
    return method_record(method, where)


def methods_in(study: str) -> tuple[str, ...]:
    """The methods a study workflow offers, in the table's order."""
    return tuple(name for name, spec in METHODS.items() if study in spec.studies)


# Kernels: each takes the factory, whose methods give the chain's densities and the warm-up's adaptation.


def inner_move(config: SamplerConfig):
    """The move of ``config``'s inner kernel (its ``inner`` setting)."""
    return METHODS[config.inner].move


def _mh(factory: KernelFactory):
    return factory.on_posterior(mh_move)


def _hmc(factory: KernelFactory):
    return factory.on_posterior(hmc_move)


def _pcn(factory: KernelFactory):
    return factory.on_posterior(pcn_move)


def _hessian_pcn(factory: KernelFactory):
    return factory.on_posterior(hessian_pcn_move)


def _parallel_tempering(factory: KernelFactory):
    return factory.tempering(parallel=True, move=inner_move(factory.config))


def _tempered_transitions(factory: KernelFactory):
    return factory.tempering(parallel=False, move=inner_move(factory.config))


def _discretizing_chain(factory: KernelFactory):
    return factory.discretizing_chain(inner_move(factory.config))


def _tempered_approximations(factory: KernelFactory):
    return factory.tempered_approximations(inner_move(factory.config))


def _autoencoder_hmc(factory: KernelFactory):
    return factory.autoencoder_hmc()


def _autoencoder_pcn(factory: KernelFactory):
    return factory.autoencoder_pcn()


# Steps tuned after the warm-up: ``kernels(factory, density)`` returns the kernel of step h.


def _pcn_steps(factory: KernelFactory, density):
    return _steps(METHODS[factory.config.method].move, factory, density)


def _inner_steps(factory: KernelFactory, density):
    return _steps(inner_move(factory.config), factory, density)


def _steps(move, factory: KernelFactory, density):
    """``make(h)``: ``move``'s kernel of step h; a pCN kernel is built once and copied with each h (its
    reference's Cholesky factor, O(dim^3), is not computed again per tuning iteration)."""
    config, adaptation = factory.config, factory.adaptation
    built = []

    def make(h):
        if built and hasattr(built[0], "rho"):
            return with_step(built[0], h)
        built[:] = [move(config, density, adaptation, step=h)]
        return built[0]

    return make


def _ae_pcn_steps(factory: KernelFactory, density):
    return lambda h: factory.ae_pcn(density, h)


def _ae_hmc_steps(factory: KernelFactory, density):
    latent = factory.latent_density()
    return lambda h: factory.ae_hmc(density, h, latent)


PCN_STEP = StepTuning("pcn_step", 0.25, 3.9, _pcn_steps)
INNER_PCN_STEP = StepTuning("pcn_step", 0.25, 3.9, _inner_steps, inner=True)
INNER_HMC_STEP = StepTuning("step_size", 0.9, 20.0, _inner_steps, inner=True, unless_warmed_up=True)
"""HMC's step on an approximation, after a cheap warm-up: Robbins-Monro to an end-point acceptance of 0.9.
Higher than NUTS's 0.8, which is averaged over its tree and so gives a smaller step than an end-point
0.8 would; with a fixed number of steps a larger one makes trajectories of about a period, which return
near their start. Measured on the big-data regressions (N = 10^4, dc over control variates, inner hmc):
end-point targets 0.65 and 0.8 gave bulk ESS 1,100 and 1,817 of 4,000 draws, 0.9 gave 7,721."""


# Default --tune search spaces, around the warm-up's tuned values.


def _log_range(name: str, low: float, high: float):
    """A real setting searched on a log scale (``stanaccel.tuning`` imports this package's config:
    imported when a space is asked for, after both are loaded)."""
    from stanaccel.tuning import Real

    return Real(name, low, high, log=True)


def _integers(name: str, low: int, high: int):
    """An integer setting searched in ``low..high``."""
    from stanaccel.tuning import Integer

    return Integer(name, low, high)


def _mh_space(tuned: dict[str, Any], beta_floor: float) -> list:
    scale = tuned.get("scale") or 0.5
    return [_log_range("scale", scale / 4, scale * 4)]


def _hmc_space(tuned: dict[str, Any], beta_floor: float) -> list:
    step = tuned.get("step_size") or 0.1
    return [_log_range("step_size", step / 4, step * 2), _integers("n_steps", 1, 40)]


def _pcn_space(tuned: dict[str, Any], beta_floor: float) -> list:
    return [_log_range("pcn_step", 1e-3, 2.0)]


def _ae_hmc_space(tuned: dict[str, Any], beta_floor: float) -> list:
    return [_log_range("latent_step_size", 1e-3, 1.0), _integers("latent_n_steps", 1, 40)]


def _ladder_space(tuned: dict[str, Any], beta_floor: float) -> list:
    ladder = [_integers("levels", 1, 12)]
    if beta_floor < 0.5:
        ladder.insert(0, _log_range("beta_min", max(beta_floor, 1e-3), 0.5))
    return ladder


def _dc_space(tuned: dict[str, Any], beta_floor: float) -> list:
    return [_integers("moves", 1, 20), _integers("jump", 1, 20)]


def _tt_approx_space(tuned: dict[str, Any], beta_floor: float) -> list:
    return [_integers("inner_steps", 1, 10)]


@dataclass(frozen=True)
class MALAConfig(_HMCStep):
    """Metropolis-adjusted Langevin, preconditioned by the warm-up's inverse metric."""

    method: ClassVar[str] = "mala"
    tune: int = setting(
        100,
        doc="iterations tuning the step by Robbins-Monro before sampling (their time is charged)",
        kind="int",
        low=0,
    )


def _mala_steps(factory: KernelFactory, density):
    config = factory.config
    metric = factory.adaptation.inv_metric if config.precondition else None
    return lambda h: MALA(density, h, inv_metric=metric)


def _mala(factory: KernelFactory):
    return _mala_steps(factory, factory.record(factory.timed_posterior()))(factory.config.step_size)


def _mala_space(tuned: dict[str, Any], beta_floor: float) -> list:
    step = tuned.get("step_size") or 0.1
    return [_log_range("step_size", step / 8, step * 2)]


@dataclass(frozen=True)
class IMHConfig(SamplerConfig):
    """Independence Metropolis-Hastings: t proposals fitted to the warm-up draws, evaluated in batches."""

    method: ClassVar[str] = "imh"
    df: float = setting(
        7.0,
        doc="degrees of freedom of the t proposal (the smaller, the heavier its tails; > 2, so that it "
        "has a covariance)",
        kind="number",
        low=2,
        low_open=True,
    )
    scale: float = setting(
        1.2,
        doc="the t proposal's scale matrix is scale x the warm-up draws' covariance (above 1: a margin "
        "for a covariance the warm-up's few draws underestimate in some direction)",
        kind="number",
        low=0,
        low_open=True,
    )
    batch: int = setting(
        16,
        doc="proposals drawn and evaluated at once, on every core (with a Dask executor: across its "
        "workers); the chain's draws do not depend on it",
        kind="int",
        low=1,
    )
    thin: int = setting(1, doc=THIN_DOC, kind="int", low=1)


def _imh(factory: KernelFactory):
    config = factory.config
    mean, covariance = factory.adaptation.gaussian()
    density = factory.record(factory.timed_posterior())
    return IndependenceMetropolis(
        density,
        mean,
        covariance,
        df=config.df,
        scale=config.scale,
        batch=config.batch,
        evaluate=factory.evaluate,
    )


def _imh_space(tuned: dict[str, Any], beta_floor: float) -> list:
    return [_log_range("df", 3.0, 30.0), _log_range("scale", 0.8, 2.5)]


_ALL_STUDIES = ("pde", "approximation", "tempering", "latent")

METHODS: dict[str, MethodSpec] = {
    spec.name: spec
    for spec in (
        MethodSpec(NutsConfig, "Stan NUTS", None, auto="own-warmup"),
        MethodSpec(
            MHConfig,
            "MH",
            _mh,
            _mh_space,
            move=mh_move,
            cheap_warmup=True,
            default_warmup="laplace",
            studies=("approximation", "tempering"),
            positive=True,
        ),
        MethodSpec(
            HMCConfig,
            "HMC",
            _hmc,
            _hmc_space,
            move=hmc_move,
            inner_step=INNER_HMC_STEP,
            cheap_warmup=True,
            default_warmup="laplace",
            studies=_ALL_STUDIES,
            auto="warm",
        ),
        MethodSpec(
            MALAConfig,
            "MALA",
            _mala,
            _mala_space,
            StepTuning("step_size", 0.574, 20.0, _mala_steps),
            cheap_warmup=True,
            default_warmup="laplace",
        ),
        MethodSpec(
            PCNConfig,
            "pCN",
            _pcn,
            _pcn_space,
            PCN_STEP,
            pcn_move,
            inner_step=INNER_PCN_STEP,
            needs_draws=True,
            cheap_warmup=True,
            default_warmup="laplace",
            studies=("pde",),
            auto="warm",
            positive=True,
            gaussian=True,
        ),
        MethodSpec(
            IMHConfig,
            "IMH",
            _imh,
            _imh_space,
            needs_draws=True,
            cheap_warmup=True,
            default_warmup="laplace",
            auto="warm",
            positive=True,
            gaussian=True,
        ),
        MethodSpec(
            HPCNConfig,
            "h-pCN",
            _hessian_pcn,
            _pcn_space,
            PCN_STEP,
            hessian_pcn_move,
            inner_step=INNER_PCN_STEP,
            needs_laplace=True,
            studies=("pde",),
        ),
        MethodSpec(
            PTConfig,
            "PT ({inner})",
            _parallel_tempering,
            _ladder_space,
            tempering="swaps",
            cheap_warmup=True,
            studies=("pde", "tempering"),
            auto="modes",
        ),
        MethodSpec(
            TTConfig,
            "TT ({inner})",
            _tempered_transitions,
            _ladder_space,
            tempering="transitions",
            cheap_warmup=True,
            studies=("pde", "tempering"),
        ),
        MethodSpec(
            SPTConfig,
            "SPT ({inner})",
            _parallel_tempering,
            _ladder_space,
            tempering="swaps",
            cheap_warmup=True,
            studies=("tempering",),
        ),
        MethodSpec(
            STTConfig,
            "STT ({inner})",
            _tempered_transitions,
            _ladder_space,
            tempering="transitions",
            cheap_warmup=True,
            studies=("tempering",),
        ),
        MethodSpec(
            DCConfig,
            "DC ({inner})",
            _discretizing_chain,
            _dc_space,
            acceptance_key="move_acceptance",
            cheap_warmup=True,
            default_warmup="laplace",
            studies=("pde", "approximation"),
            auto="approximation",
            auto_settings=(("inner", "hmc"),),
        ),
        MethodSpec(
            TTApproxConfig,
            "TT over approximations ({inner})",
            _tempered_approximations,
            _tt_approx_space,
            acceptance_key="tt_acceptance",
            cheap_warmup=True,
            default_warmup="laplace",
            studies=("pde", "approximation"),
        ),
        MethodSpec(
            AEHMCConfig,
            "AE-HMC ({exactness})",
            _autoencoder_hmc,
            _ae_hmc_space,
            StepTuning("latent_step_size", 0.75, 20.0, _ae_hmc_steps),
            needs_draws=True,
            latent=True,
            cheap_warmup=True,
            studies=("pde", "latent"),
        ),
        MethodSpec(
            AEPCNConfig,
            "AE-pCN ({exactness})",
            _autoencoder_pcn,
            _pcn_space,
            StepTuning("pcn_step", 0.3, 3.9, _ae_pcn_steps),
            needs_draws=True,
            latent=True,
            cheap_warmup=True,
            studies=("pde", "latent"),
        ),
        MethodSpec(
            LatentNutsConfig,
            "NUTS in the latent space (approximate)",
            None,
            needs_draws=True,
            latent=True,
            studies=("latent",),
        ),
    )
}
TABLE.update(METHODS)  # the settings' module looks methods up there (it cannot import this module)
