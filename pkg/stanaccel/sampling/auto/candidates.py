"""The candidates: the table's methods with a role in ``auto`` whose needs the program meets, their
settings (an "approximation" candidate's automatic approximation), the order they are piloted in, and
which of them a Laplace fit far from the posterior leaves out."""

from __future__ import annotations

from typing import Any

from stanaccel.errors import ConfigError
from stanaccel.sampling.auto import constants
from stanaccel.sampling.auto.record import AutoRun
from stanaccel.sampling.auto.settings import AutoSettings
from stanaccel.sampling.auto.warmup import _hopeless
from stanaccel.sampling.config import make_config
from stanaccel.sampling.methods import METHODS, MethodSpec
from stanaccel.sampling.program import ProgramConventionError, check_program


def control_variate_size(n: int) -> int:
    """The subset size m of the control-variate approximation ``auto`` pilots: N/20, at most 100.

    Taylor control variates about the mode leave log pi - log pi* an sd that
    falls with N (0.012 at m = 500 on the 10-predictor logistic regression at
    N = 10^4, so about 0.03 at m = 100): a larger m only makes each
    evaluation dearer (at m = 500 the DC run took 25% longer for the same ESS).
    """
    return max(1, min(n // 20, 100))


def automatic_approximation(auto: AutoSettings, program, data: dict[str, Any]) -> dict[str, Any]:
    """The approximation settings of an "approximation" candidate: control variates, else Laplace."""
    if auto.observations is not None:
        n = auto.observations.check(data)
        if n > 1:
            m = min(control_variate_size(n), n - 1)
            return {"approx": {"kind": "control-variate", "m": m}, "observations": auto.observations}
    return {"approx": {"kind": "laplace"}}


def _order(spec: MethodSpec) -> int:
    return (
        constants.PILOT_ORDER.index(spec.auto)
        if spec.auto in constants.PILOT_ORDER
        else len(constants.PILOT_ORDER)
    )


def _candidates(run: AutoRun) -> tuple[list[tuple[MethodSpec, dict]], dict[str, str]]:
    """The table's candidates whose needs the program meets, with their settings; why the others are not."""
    auto, program, data = run.auto, run.program, run.data
    out, skipped = [], {}
    for spec in METHODS.values():
        if spec.auto is None:
            continue
        settings = dict(spec.auto_settings)
        if spec.auto == "approximation":
            settings.update(automatic_approximation(auto, program, data))
        try:
            check_program(make_config(spec.name, settings), program, data)
        except (ConfigError, ProgramConventionError, ValueError) as error:
            skipped[spec.name] = f"{spec.name} not tried: {str(error).split('. ')[0]}"
            continue
        out.append((spec, settings))
    return out, skipped


def _far_gaussian(spec: MethodSpec, settings: dict[str, Any], warm_report: dict[str, Any]) -> str:
    """Why a candidate proposing from a Gaussian is not piloted where the Laplace fit's Pareto k is
    :data:`HOPELESS_K` or more, or "".

    Such a k says the posterior is far from any Gaussian (a funnel, heavy
    tails, a 1000-dim latent field): IMH's and pCN's proposals about the
    warm-up's Gaussian, and an approximation method's over the Laplace
    Gaussian, would almost all be refused (on a 1003-parameter stochastic
    volatility model, k = 54: pCN's and IMH's pilots projected under half
    of NUTS's ESS/s, for 2.7 s of pilots).
    """
    laplace = settings.get("approx", {}).get("kind") == "laplace" if spec.auto == "approximation" else False
    if not (spec.gaussian or laplace):
        return ""
    k = warm_report.get("laplace_pareto_k")
    if k is None and warm_report.get("warmup") == "laplace":
        k = warm_report.get("pareto_k")
    if not _hopeless(k):
        return ""
    proposes = "its approximation is the Laplace Gaussian" if laplace else "it proposes from a Gaussian"
    return f"{proposes}, and the Laplace fit's Pareto k is {k:.3g} ({constants.HOPELESS_K:g} or more)"
