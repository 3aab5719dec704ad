"""DecodeTXNNeedSkip's database rule, as `of_another_database` applies it to commit and
abort records (decode.c: `parsed->dbId != InvalidOid && parsed->dbId !=
ctx->slot->data.database`)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from service.decode.events import CommitEvent
from service.output.logical import of_another_database
from tests.service.schema.schema_history_support import abort, commit

OURS = 16384


def _commit(db_oid: int, xinfo: int) -> CommitEvent:
    return replace(commit(0x1000, 750), xinfo=xinfo, db_oid=db_oid)


@pytest.mark.parametrize(
    ("db_oid", "xinfo", "other"),
    [
        (OURS, 1, False),  # dbinfo naming the slot's database
        (OURS + 1, 1, True),  # dbinfo naming another database
        (0, 1, False),  # dbinfo of a process connected to no database: every slot's
        (0, 0, False),  # no dbinfo at all (wal_level below logical, no invalidations)
    ],
)
def test_a_commit_is_another_databases_only_when_it_names_one(
    db_oid: int, xinfo: int, other: bool
) -> None:
    assert of_another_database(_commit(db_oid, xinfo), OURS) is other


@pytest.mark.parametrize(("db_oid", "other"), [(OURS, False), (OURS + 1, True), (0, False)])
def test_an_abort_follows_the_same_rule(db_oid: int, other: bool) -> None:
    event = replace(abort(0x1000, 750), xinfo=1, db_oid=db_oid)
    assert of_another_database(event, OURS) is other
