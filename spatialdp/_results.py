"""What every result object shares: its accounting record, a summary, and its Jupyter display.

A result of a release (a :class:`~spatialdp.federated.MetricRelease`, a
:class:`~spatialdp.federated.RegionalReport`, a
:class:`~spatialdp.queries.NoisyGrid`, a
:class:`~spatialdp.regression.RegressionFit`...) carries ``accounting``: the
record the release target wrote (ledger id and epoch, a simulation, or
unaccounted with its reason). :class:`Result` reads it once (``simulated``,
``accounting_note``) and shows the object in Jupyter as one HTML block: a
heading, the plain-text ``summary()`` (the same words as in a terminal, so the
two never disagree) and, optionally, a table.

Results with an estimate also offer ``conf_int(alpha)``, as statsmodels'
results do.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Result", "accounting_note", "summary_html"]

#: Tables longer than this are shown head and tail, as pandas does.
MAX_ROWS = 12


def summary_html(title: str, text: str, table: pd.DataFrame | None = None,
                 *, caption: str = "") -> str:
    """Return the HTML block of a result object.

    Parameters
    ----------
    title : str
        Bold heading, e.g. the class name.
    text : str
        The object's ``summary()``, shown preformatted.
    table : DataFrame, optional
        Shown below, at most :data:`MAX_ROWS` rows.
    caption : str
        A line above the table.

    Examples
    --------
    >>> import pandas as pd
    >>> block = summary_html("Thing", "a < b", pd.DataFrame({"x": [1]}))
    >>> "a &lt; b" in block and "<table" in block
    True
    """
    parts = [f"<div class='spatialdp'><strong>{html.escape(title)}</strong>",
             f"<pre>{html.escape(text)}</pre>"]
    if table is not None:
        if caption:
            parts.append(f"<p>{html.escape(caption)}</p>")
        parts.append(table.to_html(max_rows=MAX_ROWS, float_format=lambda v: f"{v:.4g}"))
    parts.append("</div>")
    return "".join(parts)


def accounting_note(accounting: dict[str, Any]) -> str:
    """Return the label a summary ends with: empty for a ledger release.

    Examples
    --------
    >>> accounting_note({"accounting": "simulation", "simulated": True})
    ' [SIMULATION: not a release]'
    >>> accounting_note({"accounting": "ledger"})
    ''
    """
    kind = accounting.get("accounting")
    if kind == "simulation":
        return " [SIMULATION: not a release]"
    if kind == "unaccounted":
        return f" [UNACCOUNTED: {accounting.get('reason')}]"
    return ""


class Result:
    """Base of the result objects: ``accounting``, ``simulated``, ``summary()``, HTML display.

    A subclass is a dataclass with an ``accounting`` field (the release
    target's record) and a ``summary()``; it may add a table to its HTML
    display by overriding :meth:`_html_table`.

    Examples
    --------
    >>> from dataclasses import dataclass, field
    >>> @dataclass(frozen=True)
    ... class Count(Result):
    ...     value: int
    ...     accounting: dict = field(default_factory=dict)
    ...     def summary(self) -> str:
    ...         return f"count {self.value}{self.accounting_note}"
    >>> c = Count(3, {"accounting": "simulation", "simulated": True})
    >>> c.simulated, c.summary()
    (True, 'count 3 [SIMULATION: not a release]')
    >>> c._repr_html_().startswith("<div class='spatialdp'><strong>Count</strong>")
    True
    """

    accounting: dict[str, Any]

    @property
    def simulated(self) -> bool:
        """True for a simulation's output (seeded noise): never publish it."""
        return bool(self.accounting.get("simulated", False))

    @property
    def accounting_note(self) -> str:
        """The label ``summary()`` ends with: simulation, unaccounted, or empty for a release."""
        return accounting_note(self.accounting)

    def summary(self) -> str:
        """Return a short plain-text summary."""
        raise NotImplementedError

    def _html_table(self) -> tuple[pd.DataFrame | None, str]:
        """Return the table shown below the summary in Jupyter, and its caption."""
        return None, ""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.summary().splitlines()[0]})"

    def _repr_html_(self) -> str:
        table, caption = self._html_table()
        return summary_html(type(self).__name__, self.summary(), table, caption=caption)
