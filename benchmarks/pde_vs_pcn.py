"""ESS per second of the PDE samplers, as ratios against full-space pCN on the same posterior.

The PDE posterior is not a Stan program, so Stan's NUTS cannot run on it; its
baseline is pCN, the Deep MCMC paper's. Runs a PDE-study workflow (default:
workflows/pde_40.toml, the 40x40 P1 mesh in both noise regimes; the paper's
full size is workflows/pde_40_p2.toml) and prints, per regime and sampler,
ESS per second with the warm-up charged, its ratio to pCN's, the mean log
likelihood, the largest z-score against the long exact reference, and
whether the sampler is exact.

Run: .venv/bin/python benchmarks/pde_vs_pcn.py [WORKFLOW.toml]
"""

from __future__ import annotations

import sys

from stanaccel.workflow import run_workflow


def main() -> None:
    workflow = sys.argv[1] if len(sys.argv) > 1 else "workflows/pde_40.toml"
    context = run_workflow(workflow, progress=False)
    for name, result in context.results.items():
        print(f"\n{name}")
        for s in result.get("surrogates", []):
            print(f"  {s['approximation']}: cost {s['relative_cost']:.3g} of pi, sd {s['log_ratio_sd']:.3g}")
        header = ["sampler", "ESS/s", "vs pCN", "log lik", "max |z|", "exact"]
        print("{:34s} {:>9s} {:>8s} {:>8s} {:>8s} {:>6s}".format(*header))
        for r in result.get("rows", []):
            print(
                f"{r['sampler'][:34]:34s} {r['ess_per_second']:9.3g} {r['vs_pcn']:8.3g} "
                f"{r['log_lik_mean']:8.3g} {r['z_max']:8.3g} {str(r['exact']):>6s}"
            )


if __name__ == "__main__":
    main()
