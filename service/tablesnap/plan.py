"""The table snapshot's plan: which chunks of which tables are committed, planned, open.

This is the resumable state of a table snapshot, and nothing else: `SnapshotState`
holds one `TableJob` per table queued (initial or on-demand), in the order they are
snapshotted; a job holds its committed prefix (`committed_to`), the chunks planned past
it (`open`, in plan order, committed ones out of order among them) and where planning
stopped (`planned_to`, `END` once it reached the table's end). The snapshot's edges
(connectors.tablesnap: the chunk readers, the snapshotter that drives them, the
progress record that stores this state in Kafka) fill it in; this module does no I/O.

Bounds (`Bound`): a keyed table is split by key, a bound being the key columns' text
(a tuple), `None` for the table's start / end; a keyless one by heap pages (an int).
`json_bound` / `bound_from_json` are the JSON forms the progress record keeps.

Ordering: the state changes only on the worker's thread, under the snapshotter's lock.
Memory: a few hundred bytes per table, whatever the table size (chunks committed in
order are folded into `committed_to`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Bound = tuple[str, ...] | int | None
END = "end"  # planned_to once planning reached the table's end


def json_bound(b: Bound) -> Any:
    return list(b) if isinstance(b, tuple) else b


def bound_from_json(value: Any) -> Bound:
    if value is None or isinstance(value, int):
        return value
    return tuple(str(v) for v in value)


@dataclass(slots=True)
class Interval:
    lo: Bound
    hi: Bound
    committed: bool = False
    busy: bool = False  # handed to a reader (not persisted)
    retries: int = 0  # reads whose window forced a re-read (not persisted)


@dataclass(slots=True)
class TableJob:
    """One table to snapshot (invariant: `open` is in plan order, starting at
    `committed_to`, and ends at `planned_to`)."""

    table: str
    marker: str  # "initial" or "incremental"
    where: str | None = None
    oid: int = 0  # 0 until a reader resolved it
    keyed: bool = True
    committed_to: Bound = None
    planned_to: Bound | str = None
    open: list[Interval] = field(default_factory=list)
    rows: int = 0
    chunks: int = 0
    estimate: int = 0
    done: bool = False
    stopped: bool = False  # ended by a stop signal before it was complete (done too)

    def to_json(self) -> dict[str, Any]:
        def b(x: Any) -> Any:
            return list(x) if isinstance(x, tuple) else x

        return {
            "table": self.table,
            "marker": self.marker,
            "where": self.where,
            "oid": self.oid,
            "keyed": self.keyed,
            "committed_to": b(self.committed_to),
            "planned_to": b(self.planned_to),
            "open": [[b(i.lo), b(i.hi), i.committed] for i in self.open],
            "rows": self.rows,
            "chunks": self.chunks,
            "estimate": self.estimate,
            "done": self.done,
            "stopped": self.stopped,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TableJob:
        planned = d.get("planned_to")
        return cls(
            table=str(d["table"]),
            marker=str(d.get("marker", "initial")),
            where=d.get("where"),
            oid=int(d.get("oid", 0)),
            keyed=bool(d.get("keyed", True)),
            committed_to=bound_from_json(d.get("committed_to")),
            planned_to=planned if planned == END else bound_from_json(planned),
            open=[
                Interval(bound_from_json(lo), bound_from_json(hi), bool(c))
                for lo, hi, c in d.get("open", [])
            ],
            rows=int(d.get("rows", 0)),
            chunks=int(d.get("chunks", 0)),
            estimate=int(d.get("estimate", 0)),
            done=bool(d.get("done", False)),
            stopped=bool(d.get("stopped", False)),
        )


@dataclass(slots=True)
class SnapshotState:
    jobs: list[TableJob] = field(default_factory=list)
    paused: bool = False
    signal_offset: int = 0
    captured: list[str] = field(default_factory=list)
    # The shared snapshot of the initial snapshot (connectors.tablesnap.export): its
    # LSN, xmin, xmax, xip, the stream position it was aligned at (`confirmed`) and the
    # snapshot's ts (`time`, microseconds since 2000). A restart before the stream
    # passed `lsn` skips the transactions visible in it, as the aligned session did.
    export: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out = {
            "jobs": [j.to_json() for j in self.jobs],
            "paused": self.paused,
            "signal_offset": self.signal_offset,
            "captured": sorted(self.captured),
        }
        if self.export is not None:
            out["export"] = self.export
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SnapshotState:
        export = d.get("export")
        return cls(
            [TableJob.from_json(j) for j in d.get("jobs", [])],
            bool(d.get("paused", False)),
            int(d.get("signal_offset", 0)),
            [str(t) for t in d.get("captured", [])],
            dict(export) if isinstance(export, dict) else None,
        )

    def pending(self) -> list[TableJob]:
        return [j for j in self.jobs if not j.done]
