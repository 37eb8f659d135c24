"""DataFrames and consistency checks for :mod:`spatialdp.privacy.ledger`."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING

from spatialdp.exceptions import LedgerError
from spatialdp.privacy._ledger_schema import UP
from spatialdp.privacy.budget import LineItem

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
    """Line items plus ``evaluation`` subtotal and ``total`` rows, as floats."""
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
    """The ``charges`` table, oldest first, amounts as floats, times as UTC datetimes."""
    import pandas as pd

    sql = f"SELECT {_AUDIT_COLUMNS} FROM charges"
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
    """The ``borrows`` table, by epoch."""
    import pandas as pd

    cur = conn.execute("SELECT * FROM borrows ORDER BY epoch")
    df = pd.DataFrame(cur.fetchall(), columns=[d[0] for d in cur.description])
    df["amount"] = df["amount"].astype(float)
    df["recorded_at"] = pd.to_datetime(df["recorded_at"], utc=True, format="ISO8601")
    return df


def verify(
    conn: sqlite3.Connection, path: str, cap_of: Callable[[int, str], Decimal]
) -> dict[str, int]:
    """Integrity check, totals == sum of audit rows, spent <= cap; raise LedgerError if not."""
    check = [r[0] for r in conn.execute("PRAGMA integrity_check")]
    if check != ["ok"]:
        raise LedgerError(
            f"SQLite integrity_check failed on {path!r}: {check[:5]}; restore the ledger "
            "from a backup."
        )
    sums: dict[tuple[int, str], tuple[Decimal, int]] = {}
    for ep, item, charged in conn.execute(
        "SELECT epoch, line_item, charged FROM charges ORDER BY seq"
    ):
        s, n = sums.get((ep, item), (Decimal(0), 0))
        sums[(ep, item)] = (UP.add(s, Decimal(charged)), n + 1)
    totals = {
        (ep, it): (Decimal(s), int(n))
        for ep, it, s, n in conn.execute("SELECT epoch, line_item, spent, n_charges FROM spend")
    }
    if sums != totals:
        bad = sorted(set(sums.items()) ^ set(totals.items()))[:3]
        raise LedgerError(
            f"line-item totals disagree with the audit rows in {path!r} ({bad}); the file was "
            "modified outside PrivacyLedger. Restore it from a backup."
        )
    for (ep, item), (s, _) in totals.items():
        cap = cap_of(ep, item)
        if s > cap:
            raise LedgerError(
                f"epoch {ep} line item {item!r} spent {s}, above its cap {cap}, in {path!r}; "
                "the file was modified outside PrivacyLedger. Restore it from a backup."
            )
    n_borrows = conn.execute("SELECT COUNT(*) FROM borrows").fetchone()[0]
    return {
        "charges": sum(n for _, n in sums.values()),
        "line_items": len(totals),
        "borrows": int(n_borrows),
    }
