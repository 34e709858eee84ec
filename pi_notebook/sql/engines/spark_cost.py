"""What a Spark read scans, from its ``EXPLAIN COST`` text (the optimized logical plan with
each node's ``Statistics(sizeInBytes=..., rowCount=...)``).

The scan is the plan's leaves (tables, files, ``range``, local rows): their sizes add up to
the bytes read, their row counts (when every leaf has one: ``range`` and tables whose
statistics were computed with ``ANALYZE``) to the rows. A leaf without statistics has
Spark's default size (``spark.sql.defaultSizeInBytes``, 8 EiB): then the bytes are unknown.
"""

from __future__ import annotations

import re

from pi_notebook.sql.engines.base import ReadEstimate

__all__ = ["SOURCE", "cost_estimate"]

SOURCE = "Spark EXPLAIN COST (the optimized plan's leaves: sizeInBytes, rowCount)"

_STATS = re.compile(
    r"Statistics\(sizeInBytes=([0-9.Ee+-]+)\s*([KMGTPE]i)?B(?:,\s*rowCount=([0-9.Ee+-]+))?"
)
_UNITS = {
    None: 1,
    "Ki": 1 << 10,
    "Mi": 1 << 20,
    "Gi": 1 << 30,
    "Ti": 1 << 40,
    "Pi": 1 << 50,
    "Ei": 1 << 60,
}
_UNKNOWN = 1 << 62
"""A leaf this large has no statistics (Spark's default size is 8 EiB)."""
_TREE = " :+-|"


def cost_estimate(text: str) -> ReadEstimate:
    """The estimate in ``text`` (``EXPLAIN COST`` output), or one saying why there is none."""
    section = _optimized(text)
    if not section:
        return ReadEstimate(
            rows=None, bytes=None, source="Spark EXPLAIN COST gave no optimized plan"
        )
    nodes = [(len(line) - len(line.lstrip(_TREE)), _STATS.search(line)) for line in section]
    leaves = [
        stats
        for i, (depth, stats) in enumerate(nodes)
        if i + 1 == len(nodes) or nodes[i + 1][0] <= depth
    ]
    if not leaves or any(stats is None for stats in leaves):
        return ReadEstimate(
            rows=None, bytes=None, source="Spark EXPLAIN COST: a scan has no statistics"
        )
    sizes = [float(m.group(1)) * _UNITS[m.group(2)] for m in leaves if m is not None]
    counts = [m.group(3) for m in leaves if m is not None]
    rows = int(sum(float(c) for c in counts if c)) if all(counts) else None
    if any(size >= _UNKNOWN for size in sizes):
        return ReadEstimate(
            rows=rows,
            bytes=None,
            source=f"{SOURCE}; a table without statistics: its size is unknown",
        )
    return ReadEstimate(rows=rows, bytes=int(sum(sizes)), source=SOURCE)


def _optimized(text: str) -> list[str]:
    lines = text.splitlines()
    try:
        start = lines.index("== Optimized Logical Plan ==") + 1
    except ValueError:
        return []
    section: list[str] = []
    for line in lines[start:]:
        if line.startswith("== ") or not line.strip():
            break
        section.append(line)
    return section
