"""Long kernel runs: checkpoints resume to the same draws as a run never stopped; progress bars."""

import io
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import stanaccel
from stanaccel.kernels import (
    HMC,
    CheckpointWarning,
    Cycle,
    ParallelTempering,
    RandomWalkMetropolis,
    TemperedTransitions,
    power_ladder,
    run_chains,
)
from stanaccel.kernels.independence import IndependenceMetropolis
from stanaccel.kernels.parallel_tempering import all_levels
from tests.kernels.models import broad_prior_density, mixture_density, mvn_density, mvn_problem

DATA, _, _ = mvn_problem()
DIM = len(DATA["mu0"])
STARTS = np.zeros((2, DIM))


def mh_factory(chain):
    return RandomWalkMetropolis(mvn_density(DATA), 0.3)


def hmc_factory(chain):
    return HMC(mvn_density(DATA), step_size=0.1, n_steps=5, n_steps_jitter=0.5)


def imh_factory(chain):
    """Batches of 16 proposals: a stop after 120 draws falls inside a batch, which the state keeps."""
    return IndependenceMetropolis(mvn_density(DATA), DATA["mu0"], np.eye(DIM) * 0.1, batch=16)


def tempered_cycle():
    """A cycle with tempered transitions: statistics records and several inner kernels."""
    ladder = power_ladder(mixture_density(), broad_prior_density(), betas=[1.0, 0.5, 0.25])
    tt = TemperedTransitions(ladder, lambda d, m: RandomWalkMetropolis(d, 0.5 / np.sqrt(ladder.betas[m])))
    return Cycle([RandomWalkMetropolis(ladder.levels[0], 0.5), tt])


def tempering(chain):
    ladder = power_ladder(mixture_density(), broad_prior_density(), betas=[1.0, 0.5, 0.25])
    return ParallelTempering(ladder, lambda d, m: RandomWalkMetropolis(d, 0.5 / np.sqrt(ladder.betas[m])))


def assert_same_run(resumed, whole):
    for name in (
        "positions",
        "accepted",
        "acceptance_probability",
        "divergent",
        "failed",
        "failed_proposals",
    ):
        assert np.array_equal(getattr(resumed, name), getattr(whole, name)), name
    if whole.recorded is not None:
        assert np.array_equal(resumed.recorded, whole.recorded)
    for ours, theirs in zip(resumed.summaries, whole.summaries, strict=True):
        if theirs is None:
            assert ours is None
            continue
        assert ours.keys() == theirs.keys()
        for key in theirs:  # density evaluation counts differ: the resumed run re-evaluates its start
            if "evaluations" not in key:
                np.testing.assert_equal(ours[key], theirs[key], err_msg=key)
    assert not resumed.interrupted


@pytest.mark.parametrize(
    "make, starts, record",
    [
        (mh_factory, STARTS, None),
        (hmc_factory, STARTS, None),
        (imh_factory, STARTS, None),
        (tempering, np.zeros((2, 1)), all_levels),
        (lambda c: tempered_cycle(), np.zeros((2, 1)), None),
        ("shared", STARTS, None),  # one kernel, chains in turn
    ],
    ids=["mh", "hmc", "imh", "parallel-tempering", "tempered-transitions", "shared-kernel"],
)
def test_a_stopped_run_resumes_to_the_same_draws(tmp_path, make, starts, record):
    factory = hmc_factory(0) if make == "shared" else make
    n = 300
    whole = run_chains(factory, starts, n, seed=3, record=record)
    stopped = run_chains(
        factory, starts, n, seed=3, record=record, checkpoint=tmp_path, stop=lambda c, done: done == 120
    )
    assert stopped.interrupted and stopped.positions.shape[1] < n
    resumed = run_chains(factory, starts, n, seed=3, record=record, checkpoint=tmp_path)
    assert_same_run(resumed, whole)
    # evaluations count both segments: a resumed chain made no more than a whole one plus its restart
    assert np.all(resumed.evaluations >= whole.evaluations)


def test_a_finished_run_is_read_back_without_sampling(tmp_path):
    whole = run_chains(hmc_factory, STARTS, 100, seed=3, checkpoint=tmp_path)
    again = run_chains(hmc_factory, STARTS, 100, seed=3, checkpoint=tmp_path)
    assert_same_run(again, whole)
    np.testing.assert_array_equal(again.evaluations, whole.evaluations)  # no new evaluation counted


def test_a_checkpoint_of_another_run_is_not_resumed(tmp_path):
    run_chains(mh_factory, STARTS, 50, seed=3, checkpoint=tmp_path, stop=lambda c, done: done == 20)
    with pytest.warns(CheckpointWarning, match="differs in n_draws"):
        other = run_chains(mh_factory, STARTS, 80, seed=3, checkpoint=tmp_path)
    np.testing.assert_array_equal(other.positions, run_chains(mh_factory, STARTS, 80, seed=3).positions)
    (tmp_path / "chain-0.pkl").write_bytes(b"not a pickle")
    with pytest.warns(CheckpointWarning, match="chain-0.pkl is damaged"):
        run_chains(mh_factory, STARTS, 80, seed=3, checkpoint=tmp_path)


def test_a_damaged_checkpoint_is_discarded_and_its_chain_recomputed(tmp_path):
    whole = run_chains(hmc_factory, STARTS, 300, seed=3, checkpoint=tmp_path)
    zero_bytes_of(tmp_path / "chain-1.pkl", whole.positions[1])  # it still unpickles, to zero draws
    with pytest.warns(CheckpointWarning, match="chain 1: not resuming: .*chain-1.pkl is damaged"):
        again = run_chains(hmc_factory, STARTS, 300, seed=3, checkpoint=tmp_path)
    assert again.resumed_draws.tolist() == [300, 0]
    assert_same_run(again, whole)


def test_a_resumed_run_is_charged_the_seconds_its_checkpointed_draws_took(tmp_path):
    from stanaccel.kernels import checkpoint as checkpoints

    run_chains(hmc_factory, STARTS, 300, seed=3, checkpoint=tmp_path)
    again = run_chains(hmc_factory, STARTS, 300, seed=3, checkpoint=tmp_path)  # every draw read back
    stored = [
        checkpoints.load(tmp_path, c, _fingerprint(300), hmc_factory(c)).seconds for c in range(len(STARTS))
    ]
    assert min(stored) > 0
    assert again.wall_seconds >= max(stored)  # not the instant the reading took
    assert np.all(again.chain_seconds >= stored)


def zero_bytes_of(path, array, size=4096):
    """Zero up to ``size`` bytes of ``path`` where ``array``'s bytes are, as a disk error might."""
    payload = bytearray(path.read_bytes())
    start = payload.find(np.ascontiguousarray(array).tobytes()[:256])
    assert start > 0
    payload[start : start + size] = bytes(min(size, len(payload) - start))
    path.write_bytes(bytes(payload))


def _fingerprint(n_draws):
    from stanaccel.kernels.checkpoint import fingerprint

    return fingerprint(
        chains=len(STARTS), n_draws=n_draws, thin=1, dim=DIM, seed=3, kernel="HMC", starts=STARTS
    )


KILLED_RUN = """
import sys, time
import numpy as np
from stanaccel.kernels import FunctionDensity, RandomWalkMetropolis, run_chains
from tests.kernels.models import mvn_density
from tests.kernels.test_checkpoints import DATA, STARTS

exact = mvn_density(DATA)

def slow(x):  # the same values, slowly: the kill comes mid-run
    time.sleep(2e-4)
    return exact.log_density(x)

run_chains(lambda c: RandomWalkMetropolis(FunctionDensity(exact.dim, slow), 0.3), STARTS, 20000,
           seed=5, checkpoint=sys.argv[1], checkpoint_seconds=0.2, name="mh")
"""


@pytest.mark.slow
def test_a_killed_run_resumes_to_the_same_draws(tmp_path):
    root = Path(__file__).parents[2]
    path = os.pathsep.join([str(Path(stanaccel.__file__).parents[1]), str(root)])
    process = subprocess.Popen(
        [sys.executable, "-c", KILLED_RUN, str(tmp_path)], cwd=root, env={**os.environ, "PYTHONPATH": path}
    )
    files = [tmp_path / "chain-0.pkl", tmp_path / "chain-1.pkl"]
    deadline = time.monotonic() + 60
    while not all(f.exists() for f in files) and process.poll() is None:
        assert time.monotonic() < deadline, "no checkpoint written"
        time.sleep(0.05)
    time.sleep(0.5)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL
    kept = [pickle.loads(f.read_bytes()).done for f in files]
    assert all(0 < k < 20000 for k in kept), kept
    factory = lambda c: RandomWalkMetropolis(mvn_density(DATA), 0.3)  # noqa: E731
    resumed = run_chains(factory, STARTS, 20000, seed=5, checkpoint=tmp_path, name="mh")
    assert_same_run(resumed, run_chains(factory, STARTS, 20000, seed=5, name="mh"))


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_bars_show_rate_and_time_left_on_a_terminal_only(monkeypatch, capsys):
    run_chains(mh_factory, STARTS, 2000, seed=1, progress=True)
    assert capsys.readouterr().err == ""  # stderr is not a terminal here
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    run_chains(mh_factory, STARTS, 20000, seed=1, progress=True, name="MH")
    shown = terminal.getvalue()
    assert "MH chain 0" in shown and "MH chain 1" in shown and "draw/s" in shown and "<" in shown
    quiet = Terminal()
    monkeypatch.setattr(sys, "stderr", quiet)
    run_chains(mh_factory, STARTS, 2000, seed=1, progress=False)
    assert quiet.getvalue() == ""
