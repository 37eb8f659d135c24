"""DataFrames and consistency checks for :mod:`spatialdp.privacy.ledger`."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING

from spatialdp.privacy import _ledger_schema as schema
from spatialdp.privacy._ledger_files import ledger_error
from spatialdp.privacy.budget import BudgetSplit, LineItem

if TYPE_CHECKING:
    import pandas as pd

_AUDIT_COLUMNS = (
    "release_id, recorded_at, epoch, round, line_item, who, what, why, loss, loss_unit, "
    "charged, structure, structure_kind, structure_name, parts, max_parts_per_client, multiplier"
)


def summary_frame(
    rows: dict[str, dict[str, Decimal]],
    unit: str,
    to_epsilon: Callable[[float], float] | None,
) -> pd.DataFrame:
    """Return line items plus ``evaluation`` subtotal and ``total`` rows, as floats."""
    import pandas as pd

    keys = ("base_cap", "borrowed", "cap", "spent", "remaining", "n_charges")
    groups = {
        "evaluation": [i.value for i in LineItem if i.is_evaluation],
        "total": [i.value for i in LineItem],
    }
    for name, members in groups.items():
        rows[name] = {k: sum((rows[m][k] for m in members), Decimal(0)) for k in keys}
    df = pd.DataFrame.from_dict(rows, orient="index").astype(float)
    df["n_charges"] = df["n_charges"].astype(int)
    df.index.name = "line_item"
    if to_epsilon is not None:
        df["spent_epsilon"] = [to_epsilon(float(s)) for s in df["spent"]]
    df.attrs["unit"] = unit
    return df


def audit_frame(conn: sqlite3.Connection, unit: str, epoch: int | None) -> pd.DataFrame:
    """Return the ``charges`` table, oldest first, amounts as floats, times as UTC datetimes."""
    import pandas as pd

    relation = schema.column_or_default(conn, "charges", "neighbours")
    sql = f"SELECT {_AUDIT_COLUMNS}, {relation} FROM charges"
    args: tuple[int, ...] = ()
    if epoch is not None:
        sql, args = sql + " WHERE epoch = ?", (epoch,)
    cur = conn.execute(sql + " ORDER BY seq", args)
    df = pd.DataFrame(cur.fetchall(), columns=[d[0] for d in cur.description])
    df = df.rename(columns={"round": "round_index"})
    df["recorded_at"] = pd.to_datetime(df["recorded_at"], utc=True, format="ISO8601")
    df["loss"] = df["loss"].astype(float)
    df["charged"] = df["charged"].astype(float)
    df.attrs["unit"] = unit
    return df


def borrows_frame(conn: sqlite3.Connection) -> pd.DataFrame:
    """Return the ``borrows`` table, by epoch."""
    import pandas as pd

    cur = conn.execute("SELECT * FROM borrows ORDER BY epoch")
    df = pd.DataFrame(cur.fetchall(), columns=[d[0] for d in cur.description])
    df["amount"] = df["amount"].astype(float)
    df["recorded_at"] = pd.to_datetime(df["recorded_at"], utc=True, format="ISO8601")
    return df


def describe_split(split: BudgetSplit) -> str:
    """Return the split in words, e.g. ``70%/30% training/evaluation, 20% of evaluation global``.

    Examples
    --------
    >>> describe_split(BudgetSplit())
    '70%/30% training/evaluation, 20% of evaluation global'
    """
    return (f"{1 - split.evaluation_share:.0%}/{split.evaluation_share:.0%} "
            f"training/evaluation, {split.global_share:.0%} of evaluation global")


def state(conn: sqlite3.Connection) -> str:
    """Return ``"<n> epochs, <m> charges"`` (call inside a read transaction)."""
    epochs, charges = conn.execute(
        "SELECT (SELECT COUNT(*) FROM (SELECT epoch FROM spend UNION SELECT epoch FROM "
        "borrows)), (SELECT COUNT(*) FROM charges)").fetchone()
    return f"{int(epochs)} epochs, {int(charges)} charges"


def integrity(conn: sqlite3.Connection, path: str) -> None:
    """Run SQLite's ``integrity_check`` on the file; raise :class:`LedgerError` if it fails."""
    check = [str(r[0]) for r in conn.execute("PRAGMA integrity_check")]
    if check != ["ok"]:
        raise ledger_error(path, f"fails SQLite's integrity_check: {check[:5]}",
                           "restore the ledger from a backup")
