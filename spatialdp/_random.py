"""The simulation random path: seedable numpy Generators, and nothing else.

Releases never use this module: they draw noise from OS entropy in
:mod:`spatialdp.privacy.release` and take no seed. Everything that simulates
(:mod:`spatialdp.privacy.simulate`, synthetic fleets, the demo) takes ``rng=``
and turns it into a :class:`numpy.random.Generator` here, strictly: a Generator
is used as is, a whole-number seed (Python or numpy int, ``>= 0``) or ``None``
(fresh OS entropy) makes a new one. Bools, floats, strings and the legacy
:class:`numpy.random.RandomState` are refused: ``rng=0.5`` or ``rng=True`` is a
mistake, not a seed.

Examples
--------
>>> as_generator(np.int64(3)).integers(10) == as_generator(3).integers(10)
np.True_
>>> as_generator(1.5)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
spatialdp.exceptions.InvalidInput: rng=1.5 is a float, not a Generator or a seed; pass ...
"""

from __future__ import annotations

from typing import Any, TypeAlias

import numpy as np

from spatialdp._validation import fail

RandomLike: TypeAlias = "np.random.Generator | int | np.integer[Any] | None"

__all__ = ["RandomLike", "as_generator"]

_FIX = "pass a numpy Generator (numpy.random.default_rng(0)), a whole-number seed >= 0, or None"


def as_generator(rng: RandomLike, name: str = "rng") -> np.random.Generator:
    """Return a numpy Generator from a Generator, a seed, or None (fresh entropy).

    Parameters
    ----------
    rng : numpy.random.Generator, int or None
        A Generator (returned as is, so draws continue its stream), a seed
        ``>= 0`` (Python or numpy integer), or ``None`` for OS entropy.
    name : str, default "rng"
        The argument's name, used in the message.

    Returns
    -------
    numpy.random.Generator

    Raises
    ------
    InvalidInput
        For bools, floats, strings, negative seeds, ``RandomState`` and any other type.

    Examples
    --------
    >>> gen = np.random.default_rng(1)
    >>> as_generator(gen) is gen
    True
    >>> bool(as_generator(3).integers(10) == as_generator(3).integers(10))
    True
    """
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None:
        return np.random.default_rng()
    if isinstance(rng, (bool, np.bool_)):
        raise fail(name, rng, "is a bool, not a Generator or a seed", _FIX)
    if isinstance(rng, np.random.RandomState):
        raise fail(name, rng, "is a legacy RandomState", _FIX)
    if isinstance(rng, (int, np.integer)):
        if rng < 0:
            raise fail(name, rng, "is a negative seed", _FIX)
        return np.random.default_rng(int(rng))
    raise fail(name, rng, f"is a {type(rng).__name__}, not a Generator or a seed", _FIX)
