"""The GP density model: Gibbs sampler and variational method against the Stan NUTS baseline.

Runs a density-study workflow (default: workflows/density_quick.toml; the full
studies are workflows/density_1d.toml and workflows/density_2d.toml) and
prints, at each data size, each method's wall time as a ratio against the Stan
baseline's in the same run, its test log-likelihood per point and its
Hellinger distance to the true density (the base Gaussian's for reference),
then the empirical order of each method's runtime in N.

Run: .venv/bin/python benchmarks/density_vs_stan.py [WORKFLOW.toml]
"""

from __future__ import annotations

import sys

from stanaccel.workflow import run_workflow


def main() -> None:
    workflow = sys.argv[1] if len(sys.argv) > 1 else "workflows/density_quick.toml"
    context = run_workflow(workflow, progress=False)
    for result in context.results.values():
        rows = result.get("rows", [])
        stan = {r["N"]: r["seconds"] for r in rows if r["method"].startswith("Stan")}
        print(f"\n{'method':24s} {'N':>6s} {'seconds':>9s} {'vs Stan':>8s} {'test ll':>8s} {'Hellinger':>9s}")
        for r in rows:
            ratio = r["seconds"] / stan[r["N"]] if r["N"] in stan and r["seconds"] else float("nan")
            print(f"{r['method'][:24]:24s} {r['N']:6d} {r['seconds']:9.2f} {ratio:8.3f} "
                  f"{r['test_loglik']:8.4f} {r['hellinger']:9.3f}")  # fmt: skip
        print(f"truth's test log-likelihood per point: {rows[0]['truth_loglik']:.4f}")
        print((result["folder"] / "growth.md").read_text())


if __name__ == "__main__":
    main()
