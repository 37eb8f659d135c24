"""The simulation random path: seedable numpy Generators.

Releases never use this module: they draw noise from OS entropy in
:mod:`spatialdp.privacy.noise` and take no seed.
"""

from __future__ import annotations

import numpy as np

RandomLike = np.random.Generator | int | None

__all__ = ["RandomLike", "as_generator"]


def as_generator(rng: RandomLike) -> np.random.Generator:
    """A numpy Generator from a Generator, a seed, or None (fresh entropy).

    Examples
    --------
    >>> bool(as_generator(3).integers(10) == as_generator(3).integers(10))
    True
    """
    if isinstance(rng, np.random.Generator):
        return rng
    return np.random.default_rng(rng)
