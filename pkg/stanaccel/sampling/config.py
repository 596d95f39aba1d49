"""One sampler configuration: typed settings per method, checked before anything runs.

Every method has a dataclass of settings, and the same keys are used in
Python (``sample(..., settings={...})``), in workflow files (a ``sample``
step's keys) and on the command line (``--set key=value``, ``--config
FILE.toml``). :func:`make_config` checks a mapping of settings: an unknown or
misspelt key, a value of the wrong kind or out of range is a
:class:`ConfigError` naming the key, what is allowed, and where the value
came from.

Precedence, the same everywhere: a value the user sets wins; otherwise the
value tuned from the NUTS warm-up (``tuned`` below); otherwise the default.
Settings that can be tuned default to ``None`` ("not set") in the
dataclass; :meth:`SamplerConfig.resolve` fills them in and records where each
value came from.
"""

from __future__ import annotations

import difflib
import math
import reprlib
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any, ClassVar

from stanaccel.errors import ConfigError
from stanaccel.observations import Observations

INNER_KERNELS = ("mh", "hmc")
"""The choices of a tempering method's ``inner`` setting: the full-space moves that widen with the
temperature. Written out (the table of methods imports this module); every ``inner`` choice is a method
with a ``move`` there (``tests/sampling/test_methods.py`` checks)."""

WARMUPS = ("nuts", "pathfinder", "laplace")
"""The warm-ups a ``warmup`` setting names: Stan's NUTS, or a cheap one that fits a Gaussian (Stan's
Pathfinder; the mode by L-BFGS and the Hessian there) for the methods whose table entry accepts it. Each
method's default is its table entry's ``default_warmup``."""

NUTS_WARMUP = WARMUPS[0]

APPROX_WARMUP = "nuts-approx"
"""A ``warmup`` of the methods over approximations (``dc``, ``tt-approx``): Stan's NUTS warm-up
(:data:`DEFAULT_NUTS_WARMUP` iterations) on the cheapest approximation instead of on pi, where that
approximation is a Stan program (a subset of the data, the user's own program)."""

WARMUP_NAMES = (*WARMUPS, APPROX_WARMUP)
"""Every name a ``warmup`` setting of ``sample`` takes."""
"""The ``warmup`` name of Stan's NUTS warm-up (a warm-up, not the method of that name)."""

DEFAULT_NUTS_WARMUP = 1000
"""Iterations of Stan's NUTS warm-up that ``warmup = "nuts"`` means: a method's default when its default
warm-up is NUTS's, and what runs after a cheap warm-up that was not good enough."""

LARGEST = 1e6
"""The largest value of a number setting that has no upper bound of its own (a scale, a step size,
a prior sd). Far beyond any useful value: a proposal scaled by more is refused almost surely, and
values near the largest float (1e308) overflow to infinity in the first move."""


def setting(
    default: Any = None,
    *,
    doc: str,
    kind: str,
    tuned: str | None = None,
    fallback: Any = None,
    choices: tuple | None = None,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
):
    """A dataclass field with what :func:`make_config` checks and the README table shows.

    Parameters
    ----------
    default : value
        The dataclass default; ``None`` for a setting tuned from the warm-up.
    doc : str
        What the setting means.
    kind : str
        "int", "number", "bool", "str", "approximation", "approximations", "observations",
        "ladder" (1 = beta_0 > beta_1 > ... >= 0), "factors" (positive numbers), "warmup" (an integer or
        one of :data:`WARMUPS`).
    tuned : str, optional
        How the value is tuned when the user does not set it.
    fallback : value, optional
        The default used when the setting is neither set nor tuned.
    choices : tuple, optional
        Allowed values of a string.
    low, high : float, optional
        Bounds of a number (closed unless ``low_open`` / ``high_open``).
    """
    meta = {
        "doc": doc,
        "kind": kind,
        "tuned": tuned,
        "fallback": fallback,
        "choices": choices,
        "low": low,
        "high": high,
        "low_open": low_open,
        "high_open": high_open,
    }
    return field(default=default, metadata=meta)


PRIOR_SD_DOC = (
    "the sd of a zero-mean Gaussian prior on the unconstrained parameters, used as pCN's reference "
    "(default: a Gaussian fitted to the warm-up draws)"
)
PRIOR_SD_TUNED = "1 on a posterior whose prior is whitened, N(0, I) (the PDE posterior)"
TUNE_DOC = "iterations tuning the pCN or latent step before sampling (their time is charged)"
THIN_DOC = "keep every thin-th state (draws counts the kept ones), for long chains of cheap steps"


def pcn_step_setting(doc: str, acceptance: float):
    """The pCN step h, tuned by Robbins-Monro for ``acceptance``."""
    return setting(
        doc=doc,
        kind="number",
        low=0,
        high=4,
        low_open=True,
        high_open=True,
        tuned=f"Robbins-Monro for acceptance {acceptance} over `tune` iterations",
        fallback=0.5,
    )


APPROXIMATION_KINDS = (
    "subset",
    "control-variate",
    "laplace",
    "fitc",
    "sor",
    "program",
    "coarse",
    "linearized",
)
NO_SIZE = ("program", "linearized", "laplace")
"""The kinds that take no size m."""


@dataclass(frozen=True)
class Approximation:
    """A cheap approximation pi* of the posterior, for ``dc`` and ``tt-approx``.

    Attributes
    ----------
    kind : str
        "subset": the same program on m observations drawn at random (needs
        ``observations``), its likelihood scaled by N/m when ``scale``;
        "control-variate": such a scaled subset (needs ``observations``;
        scaled by ``beta`` where the program declares it, else as the
        difference of two subsets, :class:`~stanaccel.approx.taylor.ScaledSubset`)
        corrected by second-order Taylor control variates about the
        posterior mode (:mod:`stanaccel.approx.taylor`);
        "laplace": the Gaussian at the posterior mode, with the Hessian there;
        "program": a second Stan program (``program``) with the same
        parameters, on ``data`` (default: the posterior's data);
        "fitc", "sor": the bundled low-rank approximations of ``gp_ard``;
        "coarse", "linearized": the PDE posterior's surrogates in Stan, the
        same PDE on an m x m mesh, or the forward map linearised at the MAP
        (:mod:`stanaccel.pde.surrogates`), each with the enhanced error model
        unless ``scale`` is false.
    m : int
        Subset size, number of inducing inputs, or cells per side of a coarse mesh.
    scale : bool
        Subsets: multiply the subset's likelihood by N/m (the program's ``beta``;
        a control-variate subset always is);
        PDE surrogates: add the enhanced error model (mean and covariance of the
        surrogate's error over Laplace draws).
    inducing : str
        Low rank: "landmarks" or "kmeans".
    program, data : str
        kind "program": a ``.stan`` file and a Stan JSON data file.
    """

    kind: str = "subset"
    m: int | None = None
    scale: bool = True
    inducing: str = "landmarks"
    program: str | None = None
    data: str | None = None

    @classmethod
    def parse(cls, value: Any, where: str = "approx") -> Approximation:
        if isinstance(value, Approximation):
            return value
        if not isinstance(value, dict):
            raise ConfigError(
                f"{where} = {reprlib.repr(value)}: expected a table such as "
                '{ kind = "subset", m = 100 } or { program = "approx.stan" }'
            )
        value = dict(value)
        if "program" in value:
            value.setdefault("kind", "program")
        allowed = [f.name for f in fields(cls)]
        for key in value:
            if key not in allowed:
                raise ConfigError(
                    f"{where}: unknown key {key!r}; allowed: {', '.join(allowed)}{_hint(key, allowed)}"
                )
        approx = cls(**value)
        if approx.kind not in APPROXIMATION_KINDS:
            raise ConfigError(
                f"{where}.kind = {approx.kind!r}: expected one of {', '.join(APPROXIMATION_KINDS)}"
            )
        if approx.kind == "program" and not approx.program:
            raise ConfigError(f"{where}: kind 'program' needs program = \"approx.stan\"")
        if approx.kind not in NO_SIZE and (not isinstance(approx.m, int) or approx.m < 1):
            raise ConfigError(f"{where}.m = {approx.m!r}: kind {approx.kind!r} needs a positive integer m")
        if approx.kind == "laplace" and approx.m is not None:
            raise ConfigError(
                f"{where}.m = {approx.m!r}: kind 'laplace' (the Gaussian at the mode) takes no m"
            )
        if approx.kind == "control-variate" and approx.scale is not True:
            raise ConfigError(
                f"{where}.scale = {approx.scale!r}: kind 'control-variate' always scales its subset by N/m; "
                "leave scale out (or use kind 'subset' for an unscaled subset)"
            )
        if approx.inducing not in ("landmarks", "kmeans"):
            raise ConfigError(f"{where}.inducing = {approx.inducing!r}: expected 'landmarks' or 'kmeans'")
        if not isinstance(approx.scale, bool):
            raise ConfigError(f"{where}.scale = {approx.scale!r}: expected true or false")
        return approx

    @property
    def label(self) -> str:
        if self.kind == "program":
            return f"program {self.program}" + (f" on {self.data}" if self.data else "")
        plain = "" if self.scale or self.kind not in ("coarse", "linearized") else " (no error model)"
        if self.kind in ("linearized", "laplace"):
            return self.kind + plain
        return f"{self.kind} m={self.m}{plain}"


@dataclass(frozen=True)
class SamplerConfig:
    """Settings every method shares. Subclasses add their own (see :mod:`stanaccel.sampling.methods`)."""

    method: ClassVar[str] = ""
    approximate: ClassVar[bool] = False
    """True for a method that never leaves pi exactly invariant."""
    needs: ClassVar[tuple[str, ...]] = ()
    """What the program must provide: "beta" (power tempering), "observations" (subsampling)."""

    chains: int = setting(4, doc="number of chains", kind="int", low=1)
    draws: int = setting(1000, doc="draws per chain", kind="int", low=1)
    warmup: int | str = setting(
        None,
        doc="the warm-up: iterations of Stan's NUTS warm-up per chain, or 'nuts' (1000 of them), "
        "'pathfinder' or 'laplace' (a Gaussian fitted cheaply, for the methods that need only "
        "a location, a scale and start points), or 'nuts-approx' (dc, tt-approx: NUTS's warm-up on "
        "the cheapest approximation, a Stan program)",
        kind="warmup",
        low=1,
    )

    def __post_init__(self):
        if self.warmup is None:  # not set: the method's default (its table entry's ``default_warmup``)
            object.__setattr__(self, "warmup", default_warmup(self.method))

    @property
    def warmup_kind(self) -> str:
        """The warm-up this configuration asks for: "nuts", "pathfinder", "laplace" or "nuts-approx"."""
        return self.warmup if isinstance(self.warmup, str) else NUTS_WARMUP

    @property
    def cheap_warmup(self) -> bool:
        """Whether it asks for a cheap warm-up (Pathfinder, Laplace, NUTS on pi*) instead of NUTS's on pi."""
        return self.warmup_kind != NUTS_WARMUP

    @property
    def is_exact(self) -> bool:
        """Whether the sampler leaves the posterior exactly invariant."""
        return not self.approximate and bool(getattr(self, "exact", True))

    def user_keys(self) -> frozenset[str]:
        return getattr(self, "_user_keys", frozenset())

    def replace(self, **values: Any) -> SamplerConfig:
        """A copy with ``values`` changed, as defaults (not as the user's settings)."""
        from dataclasses import replace

        copy = replace(self, **values)
        object.__setattr__(copy, "_user_keys", self.user_keys())
        return copy

    def resolve(self, tuned: dict[str, Any]) -> tuple[SamplerConfig, dict[str, str]]:
        """Fill unset settings: the user's value, else the tuned one, else the default.

        Returns the resolved config and, per key, where its value came from
        ("user", "tuned" or "default").
        """
        values, sources = {}, {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in self.user_keys():
                values[f.name], sources[f.name] = value, "user"
            elif value is None and f.metadata.get("tuned") and tuned.get(f.name) is not None:
                values[f.name], sources[f.name] = tuned[f.name], "tuned"
            elif value is None and f.metadata.get("fallback") is not None:
                values[f.name], sources[f.name] = f.metadata["fallback"], "default"
            else:
                values[f.name], sources[f.name] = value, "default"
        resolved = type(self)(**values)
        object.__setattr__(resolved, "_user_keys", self.user_keys())
        return resolved, sources

    def as_dict(self) -> dict[str, Any]:
        """The settings as plain values (for attributes, JSON and TOML)."""
        out = {"method": self.method}
        for key, value in asdict(self).items():
            out[key] = value
        return out


@dataclass(frozen=True)
class NutsConfig(SamplerConfig):
    """Stan's NUTS itself: warm-up, then ``draws`` draws."""

    method: ClassVar[str] = "nuts"
    metric: str = setting("diag", doc="metric adapted in warm-up", kind="str", choices=("diag", "dense"))
    delta: float = setting(
        0.8,
        doc="target acceptance of step-size adaptation",
        kind="number",
        low=0,
        high=1,
        low_open=True,
        high_open=True,
    )
    max_depth: int = setting(10, doc="largest tree depth", kind="int", low=1)


@dataclass(frozen=True)
class _Precondition(SamplerConfig):
    precondition: bool = setting(
        True, doc="use the warm-up's metric (MH covariance, HMC inverse metric)", kind="bool"
    )


@dataclass(frozen=True)
class _MHMove(_Precondition):
    scale: float | None = setting(
        doc="MH proposal scale relative to the warm-up's covariance",
        kind="number",
        low=0,
        low_open=True,
        tuned="2.38 / sqrt(dim)",
        fallback=0.1,
    )


@dataclass(frozen=True)
class _HMCStep(_Precondition):
    step_size: float | None = setting(
        doc="HMC leapfrog step size in the original space",
        kind="number",
        low=0,
        low_open=True,
        tuned="NUTS warm-up's adapted step size (median)",
        fallback=0.1,
    )


@dataclass(frozen=True)
class _HMCMove(_HMCStep):
    n_steps: int = setting(10, doc="HMC leapfrog steps per move", kind="int", low=1)
    n_steps_jitter: float = setting(
        0.5,
        doc="draw each move's number of steps from "
        "[ceil(n_steps (1 - jitter)), n_steps], against periodic trajectories",
        kind="number",
        low=0,
        high=1,
        high_open=True,
    )


@dataclass(frozen=True)
class _Inner(_MHMove, _HMCMove):
    """Settings of both full-space moves, for methods whose ``inner`` kernel is MH or HMC."""


@dataclass(frozen=True)
class MHConfig(_MHMove):
    """Random-walk Metropolis on the posterior."""

    method: ClassVar[str] = "mh"


@dataclass(frozen=True)
class HMCConfig(_HMCMove):
    """HMC with a fixed step size and number of steps on the posterior."""

    method: ClassVar[str] = "hmc"


@dataclass(frozen=True)
class PCNConfig(SamplerConfig):
    """pCN with a Gaussian reference (fitted to the warm-up, or a prior): exact, pi / reference accepts."""

    prior_sd: float | None = setting(
        doc=PRIOR_SD_DOC, kind="number", low=0, low_open=True, tuned=PRIOR_SD_TUNED
    )

    method: ClassVar[str] = "pcn"
    pcn_step: float | None = pcn_step_setting("pCN step h (rho = (1 - h/4) / (1 + h/4))", 0.25)
    tune: int = setting(100, doc=TUNE_DOC, kind="int", low=0)
    thin: int = setting(1, doc=THIN_DOC, kind="int", low=1)


@dataclass(frozen=True)
class HPCNConfig(SamplerConfig):
    """Hessian-informed pCN: reversible for the Laplace approximation N(MAP, (I + H)^-1); exact.

    Needs a Laplace approximation in whitened coordinates, which the PDE
    posterior's warm-up makes (its MAP and Gauss-Newton Hessian).
    """

    method: ClassVar[str] = "h-pcn"
    pcn_step: float | None = pcn_step_setting("h-pCN step h (rho = (1 - h/4) / (1 + h/4))", 0.25)
    tune: int = setting(100, doc=TUNE_DOC, kind="int", low=0)
    thin: int = setting(1, doc=THIN_DOC, kind="int", low=1)


@dataclass(frozen=True)
class _Tempering(_Inner):
    inner: str = setting("hmc", doc="inner kernel at each level", kind="str", choices=INNER_KERNELS)
    inner_steps: int = setting(1, doc="inner transitions per level (and direction, TT)", kind="int", low=1)
    levels: int = setting(
        6, doc="levels above the target (placed ladder: kept if given, else chosen)", kind="int", low=1
    )
    beta_min: float = setting(
        0.125,
        doc="smallest beta (a placed ladder on pt and tt ends at 0, the prior, unless this is given)",
        kind="number",
        low=0,
        high=1,
        low_open=True,
        high_open=True,
    )
    betas: list | None = setting(
        doc="explicit ladder (1 = beta_0 > beta_1 > ... >= 0; 0 is the prior), instead of levels",
        kind="ladder",
    )
    schedule_rounds: int = setting(
        8,
        doc="rounds of parallel tempering before the draws (2, 4, ..., 2^rounds scans) that place the "
        "ladder unless betas, or levels and beta_min both, are given: betas spaced to equal swap "
        "rejections, the number of levels from the barrier; 0: the geometric ladder of levels and beta_min",
        kind="int",
        low=0,
    )
    step_factors: list | None = setting(
        doc="each level's factor on its inner move's step (HMC) or scale (MH), the target's first, one per "
        "beta: set with the betas when the ladder is placed (adapted to each level's inner acceptance); "
        "none: 1",
        kind="factors",
    )
    temperature_scaling: str = setting(
        "both",
        doc="which inner moves widen with beta_m^(-1/2) at level m: "
        "MH's scale and HMC's step, MH's only (the tempering paper's), "
        "or none",
        kind="str",
        choices=("both", "mh", "none"),
    )


@dataclass(frozen=True)
class PTConfig(_Tempering):
    """Parallel tempering over powers of the likelihood."""

    method: ClassVar[str] = "pt"
    needs: ClassVar[tuple[str, ...]] = ("beta",)
    swap: str = setting("even_odd", doc="swap scheme", kind="str", choices=("even_odd", "random"))


@dataclass(frozen=True)
class TTConfig(_Tempering):
    """Tempered transitions over powers of the likelihood, cycled with one inner step at the target."""

    method: ClassVar[str] = "tt"
    needs: ClassVar[tuple[str, ...]] = ("beta",)


@dataclass(frozen=True)
class SPTConfig(PTConfig):
    """Parallel tempering by subsampling: level m is the posterior of a nested subset of the data."""

    method: ClassVar[str] = "spt"
    needs: ClassVar[tuple[str, ...]] = ("observations",)
    observations: Observations | None = setting(doc="which data are per observation", kind="observations")


@dataclass(frozen=True)
class STTConfig(TTConfig):
    """Tempered transitions by subsampling."""

    method: ClassVar[str] = "stt"
    needs: ClassVar[tuple[str, ...]] = ("observations",)
    observations: Observations | None = setting(doc="which data are per observation", kind="observations")


def _approximation_inner(default: str):
    """The ``inner`` setting of a method over approximations, with its default."""
    return setting(
        default,
        doc="kernel that moves on the approximation (pcn, h-pcn: about the whitened prior or the Laplace "
        "approximation)",
        kind="str",
        choices=(*INNER_KERNELS, "pcn", "h-pcn"),
    )


@dataclass(frozen=True)
class _WithApproximations(_Inner):
    inner: str = _approximation_inner("mh")
    pcn_step: float | None = pcn_step_setting("inner pCN or h-pCN step h on the approximation", 0.25)
    tune: int = setting(
        100,
        doc="iterations tuning the inner kernel's step on the cheapest approximation (pCN or h-pCN "
        "step h; HMC step size after a cheap warm-up)",
        kind="int",
        low=0,
    )
    thin: int = setting(1, doc=THIN_DOC, kind="int", low=1)
    inner_steps: int = setting(1, doc="inner transitions per move (k)", kind="int", low=1)
    observations: Observations | None = setting(
        doc="which data are per observation (subset approximations)", kind="observations"
    )


@dataclass(frozen=True)
class DCConfig(_WithApproximations):
    """The discretizing chain: moves on pi*, marks accepted on pi, exact evaluations cached."""

    method: ClassVar[str] = "dc"
    needs: ClassVar[tuple[str, ...]] = ("approx",)
    approx: Approximation | None = setting(doc="the approximation pi*", kind="approximation")
    # HMC by default: on the measured posteriors (benchmarks/big_data.py) DC's MH inner kernel had not
    # converged in 4 x 1000 draws where HMC's made 2000 ESS (min of bulk and tail); auto picks HMC too.
    inner: str = _approximation_inner("hmc")
    moves: int = setting(1, doc="mark moves per iteration (r)", kind="int", low=1)
    jump: int = setting(1, doc="steps of the inner chain per jump (s)", kind="int", low=1)


@dataclass(frozen=True)
class TTApproxConfig(_WithApproximations):
    """Tempered transitions over a ladder of ever cheaper approximations."""

    method: ClassVar[str] = "tt-approx"
    needs: ClassVar[tuple[str, ...]] = ("ladder",)
    ladder: list | None = setting(doc="approximations pi_1, pi_2, ... (ever cheaper)", kind="approximations")


@dataclass(frozen=True)
class _Autoencoder(SamplerConfig):
    latent_dim: int | None = setting(doc="latent dimension", kind="int", low=1, tuned="about dim / 10")
    architecture: str = setting("linear", doc="autoencoder", kind="str", choices=("linear", "tanh"))
    epochs: int = setting(1000, doc="largest number of training epochs (early stopping)", kind="int", low=1)
    train_from: float = setting(
        0.5,
        doc="train on the warm-up draws after this fraction",
        kind="number",
        low=0,
        high=1,
        high_open=True,
    )


@dataclass(frozen=True)
class _Latent(_Autoencoder, _HMCStep):
    tune: int = setting(100, doc=TUNE_DOC, kind="int", low=0)
    exact: bool = setting(
        True, doc="leave pi exactly invariant (false: the published, approximate method)", kind="bool"
    )
    complement_steps: int = setting(
        3,
        doc="exact mode: leapfrog steps of the full-space HMC move after each latent move",
        kind="int",
        low=1,
    )


@dataclass(frozen=True)
class AEHMCConfig(_Latent):
    """HMC in an autoencoder's latent space, accepted in the original space."""

    method: ClassVar[str] = "ae-hmc"
    latent_step_size: float | None = setting(
        doc="leapfrog step in the latent space",
        kind="number",
        low=0,
        low_open=True,
        tuned="Robbins-Monro for acceptance 0.75",
        fallback=0.1,
    )
    latent_n_steps: int = setting(10, doc="leapfrog steps in the latent space", kind="int", low=1)
    encoded_momentum: bool = setting(
        False, doc="approximate mode: the paper's literal momentum p_h = E p_v", kind="bool"
    )
    latent_program: str | None = setting(
        doc="approximate mode: a latent Stan program for the gradients "
        "(the paper's route; default: the chain rule through the decoder)",
        kind="str",
    )


@dataclass(frozen=True)
class AEPCNConfig(_Latent):
    """pCN in an autoencoder's latent space, accepted in the original space."""

    method: ClassVar[str] = "ae-pcn"
    prior_sd: float | None = setting(
        doc=PRIOR_SD_DOC, kind="number", low=0, low_open=True, tuned=PRIOR_SD_TUNED
    )
    pcn_step: float | None = pcn_step_setting("pCN step h in the latent space", 0.3)
    thin: int = setting(1, doc=THIN_DOC, kind="int", low=1)


@dataclass(frozen=True)
class LatentNutsConfig(_Autoencoder):
    """Stan's NUTS on a latent Stan program, its draws decoded (the Deep MCMC pipeline; approximate)."""

    method: ClassVar[str] = "latent-nuts"
    approximate: ClassVar[bool] = True
    needs: ClassVar[tuple[str, ...]] = ("latent_program",)
    latent_program: str | None = setting(doc="Stan program of log pi(decode(z)) (see the README)", kind="str")


NEEDED_EXAMPLES = {
    "approx": (
        'approx = { kind = "laplace" } (the Gaussian at the posterior mode: any program), '
        '{ kind = "subset", m = 100 } (100 observations: needs observations) or '
        '{ program = "approx.stan" } (a cheaper program with the same parameters); on the command line '
        "--set 'approx={ kind = \"laplace\" }'"
    ),
    "ladder": (
        'ladder = [{ kind = "subset", m = 1000 }, { kind = "laplace" }] (ever cheaper approximations, each '
        "as approx takes them); on the command line --set 'ladder=[{ kind = \"laplace\" }]'"
    ),
    "latent_program": 'latent_program = "latent.stan" (a Stan program of log pi(decode(z)): see the README)',
}
"""An example value of each setting that a method cannot run without (``needs``), for its error."""


def missing_setting(method: str, key: str) -> ConfigError:
    """The error for ``method`` run without ``key``, a setting it needs: with an example value."""
    example = NEEDED_EXAMPLES.get(key)
    return ConfigError(
        f"method {method!r} needs the setting {key!r}" + (f", such as {example}" if example else "")
    )


def keys(method: str) -> list[str]:
    """The settings ``method`` takes."""
    return [f.name for f in fields(config_class(method))]


AUTO = "auto"
"""The name that asks ``sample`` to choose the method (``--method auto``, :mod:`stanaccel.sampling.auto`):
not a method of the table."""

OBJECTIVES = ("ess-per-second", "ess-per-evaluation", "autocorrelation")
"""What a ``--tune`` trial may maximise (:mod:`stanaccel.sampling.tune`)."""

TABLE: dict[str, Any] = {}
"""The table of methods, name -> :class:`~stanaccel.sampling.methods.MethodSpec`, in its order.

:mod:`stanaccel.sampling.methods` defines it on this module's classes and fills it here when it is
imported, which importing ``stanaccel.sampling`` does first (this module cannot import it: that would be
a circle)."""


def method_record(method: str, where: str = "method"):
    """The record of ``method`` in the table of methods, or a :class:`ConfigError` naming the methods."""
    if method not in TABLE:
        raise ConfigError(
            f"{where} = {method!r}: unknown method; expected one of {', '.join(TABLE)}" + _hint(method, TABLE)
        )
    return TABLE[method]


def check_method_name(method: Any, where: str = "method") -> str:
    """``method`` where it names a method of the table or :data:`AUTO`; otherwise a :class:`ConfigError`
    naming them all, with a suggestion (a ``TypeError`` for a value that is no name)."""
    choices = [*TABLE, AUTO]
    if not isinstance(method, str):
        raise TypeError(
            f"{where} must be a method's name, one of {', '.join(choices)}; not {type(method).__name__} "
            f"({reprlib.repr(method)})"
        )
    if method not in choices:
        raise ConfigError(
            f"{where} = {method!r}: unknown method; expected one of {', '.join(choices)}"
            + _hint(method.lower(), choices)
        )
    return method


def config_class(method: str, where: str = "method") -> type[SamplerConfig]:
    """The settings class of ``method`` (from :data:`TABLE`)."""
    return method_record(method, where).config


def make_config(
    method: str, settings: dict[str, Any] | None = None, sources: dict[str, str] | str = "settings"
) -> SamplerConfig:
    """Check ``settings`` for ``method`` and return its typed config.

    Parameters
    ----------
    method : str
        One of :data:`stanaccel.sampling.methods.METHODS`.
    settings : dict
        Keys of the method's config; ``None`` values are left unset.
    sources : dict or str
        Where each key came from (a file, ``--set``, ``settings=``), for the
        messages; one string for all.

    Raises
    ------
    ConfigError
        An unknown key (with the allowed ones and a suggestion), a value of
        the wrong kind or out of range (with what is allowed).
    """
    cls = config_class(method)
    if settings is not None and not isinstance(settings, Mapping):
        raise TypeError(
            f"settings must be a dict of setting name -> value, such as {{'scale': 0.5}}, "
            f"not a {type(settings).__name__} ({reprlib.repr(settings)})"
        )
    settings = {k: v for k, v in (settings or {}).items() if v is not None and k != "method"}
    known = {f.name: f for f in fields(cls)}

    def source(key: str) -> str:
        return sources if isinstance(sources, str) else sources.get(key, "settings")

    values = {}
    for key, value in settings.items():
        if key not in known:
            raise ConfigError(
                f"{source(key)}: unknown setting {key!r} for method {method!r}; allowed: "
                f"{', '.join(known)}{_hint(key, known)}"
            )
        values[key] = _check(key, value, known[key].metadata, f"{source(key)}: ")
    config = cls(**values)
    object.__setattr__(config, "_user_keys", frozenset(values))
    _check_warmup_kind(method, config.warmup, f"{source('warmup')}: ")
    _check_step_factors(values, f"{source('step_factors')}: ")
    return config


def _check_step_factors(values: dict[str, Any], prefix: str) -> None:
    """``step_factors`` go with the ``betas`` they were found for, one per beta (placing sets both)."""
    factors = values.get("step_factors")
    if factors is None:
        return
    betas = values.get("betas")
    if betas is None:
        raise ConfigError(
            f"{prefix}step_factors are given without betas: give the betas they go with (one factor per "
            "beta), or leave both out and let the ladder be placed with its own"
        )
    if len(factors) != len(betas):
        raise ConfigError(
            f"{prefix}step_factors has {len(factors)} values for {len(betas)} betas: give one per beta, "
            "the target's first"
        )


def default_warmup(method: str) -> int | str:
    """The ``warmup`` of ``method`` when the user sets none: its table entry's ``default_warmup``.

    A cheap warm-up's name ("laplace", "pathfinder"), or for "nuts" the
    number of NUTS warm-up iterations it means (:data:`DEFAULT_NUTS_WARMUP`),
    so that a method's ``warmup`` is always what runs.
    """
    spec = TABLE.get(method)
    kind = spec.default_warmup if spec is not None else NUTS_WARMUP
    return DEFAULT_NUTS_WARMUP if kind == NUTS_WARMUP else kind


def warmup_defaults() -> dict[str, list[str]]:
    """The methods by their default warm-up ("nuts", "laplace", ...), in the table's order."""
    out: dict[str, list[str]] = {}
    for name, spec in TABLE.items():
        out.setdefault(spec.default_warmup, []).append(name)
    return out


def warmup_default_text() -> str:
    """The ``warmup`` setting's default, per method, in words (the settings' table, ``--help``)."""
    return "; ".join(
        f"{DEFAULT_NUTS_WARMUP if kind == NUTS_WARMUP else kind} for {', '.join(methods)}"
        for kind, methods in warmup_defaults().items()
    )


def _check_warmup_kind(method: str, warmup: int | str, prefix: str) -> None:
    """A cheap warm-up (a ``warmup`` name other than "nuts") only for a method whose table entry takes one."""
    if warmup == APPROX_WARMUP and not method_record(method).approximations:
        raise ConfigError(
            f"{prefix}warmup = {warmup!r} runs Stan's NUTS warm-up on the method's cheapest approximation; "
            f"method {method!r} has none: use it with "
            + ", ".join(name for name, spec in TABLE.items() if spec.approximations and spec.cheap_warmup)
            + ", or give another warm-up"
        )
    if isinstance(warmup, str) and not method_record(method).cheap_warmup:
        raise ConfigError(
            f"{prefix}warmup = {warmup!r}: method {method!r} runs Stan's NUTS, which needs NUTS's own "
            "warm-up; give a number of warm-up iterations (or 'nuts'), or use a method that takes a "
            "cheap warm-up (" + ", ".join(name for name, spec in TABLE.items() if spec.cheap_warmup) + ")"
        )


def check_setting(method: str, key: str, value: Any, shown: str | None = None) -> Any:
    """One setting of ``method``, checked (for the workflow file checker); raises :class:`ConfigError`.

    ``shown`` is the setting's name in messages (a path such as ``samplers[1].approx``).
    """
    known = {f.name: f for f in fields(config_class(method))}
    if key not in known:
        raise ConfigError(f"unknown setting {key!r} for method {method!r}; allowed: {', '.join(known)}")
    value = _check(shown or key, value, known[key].metadata, "")
    if key == "warmup":
        _check_warmup_kind(method, value, "")
    return value


def _check(key: str, value: Any, meta: dict, prefix: str) -> Any:
    """The value, checked (and converted: lists to tuples, tables to Observations) for its key."""
    kind = meta["kind"]
    shown = f"{prefix}{key} = {reprlib.repr(value)}"
    if kind == "warmup":
        names = ", ".join(map(repr, WARMUP_NAMES))
        if isinstance(value, str) and value in WARMUP_NAMES:
            return DEFAULT_NUTS_WARMUP if value == NUTS_WARMUP else value
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise ConfigError(f"{shown}: expected a number of NUTS warm-up iterations or one of {names}")
        if isinstance(value, str):
            raise ConfigError(
                f"{shown}: expected a number of NUTS warm-up iterations or one of {names}"
                + _hint(value, WARMUP_NAMES)
            )
        if value < meta["low"]:
            raise ConfigError(
                f"{shown}: must be at least {meta['low']} NUTS warm-up iteration: the sampler starts from "
                f"what the warm-up adapts (step size, metric, start points), and {value} iterations adapt "
                "none of it; give more iterations, a cheap warm-up ('pathfinder' or 'laplace', for the "
                "methods that take one), or an earlier warm-up instead (--warmup-from)"
            )
        kind = "int"
    if kind == "int":
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConfigError(f"{shown}: expected an integer")
    elif kind == "number":
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise ConfigError(f"{shown}: expected a number")
        value = float(value)
        if not math.isfinite(value):
            raise ConfigError(f"{shown}: expected a finite number, not {value}")
    elif kind == "bool":
        if not isinstance(value, bool):
            raise ConfigError(f"{shown}: expected true or false")
    elif kind == "str":
        if not isinstance(value, str):
            raise ConfigError(f"{shown}: expected a string")
        if meta["choices"] and value not in meta["choices"]:
            raise ConfigError(
                f"{shown}: expected one of {', '.join(map(repr, meta['choices']))}"
                + _hint(value, meta["choices"])
            )
    elif kind in ("ladder", "factors"):
        if (
            not isinstance(value, list | tuple)
            or not value
            or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
        ):
            raise ConfigError(f"{shown}: expected a list of numbers")
        value = [float(v) for v in value]
        if not all(math.isfinite(v) for v in value):
            raise ConfigError(f"{shown}: expected finite numbers")
        if kind == "factors" and min(value) <= 0:
            raise ConfigError(f"{shown}: expected positive numbers")
        if kind == "ladder" and (
            value[0] != 1 or value[-1] < 0 or any(a <= b for a, b in zip(value, value[1:], strict=False))
        ):
            raise ConfigError(f"{shown}: expected 1 = beta_0 > beta_1 > ... >= 0")
    elif kind == "observations":
        try:
            return Observations.parse(value, f"{prefix}{key}")
        except ValueError as error:
            raise ConfigError(str(error)) from None
    elif kind == "approximation":
        return Approximation.parse(value, f"{prefix}{key}")
    elif kind == "approximations":
        if not isinstance(value, list | tuple) or not value:
            raise ConfigError(f"{shown}: expected a list of approximations")
        return [Approximation.parse(v, f"{prefix}{key}[{i}]") for i, v in enumerate(value)]
    low, high = meta.get("low"), meta.get("high")
    if kind == "number" and high is None and value > LARGEST:
        raise ConfigError(
            f"{shown}: must be at most {LARGEST:g} (a larger value makes every move overflow or be refused)"
        )
    if kind in ("int", "number") and low is not None and (value < low or (meta["low_open"] and value == low)):
        raise ConfigError(f"{shown}: must be {'above' if meta['low_open'] else 'at least'} {low:g}")
    if (
        kind in ("int", "number")
        and high is not None
        and (value > high or (meta["high_open"] and value == high))
    ):
        raise ConfigError(f"{shown}: must be {'below' if meta['high_open'] else 'at most'} {high:g}")
    return value


def _hint(word: str, allowed) -> str:
    close = difflib.get_close_matches(str(word), list(allowed), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def parse_assignment(text: str) -> tuple[str, Any]:
    """``key=value`` from the command line; the value is read as TOML (a number, true, a list, a table).

    A value that is not TOML is a string, so ``--set inner=mh`` works without quotes.
    """
    import tomllib

    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"--set {text!r}: expected key=value, such as --set n_steps=20")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return key, value


def table_rows() -> list[dict[str, str]]:
    """Every setting of every method: for the README's table and ``stanaccel sample --help``."""
    rows: dict[str, dict[str, Any]] = {}
    for method, spec in TABLE.items():
        for f in fields(spec.config):
            meta = f.metadata
            default = meta.get("fallback") if f.default is None else f.default
            if f.name == "warmup":
                default = warmup_default_text()
            if f.default is MISSING:
                default = ""
            row = rows.setdefault(
                f.name,
                {
                    "key": f.name,
                    "methods": [],
                    "doc": meta["doc"],
                    "tuned": meta.get("tuned") or "",
                    "default": default,
                },
            )
            row["methods"].append(method)
    return list(rows.values())
