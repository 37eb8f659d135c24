"""Jupyter display: one small HTML block shared by every result object.

A heading, the object's plain-text summary (the same words as ``summary()``,
so the notebook and the terminal never disagree) and, optionally, a table.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

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
