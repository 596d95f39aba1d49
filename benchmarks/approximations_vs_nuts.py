"""ESS per second of the samplers that move with fast approximations, as ratios against Stan NUTS.

Runs an approximation-study workflow (default: workflows/approx_quick.toml;
the full study is workflows/approx_gp.toml) and prints, for each sampler,
ESS per second with its tuning run charged and sampling only, each divided by
Stan NUTS's figure on the same posterior in the same run, with the largest
z-score of its posterior means and sds against the NUTS draws.

Run: .venv/bin/python benchmarks/approximations_vs_nuts.py [WORKFLOW.toml]
"""

from __future__ import annotations

import sys

from stanaccel.workflow import run_workflow


def main() -> None:
    workflow = sys.argv[1] if len(sys.argv) > 1 else "workflows/approx_quick.toml"
    context = run_workflow(workflow, progress=False)
    header = ["sampler", "settings", "ESS/s", "vs NUTS", "ESS/s sampling", "vs NUTS", "max |z|"]
    print("\n{:16s} {:42s} {:>8s} {:>8s} {:>15s} {:>8s} {:>8s}".format(*header))
    for result in context.results.values():
        for r in result.get("rows", []):
            z = r.get("z_max", float("nan"))
            print(
                f"{r['sampler']:16s} {r['settings']:42s} {r['ess_per_second']:8.2f} {r['vs_nuts']:8.2f} "
                f"{r['ess_per_second_sampling']:15.2f} {r['vs_nuts_sampling']:8.2f} {z:8.2f}"
            )


if __name__ == "__main__":
    main()
