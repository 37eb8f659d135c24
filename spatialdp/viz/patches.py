"""Adding polygon patches to an axes without matplotlib's per-segment limit walk.

:meth:`matplotlib.axes.Axes.add_patch` updates the data limits by walking every
segment of the patch's path in Python (``Path.iter_bezier``): for region outlines
of thousands of vertices that walk, not the drawing, is the cost (1.6 s for the
demo's coverage map of 3,670 hexagons in one compound path). A polygon's extent
is the extent of its vertices, so :func:`add_polygon_patch` adds the artist and
updates the limits from the vertices in one vectorised call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.patches import PathPatch

__all__ = ["add_polygon_patch"]


def add_polygon_patch(ax: Axes, patch: PathPatch) -> PathPatch:
    """Add a straight-edged patch in data coordinates, as ``ax.add_patch`` would.

    Same clip path, transform and data limits as :meth:`~matplotlib.axes.Axes.add_patch`
    for a path of line segments (the limits of its vertices), without the Python
    walk over its segments.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> from matplotlib.patches import PathPatch
    >>> from matplotlib.path import Path
    >>> fig, ax = plt.subplots()
    >>> square = Path([(2, 3), (4, 3), (4, 5), (2, 5), (2, 3)], closed=True)
    >>> _ = add_polygon_patch(ax, PathPatch(square))
    >>> [float(v) for v in ax.dataLim.extents]  # x0, y0, x1, y1
    [2.0, 3.0, 4.0, 5.0]
    >>> plt.close(fig)
    """
    ax.add_artist(patch)  # clip path and transData, as add_patch sets them
    vertices = np.asarray(patch.get_path().vertices, dtype=float)
    if vertices.size:
        ax.update_datalim(vertices)
    return patch
