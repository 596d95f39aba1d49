"""Checkpointed NUTS: chunks resume to the same draws, keep the warm-up, and still sample exactly."""

import shutil

import numpy as np
import pytest

from stanaccel.atomic import read_pickle
from stanaccel.datasets.mvn_mean import exact_posterior
from stanaccel.diagnostics import mcse_z_scores, to_inference_data
from stanaccel.stan.chunks import NutsCheckpointWarning
from stanaccel.stan.nuts import sample_nuts
from tests.kernels.test_checkpoints import zero_bytes_of

SETTINGS = {"chains": 2, "warmup": 300, "draws": 1000, "seed": 4, "progress": False}


@pytest.fixture(scope="module")
def whole(mvn_model, tmp_path_factory):
    folder = tmp_path_factory.mktemp("whole")
    return sample_nuts(mvn_model, checkpoint=folder, checkpoint_draws=150, **SETTINGS), folder


def assert_same_fit(ours, theirs):
    np.testing.assert_array_equal(ours.draws_unconstrained, theirs.draws_unconstrained)
    np.testing.assert_array_equal(ours.draws_constrained, theirs.draws_constrained)
    np.testing.assert_array_equal(ours.warmup_constrained, theirs.warmup_constrained)
    for name, values in theirs.sample_stats.items():
        np.testing.assert_array_equal(ours.sample_stats[name], values, err_msg=name)
    np.testing.assert_array_equal(ours.step_size, theirs.step_size)
    np.testing.assert_array_equal(ours.inv_metric, theirs.inv_metric)
    assert not ours.interrupted and ours.adapted


def test_chunked_nuts_recovers_the_exact_posterior(whole, mvn_data):
    fit, _ = whole
    mean, cov = exact_posterior(mvn_data)
    z_mean, z_sd = mcse_z_scores(to_inference_data(fit), "theta", mean, np.sqrt(np.diag(cov)))
    assert np.all(np.abs(z_mean) < 3.5) and np.all(np.abs(z_sd) < 3.5), (z_mean, z_sd)
    assert fit.draws_constrained.shape == (2, 1000, 3) and fit.warmup_constrained.shape == (2, 300, 3)


def test_the_warmup_is_an_unchunked_runs(whole, mvn_model):
    plain = sample_nuts(mvn_model, **SETTINGS)
    np.testing.assert_array_equal(whole[0].warmup_unconstrained, plain.warmup_unconstrained)
    np.testing.assert_array_equal(whole[0].step_size, plain.step_size)


@pytest.mark.parametrize("kept", [{0: 3, 1: 1}, {0: 0, 1: 6}, "warmup-lost"])
def test_a_killed_run_resumes_to_the_same_draws(whole, mvn_model, tmp_path, kept):
    """A kill leaves each chain's warm-up and its first chunks: simulate it by keeping only those files."""
    fit, folder = whole
    for path in folder.glob("*.pkl"):
        chain, part = path.stem.removeprefix("nuts-chain-").split("-")
        lost = part != "warmup" and int(part) >= kept[int(chain)] if kept != "warmup-lost" else chain == "1"
        if not lost:
            for file in (path, path.with_name(path.name + ".json")):  # the checkpoint and its manifest
                (tmp_path / file.name).write_bytes(file.read_bytes())
    resumed = sample_nuts(mvn_model, checkpoint=tmp_path, checkpoint_draws=150, **SETTINGS)
    assert_same_fit(resumed, fit)
    assert len(list(tmp_path.iterdir())) == len(list(folder.iterdir()))


def test_another_runs_checkpoints_are_not_resumed(whole, mvn_model, tmp_path):
    _, folder = whole
    for path in folder.iterdir():
        (tmp_path / path.name).write_bytes(path.read_bytes())
    with pytest.warns(NutsCheckpointWarning, match="differs in settings"):
        other = sample_nuts(mvn_model, checkpoint=tmp_path, checkpoint_draws=150, **{**SETTINGS, "seed": 5})
    assert_same_fit(other, sample_nuts(mvn_model, checkpoint_draws=150, checkpoint=tmp_path / "new",
                                       **{**SETTINGS, "seed": 5}))  # fmt: skip


def test_a_run_from_an_earlier_warmup_resumes_too(whole, mvn_model, tmp_path):
    state = whole[0].warmup_state()
    first = sample_nuts(mvn_model, warmup_from=state, draws=400, seed=2, progress=False, checkpoint=tmp_path)
    for path in tmp_path.glob("nuts-chain-0-[12].pkl"):
        path.unlink()
    again = sample_nuts(mvn_model, warmup_from=state, draws=400, seed=2, progress=False, checkpoint=tmp_path)
    assert_same_fit(again, first)
    assert first.draws_constrained.shape == (2, 400, 3)


def test_a_damaged_chunk_is_discarded_and_run_again(whole, mvn_model, tmp_path):
    fit, folder = whole
    shutil.copytree(folder, tmp_path, dirs_exist_ok=True)
    path = tmp_path / "nuts-chain-0-2.pkl"
    rows = read_pickle(path)["piece"]["sample_rows"]
    zero_bytes_of(path, rows)  # it still unpickles, to zero draws
    with pytest.warns(NutsCheckpointWarning, match="chain 0: not resuming: .*nuts-chain-0-2.pkl is damaged"):
        resumed = sample_nuts(mvn_model, checkpoint=tmp_path, checkpoint_draws=150, **SETTINGS)
    assert_same_fit(resumed, fit)


def test_a_resumed_run_is_charged_the_seconds_its_checkpointed_parts_took(whole, mvn_model, tmp_path):
    fit, folder = whole
    shutil.copytree(folder, tmp_path, dirs_exist_ok=True)
    resumed = sample_nuts(mvn_model, checkpoint=tmp_path, checkpoint_draws=150, **SETTINGS)  # all read back
    np.testing.assert_array_equal(resumed.chain_seconds, fit.chain_seconds)
    assert resumed.wall_seconds >= resumed.chain_seconds.max() > 0  # not the instant the reading took


def test_a_longer_run_continues_a_shorter_ones_chunks(whole, mvn_model, tmp_path):
    """``auto``'s NUTS pilot is the start of its full run: the same draws as a run never stopped."""
    state = whole[0].warmup_state()
    settings = {"warmup_from": state, "seed": 6, "progress": False, "checkpoint_draws": 150}
    short = sample_nuts(mvn_model, draws=300, checkpoint=tmp_path, **settings)
    longer = sample_nuts(mvn_model, draws=1000, checkpoint=tmp_path, **settings)
    never_stopped = sample_nuts(mvn_model, draws=1000, checkpoint=tmp_path / "new", **settings)
    np.testing.assert_array_equal(longer.draws_unconstrained, never_stopped.draws_unconstrained)
    np.testing.assert_array_equal(longer.draws_unconstrained[:, :300], short.draws_unconstrained)
    assert longer.wall_seconds >= short.wall_seconds  # charged the chunks it continued
    # A shorter run's last chunk (here 50 draws) is not the longer run's chunk there (150): run again.
    odd = tmp_path / "odd"
    sample_nuts(mvn_model, draws=350, checkpoint=odd, **settings)
    again = sample_nuts(mvn_model, draws=1000, checkpoint=odd, **settings)
    np.testing.assert_array_equal(again.draws_unconstrained, never_stopped.draws_unconstrained)
