"""The shared snapshot's record in the snapshot state: what a restart re-installs.

`SnapshotState.export` survives the progress record's JSON round trip, and the
visibility rebuilt from it (`export_visibility`) is the exported snapshot's own
XidInMVCCSnapshot answer: xids before xmin visible, xip and xmax onwards not.
"""

from __future__ import annotations

import json

from connectors.tablesnap.export import export_doc, export_visibility
from service.schema.tabledef import CatalogSnapshot
from service.tablesnap.plan import SnapshotState, TableJob


def test_export_round_trips_and_keeps_its_visibility() -> None:
    snap = CatalogSnapshot(
        db_oid=5, lsn=0x3F05BCDC0, xmin=100, xmax=110, xip=frozenset({103, 107}), tables=()
    )
    state = SnapshotState(jobs=[TableJob("public.a", "initial")], captured=["public.a"])
    state.export = export_doc(snap, confirmed_lsn=0x3F00098B8, ts_us=123)
    back = SnapshotState.from_json(json.loads(json.dumps(state.to_json())))
    assert back.export == state.export
    assert back.export is not None
    assert back.export["confirmed"] == 0x3F00098B8 and back.export["time"] == 123
    again = export_visibility(back.export)
    for xid in (50, 99, 100, 101, 103, 106, 107, 109, 110, 111, 2**31):
        assert again.xid_visible(xid) == snap.xid_visible(xid), xid
    assert [x for x in range(95, 115) if again.xid_visible(x)] == [
        x for x in range(95, 110) if x not in (103, 107)
    ]


def test_state_without_export_has_none() -> None:
    doc = SnapshotState(captured=["public.a"]).to_json()
    assert "export" not in doc
    assert SnapshotState.from_json(doc).export is None
