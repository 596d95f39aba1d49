"""ESS per second of the tempering samplers as ratios against Stan NUTS, in one run.

Runs a tempering-study workflow (default: workflows/tempering_quick.toml) and
prints, for each data size and sampler, ESS per second (warm-up charged where
used) and sampling-only ESS per second, each divided by Stan NUTS's figure on
the same posterior in the same run.

Run: .venv/bin/python benchmarks/tempering_vs_nuts.py [WORKFLOW.toml]
"""

from __future__ import annotations

import sys

from stanaccel.workflow import run_workflow


def main() -> None:
    workflow = sys.argv[1] if len(sys.argv) > 1 else "workflows/tempering_quick.toml"
    context = run_workflow(workflow, progress=False)
    header = ["size", "sampler", "ESS/s", "vs NUTS", "ESS/s sampling", "vs NUTS"]
    print("\n{:12s} {:14s} {:>9s} {:>8s} {:>15s} {:>8s}".format(*header))
    for result in context.results.values():
        rows = result.get("rows", [])
        nuts = {r["size"]: r for r in rows if r["method"] == "nuts"}
        for r in rows:
            ref = nuts[r["size"]]
            print(
                f"{r['size']:12s} {r['sampler']:14s} {r['ess_per_second']:9.2f} "
                f"{r['ess_per_second'] / ref['ess_per_second']:8.3f} {r['ess_per_second_sampling']:15.2f} "
                f"{r['ess_per_second_sampling'] / ref['ess_per_second_sampling']:8.3f}"
            )


if __name__ == "__main__":
    main()
