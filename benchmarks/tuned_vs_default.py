"""ESS per second of stanaccel's samplers with default and Bayesian-optimised settings, against NUTS.

Runs workflows/tuned_samplers.toml (or the workflow given) and prints, per
posterior, Stan NUTS's ESS per second (its warm-up charged), then each
sampler's with its default settings (tuned from the warm-up as
``stanaccel sample`` does) and with settings tuned by Bayesian optimisation
(``stanaccel sample --tune``: the trials' time charged as "tuning"), as
ratios to NUTS with everything charged (warm-up or pilot, training,
tuning), the sampling's own ESS per second, the tuned settings and the
tuning's seconds.

Run: .venv/bin/python benchmarks/tuned_vs_default.py [WORKFLOW.toml]
"""

from __future__ import annotations

import sys

from stanaccel.workflow import run_workflow


def main() -> None:
    workflow = sys.argv[1] if len(sys.argv) > 1 else "workflows/tuned_samplers.toml"
    context = run_workflow(workflow, progress=False)
    nuts = {}
    header = ["step", "sampler", "ESS/s", "vs NUTS", "sampling", "tuning s", "settings"]
    print("{:24s} {:16s} {:>9s} {:>8s} {:>9s} {:>9s}  {}".format(*header))
    for name, result in context.results.items():
        metrics = result.get("metrics")
        if metrics is None:
            continue
        posterior = name.split("_")[0]
        if metrics.get("method") in ("nuts", "stan_nuts"):
            nuts[posterior] = metrics["ess_per_second"]
        sources = metrics.get("setting_sources", {})
        tuned = {k: metrics["settings"][k] for k, v in sources.items() if v == "bayesian optimisation"}
        shown = ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in tuned.items())
        total = metrics["ess_per_second"]
        sampling = metrics.get("ess_per_second_sampling", float("nan"))
        ratio = total / nuts.get(posterior, float("nan"))
        sampler = metrics.get("sampler", "Stan NUTS")[:16]
        tuning = metrics.get("charged_seconds", {}).get("tuning", 0.0)
        print(f"{name:24s} {sampler:16s} {total:9.3g} {ratio:8.3g} {sampling:9.3g} {tuning:9.1f}  {shown}")


if __name__ == "__main__":
    main()
