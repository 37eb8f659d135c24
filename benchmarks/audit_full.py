"""The long privacy audit: every release path at its claim, and every broken variant.

Runs each case of :mod:`spatialdp.audit.cases` with many more draws than the CI
suite: every correct release on what it publishes (the ``published`` path, one
seeded release per draw: default 5,000 draws per input, a tenth of that for
the file case) and on its noise at the tap (default 1,000,000 draws per
input), and every broken variant on its own path (tap variants with the tap
draws, post-noise variants with the published draws, the seeded and
composition variants on the real release path with their small samples).
Prints one line per audit and writes the claimed-vs-measured table to
``docs/figures/audit_table.md`` (the table in ``docs/audit.md``).

    python benchmarks/audit_full.py              # about 15-30 minutes on 2 quiet cores
    python benchmarks/audit_full.py --draws 200000 --published-draws 2000 --out -
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from spatialdp.audit.auditor import AuditResult
from spatialdp.audit.cases import CASES, VARIANTS, run_case

ROOT = Path(__file__).resolve().parents[1]
#: The file case writes a GeoPackage, a CSV, a JSON and a model card per draw.
SLOW_CASES = {"regional_report.write": 10}


def _draws(name: str, path: str, args: argparse.Namespace) -> int | None:
    if path == "tap":
        return int(args.draws)
    if path == "published" and name != "published_composition":
        return max(100, int(args.published_draws) // SLOW_CASES.get(name, 1))
    return None  # the release path (seeded variants) and the composition: their own sample


def _runs(name: str) -> list[tuple[str, str]]:
    """(variant, path) audited for a case: the correct release on each seeded path, then
    every broken variant on its own path."""
    case = CASES[name]
    runs = [("correct", path) for path in ("published", "tap") if path in case.paths]
    if name == "transform_clients":
        runs.append(("correct", "release"))
    return runs + [(v, VARIANTS[v].path) for v in case.variants if v != "correct"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--draws", type=int, default=1_000_000,
                        help="draws per input at the noise tap (default 1,000,000)")
    parser.add_argument("--published-draws", type=int, default=5_000,
                        help="draws per input on the published path (default 5,000)")
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("--out", default=str(ROOT / "docs" / "figures" / "audit_table.md"),
                        help="markdown table path, or - to print only")
    parser.add_argument("--cases", nargs="*", default=sorted(CASES), choices=sorted(CASES))
    args = parser.parse_args(argv)

    rows: list[tuple[str, str, AuditResult, str]] = []
    started = time.perf_counter()
    for name in args.cases:
        for variant, path in _runs(name):
            t0 = time.perf_counter()
            result = run_case(name, variant, path=path, draws=_draws(name, path, args),
                              rng=args.seed)
            seconds = time.perf_counter() - t0
            expected = variant == "correct"
            verdict = ("pass" if result.passed else "VIOLATION") + (
                "" if result.passed == expected else " (UNEXPECTED)")
            rows.append((name, variant, result, verdict))
            print(f"{name:22s} {variant:17s} claimed {result.unit} {result.claimed:<5g} "
                  f"measured >= {result.measured:7.4f}  {verdict:10s} {result.path:18s} "
                  f"{result.draws:>9,} draws  {seconds:6.1f} s  | {result.event}", flush=True)
    total = time.perf_counter() - started
    unexpected = sum("UNEXPECTED" in r[3] for r in rows)

    lines = [
        "| release path | neighbours | variant | broken | claimed | measured lower bound "
        "| verdict | audit path | counted draws per input | event |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, variant, r, verdict in rows:
        event = r.event.replace("|", "\\|")
        lines.append(f"| `{name}` | {CASES[name].neighbours} | {variant} | "
                     f"{VARIANTS[variant].broken} | {r.unit} {r.claimed:g} | "
                     f"{r.measured:.3f} | {verdict} | {r.path} | {r.draws:,} | {event} |")
    lines.append("")
    lines.append(f"Alpha of every bound: 1e-6 (split over a case's neighbouring pairs "
                 f"and the two proportions). Seed {args.seed}; {args.draws:,} draws per input "
                 f"requested at the tap, {args.published_draws:,} on the published path; "
                 f"total {total:.0f} s; unexpected verdicts: {unexpected} of {len(rows)}.")
    table = "\n".join(lines) + "\n"
    if args.out == "-":
        print(table)
    else:
        Path(args.out).write_text(table, encoding="utf-8")
        print(f"wrote {args.out}")
    print(f"audits: {len(rows)}, unexpected verdicts: {unexpected}, total {total:.0f} s")
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
