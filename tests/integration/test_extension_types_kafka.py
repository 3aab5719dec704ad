"""Extension types end to end: `pgcdc run` -> Avro in Kafka -> read back with the registry.

For every extension type of tests/integration/extension_cases.py the build has (hstore,
ltree, lquery, citext, the isn types, cube, earth, seg, PostGIS geometry and geography
on pg15, pgvector's vector, halfvec and sparsevec on pg18 and vector on pg16v; the
contrib ones on every major 15 to 18), with
its edge and TOASTed values, arrays and NULLs: one table with a column per type, rows
written before the worker starts (read by the initial snapshot, op `r`) and the same
rows again after it streams (op `c`). Each Avro value read back is compared with what
Debezium 3.6's PostgresValueConverter makes of the value PostgreSQL itself prints
(the expected values come from the server, never from pgcdc's decoders):

- geometry / geography: {wkb: the bytes of the hex EWKB geometry_out prints, srid: the
  SRID in the EWKB's type flag, 0 without one} (PostgisGeometry.fromHexEWKB);
- hstore: a JSON object string (hstore.handling.mode=json) equal to hstore_to_json's,
  written compact;
- vector: the printed numbers as doubles (DoubleVector); halfvec: as floats
  (FloatVector); sparsevec: {dimensions, vector: index (as printed) -> double};
- ltree: its text (io.debezium.data.Ltree); lquery, citext, isn, cube, earth, seg: a
  string, PostgreSQL's text (Debezium has no mapping);
- arrays: each element mapped as above, NULL elements null.
The Value schema's semantic names are checked too.
"""

from __future__ import annotations

import json
import struct
import urllib.parse
import urllib.request
from typing import Any

import pytest

from tests.fixtures.services import ensure_service
from tests.integration.extension_cases import cases, extension_ddl
from tests.integration.pipeline_kafka_support import Pipeline, insert_lsn, pipeline, read_all

pytestmark = pytest.mark.integration

SNAPSHOT_BASE, STREAM_BASE = 0, 1000

SEMANTIC = {
    "hstore": "io.debezium.data.Json",
    "ltree": "io.debezium.data.Ltree",
    "geometry": "io.debezium.data.geometry.Geometry",
    "geography": "io.debezium.data.geometry.Geography",
    "vector": "io.debezium.data.DoubleVector",
    "halfvec": "io.debezium.data.FloatVector",
    "sparsevec": "io.debezium.data.SparseDoubleVector",
}


@pytest.fixture(params=["pg15", "pg16", "pg17", "pg18", "pg16v"])
def pgx(request: pytest.FixtureRequest) -> dict[str, Any]:
    return ensure_service(str(request.param))


def _base(column_type: str) -> tuple[str, bool]:
    """('hstore', is_array) for 'hstore[]', 'ext.ltree', 'vector(2)[]', ..."""
    is_array = column_type.endswith("[]")
    name = column_type.removesuffix("[]").split("(")[0].split(".")[-1]
    return name, is_array


def _oracle_sql(base: str, expr: str) -> str:
    """The server-side text the expected Avro value is made from."""
    return f"hstore_to_json({expr})::text" if base == "hstore" else f"({expr})::text"


def _ewkb_srid(wkb: bytes) -> int:
    """The SRID in an EWKB's type word (0x20000000 flag), 0 without one."""
    order = "<" if wkb[0] else ">"
    (kind,) = struct.unpack_from(order + "I", wkb, 1)
    return int(struct.unpack_from(order + "i", wkb, 5)[0]) if kind & 0x20000000 else 0


def _float32(text: str) -> float:
    return float(struct.unpack("<f", struct.pack("<f", float(text)))[0])


def _expected(base: str, text: str) -> Any:
    """Debezium 3.6's value for one non-NULL value whose server text is `text`."""
    match base:
        case "hstore":
            return json.loads(text)
        case "geometry" | "geography":
            wkb = bytes.fromhex(text)
            return {"wkb": wkb, "srid": _ewkb_srid(wkb)}
        case "vector":
            return [float(v) for v in text[1:-1].split(",")] if text != "[]" else []
        case "halfvec":
            return [_float32(v) for v in text[1:-1].split(",")]
        case "sparsevec":
            body, dim = text.rsplit("/", 1)
            pairs = [p.split(":") for p in body[1:-1].split(",") if p]
            return {"dimensions": int(dim), "vector": {int(k): float(v) for k, v in pairs}}
        case _:
            return text


def _got(base: str, value: Any) -> Any:
    """The Avro value read back, in the shape `_expected` builds."""
    if value is None:
        return None
    match base:
        case "hstore":
            assert value == json.dumps(json.loads(value), separators=(",", ":"), ensure_ascii=False)
            return json.loads(value)
        case "sparsevec":
            return {
                "dimensions": value["dimensions"],
                "vector": {e["key"]: e["value"] for e in value["vector"]},
            }
        case _:
            return value


def _value_fields(p: Pipeline, table: str) -> dict[str, Any]:
    subject = urllib.parse.quote(f"{p.topic(table)}-value", safe="")
    url = f"{p.settings().registry.url}/subjects/{subject}/versions/latest"
    with urllib.request.urlopen(url, timeout=10) as resp:
        schema = json.loads(json.loads(resp.read())["schema"])
    value = next(f for f in schema["fields"] if f["name"] == "before")["type"][1]
    return {f["name"]: f["type"] for f in value["fields"]}


def _semantic_name(avro: Any) -> str | None:
    if isinstance(avro, list):
        avro = next(a for a in avro if a != "null")
    if isinstance(avro, dict):
        if avro.get("type") == "array" and "connect.name" not in avro:
            return _semantic_name(avro["items"])
        name = avro.get("connect.name")
        return str(name) if name is not None else None
    if isinstance(avro, str) and "." in avro:  # a named type defined before: its name
        return avro
    return None


def test_extension_types_through_kafka_equal_debezium(
    pgx: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """Snapshot and stream rows of every extension type: Avro values equal Debezium's
    mapping of the server's own text, schema names equal Debezium's."""
    found = cases(pgx)
    assert found, f"{pgx['service']} has no extension"
    types = [t for t, _ in found]
    cols = [f"c{i}" for i in range(len(found))]
    nrows = max(len(lits) for _, lits in found) + 1  # the last row: every column NULL
    ddl = [
        *[s for s in extension_ddl(pgx).split(";\n") if s.strip()],
        "CREATE TABLE ext_t (id int PRIMARY KEY, "
        + ", ".join(f"{c} {t}" for c, t in zip(cols, types, strict=True))
        + ")",
    ]

    def insert_rows(p: Pipeline, base: int) -> int:
        with p.connect() as conn, conn.cursor() as cur:
            for k in range(nrows):
                values = [lits[k] if k < len(lits) else "NULL" for _, lits in found]
                cur.execute(f"INSERT INTO ext_t VALUES ({base + k}, {', '.join(values)})")
            return insert_lsn(cur)

    with pipeline(pgx, kafka, registry, "extkafka", ddl) as p:
        insert_rows(p, SNAPSHOT_BASE)
        worker = p.start_worker()
        worker.wait_event(["snapshot_committed"], 300)
        end = insert_rows(p, STREAM_BASE)
        p.wait_confirmed(end - 1, 300, worker)
        assert worker.terminate() == 0

        events = {
            (r.value["after"]["id"], r.value["op"]): r.value["after"]
            for r in read_all(p.settings(), [p.topic("ext_t")], timeout_s=120)
            if r.value is not None
        }
        select = []
        for c, t in zip(cols, types, strict=True):
            base, is_array = _base(t)
            if is_array:
                select.append(
                    f"ARRAY(SELECT {_oracle_sql(base, 'e')} FROM unnest({c})"
                    " WITH ORDINALITY u(e, n) ORDER BY n)"
                )
            else:
                select.append(_oracle_sql(base, c))
        server = {
            int(r[0]): r[1:]
            for r in p.query(f"SELECT id, {', '.join(select)} FROM ext_t ORDER BY id")
        }
        nulls = {
            int(r[0]): r[1:]
            for r in p.query(
                f"SELECT id, {', '.join(f'{c} IS NULL' for c in cols)} FROM ext_t ORDER BY id"
            )
        }

        fields = _value_fields(p, "ext_t")
        for c, t in zip(cols, types, strict=True):
            base, _ = _base(t)
            assert _semantic_name(fields[c]) == SEMANTIC.get(base), (t, fields[c])

        bad = []
        compared = 0
        for base_id, op in ((SNAPSHOT_BASE, "r"), (STREAM_BASE, "c")):
            for k in range(nrows):
                row = events.get((base_id + k, op))
                assert row is not None, f"no {op} event for row {base_id + k}"
                for i, (c, t) in enumerate(zip(cols, types, strict=True)):
                    base, is_array = _base(t)
                    text = server[base_id + k][i]
                    if nulls[base_id + k][i]:
                        want: Any = None
                    elif is_array:
                        want = [None if e is None else _expected(base, e) for e in text]
                    else:
                        want = _expected(base, text)
                    value = row[c]
                    got = (
                        [None if e is None else _got(base, e) for e in value]
                        if is_array and value is not None
                        else _got(base, value)
                    )
                    compared += 1
                    if got != want:
                        bad.append(f"{op} row {k} {t}: {str(got)[:200]} != {str(want)[:200]}")
        assert not bad, f"{len(bad)} of {compared} differ:\n" + "\n".join(bad[:30])
        print(f"\n{pgx['service']}: {compared} Avro values equal Debezium's mapping")
