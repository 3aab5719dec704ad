"""pgcdc registers the schemas Debezium 3.6.1 registers, subject for subject.

The golden file (golden/debezium-3.6.1.Final.json) holds what Debezium's PostgreSQL
connector (pgoutput, Apicurio's AvroConverter) registered for golden_workload.py; see
capture_debezium_golden.py, which made it. Here `pgcdc run` goes over the same tables and
workload on PostgreSQL 15, and every golden subject (table keys and values, transaction,
message, heartbeat) must exist for pgcdc's prefix with an equal schema.

Equal means equal as Avro plus Kafka Connect schemas: field order, types, defaults and
every `connect.*` attribute. Only how a name is spelled is normalized: Apicurio's
converter leaves out a namespace a nested record inherits, pgcdc writes it out, and both
denote the same full name.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.consumers import golden_workload as wl
from tests.integration.pipeline_kafka_support import pipeline

pytestmark = pytest.mark.integration

GOLDEN = Path(__file__).resolve().parent / "golden" / "debezium-3.6.1.Final.json"
_NAMED = ("record", "enum", "fixed")


def canonical(schema: Any, namespace: str | None = None) -> Any:
    """`schema` with every named type's name written in full and no `namespace` key, and
    references to named types written as full names."""
    if isinstance(schema, str):
        if "." in schema or schema in _PRIMITIVES or namespace is None:
            return schema
        return f"{namespace}.{schema}"
    if isinstance(schema, list):
        return [canonical(s, namespace) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    kind = out.get("type")
    if kind in _NAMED:
        name = out["name"]
        ns = out.pop("namespace", None) or namespace
        full = name if "." in name or not ns else f"{ns}.{name}"
        out["name"] = full
        namespace = full.rsplit(".", 1)[0] if "." in full else None
    else:
        out.pop("namespace", None)
    if kind == "record":
        out["fields"] = [
            {**f, "type": canonical(f["type"], namespace)} for f in out.get("fields", [])
        ]
    elif kind == "array":
        out["items"] = canonical(out["items"], namespace)
    elif kind == "map":
        out["values"] = canonical(out["values"], namespace)
    elif isinstance(kind, dict | list):
        out["type"] = canonical(kind, namespace)
    return out


_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}


def test_canonical_only_normalizes_names() -> None:
    """The normalization equates an inherited namespace with a spelled-out one, and
    nothing else: a different field order or connect attribute stays different."""
    inherited = {
        "type": "record",
        "name": "E",
        "namespace": "a.b",
        "fields": [{"name": "v", "type": {"type": "record", "name": "V", "fields": []}}],
    }
    spelled = json.loads(json.dumps(inherited))
    spelled["fields"][0]["type"]["namespace"] = "a.b"
    assert canonical(inherited) == canonical(spelled)
    other = json.loads(json.dumps(spelled))
    other["fields"][0]["type"]["connect.version"] = 1
    assert canonical(other) != canonical(spelled)


def _latest(registry_url: str, subject: str) -> dict[str, Any] | None:
    url = f"{registry_url}/subjects/{urllib.parse.quote(subject, safe='')}/versions/latest"
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            got = json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise
    schema: dict[str, Any] = json.loads(got["schema"])
    return schema


def _run_statements(p: Any, statements: tuple[str, ...]) -> None:
    conn = p.connect()
    conn.autocommit = False
    with conn.cursor() as cur:
        for sql in statements:
            cur.execute(sql)
    conn.commit()
    conn.close()


def test_registered_subjects_equal_debeziums(
    pg15: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """Every subject Debezium 3.6.1 registered for the golden workload is registered by
    pgcdc with an equal schema (key, value, transaction, message, heartbeat)."""
    golden = json.loads(GOLDEN.read_text())
    expected: dict[str, Any] = golden["subjects"]
    assert len(expected) == 11  # 3 values, 2 keys (golden_full has none), 6 static
    with pipeline(
        pg15, kafka, registry, "dbzschema", [*wl.TABLES, *wl.SNAPSHOT_ROWS], heartbeat_s=0.5
    ) as p:
        worker = p.start_worker()
        worker.wait_ready(120)
        for txn in wl.STREAM:
            _run_statements(p, txn)
        lsn = int(p.query("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn")[0][0])
        p.wait_confirmed(lsn - 1, 120, worker)
        deadline = time.monotonic() + 60
        got: dict[str, Any] = {}
        while time.monotonic() < deadline:
            got = {
                subject: _latest(registry["url"], subject.replace("${prefix}", p.prefix))
                for subject in expected
            }
            if all(v is not None for v in got.values()):
                break
            time.sleep(0.5)
        missing = sorted(s for s, v in got.items() if v is None)
        assert not missing, f"pgcdc registered none of {missing}"
        for subject, schema in expected.items():
            ours = json.loads(json.dumps(got[subject]).replace(p.prefix, "${prefix}"))
            assert canonical(ours) == canonical(schema), subject
        # Keyless tables register no key subject, as Debezium's.
        assert _latest(registry["url"], f"{p.prefix}.public.golden_full-key") is None
