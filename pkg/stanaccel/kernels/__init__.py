"""Markov kernels and their compositions (see DESIGN.md, "Densities and kernels").

Kernels see log densities, never Stan: a test of a kernel needs no compile.
"""

from stanaccel.densities import FunctionDensity, safe_log_density, safe_log_density_gradient
from stanaccel.kernels.compose import Cycle, Mixture
from stanaccel.kernels.discretizing_chain import DiscretizingChain, marked_states
from stanaccel.kernels.driver import CheckpointWarning, FailingDensityWarning, KernelRun, run_chains
from stanaccel.kernels.hessian_pcn import HessianPCN
from stanaccel.kernels.hmc import HMC
from stanaccel.kernels.ladder import (
    Ladder,
    approximation_ladder,
    geometric_betas,
    nested_subsets,
    power_ladder,
    subsampled_ladder,
)
from stanaccel.kernels.metropolis import RandomWalkMetropolis, accept
from stanaccel.kernels.parallel_tempering import ParallelTempering
from stanaccel.kernels.pcn import PCN
from stanaccel.kernels.state import Info, Kernel, State, UndefinedStartError
from stanaccel.kernels.tempered_transitions import TemperedTransitions

__all__ = [
    "HMC",
    "PCN",
    "CheckpointWarning",
    "Cycle",
    "DiscretizingChain",
    "FailingDensityWarning",
    "HessianPCN",
    "FunctionDensity",
    "Info",
    "Kernel",
    "KernelRun",
    "Ladder",
    "Mixture",
    "ParallelTempering",
    "RandomWalkMetropolis",
    "State",
    "TemperedTransitions",
    "UndefinedStartError",
    "accept",
    "approximation_ladder",
    "geometric_betas",
    "marked_states",
    "nested_subsets",
    "power_ladder",
    "run_chains",
    "safe_log_density",
    "safe_log_density_gradient",
    "subsampled_ladder",
]
