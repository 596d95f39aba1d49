"""The tuning constants of ``method = "auto"``: the pilots' lengths, the race's caps and budget, the
margins of the choice and of its check, the quick path's thresholds.

The stages read them here at call time (``constants.NUTS_MARGIN``), so that setting one on this module
changes what ``auto`` does.
"""

NUTS_PILOT_STEP = 30
"""Iterations of the NUTS pilot adapting only its step size, from the shared warm-up's metric and starts
(and its step size, where it adapted one): the first phase of NUTS's own warm-up, shortened."""

NUTS_PILOT_PROBE = 5
"""Iterations of a first, shorter step-size adaptation, whose seconds alone may drop NUTS from the race."""

POSITIVE_CAP = 1.5
"""The largest ESS per draw the race allows a pilot of a positive kernel (:attr:`MethodSpec.positive
<stanaccel.sampling.methods.MethodSpec.positive>`): 1, and room for the estimate's noise. NUTS is held
to it too: its bulk ESS per draw can pass 1 (it is antithetic on near-Gaussian targets), but its tail ESS
per draw, and so the min(bulk, tail) of the score, stays about 1 or below (at most 0.83 in posteriordb's
pilots)."""

PROBE_SHARE = 4
"""Once a leader is in the race, a kernel pilot first draws ``pilot_draws // PROBE_SHARE`` per chain (a
probe, at least :data:`PROBE_DRAWS`): their ESS can drop it before it draws the rest."""

PROBE_DRAWS = 20

PROBE_MARGIN = 2.0
"""A probe's ESS per draw, times this, is the most the race lets it claim: an ESS of 4 x 25 draws is within
a factor of about 2 of the full pilot's."""

RACE_DRAWS = 3
RACE_SECONDS = 0.1
"""A kernel pilot's chain is timed over at least :data:`RACE_DRAWS` draws and this many seconds before its
seconds per draw may drop its candidate: cheap chains run in bursts as they share the interpreter."""

NUTS_PROBE_SECONDS = 0.1
"""NUTS's probe drops it only when it took this long: on a cheap posterior its iterations take a
millisecond, which a loaded machine's pause can multiply. (NUTS races last only where a whole NUTS run is
projected over :data:`NUTS_FIRST_SECONDS`: there a probe takes tens of milliseconds or more.) Its
step-size iterations may drop it in any case."""

PILOT_ORDER = ("approximation", "warm", "own-warmup")
"""The roles in the order their candidates are piloted: the cheap ones first, so that the race has a best
projection to hold the dear ones to."""

AGREEMENT_P = 1e-3
"""A pilot disagrees with the NUTS pilot when a posterior mean differs by more than the z of this
two-sided probability, Bonferroni-corrected over the parameters and pilots."""

MODE_GAP = 3.0
"""The pilots disagree about the modes when two pilot chains' means of a coordinate lie more than this
many within-chain sds apart (and :data:`MODE_Z` standard errors): chains that mix in one mode differ by
about sd / sqrt(ESS per chain)."""

MODE_Z = 6.0
"""... and more than this many standard errors of their difference, each chain's sd / sqrt(its ESS):
chains that move slowly through one mode (a funnel's neck and mouth) differ by many sds but few errors."""

MODE_ESS = 10.0
"""A chain whose worst coordinate has a bulk ESS below this has not mixed even locally: it says nothing
about the modes, and the modes check leaves it out."""

PILOT_SHARE = 0.10
"""The pilots of the candidates not chosen may take at most this share of the leader's projected full
run (its warm-up, set-up and draws), or :data:`PILOT_FLOOR` if more: once spent, the pilot running stops
and no other starts, but NUTS's (the baseline, whose pilot its full run keeps)."""

PILOT_FLOOR = 0.25
"""Seconds the pilots may always take: about one cheap pilot, which on a posterior of a few seconds can
still find a sampler many times faster than NUTS."""

QUICK_NUTS_SECONDS = QUICK_NUTS_DEFAULT = 2.0
"""Below this projected length of a whole Stan NUTS run (:func:`_quick_nuts`), NUTS runs at once."""

NUTS_FIRST_SECONDS = NUTS_FIRST_DEFAULT = 30.0
"""Below this projected length of a whole Stan NUTS run, NUTS is piloted first after a cheap warm-up:
its pilot then costs little, and its projection caps the others' pilots at :data:`PILOT_SHARE` of its
run. The projection assumes :data:`QUICK_LEAPFROGS` per iteration, which misses by 6x either way (on
posteriordb gp_regr takes about 5, arK 33), so only the pilot tells how long NUTS's run is."""

QUICK_DENSE_MAX_DIM = 100
"""Up to this many parameters Stan's NUTS run at once (:func:`_nuts_at_once`) adapts a dense metric
(Stan's ``metric=dense``), beyond it the diagonal. On posteriordb's cheap posteriors the dense metric
made 1.8-67x the diagonal's ESS per second (kidiq_interaction 15x, diamonds 67x: correlated regression
coefficients), and nowhere less; its dim^2 per leapfrog step is nothing at a few dozen parameters, and
Stan's windowed adaptation estimates a covariance of up to about a hundred from its last 500 warm-up
draws (beyond that its regularisation toward the identity dominates)."""

QUICK_LEAPFROGS = 32
"""Gradients per NUTS iteration in that projection: a tree depth of 5 (arK of posteriordb: 33 per
iteration); a deeper tree only makes NUTS dearer, and the pilots more worth their cost."""

NUTS_MARGIN = 1.5
"""Another candidate is chosen over NUTS only if it projects this many times NUTS's ESS/s: a pilot of
4 x 100 draws estimates ESS per draw to within about this factor, and NUTS is the robust choice (on
posteriordb a pCN that projected 1.37x NUTS made half its ESS in full)."""

CHECK_SHARE = 0.25
"""A kernel chosen over NUTS first runs to this share of its draws (at least twice its pilot's), then its
ESS per draw so far is checked against its pilot's: chains that stick after the pilot (on posteriordb a
DC whose pilot showed 0.11 ESS per draw made 0.006 in full) would lose to a candidate not chosen. The
choice is then made again with the ESS measured, and the new choice continues its own pilot."""

CHECK_RHAT = 1.05
"""... and where the worst R-hat of those draws is above this, its chains disagree (they have not mixed,
or drift: on posteriordb's one_comp_mm_elim_abs a DC of R-hat 1.08 at the check made an ESS of 8 in
full), so the choice is made again without it."""

MODES_CHECK_MAX_DIM = 1000
"""Up to this many parameters Stan's NUTS run at once has the Laplace warm-up's modes check
(:func:`_check_modes`): its L-BFGS runs each compute a dim x dim Hessian (2 dim gradients)."""

WARMUPS_TRIED = ("laplace", "pathfinder")
"""The cheap warm-ups tried in turn for the shared warm-up; NUTS's warm-up if both fail their checks."""
HOPELESS_K = 10.0
"""A Laplace fit refused with its Pareto k at least this is far from the posterior: Pathfinder, whose
Gaussian is fitted along the same L-BFGS path, is not tried after it, and the approximation candidates
over the Laplace Gaussian are not piloted (their proposals would be refused almost always). See
:func:`_shared_warm_up` for the evidence."""
