"""The result of a run: :class:`SampleResult` (draws, the settings used, the time charged) and its files.

:func:`write_result` writes a result's InferenceData (netCDF) and its
metrics (JSON); :func:`method_label` names a sampler for tables and messages.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from stanaccel.diagnostics.files import (
    OutputFailed,
    OutputWarning,
    Written,
    json_text,
    jsonable,
    metrics_file,
    save_or_rescue,
    write_or_rescue,
)
from stanaccel.kernels import KernelRun
from stanaccel.results import Result
from stanaccel.sampling.config import SamplerConfig
from stanaccel.sampling.methods import method_spec
from stanaccel.sampling.warmup import warmup_share
from stanaccel.stan.nuts import NutsFit, WarmupState


def method_label(config: SamplerConfig) -> str:
    """A short name of the sampler for tables and messages, such as "TT (HMC)" or "AE-pCN (exact)"."""
    return method_spec(config.method).label_of(config)


@dataclass
class SampleResult(Result):
    """The outcome of :func:`sample`: draws, the settings used, and the time charged to them.

    Attributes
    ----------
    config : SamplerConfig
        The settings used, every tuned value filled in.
    sources : dict
        Per setting, where its value came from: "user", "tuned" or "default".
    run : NutsFit or KernelRun
        The sampling run.
    program : str
        The program's name.
    seed : int
    charged_seconds : dict
        Time spent before sampling and charged to it: "warmup" (or "warmup (borrowed)": an
        earlier run's, by ``warmup_from``), "pilot", "training", "tuning".
    reports : dict
        Method-specific records: "approximations" (cost and spread), "autoencoder"
        (training and reconstruction), "summaries" (each chain's kernel summary),
        "density_costs" (per chain, the evaluations and seconds of the exact density
        and of each approximation), "auto" (``method = "auto"``: the pilot table and
        why the method was chosen). Plain values only, so that a result pickles.
    """

    config: SamplerConfig
    sources: dict[str, str]
    run: NutsFit | KernelRun
    program: str
    seed: int
    charged_seconds: dict[str, float] = field(default_factory=dict)
    reports: dict[str, Any] = field(default_factory=dict)
    adaptation: WarmupState | None = None
    """The NUTS warm-up's adaptation (a method other than NUTS): saved in the file's ``adaptation``
    group with each chain's last draw, so that ``--warmup-from`` can continue from the file."""

    @property
    def method(self) -> str:
        return self.config.method

    @property
    def exact(self) -> bool:
        return self.config.is_exact

    @property
    def interrupted(self) -> bool:
        return bool(self.run.interrupted)

    @property
    def evaluations(self) -> int:
        """Density and gradient evaluations of the sampling run (NUTS: gradients, warm-up included)."""
        if isinstance(self.run, NutsFit):
            return int(self.run.gradient_evaluations)
        return int(np.sum(self.run.evaluations))

    @property
    def acceptance(self) -> float:
        """The mean acceptance probability of the kept draws' steps."""
        run = self.run
        values = (
            run.sample_stats["acceptance_rate"] if isinstance(run, NutsFit) else run.acceptance_probability
        )
        return float(np.mean(values)) if np.size(values) else float("nan")

    @property
    def dropped_draws(self) -> int:
        """Of a stopped run, the draws that chains made beyond the slowest chain's, all chains together
        (Stan's NUTS: warm-up draws included): dropped to keep the chains equal."""
        return int(self.run.dropped_draws)

    @property
    def num_draws(self) -> int:
        """Draws per chain kept (fewer than asked for after Ctrl-C)."""
        run = self.run
        return run.num_draws if isinstance(run, NutsFit) else run.positions.shape[1]

    @property
    def iterations(self) -> int:
        """Iterations of all chains (NUTS and latent NUTS: warm-up included, as their evaluations are)."""
        run = self.run
        if isinstance(run, NutsFit):
            return run.chains * (run.warmup_unconstrained.shape[1] + run.num_draws)
        return self.reports.get("iterations", int(np.prod(run.positions.shape[:2])))

    @property
    def quantities_failed(self) -> int:
        """Kept draws whose generated quantities failed (a ``reject``): NaN in the posterior, not a crash."""
        failed = self.run.quantities_failed
        return 0 if failed is None else int(np.sum(failed))

    @property
    def sampling_seconds(self) -> float:
        """The sampling run's time; for Stan NUTS without its warm-up's share."""
        if isinstance(self.run, NutsFit):  # Stan's NUTS, its warm-up in the run
            return self.run.wall_seconds * (1 - warmup_share(self.run))
        return self.run.wall_seconds

    @property
    def wall_seconds(self) -> float:
        """The time of the whole run: sampling plus everything charged to it."""
        return self.run.wall_seconds + sum(self.charged_seconds.values())

    def inference_groups(self) -> dict[str, Any]:
        from stanaccel import __version__

        groups = self.run.inference_groups()
        if self.adaptation is not None and not isinstance(self.run, NutsFit):
            state = self.adaptation
            groups["adaptation"] = self._adaptation_group()
            groups["attrs"] = {
                **groups.get("attrs", {}),
                "metric": state.metric,
                "adapted": True,
                "warmup_kind": state.warmup,  # "nuts", or a cheap warm-up's (its step size NaN if none)
                **({} if state.seconds is None else {"warmup_seconds": float(state.seconds)}),
                **({} if state.provenance is None else state.provenance.attrs()),  # checked when borrowed
            }
        groups["attrs"] = {
            **groups.get("attrs", {}),
            "stanaccel_version": __version__,  # a file without "adaptation" is then known not to be older
            "method": self.method,
            "sampler": method_label(self.config),
            "exact": self.exact,
            "invariance": "exact" if self.exact else "approximate: does not leave the posterior invariant",
            "program": self.program,
            "seed": self.seed,
            "settings": json.dumps(jsonable(self.config.as_dict())),
            "setting_sources": json.dumps(self.sources),
            "charged_seconds": json.dumps(self.charged_seconds),
            "wall_seconds": self.wall_seconds,
        }
        return groups

    def _adaptation_group(self) -> dict[str, np.ndarray]:
        """Per chain: the warm-up's step size and inverse metric (of the warm-up chain it started
        from) and the chain's last draw (its start point where it has none)."""
        state, positions = self.adaptation, np.asarray(self.run.positions)
        source = np.arange(len(positions)) % len(state.step_size)
        last = positions[:, -1, :] if positions.shape[1] else np.asarray(state.positions)[source]
        return {
            "step_size": np.asarray(state.step_size)[source],
            "inv_metric": np.asarray(state.inv_metric)[source],
            "last_position": last,
        }

    def _metrics_arguments(self) -> dict[str, Any]:
        return {
            "wall_seconds": self.wall_seconds,
            "sampling_seconds": self.sampling_seconds,
            "gradient_evaluations": self.evaluations,
        }

    def metrics(self) -> dict[str, Any]:
        """ESS (bulk, tail), R-hat, wall time, evaluations, ESS per second with and without the charges.

        Also ``method_statistics``, each chain's kernel statistics (swap
        acceptance and round trips, trajectory acceptance, mark acceptance and
        cache hits: :func:`~stanaccel.diagnostics.method_statistics`),
        ``step_setting`` (the setting of its step, which a reason may name),
        and ``converged`` and ``warnings``, which include the method's
        (:func:`~stanaccel.diagnostics.metrics.judge`).
        """
        from stanaccel.diagnostics.metrics import judge, method_statistics

        metrics = super().metrics()
        metrics["evaluations"] = metrics.pop("gradient_evaluations")
        metrics["ess_per_1000_evaluations"] = metrics.pop("ess_per_1000_gradients")
        metrics["method_statistics"] = method_statistics(self.reports.get("summaries", []))
        # What the reasons' hints read: the method's settings (a delta?) and its step (from the table).
        metrics["acceptance"] = self.acceptance
        metrics["settings"] = jsonable(self.config.as_dict())
        metrics["step_setting"] = method_spec(self.method).step_key(self.config)
        # What the run's stages found: the verdict reads it too (diagnostics.metrics.finding_warnings).
        stages = ("warmup", "schedule", "evidence", "modes", "auto")
        metrics.update({key: jsonable(self.reports[key]) for key in stages if key in self.reports})
        judge(metrics)
        return {
            "method": self.method,
            "sampler": method_label(self.config),
            "exact": self.exact,
            "program": self.program,
            "seed": self.seed,
            "converged": metrics["converged"],  # first, so that a reader of metrics.json sees it
            "warnings": metrics["warnings"],
            **metrics,
            "charged_seconds": dict(self.charged_seconds),
            "quantities_failed": self.quantities_failed,
            "interrupted": self.interrupted,
            "setting_sources": dict(self.sources),
            **(
                {"tuning": jsonable(self.reports["tuning_summary"])}
                if "tuning_summary" in self.reports
                else {}
            ),
        }


def write_result(
    result: SampleResult, output: str | Path, metrics_path: str | Path | None = None
) -> tuple[Written, dict[str, Any] | None]:
    """Write the InferenceData (``output``, netCDF) and, unless interrupted, the metrics (JSON).

    Nothing is lost where ``output`` cannot be written (a full disk): the
    draws go to a rescue file (:func:`~stanaccel.diagnostics.files.save_or_rescue`)
    and the metrics beside it. The metrics go to ``metrics_path``, by default
    ``<output without .nc>.metrics.json`` beside the netCDF file written.

    Returns
    -------
    Written
        The netCDF file written (a rescue file where ``output`` failed, and why).
    dict or None
        The metrics; None for an interrupted run, too short to measure.

    Raises
    ------
    OutputFailed
        The draws could be written nowhere, not even in the temporary folder.
    """
    written = save_or_rescue(result.to_inference_data(), output)
    if result.interrupted:
        return written, None
    metrics = result.metrics()
    path = written.path
    if metrics_path is None or written.rescued:
        metrics_path = metrics_file(path)
    try:
        metrics_written = write_or_rescue(json_text(metrics).encode(), metrics_path)
    except OutputFailed as exc:  # the draws are safe; the metrics can be made again from them
        warnings.warn(f"the metrics were not written: {exc}", OutputWarning, stacklevel=2)
    else:
        if metrics_written.rescued:
            warnings.warn(
                f"could not write {metrics_path} ({metrics_written.problem}); wrote the metrics to "
                f"{metrics_written.path}",
                OutputWarning,
                stacklevel=2,
            )
    return written, metrics
