"""An existing CmdStan run (Stan CSV files, read by cmdstanpy) as a warm-up source."""

import numpy as np
import pytest

from stanaccel.stan.cmdstan import cmdstan_column, read_warmup
from stanaccel.stan.nuts import BorrowedWarmupWarning, sample_nuts
from stanaccel.stan.provenance import READAPT_ITERATIONS

HEADER = """# stan_version_major = 2
# stan_version_minor = 35
# stan_version_patch = 0
# model = {model}
# start_datetime = 2026-11-29 12:00:00 UTC
# method = sample (Default)
#   sample
#     num_samples = {draws}
#     num_warmup = {warmup}
#     save_warmup = false (Default)
#     thin = 1 (Default)
#     adapt
#       engaged = true (Default)
#       gamma = 0.05 (Default)
#       delta = 0.8 (Default)
#       kappa = 0.75 (Default)
#       t0 = 10 (Default)
#       init_buffer = 75 (Default)
#       term_buffer = 50 (Default)
#       window = 25 (Default)
#       save_metric = false (Default)
#     algorithm = hmc (Default)
#       hmc
#         engine = nuts (Default)
#           nuts
#             max_depth = 10 (Default)
#         metric = {metric}_e
#         metric_file =  (Default)
#         stepsize = 1 (Default)
#         stepsize_jitter = 0 (Default)
#     num_chains = 1 (Default)
# id = {chain}
# data
#   file = data.json
# init = 2 (Default)
# random
#   seed = 1
# output
#   file = output.csv (Default)
#   diagnostic_file =  (Default)
#   refresh = 100 (Default)
#   sig_figs = -1 (Default)
#   profile_file = profile.csv (Default)
#   save_cmdstan_config = false (Default)
# num_threads = 1 (Default)
# stanc_version = stanc3 v2.35.0
# stancflags =
"""


def write_cmdstan_csv(path, fit, chain, model_name):
    """One chain of a fit in the layout CmdStan 2.35 writes."""
    stan_columns = [
        "lp__",
        "accept_stat__",
        "stepsize__",
        "treedepth__",
        "n_leapfrog__",
        "divergent__",
        "energy__",
    ]
    stats = [
        fit.sample_stats[k][chain]
        for k in ("lp", "acceptance_rate", "step_size", "tree_depth", "n_steps", "diverging", "energy")
    ]
    table = np.column_stack([*stats, fit.draws_constrained[chain]])
    lines = [
        HEADER.format(
            model=model_name,
            draws=fit.num_draws,
            warmup=fit.settings.warmup,
            metric=fit.settings.metric,
            chain=chain + 1,
        )
    ]
    lines.append(",".join(stan_columns + [cmdstan_column(n) for n in fit.param_names]) + "\n")
    lines.append("# Adaptation terminated\n")
    lines.append(f"# Step size = {fit.step_size[chain]:.17g}\n")
    if fit.settings.metric == "diag":
        lines.append("# Diagonal elements of inverse mass matrix:\n")
        lines.append("# " + ", ".join(f"{v:.17g}" for v in fit.inv_metric[chain]) + "\n")
    else:
        lines.append("# Elements of inverse mass matrix:\n")
        for row in fit.inv_metric[chain]:
            lines.append("# " + ", ".join(f"{v:.17g}" for v in row) + "\n")
    for row in table:
        lines.append(",".join(f"{v:.17g}" for v in row) + "\n")
    lines.append("# \n#  Elapsed Time: 0.1 seconds (Warm-up)\n#                0.1 seconds (Sampling)\n")
    lines.append("#                0.2 seconds (Total)\n# \n")
    path.write_text("".join(lines))
    return path


@pytest.mark.parametrize("metric", ["diag", "dense"])
def test_cmdstan_run_is_a_warmup_source(tmp_path, gp_model, metric):
    fit = sample_nuts(gp_model, chains=2, warmup=300, draws=100, seed=4, metric=metric, progress=False)
    files = [write_cmdstan_csv(tmp_path / f"run-{c + 1}.csv", fit, c, gp_model.name) for c in range(2)]
    state = read_warmup(files, gp_model)
    assert state.metric == metric
    np.testing.assert_allclose(state.step_size, fit.step_size, rtol=1e-12)
    np.testing.assert_allclose(state.inv_metric, fit.inv_metric, rtol=1e-12)
    np.testing.assert_allclose(state.positions, fit.draws_unconstrained[:, -1], rtol=1e-8)
    # CSV files name their data file, not its contents: the data cannot be checked, so NUTS adapts again.
    with pytest.warns(BorrowedWarmupWarning, match="run-1.csv.*cannot be checked.*300 iterations"):
        more = sample_nuts(gp_model, warmup_from=state, draws=20, seed=9, progress=False)
    assert more.draws().shape == (2, 20, 4) and more.warmup_unconstrained.shape[1] == READAPT_ITERATIONS
    with pytest.warns(BorrowedWarmupWarning, match="warmup = 0 asks for no warm-up"):
        at_once = sample_nuts(gp_model, warmup_from=state, warmup=0, draws=20, seed=9, progress=False)
    np.testing.assert_allclose(at_once.sample_stats["step_size"][:, 0], fit.step_size)


def test_cmdstan_run_of_another_program_is_refused(tmp_path, gp_model, mvn_model):
    fit = sample_nuts(mvn_model, chains=1, warmup=100, draws=10, seed=4, progress=False)
    path = write_cmdstan_csv(tmp_path / "run-1.csv", fit, 0, mvn_model.name)
    with pytest.raises(ValueError, match="same program"):
        read_warmup(path, gp_model)


def test_cmdstan_run_with_more_parameters_than_the_model_is_refused(tmp_path, mvn_model):
    """A run whose columns include the model's and more (theta[1..3] for theta[1..2]): another program."""
    from stanaccel.datasets import generate
    from stanaccel.stan import StanModel

    fit = sample_nuts(mvn_model, chains=1, warmup=100, draws=10, seed=4, progress=False)
    path = write_cmdstan_csv(tmp_path / "run-1.csv", fit, 0, mvn_model.name)
    smaller = StanModel(mvn_model.program, generate("mvn_mean", N=20, D=2, seed=7).data)
    with pytest.raises(ValueError, match="a metric of 3 unconstrained parameters; mvn_mean_model has 2"):
        read_warmup(path, smaller)
