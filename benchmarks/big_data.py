"""Big-data regressions: every exact stanaccel method against Stan NUTS, with everything charged.

Three posteriors written here as a user would write them, each with its
likelihood multiplied by a data variable ``real<lower=0> beta`` and its
observations declared for subsampling:

- ``logistic``: ``bernoulli_logit_glm``, K = 10 predictors correlated
  0.5^|i - j|;
- ``poisson``: ``poisson_log_glm`` on the same kind of predictors;
- ``hierarchical``: a logistic regression with J = 20 group intercepts
  (centred: many observations per group) and the K = 10 shared slopes.

For each posterior and N (default 10^4 and 10^5; ``--n 1000000`` for 10^6)
the script writes the programs and the data (NumPy, fixed seeds) to a work
folder and runs, in one process and in the order of :data:`RUNS`, Stan's
NUTS through ``stanaccel.sampling.sample(method="nuts")``, every exact
stanaccel method after a cheap warm-up, and NumPyro's NUTS on the same data
when ``numpyro`` is importable (``pip install "stanaccel[peers]"``; JIT
compilation charged). Each row charges everything: warm-up, mode and
Taylor set-up, tuning, sampling. It prints one table: seconds charged, the
wall time of the call (everything the process does for the run but its
imports: the data's conversion, the program's loading, the draws'
conversion), ESS = the worst over the parameters of min(bulk ESS, tail ESS)
(bulk and tail shown too), ESS per second charged, the ratio to Stan NUTS
per second charged and per wall second, and the worst |z| of a parameter's mean against NUTS's, z = (mean -
mean_nuts) / sqrt(mcse^2 + mcse_nuts^2), with the Bonferroni limit for the
parameters (family-wise 1%); then how each method's ratio grows with N.

Run: .venv/bin/python benchmarks/big_data.py [--n 10000,100000] [--posteriors logistic,poisson,hierarchical]
     [--runs nuts,hmc,...] [--chains 4] [--draws 1000] [--seed 3] [--quick] [--markdown out.md] [FOLDER]
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
import time
import warnings
from pathlib import Path

import arviz as az
import numpy as np
from scipy.stats import norm

from stanaccel.sampling import METHODS, ApproximationWarning, sample
from stanaccel.sampling.auto import is_auto, pilot_line
from stanaccel.stan import write_data

# The runs, in order: (name, method, settings). "nuts" first: every ratio and z is against it.
# A method not in stanaccel's table (``auto`` until it lands) is skipped with a message; "numpyro"
# is NumPyro's NUTS, run only when numpyro is importable.
CV = {"kind": "control-variate", "m": 100}
RUNS: list[tuple[str, str, dict]] = [
    ("nuts", "nuts", {}),
    ("hmc", "hmc", {"warmup": "laplace"}),
    ("mala", "mala", {"warmup": "laplace"}),
    ("imh", "imh", {"warmup": "laplace"}),
    ("pcn-laplace", "pcn", {"warmup": "laplace"}),
    ("pcn-pathfinder", "pcn", {"warmup": "pathfinder"}),
    ("dc-cv", "dc", {"warmup": "laplace", "inner": "hmc", "approx": CV}),
    ("auto", "auto", {}),
    ("numpyro", "numpyro", {}),
]

LOGISTIC = """
data {
  int<lower=1> N;
  int<lower=1> K;
  matrix[N, K] X;
  array[N] int<lower=0, upper=1> y;
  real<lower=0> beta;
}
parameters {
  real alpha;
  vector[K] w;
}
model {
  alpha ~ normal(0, 5);
  w ~ normal(0, 5);
  target += beta * bernoulli_logit_glm_lpmf(y | X, alpha, w);
}
"""

POISSON = """
data {
  int<lower=1> N;
  int<lower=1> K;
  matrix[N, K] X;
  array[N] int<lower=0> y;
  real<lower=0> beta;
}
parameters {
  real alpha;
  vector[K] w;
}
model {
  alpha ~ normal(0, 5);
  w ~ normal(0, 5);
  target += beta * poisson_log_glm_lpmf(y | X, alpha, w);
}
"""

HIERARCHICAL = """
data {
  int<lower=1> N;
  int<lower=1> K;
  int<lower=1> J;
  matrix[N, K] X;
  array[N] int<lower=1, upper=J> g;
  array[N] int<lower=0, upper=1> y;
  real<lower=0> beta;
}
parameters {
  real mu;
  real<lower=0> tau;
  vector[J] a;
  vector[K] w;
}
model {
  mu ~ normal(0, 2);
  tau ~ normal(0, 1);
  a ~ normal(mu, tau);
  w ~ normal(0, 5);
  target += beta * bernoulli_logit_glm_lpmf(y | X, a[g], w);
}
"""

K, J = 10, 20
POSTERIORS = {
    "logistic": (LOGISTIC, ["alpha", "w"], ["X", "y"]),
    "poisson": (POISSON, ["alpha", "w"], ["X", "y"]),
    "hierarchical": (HIERARCHICAL, ["mu", "tau", "a", "w"], ["X", "y", "g"]),
}


def make_data(posterior: str, n: int, seed: int = 2026) -> dict:
    """N observations of K predictors correlated 0.5^|i-j|, and the response, from NumPy with a fixed seed."""
    rng = np.random.default_rng([seed, n])
    lags = np.abs(np.subtract.outer(np.arange(K), np.arange(K)))
    X = rng.normal(size=(n, K)) @ np.linalg.cholesky(0.5**lags).T
    data = {"N": n, "K": K, "X": X, "beta": 1.0}
    if posterior == "poisson":
        data["y"] = rng.poisson(np.exp(0.5 + X @ np.linspace(-0.3, 0.3, K)))
    elif posterior == "logistic":
        data["y"] = (rng.uniform(size=n) < 1 / (1 + np.exp(-(0.3 + X @ np.linspace(-1, 1, K))))).astype(int)
    else:
        g = rng.integers(1, J + 1, size=n)
        a = 0.3 + 0.5 * rng.normal(size=J)
        eta = a[g - 1] + X @ np.linspace(-1, 1, K)
        data.update(J=J, g=g, y=(rng.uniform(size=n) < 1 / (1 + np.exp(-eta))).astype(int))
    return data


def columns(draws: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Each scalar parameter's (chain, draw) array, named ``var[i]`` (0-based) or ``var``."""
    out = {}
    for name, array in draws.items():
        flat = array.reshape(array.shape[0], array.shape[1], -1)
        if array.ndim == 2:
            out[name] = flat[:, :, 0]
        else:
            out.update({f"{name}[{i}]": flat[:, :, i] for i in range(flat.shape[2])})
    return out


def moments(draws: dict[str, np.ndarray]) -> dict[str, tuple[float, float, float]]:
    """Per scalar parameter: mean, MCSE of the mean, bulk ESS, tail ESS (ArviZ)."""
    return {
        name: (
            float(x.mean()),
            float(np.ravel(az.mcse(x, method="mean"))[0]),
            float(np.ravel(az.ess(x, method="bulk"))[0]),
            float(np.ravel(az.ess(x, method="tail"))[0]),
        )
        for name, x in columns(draws).items()
    }


def run_stanaccel(program: Path, data: dict, method: str, settings: dict, seed: int) -> dict:
    """One ``sample`` call; seconds charged and the parameters' draws."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ApproximationWarning)
        result = sample(program, data, method, settings, seed=seed, progress=False)
    posterior = result.to_inference_data().posterior
    params = POSTERIORS[program.stem][1]
    charged = ", ".join(f"{k} {v:.1f}" for k, v in result.charged_seconds.items())
    if is_auto(method):
        charged = f"chose {result.method}; {charged}"
        table = result.reports["auto"]
        for row in table["pilots"]:
            print("  auto pilot: " + pilot_line(row), flush=True)
        print("  " + table["reason"], flush=True)
    return {
        "seconds": result.wall_seconds,
        "draws": {p: posterior[p].values for p in params},
        "note": charged or "its own warm-up",
        "acceptance": result.acceptance,
    }


def run_numpyro(posterior: str, data: dict, chains: int, warmup: int, draws: int, seed: int) -> dict:
    """NumPyro's NUTS (diagonal metric, target acceptance 0.8, float64) on the same data; JIT charged."""
    import jax
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from numpyro.infer import MCMC, NUTS

    numpyro.enable_x64()
    start = time.perf_counter()  # charged: the data's transfer, JIT compilation, warm-up and sampling
    X, y = jnp.asarray(data["X"]), jnp.asarray(data["y"])

    def model():
        if posterior == "hierarchical":
            mu = numpyro.sample("mu", dist.Normal(0, 2))
            tau = numpyro.sample("tau", dist.HalfNormal(1))
            a = numpyro.sample("a", dist.Normal(mu, tau).expand([J]).to_event(1))
            intercept = a[jnp.asarray(data["g"]) - 1]
        else:
            intercept = numpyro.sample("alpha", dist.Normal(0, 5))
        w = numpyro.sample("w", dist.Normal(0, 5).expand([K]).to_event(1))
        eta = intercept + X @ w
        likelihood = dist.Poisson(jnp.exp(eta)) if posterior == "poisson" else dist.BernoulliLogits(eta)
        numpyro.sample("y", likelihood, obs=y)

    method = "parallel" if jax.local_device_count() >= chains else "sequential"
    mcmc = MCMC(NUTS(model), num_warmup=warmup, num_samples=draws, num_chains=chains,
                chain_method=method, progress_bar=False)  # fmt: skip
    mcmc.run(jax.random.PRNGKey(seed))
    samples = jax.block_until_ready(mcmc.get_samples(group_by_chain=True))  # JAX computes asynchronously
    seconds = time.perf_counter() - start
    params = POSTERIORS[posterior][1]
    return {
        "seconds": seconds,
        "draws": {p: np.asarray(samples[p]) for p in params},
        "note": f"JIT included, chains {method}",
        "acceptance": None,
    }


def compare(row: dict, nuts: dict) -> None:
    """Add the ESS (min of bulk and tail), ESS/s charged and per wall second, and the worst |z| to ``row``."""
    mine, theirs = moments(row["draws"]), moments(nuts["draws"])
    row["bulk"] = min(m[2] for m in mine.values())
    row["tail"] = min(m[3] for m in mine.values())
    row["ess"] = min(row["bulk"], row["tail"])
    row["ess_s"] = row["ess"] / row["seconds"]
    row["ess_wall"] = row["ess"] / row["wall"]
    z = {
        name: abs(mean - theirs[name][0]) / math.hypot(mcse, theirs[name][1])
        for name, (mean, mcse, _, _) in mine.items()
    }
    row["worst"] = max(z, key=z.get)
    row["z"] = z[row["worst"]]
    row["limit"] = float(norm.isf(0.01 / (2 * len(z))))


def numpyro_available() -> bool:
    try:
        import numpyro  # noqa: F401
    except ImportError:
        return False
    return True


def runnable(name: str, method: str) -> bool:
    """Whether a run of :data:`RUNS` can run here (NumPyro only when installed); if not, say why."""
    if method == "numpyro" and not numpyro_available():
        print('skipping numpyro: not importable (pip install "stanaccel[peers]")', flush=True)
        return False
    if method != "numpyro" and method not in METHODS and not is_auto(method):
        print(f"skipping {name}: '{method}' is not a stanaccel method here", flush=True)
        return False
    return True


def data_warning(n: int, posterior: str) -> str | None:
    """Stan reads data as JSON text: say how large it is at large N."""
    floats = n * (K + 2)
    if floats < 5_000_000:
        return None
    return (
        f"warning: {posterior} at N = {n}: {floats / 1e6:.0f} million numbers; Stan reads them as JSON text "
        f"(about {floats * 22 / 1e9:.1f} GB of it, and a parsed copy of {floats * 8 / 1e9:.1f} GB, for each "
        "data set: the full data and, for subsets, a few small ones; the chains share them), which takes "
        "tens of seconds before each run starts and is not charged to it; expect a few GB of memory"
    )


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "folder", nargs="?", default="output/big_data", help="work folder for programs and data"
    )
    parser.add_argument("--n", default=None, help="values of N, comma-separated (default 10000,100000)")
    parser.add_argument("--posteriors", default="logistic,poisson,hierarchical")
    parser.add_argument(
        "--runs", default=",".join(r[0] for r in RUNS), help="names from RUNS, comma-separated"
    )
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--draws", type=int, default=None, help="draws per chain (default 1000)")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="N = 2000, 200 warm-up and draws: a smoke test")
    parser.add_argument("--markdown", default=None, help="also write the tables to this Markdown file")
    args = parser.parse_args(argv)
    sizes = [int(float(n)) for n in (args.n or ("2000" if args.quick else "10000,100000")).split(",")]
    draws = args.draws or (200 if args.quick else 1000)
    warmup = 200 if args.quick else 1000
    posteriors = args.posteriors.split(",")
    wanted = args.runs.split(",")
    names = [name for name, _, _ in RUNS]
    unknown = [p for p in posteriors if p not in POSTERIORS] + [r for r in wanted if r not in names]
    if unknown:
        parser.error(f"unknown posterior or run {unknown}: choose from {list(POSTERIORS)} and {names}")
    runs = [run for run in RUNS if run[0] in wanted or run[0] == "nuts"]  # NUTS: every ratio's baseline
    runs = [run for run in runs if runnable(*run[:2])]
    if any(m == "numpyro" for _, m, _ in runs):
        import numpyro

        numpyro.set_host_device_count(args.chains)  # one CPU device per chain, before JAX starts
    folder = Path(args.folder)
    folder.mkdir(parents=True, exist_ok=True)
    common = {"chains": args.chains, "draws": draws}
    rows = []
    for posterior in posteriors:
        source, _, fields = POSTERIORS[posterior]
        program = folder / f"{posterior}.stan"
        program.write_text(source)
        observations = {"count": "N", "fields": fields}
        for n in sizes:
            if message := data_warning(n, posterior):
                print(message, flush=True)
            data = make_data(posterior, n)
            write_data(folder / f"{posterior}_{n}.json", data)  # for the stanaccel command line
            nuts = None
            for name, method, settings in runs:
                start = time.perf_counter()
                if method == "numpyro":
                    row = run_numpyro(posterior, data, args.chains, warmup, draws, args.seed)
                else:
                    settings = {**common, **settings}
                    if settings.get("warmup") is None and not is_auto(method):  # auto runs its own
                        settings["warmup"] = warmup
                    if is_auto(method) or {"approx", "ladder", "observations"} & set(METHODS[method].needs):
                        settings["observations"] = observations
                    row = run_stanaccel(program, data, method, settings, args.seed)
                wall = time.perf_counter() - start
                row.update(posterior=posterior, N=n, name=name, method=method, wall=wall)
                nuts = nuts or row
                compare(row, nuts)
                rows.append(row)
                print(
                    f"{posterior} N={n} {name}: {row['seconds']:.1f} s ({row['note']}), "
                    f"ESS {row['ess']:.0f}, "
                    f"x NUTS {row['ess_s'] / nuts['ess_s']:.2f}, worst |z| {row['z']:.2f} "
                    f"({row['worst']}); took {time.perf_counter() - start:.0f} s",
                    flush=True,
                )
    text = report(rows, args, draws, warmup)
    print("\n" + text)
    if args.markdown:
        Path(args.markdown).write_text(text + "\n")
    return rows


def report(rows: list[dict], args, draws: int, warmup: int) -> str:
    """The table, and how each method's ratio to NUTS grows with N, as Markdown."""
    nuts = {(r["posterior"], r["N"]): r for r in rows if r["name"] == "nuts"}
    lines = [
        f"$ python benchmarks/big_data.py {shlex.join(sys.argv[1:])}",
        "",
        f"{args.chains} chains x {draws} draws (NUTS: {warmup} warm-up iterations), seed {args.seed}; "
        "seconds charged = warm-up and set-up + sampling; wall = the call's wall time (all but imports); "
        "ESS = the worst over the parameters of min(bulk ESS, tail ESS); "
        "|z| = worst parameter's |mean - mean_nuts| / sqrt(mcse^2 + mcse_nuts^2), "
        "limit: Bonferroni over the parameters at 1%.",
        "",
        "| posterior | N | run | seconds charged | wall s | ESS bulk / tail | ESS | ESS/s charged "
        "| x Stan NUTS, charged | x Stan NUTS, wall | worst abs z (limit) |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        base = nuts[(r["posterior"], r["N"])]
        ratio, wall = r["ess_s"] / base["ess_s"], r["ess_wall"] / base["ess_wall"]
        z = "" if r["name"] == "nuts" else f"{r['z']:.2f} ({r['limit']:.2f})"
        lines.append(
            f"| {r['posterior']} | {r['N']} | {r['name']} | {r['seconds']:.1f} | {r['wall']:.1f} "
            f"| {r['bulk']:.0f} / {r['tail']:.0f} | {r['ess']:.0f} | {r['ess_s']:.1f} | {ratio:.2f} "
            f"| {wall:.2f} | {z} |"
        )
    lines += ["", "How the ratio to Stan NUTS grows with N:", ""]
    for posterior in dict.fromkeys(r["posterior"] for r in rows):
        for name in dict.fromkeys(r["name"] for r in rows if r["name"] != "nuts"):
            mine = [r for r in rows if r["posterior"] == posterior and r["name"] == name]
            ratios = [(r["N"], r["ess_s"] / nuts[(posterior, r["N"])]["ess_s"]) for r in mine]
            text = " -> ".join(f"{ratio:.2f}x (N={n})" for n, ratio in ratios)
            if len(ratios) > 1:
                (n0, r0), (n1, r1) = ratios[0], ratios[-1]
                text += f"; x{(r1 / r0) ** (1 / math.log10(n1 / n0)):.2f} per tenfold N"
            lines.append(f"- {posterior}, {name}: {text}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
