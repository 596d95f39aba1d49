"""BLAS threads and the GP density model: each method's time per iteration, idle and beside another process.

For one Cholesky factorisation of an n x n kernel matrix (n = 600, 1200,
2400), a Gibbs sweep and a variational iteration on the three-bump density
(N = 300), prints the seconds with BLAS held to 1 and 2 threads
(threadpoolctl), first on an idle machine, then while another process runs:
a Python loop (one core busy), then NumPy products with OpenBLAS's default
threads (a second run or a test suite beside this one). The Gibbs sampler
and the variational method hold BLAS to ``blas_threads`` (default 1) while
they run; this shows why.

Run: .venv/bin/python benchmarks/density_blas_threads.py
"""

from __future__ import annotations

import multiprocessing
import time

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

from stanaccel.gpdensity import GibbsSampler, SquaredExponential, VariationalDensity
from stanaccel.gpdensity.synthetic import Mixture

THREE_BUMPS = Mixture(
    np.array([0.5, 0.3, 0.2]), np.array([[-2.2], [0.6], [3.0]]), np.array([[[0.36]], [[0.25]], [[0.81]]])
)


def _python_loop(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _blas_loop(seconds: float) -> None:
    """Another NumPy user with OpenBLAS's default threads: products of 300 x 300 matrices."""
    a = np.random.default_rng(0).standard_normal((300, 300))
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        a @ a


LOADS = {"idle": None, "a Python loop beside": _python_loop, "a BLAS loop beside": _blas_loop}


def _best_of(function, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times) if repeats > 2 else float(np.median(times))


def _cases():
    rng = np.random.default_rng(0)
    for n in (600, 1200, 2400):
        K = SquaredExponential(1.0, [0.7])(rng.normal(0, 2, size=(n, 1)))
        yield f"Cholesky n={n}", (lambda K=K: np.linalg.cholesky(K)), 5
    data = THREE_BUMPS.sample(300, np.random.default_rng(42))
    sampler = GibbsSampler(data, blas_threads=None)
    state = sampler.run(30, seed=1)["state"]  # a state with its latent events, M about 3-4 N

    rng = np.random.default_rng(2)

    def sweep(state=state, rng=rng):
        for i in range(5):
            sampler.step(state, i, rng)

    yield f"Gibbs, 5 sweeps (N=300, M={len(state.events)})", sweep, 3
    method = VariationalDensity(data, blas_threads=None)
    method.fit(2)  # compile the TensorFlow functions first
    yield "variational, 20 iterations (N=300)", lambda: method.fit(20, tol=0), 3


def main() -> None:
    blas = [(i["internal_api"], i["num_threads"], i.get("architecture")) for i in threadpool_info()
            if i["user_api"] == "blas"]  # fmt: skip
    print(f"BLAS: {blas}; {multiprocessing.cpu_count()} cores")
    cases = list(_cases())
    rows = {name: {} for name, _, _ in cases}
    for load, target in LOADS.items():
        hog = None
        if target is not None:
            hog = multiprocessing.Process(target=target, args=(3600.0,), daemon=True)
            hog.start()
            time.sleep(0.5)
        try:
            for threads in (1, 2):
                with threadpool_limits(threads, "blas"):
                    for name, function, repeats in cases:
                        rows[name][(load, threads)] = _best_of(function, repeats)
        finally:
            if hog is not None:
                hog.terminate()
                hog.join()
    columns = [(load, t) for load in LOADS for t in (1, 2)]
    print("| case | " + " | ".join(f"{load}, {t} thread{'s' * (t > 1)}" for load, t in columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for name, times in rows.items():
        print(f"| {name} | " + " | ".join(f"{times[c]:.3g} s" for c in columns) + " |")


if __name__ == "__main__":
    main()
