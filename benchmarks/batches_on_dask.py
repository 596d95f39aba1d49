"""A batch of imh proposals evaluated on this process's cores against across a Dask cluster's workers.

The big-data logistic regression of :mod:`big_data` (K = 10 predictors,
``--n`` observations), written to a work folder and compiled there. Points
from N(0, 0.1^2 I) on its unconstrained space, in ``--batches`` batches of
``--batch``, are evaluated (constants kept, as imh's density does) by
:func:`stanaccel.densities.safe_log_densities` (one thread per core of this
process) and by :class:`stanaccel.sampling.batches.ExecutorBatches` on a
``LocalCluster`` of ``--workers`` worker processes of one thread each. It
prints the median seconds per batch of each, and checks that both give the
same values and count every evaluation.

Run: .venv/bin/python benchmarks/batches_on_dask.py [--n 100000] [--batch 32] [--batches 20]
     [--workers 2] [FOLDER]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from big_data import LOGISTIC, make_data

from stanaccel.approx import KeepConstants
from stanaccel.densities import safe_log_densities
from stanaccel.executors import DaskExecutor
from stanaccel.sampling.batches import ExecutorBatches
from stanaccel.stan import StanModel, compile_program


def median_seconds(evaluate, density, batches: list[np.ndarray]) -> tuple[float, np.ndarray]:
    """The median seconds per batch of ``evaluate(density, batch)``, and all the values."""
    seconds, values = [], []
    for points in batches:
        start = time.perf_counter()
        values.append(evaluate(density, points))
        seconds.append(time.perf_counter() - start)
    return float(np.median(seconds)), np.concatenate(values)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default="batches-on-dask")
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    folder = Path(args.folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "logistic.stan").write_text(LOGISTIC)
    model = StanModel(compile_program(folder / "logistic.stan"), make_data("logistic", args.n))
    rng = np.random.default_rng(1)
    batches = [0.1 * rng.standard_normal((args.batch, model.dim)) for _ in range(args.batches)]
    here = KeepConstants(model.with_data(model.data_json))
    local, expected = median_seconds(safe_log_densities, here, batches)
    with DaskExecutor(n_workers=args.workers) as executor:
        spread = ExecutorBatches(executor)
        there = KeepConstants(model.with_data(model.data_json))
        median_seconds(spread, there, batches[:1])  # the density sent to the workers, the tasks imported
        remote, values = median_seconds(spread, there, batches)
    np.testing.assert_array_equal(values, expected)
    assert there.n_log_density == here.n_log_density + args.batch
    count = there.n_log_density
    here_each, there_each = here.seconds / count * 1e3, there.seconds / count * 1e3
    print(f"logistic N = {args.n}, batches of {args.batch}, median of {args.batches}:")
    print(f"  this process's threads: {local * 1e3:.1f} ms per batch ({here_each:.2f} ms per evaluation)")
    print(
        f"  Dask, {args.workers} workers x 1 thread: {remote * 1e3:.1f} ms per batch ({local / remote:.2f}x; "
        f"{there_each:.2f} ms per evaluation on a worker)"
    )


if __name__ == "__main__":
    sys.exit(main())
