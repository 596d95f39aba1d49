"""``method = "auto"``: short pilots of the exact candidates, each scored by the ESS per second its full
run would give with everything charged; the best runs in full, continuing its pilot.

"auto" is not a method of the table: it chooses one. The candidates and
their roles come from the table (:attr:`~stanaccel.sampling.methods.MethodSpec.auto`):

- every candidate shares one warm-up (Laplace; Stan's Pathfinder if
  Laplace's diagnostics fail; NUTS's own warm-up if both do:
  :mod:`~stanaccel.sampling.warmup`), which the chosen one's full run reuses:
  no candidate warms up twice;
- "approximation" and "warm": kernels after that warm-up; "approximation"
  over the automatic approximation of the program: control variates about
  the mode (kind "control-variate", m = :func:`control_variate_size`) where
  the observations are declared (with or without ``beta``), else the
  Gaussian at the mode (kind "laplace");
- "own-warmup" (Stan's NUTS): after NUTS's own warm-up it draws at once
  with the adapted step sizes and metrics; after a cheap warm-up it first
  adapts its step size alone (:data:`NUTS_PILOT_STEP` iterations, after a
  probe of :data:`NUTS_PILOT_PROBE`) from the cheap warm-up's metric and
  starts. It is piloted first (the baseline the others must beat, whose
  projected run sets the pilots' budget) after NUTS's own warm-up, and
  where a whole Stan NUTS run is projected under :data:`NUTS_FIRST_SECONDS`
  (a cheap posterior, where the other pilots' fixed costs matter); else
  last, so that the race can drop it for its cost;
- "modes": tempering, piloted only when the other pilots' chains disagree
  about where the posterior's mass is (:func:`~stanaccel.diagnostics.modes.mode_gap`
  above :data:`MODE_GAP` within-chain sds and :data:`MODE_Z` standard
  errors, among chains that mixed where they are); then the choice is
  among these.

A pilot is the start of its candidate's full run: the full run's chains,
seeds and settings, stopped after ``pilot_draws`` draws with its chains
checkpointed, so that the chosen one's full run continues them (the same
kernel from the same starts: its draws are those of one run never stopped;
NUTS's in checkpointed chunks of the pilot's length). Per chain-draw a
pilot gives an ESS (the worst over the parameters of min(bulk, tail) ESS
over the pilot's chain-draws) and seconds (its slowest chain's seconds per
draw from its first draw on, over the chains: the time of a run without the
fixed cost of starting one); for a full run of C chains x D draws the score
is

    projected ESS/s = e x C x D / (W + S + t x C x D)

with e the pilot's ESS per chain-draw, t its sampling seconds per chain-draw,
W the shared warm-up's measured seconds, and S the candidate's own set-up
measured in its pilot (step tuning, the approximation's mode and Taylor
coefficients, NUTS's step-size iterations).

The pilots race (:class:`Race`): ArviZ caps an ESS at n log10(n) for n
draws, so no pilot of n chain-draws shows an e above log10(n); a positive
kernel's (:attr:`~stanaccel.sampling.methods.MethodSpec.positive`) is at
most 1 (:data:`POSITIVE_CAP` with the estimate's noise). A pilot whose
seconds per draw, after :data:`RACE_DRAWS` draws and :data:`RACE_SECONDS`
of each chain (NUTS: after its step-size iterations), cap its score below
the best projection so far even at that e is stopped and its candidate
dropped, the table saying so. Once a pilot leads, the next kernel pilot
first draws a probe (:data:`PROBE_SHARE`), whose ESS per draw, times
:data:`PROBE_MARGIN`, caps its e: a candidate as fast per draw as the
leader but mixing far worse (a Gaussian reference on a skewed posterior)
is dropped there. And the pilots have a budget: once a leader is known,
the others may take at most :data:`PILOT_SHARE` of its projected full run
(at least :data:`PILOT_FLOOR` seconds); when that is spent the running
pilot stops and no other starts but NUTS's, so that ``auto`` costs at most
that share more than the method it chooses.

A kernel chosen over NUTS is checked once in its full run: at
:data:`CHECK_SHARE` of its draws, its ESS per draw so far replaces its
pilot's, and where another eligible candidate would then be chosen, or its
chains disagree (R-hat above :data:`CHECK_RHAT`), that one (the best of the
others) runs instead, continuing its own pilot, the abandoned draws charged.

The pilots themselves are not in the score (they are spent whichever method
is chosen) but are charged to the result ("auto pilots"), less the chosen
one's draws, which its full run keeps. A pilot whose posterior means differ
from the reference pilot's (the NUTS pilot's; if NUTS was dropped, that of
the full-density candidate of highest ESS; if those were dropped too, the
draws of the one that drew most) by more than a Bonferroni z limit
(:data:`AGREEMENT_P`) is not chosen.
"""

from stanaccel.sampling.auto.candidates import automatic_approximation, control_variate_size
from stanaccel.sampling.auto.choice import pilot_line
from stanaccel.sampling.auto.pipeline import sample_auto
from stanaccel.sampling.auto.race import Pilot, Race
from stanaccel.sampling.auto.settings import AUTO, AUTO_KEYS, AutoSettings, auto_settings, is_auto

__all__ = [
    "AUTO",
    "AUTO_KEYS",
    "AutoSettings",
    "Pilot",
    "Race",
    "auto_settings",
    "automatic_approximation",
    "control_variate_size",
    "is_auto",
    "pilot_line",
    "sample_auto",
]
