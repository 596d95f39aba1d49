"""The latent-space samplers (Deep MCMC) against Stan NUTS: speed and what it costs in exactness.

Runs a latent-study workflow (default: workflows/latent_quick.toml; the full
studies are workflows/latent_logistic.toml and workflows/latent_digits.toml)
and prints, for each sampler, whether it is exact, ESS per second (pilot,
training and tuning charged) as a ratio against Stan NUTS on the same
posterior in the same run, ESS per 1000 log-density evaluations, test
accuracy, and its bias against a long NUTS reference: the largest error of a
posterior mean in reference sds, the smallest sd ratio, and the largest
error of a test-set predictive probability.

Run: .venv/bin/python benchmarks/latent_vs_nuts.py [WORKFLOW.toml]
"""

from __future__ import annotations

import sys

from stanaccel.workflow import run_workflow


def main() -> None:
    workflow = sys.argv[1] if len(sys.argv) > 1 else "workflows/latent_quick.toml"
    context = run_workflow(workflow, progress=False)
    header = [
        "sampler",
        "exact",
        "vs NUTS",
        "ESS/1000 ev",
        "accuracy",
        "mean err/sd",
        "min sd ratio",
        "p err",
    ]
    print("\n{:40s} {:>5s} {:>8s} {:>11s} {:>8s} {:>11s} {:>12s} {:>6s}".format(*header))
    for result in context.results.values():
        for r in result.get("rows", []):
            print(
                f"{r['sampler'][:38]:38s} {r['settings'][:36]:36s} {str(r['exact']):>5s} {r['vs_nuts']:8.3f} "
                f"{r.get('ess_per_1000_evaluations', float('nan')):11.2f} {r['test_accuracy']:8.3f} "
                f"{r['mean_error_sd']:11.3f} {r['sd_ratio_min']:6.3f} {r['predictive_error_max']:6.3f}"
            )


if __name__ == "__main__":
    main()
