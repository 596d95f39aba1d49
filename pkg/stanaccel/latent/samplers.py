"""AE-HMC and AE-pCN: proposals made in an autoencoder's latent space, accepted in the original space.

Deep MCMC (Shahbaba et al.) moves the latent code ``z = phi(q)`` of the
current point with HMC or pCN and decodes the result, ``q' = psi(z')``; the
accept/reject step uses the Stan log density pi of the original space. Each
sampler here has two modes.

``exact=False`` is the method as published, and it is approximate: the
chain lives in the latent space (its state keeps the latent position z,
starting from ``encode`` of the starting point), every draw ``psi(z)`` lies
on the decoder's image, and the volume change between the spaces is not
accounted for, so pi is not left invariant: the draws follow pi restricted
to the decoder's image, with no spread off it. The paper argues the bias is
small where prediction is the goal; stanaccel measures it.

``exact=True`` leaves pi exactly invariant, for any encoder and decoder.
The current latent position is an auxiliary variable,
``z ~ N(phi(q), diag(tau^2))``, so the extended target is
``pi(q) N(z | phi(q), tau^2)`` and its q-marginal is pi. The move keeps the
residual ``r = q - psi(z)`` fixed while z moves, and proposes
``q' = r + psi(z')``. The map ``(q, z) -> (r, z)`` is a shear, whose Jacobian
determinant is exactly 1, so the volume correction the published method
drops is here identically zero and costs nothing; what the exact mode pays
instead is the auxiliary term ``-log N(z | phi(r + psi(z)), tau^2)`` in the
latent potential, one encoder evaluation and one encoder vector-Jacobian
product per leapfrog step (NumPy, microseconds beside a Stan gradient). Its
moves change q only along the decoder's image (``q' - q = psi(z') -
psi(z)``), so on its own it is not ergodic in the remaining directions:
compose it with a full-space kernel (``Cycle([ae, HMC(...)])``), as the
workflows do. This construction is stanaccel's, not the paper's; the
paper's exact variant corrects by a volume term that its text does not give.

Momenta are vectors, not points, so they map between the spaces through the
networks' linear parts at the centre of the training codes: ``E`` (encoder)
and ``W`` (decoder). For the paper's linear autoencoder these are exactly its
weight matrices. The latent kinetic energy is the paper's
``K_h(p_h) = K_v(W p_h) = 1/2 (W p_h)^T M^-1 (W p_h)``, with ``M^-1`` the
variance of the training draws (what Stan's diagonal metric adaptation would
estimate). Latent momenta are drawn from the distribution this kinetic energy
defines, N(0, A^-1) with ``A = W^T M^-1 W``; the paper's literal
``p_h = phi(p_v)``, ``p_v ~ N(0, M)``, has the same distribution when the
linear autoencoder is exact, and is available as ``encoded_momentum=True``.

Statistics live in the state: each step reports its latent potential
evaluations in ``Info.details["latent_evaluations"]``, and the running counts
are a record in ``State.extra`` (see :mod:`stanaccel.kernels.compose`), so one
sampler shared by several chains reports each chain's own acceptance.
"""

from __future__ import annotations

import numpy as np

from stanaccel.densities import safe_log_density, safe_log_density_gradient
from stanaccel.kernels.hmc import DIVERGENCE
from stanaccel.kernels.integrator import leapfrog
from stanaccel.kernels.metropolis import accept
from stanaccel.kernels.pcn import gaussian_root, pcn_proposal, pcn_rho, whiten
from stanaccel.kernels.state import (
    Info,
    State,
    added,
    chain_statistics,
    check_start,
    statistics_key,
    with_statistics,
)
from stanaccel.latent.network import LatentMaps

APPROXIMATE_NOTE = (
    "approximate (Deep MCMC as published): proposals decoded onto the autoencoder's image, "
    "no volume correction; pi is not left invariant"
)

EMPTY = {"proposals": 0, "sum_acceptance": 0.0, "latent_evaluations": 0}
"""A chain's statistics record before its first step."""


class _LatentMoves:
    """What both latent samplers share: the maps, the momentum maps, the auxiliary scale."""

    def __init__(self, density, maps: LatentMaps, exact: bool, tau: float | np.ndarray):
        if density.dim != maps.dim:
            raise ValueError(f"the density has {density.dim} coordinates but the autoencoder {maps.dim}")
        self.density = density
        self.maps = maps
        self.exact = bool(exact)
        self.note = "exact" if self.exact else APPROXIMATE_NOTE
        centre = maps.latent_mean if maps.latent_mean is not None else maps.encode(maps.mean)
        self.decoder_linear = maps.decode_jacobian(centre)  # W, (dim, latent_dim)
        self.encoder_linear = maps.encode_jacobian(maps.decode(centre))  # E, (latent_dim, dim)
        latent_sd = (
            np.sqrt(np.diag(maps.latent_cov)) if maps.latent_cov is not None else np.ones(maps.latent_dim)
        )
        self.tau = np.broadcast_to(np.asarray(tau, dtype=float), (maps.latent_dim,)) * latent_sd
        if np.any(self.tau <= 0):
            raise ValueError("tau must be positive")
        self.record_key = statistics_key(self)

    def summary(self, state: State) -> dict:
        """The chain's mean acceptance probability of the latent moves, its latent potential
        evaluations, and the mode; from ``state`` alone."""
        counts = chain_statistics(state, self.record_key, EMPTY)
        return {
            "latent_acceptance": counts["sum_acceptance"] / max(counts["proposals"], 1),
            "latent_evaluations": counts["latent_evaluations"],
            "mode": self.note,
        }

    def step(self, state: State, rng: np.random.Generator) -> tuple[State, Info]:
        new, info = self._propose(state, rng)
        counts = {
            "proposals": 1,
            "sum_acceptance": info.acceptance_probability,
            "latent_evaluations": info.details["latent_evaluations"],
        }
        record = added(chain_statistics(state, self.record_key, EMPTY), counts)
        return with_statistics(new, state, self.record_key, record), info

    def init(self, position: np.ndarray) -> State:
        """The starting state. The approximate mode's chain lives in the latent space: it
        starts at ``z = encode(position)``, whose point is ``decode(z)``."""
        position = np.array(position, dtype=float)
        if position.shape != (self.maps.dim,):
            raise ValueError(
                f"a starting point needs {self.maps.dim} coordinates, not shape {position.shape}"
            )
        name = type(self).__name__
        if not self.exact:
            z = self.maps.encode(position)
            position = self.maps.decode(z)
            state = State(position, safe_log_density(self.density, position), extra={"latent": z})
            return check_start(state, f"{name} (the decoded start point)")
        return check_start(State(position, safe_log_density(self.density, position)), name)

    def _start(self, state: State, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """The latent start z0 and the residual kept fixed (zero in the approximate mode)."""
        if not self.exact:
            z = state.extra.get("latent")
            return (self.maps.encode(state.position) if z is None else z), np.zeros(self.maps.dim)
        code = self.maps.encode(state.position)
        z0 = code + self.tau * rng.standard_normal(self.maps.latent_dim)
        return z0, state.position - self.maps.decode(z0)

    def _auxiliary(self, z: np.ndarray, q: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """``-log N(z | phi(q), tau^2)`` up to a constant, its gradient in z (holding q) and the
        encoder's contribution ``-J_phi(q)^T e`` to the gradient in q."""
        code = self.maps.encode(q)
        e = (z - code) / self.tau**2
        _, back = self.maps.encode_vjp(q, e)
        return 0.5 * float(np.sum(((z - code) / self.tau) ** 2)), e, -back


class AutoencoderHMC(_LatentMoves):
    """HMC in an autoencoder's latent space, accepted in the original space.

    Parameters
    ----------
    density : log density with a gradient (the Stan model)
    maps : LatentMaps
        The trained autoencoder (``Autoencoder.maps()``).
    step_size : float
        Leapfrog step in the latent space.
    n_steps : int
    exact : bool
        True: leaves pi invariant (auxiliary latent variable; see the module
        docstring). False: the published method, approximate.
    tau : float
        Exact mode only: the auxiliary variable's sd in units of the latent
        codes' sd.
    step_size_jitter : float in [0, 1)
    encoded_momentum : bool
        Approximate mode only. True: the paper's literal momentum
        ``p_h = E p_v``, ``p_v ~ N(0, M)``. False (default): ``p_h ~ N(0, A^-1)``,
        the distribution the kinetic energy K_h defines. The two agree when
        the linear autoencoder is exact (E the pseudo-inverse of W, as PCA
        gives); for a trained one they differ, and the literal version no
        longer samples pi restricted to the decoder's image (measured in
        the latent study).
    latent_density : optional
        A log density on the latent space whose gradient is ``-U(z)``'s,
        ``log pi(decode(z))`` (the latent Stan program route). Approximate mode
        only; used for the leapfrog gradients instead of the chain rule.
    """

    def __init__(self, density, maps: LatentMaps, step_size: float, n_steps: int, *, exact: bool,
                 tau: float = 0.5, step_size_jitter: float = 0.0, latent_density=None,
                 encoded_momentum: bool = False):  # fmt: skip
        super().__init__(density, maps, exact, tau)
        if step_size <= 0 or n_steps < 1:
            raise ValueError(f"need step_size > 0 and n_steps >= 1, not {step_size} and {n_steps}")
        if latent_density is not None and exact:
            raise ValueError("the latent Stan program route gives the approximate mode's potential only")
        self.step_size = float(step_size)
        self.n_steps = int(n_steps)
        self.step_size_jitter = float(step_size_jitter)
        self.latent_density = latent_density
        if encoded_momentum and exact:
            raise ValueError(
                "the encoded momentum is the approximate mode's; the exact mode draws p_h ~ N(0, A^-1)"
            )
        self.encoded_momentum = bool(encoded_momentum)
        W = self.decoder_linear
        self.kinetic_matrix = W.T @ (maps.scale[:, None] ** 2 * W)  # A = W^T M^-1 W
        self._kinetic_cholesky = np.linalg.cholesky(self.kinetic_matrix)

    @property
    def densities(self) -> list:
        return [self.density] + ([self.latent_density] if self.latent_density is not None else [])

    def _potential(self, z: np.ndarray, residual: np.ndarray):
        """U(z) and its gradient; None gradient where pi is undefined."""
        if self.latent_density is not None:
            lp, grad = safe_log_density_gradient(self.latent_density, z)
            return -lp, (None if grad is None else -grad), None
        q = residual + self.maps.decode(z)
        lp, grad_q = safe_log_density_gradient(self.density, q)
        if grad_q is None:
            return np.inf, None, q
        if not self.exact:
            _, grad_z = self.maps.decode_vjp(z, grad_q)
            return -lp, -grad_z, q
        aux, aux_z, aux_q = self._auxiliary(z, q)
        _, back = self.maps.decode_vjp(z, grad_q - aux_q)
        return -lp + aux, aux_z - back, q

    def _propose(self, state: State, rng: np.random.Generator) -> tuple[State, Info]:
        z, residual = self._start(state, rng)
        d = self.maps.latent_dim
        if self.encoded_momentum:
            momentum = rng.standard_normal(self.maps.dim) / self.maps.scale  # p_v ~ N(0, M)
            p = self.encoder_linear @ momentum  # the paper's p_h = phi(p_v)
        else:
            p = np.linalg.solve(self._kinetic_cholesky.T, rng.standard_normal(d))  # p ~ N(0, A^-1)
        epsilon = self.step_size * (1 + self.step_size_jitter * (2 * rng.random() - 1))
        u = rng.random()
        calls = 0

        def potential(z: np.ndarray):
            nonlocal calls
            calls += 1
            return self._potential(z, residual)

        u0, grad, _ = potential(z)
        if grad is None:
            return state, Info(False, 0.0, failed=True, details={"latent_evaluations": calls})
        if not self.exact:
            u0 = -state.log_density  # accept in the original space, from the current point
        h0 = u0 + 0.5 * p @ self.kinetic_matrix @ p
        end = leapfrog(z, p, grad, epsilon, self.n_steps, lambda p: self.kinetic_matrix @ p, potential)
        if end.failed:
            details = {"n_steps": end.n_steps, "latent_evaluations": calls}
            return state, Info(False, 0.0, failed=True, details=details)  # rejected by the program
        z, p, potential, q = end.position, end.momentum, end.potential, end.extra
        if self.exact:
            lp, end_potential = -potential + self._auxiliary(z, q)[0], potential
        elif self.latent_density is not None:
            q = self.maps.decode(z)
            lp = safe_log_density(self.density, q)
            end_potential = -lp
        else:
            lp, end_potential = -potential, potential
        energy_error = end_potential + 0.5 * p @ self.kinetic_matrix @ p - h0
        divergent = bool(not np.isfinite(energy_error) or energy_error > DIVERGENCE)
        probability = float(np.exp(min(0.0, -energy_error))) if np.isfinite(energy_error) else 0.0
        details = {"n_steps": self.n_steps, "energy_error": float(energy_error), "latent_evaluations": calls}
        if u < probability:
            extra = {} if self.exact else {"latent": z}
            return State(q, lp, extra=extra), Info(True, probability, divergent, details=details)
        return state, Info(False, probability, divergent, details=details)


class AutoencoderPCN(_LatentMoves):
    """Preconditioned Crank-Nicolson in an autoencoder's latent space, accepted in the original space.

    The proposal ``z' = m + rho (z - m) + sqrt(1 - rho^2) C^(1/2) xi`` keeps a
    Gaussian reference N(m, C) on the latent space invariant, with
    ``rho = (1 - h/4) / (1 + h/4)`` for a step h.

    Parameters
    ----------
    density : log density (the Stan model)
    maps : LatentMaps
    rho, step : float
        Give one: the autocorrelation rho, or the step h.
    exact : bool
        True: leaves pi invariant for any model; the reference is a Gaussian
        on the latent space (``reference``, default the training codes'
        mean and covariance) and the acceptance ratio divides it out.
        False: the published method, approximate; needs the model's Gaussian
        ``prior`` and accepts on the likelihood ratio pi/prior at decoded points.
    prior : (mean, covariance) in the original space, optional
        A Gaussian prior of the model. Its image under the encoder's linear
        part is the latent reference of the approximate mode, and of the
        exact mode unless ``reference`` is given.
    reference : (mean, covariance) in the latent space, optional
    tau : float
        Exact mode only, as in :class:`AutoencoderHMC`.
    """

    def __init__(self, density, maps: LatentMaps, *, exact: bool, rho: float | None = None,
                 step: float | None = None, prior=None, reference=None, tau: float = 0.5):  # fmt: skip
        super().__init__(density, maps, exact, tau)
        self.rho = pcn_rho(rho, step)
        if not exact and prior is None:
            raise ValueError(
                "the approximate AE-pCN accepts on the likelihood ratio: give the model's Gaussian prior"
            )
        self.prior = None
        if prior is not None:
            mean, cov = (np.asarray(a, dtype=float) for a in prior)
            cov = np.diag(cov) if cov.ndim == 1 else cov
            self.prior = (mean, cov, gaussian_root(cov))
        if reference is None:
            if self.prior is not None:
                E = self.encoder_linear
                reference = (maps.encode(self.prior[0]), E @ self.prior[1] @ E.T)
            elif maps.latent_cov is not None:
                reference = (maps.latent_mean, maps.latent_cov)
            else:
                raise ValueError("give a latent reference (mean, covariance) or the model's Gaussian prior")
        self.reference_mean = np.asarray(reference[0], dtype=float)
        self.reference_cov = np.atleast_2d(np.asarray(reference[1], dtype=float))
        self._reference_cholesky = gaussian_root(self.reference_cov)

    def _log_reference(self, z: np.ndarray) -> float:
        w = whiten(self._reference_cholesky, z - self.reference_mean)
        return -0.5 * float(w @ w)

    def _log_prior(self, q: np.ndarray) -> float:
        mean, _, chol = self.prior
        w = whiten(chol, q - mean)
        return -0.5 * float(w @ w)

    def _log_target(self, z: np.ndarray, q: np.ndarray, lp: float) -> float:
        """The log of what the acceptance ratio compares at (z, q): see the module docstring."""
        if self.exact:
            return lp - self._auxiliary(z, q)[0] - self._log_reference(z)
        return lp - self._log_prior(q)

    def _propose(self, state: State, rng: np.random.Generator) -> tuple[State, Info]:
        z, residual = self._start(state, rng)
        proposal = pcn_proposal(z, self.reference_mean, self._reference_cholesky, self.rho, rng)
        q = residual + self.maps.decode(proposal)
        lp = safe_log_density(self.density, q)
        details = {"latent_evaluations": 1}
        if lp == -np.inf:
            return state, Info(False, 0.0, failed=True, details=details)
        log_ratio = self._log_target(proposal, q, lp) - self._log_target(z, state.position, state.log_density)
        accepted, probability = accept(log_ratio, rng)
        info = Info(accepted, probability, details=details)
        extra = {} if self.exact else {"latent": proposal}
        return (State(q, lp, extra=extra), info) if accepted else (state, info)


def tune_step(make_kernel, start: np.ndarray, rng: np.random.Generator, *, target: float, initial: float,
              iterations: int = 100, maximum: float = 20.0) -> float:  # fmt: skip
    """A step (latent HMC step size, or pCN step h) that gives about the ``target`` acceptance.

    Robbins-Monro on the log step, ``log h += (acceptance - target) / sqrt(t)``,
    over ``iterations`` steps of ``make_kernel(h)`` from ``start``; returns the
    average over the second half. The kernels it builds are discarded: the
    returned step is fixed during sampling, so the sampler stays a Markov chain.
    Steps stay below ``maximum`` (below 4 for pCN, where h = 4 means rho = 0).
    """
    log_h = float(np.log(initial))
    state = make_kernel(initial).init(start)
    history = []
    for t in range(1, iterations + 1):
        state, info = make_kernel(float(np.exp(log_h))).step(state, rng)
        log_h = float(
            np.clip(log_h + (info.acceptance_probability - target) / np.sqrt(t), -12, np.log(maximum))
        )
        history.append(log_h)
    return float(np.exp(np.mean(history[iterations // 2 :])))
