"""Vectorised draws of a library release: a simulation target that draws ``n`` at once.

Every spatialdp release draws its noise through ``target.add_noise(mechanism,
values)`` (:mod:`spatialdp.privacy.target`). :class:`NoiseTap` is a
:class:`~spatialdp.privacy.target.Simulation` whose ``add_noise`` draws ``n``
independent noisy copies of ``values`` in one vectorised call of the
mechanism's seeded sampler, keeps them, and hands the first copy back to the
release (which finishes and publishes it as usual, marked as a simulation).
:func:`tapped` turns a release function into a sampler of ``n`` draws of
everything its noise touched: the noisy values before the release's
post-processing (division by cohorts, rounding, consistency), which can only
lower epsilon (or rho), so an audit of the tapped values is an audit of the
release.

Examples
--------
>>> from spatialdp.privacy import LaplaceMechanism
>>> tap = NoiseTap(5, rng=0)
>>> tap.add_noise(LaplaceMechanism(1.0, discrete=True), np.array([10, 20])).shape
(2,)
>>> tap.draws().shape
(5, 2)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from spatialdp._random import RandomLike
from spatialdp._validation import check_count
from spatialdp.exceptions import InvalidInput
from spatialdp.privacy.target import Mechanism, Simulation

__all__ = ["NoiseTap", "tapped"]

#: A mechanism rewrite, for broken variants in audit tests: mechanism -> mechanism.
Rewrite = Callable[[Any], Any]


class NoiseTap(Simulation):
    """A simulation target that draws ``n`` noisy copies of every noised vector.

    Parameters
    ----------
    n : int
        Draws per noised vector (>= 1).
    rng : numpy Generator, int or None
        The seeded source of all draws.
    rewrite : callable, optional
        ``rewrite(mechanism, index) -> mechanism`` applied before each draw (the
        index counts the ``add_noise`` calls of the release): a way to build a
        deliberately broken variant of a release (half the noise scale, a
        wrong epsilon split) without touching library code. Never for releases.
    """

    def __init__(self, n: int, rng: RandomLike = None, *,
                 rewrite: Callable[[Any, int], Any] | None = None) -> None:
        super().__init__(rng)
        self.n = check_count(n, "n", low=1)
        self.rewrite = rewrite
        self._draws: list[NDArray[np.float64]] = []

    def add_noise(self, mechanism: Mechanism, values: NDArray[Any]) -> NDArray[Any]:
        """Draw ``n`` noisy copies of ``values``; keep them; return the first."""
        mech = mechanism if self.rewrite is None else self.rewrite(mechanism, len(self._draws))
        arr = np.asarray(values)
        if arr.ndim == 2 and type(mech).__name__ == "LatticeGaussianMechanism":
            batch = np.asarray(mech.simulate(np.tile(arr, (self.n, 1)), rng=self.rng))
            batch = batch.reshape(self.n, *arr.shape)
        else:
            batch = np.asarray(mech.simulate(np.broadcast_to(arr, (self.n, *arr.shape)).copy(),
                                             rng=self.rng))
        self._draws.append(batch.reshape(self.n, -1).astype(np.float64))
        return batch[0]

    def draws(self) -> NDArray[np.float64]:
        """Return every noised value of the release, ``(n, total)``, in drawing order."""
        if not self._draws:
            raise InvalidInput("the release drew no noise through its target; it cannot be "
                               "audited by tapping (pass a vectorised sampler to "
                               "audit_sampler instead)")
        return np.concatenate(self._draws, axis=1)

    def __repr__(self) -> str:
        return f"NoiseTap(n={self.n})"


def tapped(release: Callable[[Any, Any], Any], *,
           rewrite: Callable[[Any, int], Any] | None = None
           ) -> Callable[[Any, int, np.random.Generator], NDArray[np.float64]]:
    """Return ``sampler(dataset, n, rng)``: ``n`` draws of what ``release`` noises.

    Parameters
    ----------
    release : callable
        ``release(dataset, target)``: runs one spatialdp release of ``dataset``
        with ``target=target`` (its return value is ignored here).
    rewrite : callable, optional
        Passed to :class:`NoiseTap` (broken variants in tests).

    Examples
    --------
    >>> from spatialdp.privacy import LaplaceMechanism
    >>> def release(x, target):
    ...     return target.add_noise(LaplaceMechanism(1.0), np.asarray(x, dtype=float))
    >>> tapped(release)([0.0, 1.0], 4, np.random.default_rng(0)).shape
    (4, 2)
    """
    def sampler(dataset: Any, n: int, rng: np.random.Generator) -> NDArray[np.float64]:
        tap = NoiseTap(n, rng, rewrite=rewrite)
        release(dataset, tap)
        return tap.draws()

    return sampler
