"""Small-area estimation on private regional maps: borrow strength, free under post-processing.

A regional report is most uncertain where the analyst most needs it: small
regions near the cohort floor. Official statistics solve this with
small-area models (the US Census Bureau's SAIPE uses Fay-Herriot): each noisy
direct estimate is combined with a regression on public covariates and a
random area effect, weighted by its precision. Under differential privacy the
noise variance of every published value is known exactly, and any function of
published values and public data costs no epsilon.

- :func:`small_area_estimates`: Fay-Herriot or spatial Fay-Herriot (SAR,
  dense or sparse; or CAR, sparse) EBLUPs, MSEs, Laplace-aware intervals,
  shrinkage weights and labels.
- :func:`plot_raw_vs_smoothed`: the raw map, the smoothed map (one colour
  scale) and the estimates' RMSE, side by side.
- :func:`spatial_weights`, :func:`to_libpysal`: the neighbour graph, to and
  from libpysal (optional).

See ``docs/small_area.md``.
"""

from spatialdp.smooth.diagnostics import SmallAreaModelWarning
from spatialdp.smooth.direct import READ_COLUMNS, DirectEstimates, read_direct
from spatialdp.smooth.estimate import DIRECT_WEIGHT, SmallAreaEstimates, small_area_estimates
from spatialdp.smooth.maps import plot_raw_vs_smoothed
from spatialdp.smooth.weights import row_standardised, spatial_weights, to_libpysal

__all__ = ["DIRECT_WEIGHT", "READ_COLUMNS", "DirectEstimates", "SmallAreaEstimates",
           "SmallAreaModelWarning", "plot_raw_vs_smoothed", "read_direct", "row_standardised",
           "small_area_estimates", "spatial_weights", "to_libpysal"]
