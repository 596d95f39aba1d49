"""Stop signals: SIGTERM and SIGHUP raise ``KeyboardInterrupt`` as Ctrl-C does, once, and are undone after."""

import os
import signal
import time

import numpy as np
import pytest

from stanaccel.signals import STOP_SIGNALS, received, stop_on_signals
from stanaccel.workflow.interrupts import InterruptWatch


def _send(signum: int) -> None:
    os.kill(os.getpid(), signum)
    time.sleep(0.5)  # Python runs the handler at its next bytecode; this only waits to be sure


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_stop_signal_raises_once_and_later_ones_wait_for_the_draws(signum, capsys):
    before = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    with stop_on_signals():
        with pytest.raises(KeyboardInterrupt):
            _send(signum)
        assert received() == signum
        _send(signal.SIGTERM)  # while the draws are written: ignored, and said
    assert (
        "received while stopping: ignored, the draws made so far are being written" in capsys.readouterr().err
    )
    assert {s: signal.getsignal(s) for s in STOP_SIGNALS} == before
    with stop_on_signals():  # a new run starts with no stop
        assert received() is None


def test_a_workflow_step_sees_which_signal_stopped_it():
    watch = InterruptWatch()
    with stop_on_signals(), pytest.raises(KeyboardInterrupt):
        with watch.watching():
            _send(signal.SIGTERM)
    assert watch.seen and watch.what == "SIGTERM"


def test_after_a_stop_no_phase_starts(mvn_model):
    """A phase that took the stop for a failure of its own (a Pathfinder stopped before its paths had
    draws looks like paths that all failed) would hand over to the next one: none may start."""
    from stanaccel.kernels import HMC, run_chains
    from stanaccel.stan.nuts import sample_nuts
    from stanaccel.stan.optimize import optimize
    from stanaccel.stan.pathfinder import pathfinder

    start = np.zeros(mvn_model.dim)
    with stop_on_signals():
        with pytest.raises(KeyboardInterrupt):
            _send(signal.SIGTERM)
        with pytest.raises(KeyboardInterrupt, match="stopped before Stan's Pathfinder began"):
            pathfinder(mvn_model, paths=2, seed=1)
        with pytest.raises(KeyboardInterrupt, match="stopped before Stan's NUTS began"):
            sample_nuts(mvn_model, chains=1, warmup=20, draws=20, seed=1)
        with pytest.raises(KeyboardInterrupt, match="stopped before Stan's L-BFGS began"):
            optimize(mvn_model, seed=1)
        with pytest.raises(KeyboardInterrupt, match="stopped before the chains of HMC began"):
            run_chains(HMC(mvn_model, 0.2, 5), start[None], 20, name="HMC")
    assert received() is None
    assert run_chains(HMC(mvn_model, 0.2, 5), start[None], 20).positions.shape == (1, 20, mvn_model.dim)
