"""The correctness matrix, generated from the table of methods.

Every exact method (``stanaccel.sampling.METHODS``) is crossed with every
``inner`` kernel it takes, every approximation kind (``approx``, or a
one-level ``ladder``) and every warm-up name, and run on the conjugate
Gaussian regression of ``tests/sampling/programs.py``, whose posterior is
known in closed form. A combination either samples that posterior (means
and sds within :data:`Z_LIMIT` Monte Carlo standard errors) or is refused
before any work with an error that names why. A new method, inner kernel,
approximation kind or warm-up enters the matrix through the table and the
settings' choices, with no new test.

Refused, by the package's own rules: an inner kernel that needs a Laplace
approximation (h-pCN: the PDE posterior's, which a Stan program lacks); an
approximation kind that belongs to one bundled posterior (not in
:data:`~stanaccel.sampling.program.GENERAL_KINDS`); ``nuts-approx`` where the
cheapest approximation is built in Python about the mode (not a Stan
program); a cheap warm-up for a method that runs Stan's NUTS; ``nuts-approx``
for a method without approximations.

The approximations differ from the posterior where they can: the program
approximation is the same program on 30 of the 40 observations, the subset is 30 of 40
observations. (Laplace and control variates are exact on a Gaussian
posterior; their cases check how they are built and handed to the kernels.)
Tempering ladders are given, not placed: the matrix checks exactness, and
placing (minutes on every HMC case) is tested on its own.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import norm

from stanaccel.diagnostics import mcse_z_scores
from stanaccel.sampling import METHODS
from stanaccel.sampling.config import APPROX_WARMUP, APPROXIMATION_KINDS, NUTS_WARMUP, WARMUP_NAMES
from stanaccel.sampling.program import AUTOMATIC_KINDS, GENERAL_KINDS, SUBSET_KINDS
from stanaccel.stan import write_data
from tests.sampling.programs import REGRESSION, regression_data, regression_posterior

DRAWS = 500
"""Draws per chain (4 chains): an MCSE-based check still finds an sd wrong by 10% (z about 5)."""
NUTS_ITERATIONS = 200
"""Stan's NUTS warm-up iterations where a case's warm-up is NUTS's."""
OBSERVATIONS = {"count": "N", "fields": ["x", "y"]}
POWER_BETAS = [1.0, 0.3, 0.0]
SUBSET_BETAS = [1.0, 0.5, 0.25]
LATENT_EPOCHS = 50
"""Autoencoder training epochs: the accept step in the original space keeps an AE method exact however
well the autoencoder is trained."""
LATENT_STEPS = 3
"""AE-HMC's leapfrog steps. With its default 10 on this Gaussian the tuned latent step (about 5) makes
trajectories near half a period: each move nearly reflects the point about the mean, so the means mix
at once but the sds very slowly (their ESS near 85 in 8,000 draws, measured over five seeds with no
bias), far slower than ArviZ's MCSE of the sd estimates at 500 draws."""
PCN_COMPLEMENT_STEPS = 10
"""AE-pCN's full-space HMC steps after each latent move. With its default 3 its tails mix so slowly on
this Gaussian that no MCSE from a few thousand draws holds: after the autoencoder's training changed,
seed 11 with the Laplace warm-up gave sd ratios 0.85 and 0.83 at 2000 draws (all four chains low,
|z| 5.9), and four chains of 20,000 still spread from 0.91 to 1.01 (tail ESS about 950 of 80,000;
pooled ratio 0.96, |z| under 1). With 10, tail ESS is 970-1950 of 2000 draws and |z| < 1 on seeds
11-14; a latent move whose ratio leaves out the latent reference is still caught (|z| 5.0-8.1 on four
runs)."""
FAMILY_ALPHA = 0.01
"""The chance that a correct matrix fails somewhere (Bonferroni over every z-score it checks)."""


@dataclass(frozen=True)
class Case:
    """One combination: a method, its inner kernel, its approximation kind and its warm-up.

    ``refusals`` are the patterns of the errors that refuse it (any one may
    come first); empty: it runs and must sample the known posterior.
    """

    method: str
    inner: str | None
    kind: str | None
    warmup: str
    refusals: tuple[str, ...]

    @property
    def id(self) -> str:
        return "-".join(part for part in (self.method, self.inner, self.kind, self.warmup) if part)

    def settings(self, folder: Path) -> dict:
        """The case's settings for :func:`stanaccel.sampling.sample`, its files in ``folder``."""
        spec = METHODS[self.method]
        settings = {"draws": DRAWS, "warmup": NUTS_ITERATIONS if self.warmup == NUTS_WARMUP else self.warmup}
        if self.inner:
            settings["inner"] = self.inner
        if "observations" in spec.needs or self.kind in SUBSET_KINDS:
            settings["observations"] = OBSERVATIONS
        if self.kind:
            approx = approximation(self.kind, folder)
            settings["approx" if "approx" in spec.needs else "ladder"] = (
                approx if "approx" in spec.needs else [approx]
            )
        if spec.tempering:
            settings["betas"] = POWER_BETAS if "beta" in spec.needs else SUBSET_BETAS
        if spec.latent:
            settings["epochs"] = LATENT_EPOCHS
            if "latent_n_steps" in {f.name for f in fields(spec.config)}:
                settings["latent_n_steps"] = LATENT_STEPS
            if self.method == "ae-pcn":
                settings["complement_steps"] = PCN_COMPLEMENT_STEPS
        return settings


def approximation(kind: str, folder: Path) -> dict:
    """An approximation of ``kind`` for the regression (sizes and files where the kind needs them)."""
    if kind == "program":
        return {"program": str(folder / "regression.stan"), "data": str(folder / "part.json")}
    if kind in ("laplace", "linearized"):
        return {"kind": kind}
    return {"kind": kind, "m": 10 if kind == "control-variate" else 30 if kind in SUBSET_KINDS else 5}


def choices(method: str, key: str) -> tuple:
    """The choices of ``method``'s setting ``key`` (``(None,)`` when it has no such setting)."""
    field = next((f for f in fields(METHODS[method].config) if f.name == key), None)
    return (None,) if field is None else field.metadata["choices"]


def refusals(method: str, inner: str | None, kind: str | None, warmup: str) -> tuple[str, ...]:
    """Why the package refuses the combination (the patterns of its errors), or () where it runs."""
    spec = METHODS[method]
    why = []
    if spec.needs_laplace or (inner and METHODS[inner].needs_laplace):
        why.append("needs a Laplace approximation")
    if kind and kind not in GENERAL_KINDS:
        why.append(f"approximation kind '{kind}'")
    if warmup != NUTS_WARMUP and not spec.cheap_warmup:
        why.append(f"warmup = '{warmup}'")
    if warmup == APPROX_WARMUP and not spec.approximations:
        why.append(f"warmup = '{warmup}'")
    if warmup == APPROX_WARMUP and kind in AUTOMATIC_KINDS:
        why.append("built in Python about the mode, not a Stan program")
    return tuple(why)


def cases(latent: bool | None = None, approximations: bool | None = None) -> list[Case]:
    """Every combination of every exact method; ``latent``, ``approximations``: only those (or not)."""
    out = []
    for method, spec in METHODS.items():
        if spec.exact is False or (latent is not None and spec.latent != latent):
            continue
        if approximations is not None and spec.approximations != approximations:
            continue
        kinds = APPROXIMATION_KINDS if spec.approximations else (None,)
        for inner, kind, warmup in itertools.product(choices(method, "inner"), kinds, WARMUP_NAMES):
            out.append(Case(method, inner, kind, warmup, refusals(method, inner, kind, warmup)))
    return out


N_CHECKED = 4 * sum(not case.refusals for case in cases())
"""z-scores the whole matrix checks: a mean and an sd of each of the two coefficients per run."""
Z_LIMIT = float(norm.isf(FAMILY_ALPHA / (2 * N_CHECKED)))
"""The bound on every |z|: a correct matrix passes all of them with probability 1 - FAMILY_ALPHA."""


@pytest.fixture(scope="module")
def matrix_files(tmp_path_factory) -> Path:
    """The regression program, its data, and 30 of its 40 observations (the program approximation's)."""
    folder = tmp_path_factory.mktemp("matrix")
    (folder / "regression.stan").write_text(REGRESSION)
    data = regression_data()
    write_data(folder / "regression.json", data)
    write_data(folder / "part.json", {**data, "N": 30, "x": data["x"][:30], "y": data["y"][:30]})
    return folder


def worst_z(result) -> float:
    """The largest |z| of the means and sds of ``result``'s coefficients against the exact posterior
    (each MCSE no smaller than that of independent draws: see :func:`mcse_z_scores`)."""
    mean, sd = regression_posterior(regression_data())
    z_mean, z_sd = mcse_z_scores(result.to_inference_data(), "coef", mean, sd, independent_floor=True)
    return float(np.max(np.abs(np.concatenate([z_mean, z_sd]))))


def run_case(case: Case, folder: Path):
    """Sample the case (seed fixed), or check that it is refused with one of its reasons."""
    from stanaccel.sampling import sample

    def run():
        return sample(
            folder / "regression.stan",
            folder / "regression.json",
            case.method,
            case.settings(folder),
            seed=11,
            progress=False,
        )

    if case.refusals:
        with pytest.raises(ValueError, match="|".join(case.refusals)):
            run()
        return None
    return run()


def check_case(case: Case, folder: Path) -> None:
    """The whole check of one case: refused as the rules say, or exact on the known posterior."""
    result = run_case(case, folder)
    if result is None:
        return
    assert result.to_inference_data().posterior.attrs["exact"] == 1
    z = worst_z(result)
    assert z < Z_LIMIT, f"{case.id}: worst |z| {z:.2f} of the means and sds (limit {Z_LIMIT:.2f})"
