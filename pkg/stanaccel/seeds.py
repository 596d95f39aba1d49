"""Seeds for the parts of a run, all spawned from one with ``numpy.random.SeedSequence``.

Deriving seeds by arithmetic (``seed + k``) correlates streams and can leave
the range Stan accepts (below 2**32); spawned seeds are independent, and each
is a 32-bit integer, which NUTS, NumPy and Keras all accept.
"""

from __future__ import annotations

import numpy as np


def spawn_seeds(seed: int | np.random.SeedSequence, names: list[str] | tuple[str, ...]) -> dict[str, int]:
    """One independent 32-bit seed per name, fixed by ``seed`` and the position of the name.

    Append new names at the end: a name's seed depends on its position, not on the names after it.
    """
    sequence = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    children = sequence.spawn(len(names))
    return {name: int(child.generate_state(1)[0]) for name, child in zip(names, children, strict=True)}


def spawn_seed(seed: int, *path: int) -> int:
    """The 32-bit seed of the child at ``path`` (for example ``(size_index, sampler_index)``) of ``seed``."""
    return int(np.random.SeedSequence(seed, spawn_key=path).generate_state(1)[0])


def check_seed(seed, where: str = "seed", below: int = 2**63) -> int:
    """``seed`` as an int if it is a non-negative integer below ``below``, else a ValueError naming ``where``.

    ``where`` is how the user gave it (``--seed``, ``seed=``, a workflow file's ``seed``). Stan's
    NUTS takes seeds below 2**32; a seed spawned into parts (``sample``, workflows) may be larger.
    """
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or not 0 <= seed < below:
        limit = "2**32" if below == 2**32 else "2**63" if below == 2**63 else f"{below}"
        raise ValueError(f"{where} = {seed!r}: expected a non-negative integer below {limit}")
    return int(seed)


def draw_seeds(seed: int, chain: int, draws: int) -> np.ndarray:
    """A 32-bit seed for each of the first ``draws`` draws of chain ``chain`` of a run seeded ``seed``.

    The seeds of a chain's first k draws are the same whatever ``draws`` is
    (k <= ``draws``), so a run stopped early keeps its draws' seeds.
    """
    return np.random.SeedSequence(seed, spawn_key=(chain,)).generate_state(draws)
