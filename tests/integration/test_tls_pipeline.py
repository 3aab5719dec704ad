"""End to end over TLS on all three connections: a TLS-only PostgreSQL (15, then 18) ->
`pgcdc run` (a subprocess) -> a TLS-only Kafka and an HTTPS-only Apicurio with basic
auth, the instances of deploy/local/svc_tls.py, which accept nothing in plaintext.

Each wiring (tests.integration.tls_support.Wiring) authenticates differently: SCRAM or a
client certificate on PostgreSQL (the replication connection and the SQL ones alike),
SASL SCRAM-SHA-512 or PLAIN over TLS or mutual TLS on Kafka (the producer, the admin
client and the offset readers alike), basic auth on the registry; secrets come from
`*_file` settings or from `PGCDC_*` variables. What the worker published is read back
over TLS as a downstream consumer would. The worker's whole output (JSON log, debug
level for one wiring, and librdkafka's lines) must not contain any of the passwords.

A worker facing a wrong CA, or a server that requires TLS while pgcdc is configured
without it, must stop at once with exit 1 and name the setting, not retry for its
retry budget.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.pipeline_kafka_support import insert_lsn, read_all
from tests.integration.tls_support import Wiring, foreign_ca, secret, tls_pipeline

pytestmark = pytest.mark.integration

TABLES = ["CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL)"]
WIRINGS = [
    Wiring("scram", "SCRAM-SHA-512", "env"),
    Wiring("cert", "mTLS", "files"),
    Wiring("scram", "PLAIN", "files"),
]


def _secrets(*infos: dict[str, Any]) -> list[str]:
    return [secret(info) for info in infos]


@pytest.mark.parametrize("wiring", WIRINGS, ids=lambda w: w.id)
def test_rows_are_published_over_tls(
    tls_pg: dict[str, Any],
    tls_kafka: dict[str, Any],
    tls_registry: dict[str, Any],
    wiring: Wiring,
) -> None:
    """Inserts, an update and a delete on a TLS-only server reach Kafka over TLS, with
    schemas registered over HTTPS: the walsender's connection is encrypted, the events
    read back (over TLS) are the statements', the worker stops cleanly, and no password
    appears anywhere in its output."""
    level = "debug" if wiring.secrets_from == "env" else "info"
    with tls_pipeline(
        tls_pg,
        tls_kafka,
        tls_registry,
        "tls",
        TABLES,
        wiring=wiring,
        extra_env={"PGCDC_LOG__LEVEL": level},
    ) as p:
        worker = p.start_worker()
        worker.wait_ready(90)
        conn = p.connect()
        with conn.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute("INSERT INTO items VALUES (1, 'one'), (2, 'two'), (3, 'three')")
            cur.execute("UPDATE items SET name = 'TWO' WHERE id = 2")
            cur.execute("DELETE FROM items WHERE id = 3")
            end = insert_lsn(cur)  # before the commit record: its end LSN passes this
            cur.execute("COMMIT")
            cur.execute(
                "SELECT s.ssl, s.version FROM pg_catalog.pg_replication_slots r "
                "JOIN pg_catalog.pg_stat_ssl s ON s.pid = r.active_pid WHERE r.slot_name = %s",
                (p.slot,),
            )
            walsender_tls = cur.fetchall()
        conn.close()
        assert walsender_tls and walsender_tls[0][0] is True, walsender_tls
        p.wait_confirmed(end, 60, worker)
        records = read_all(p.settings(), [p.topic("items")])
        values = [r.value for r in records if r.value is not None]
        events = [(v["op"], (v["after"] or v["before"])["id"]) for v in values]
        assert events == [("c", 1), ("c", 2), ("c", 3), ("u", 2), ("d", 3)], events
        assert values[3]["after"]["name"] == "TWO"
        assert worker.terminate() == 0, worker.tail()
        output = worker.log_text()
        assert "worker_consistent" in output or "worker_resumed" in output
        for password in _secrets(tls_pg, tls_kafka, tls_registry):
            assert password not in output


@pytest.mark.parametrize(
    ("section", "setting", "field"),
    [
        # A server that requires TLS refuses a plaintext pgcdc.
        ("source", {"sslmode": "disable", "sslrootcert": None}, "source.sslmode"),
        # A wrong CA for the source, the broker and the registry.
        ("source", {"sslrootcert": "FOREIGN"}, "source.sslrootcert"),
        ("kafka", {"ssl_ca_location": "FOREIGN"}, "kafka.ssl_ca_location"),
        ("registry", {"ca_location": "FOREIGN"}, "registry.ca_location"),
    ],
    ids=["source-plaintext", "source-wrong-ca", "kafka-wrong-ca", "registry-wrong-ca"],
)
def test_run_stops_at_once_on_tls_it_cannot_use(
    tls_pg: dict[str, Any],
    tls_kafka: dict[str, Any],
    tls_registry: dict[str, Any],
    tmp_path: Path,
    section: str,
    setting: dict[str, Any],
    field: str,
) -> None:
    """`pgcdc run` with a wrong CA, or without TLS against a TLS-only source, exits 1
    (fatal) within seconds although every retry budget allows five minutes, naming the
    setting to fix, and without printing a password."""
    foreign = foreign_ca(tmp_path)
    values = {k: (str(foreign.ca) if v == "FOREIGN" else v) for k, v in setting.items()}
    budgets = {
        "source": {"retry_budget_s": 300},
        "kafka": {"retry_budget_s": 300},
        "registry": {"retry_budget_s": 300},
    }
    budgets[section] |= values
    with tls_pipeline(
        tls_pg,
        tls_kafka,
        tls_registry,
        "tlsfail",
        TABLES,
        wiring=Wiring("scram", "SCRAM-SHA-512", "files"),
        overrides=budgets,
    ) as p:
        began = time.monotonic()
        worker = p.start_worker()
        if section == "registry":
            # The registry is first asked when the first change is published.
            worker.wait_ready(90)
            p.execute("INSERT INTO items VALUES (1, 'one')")
        code = worker.wait(60)
        took = time.monotonic() - began
        output = worker.log_text()
        assert code == 1, output[-3000:]
        assert took < 45, f"took {took:.0f}s"
        assert "TlsError" in output and f"field={field}" in output, output[-3000:]
        for password in _secrets(tls_pg, tls_kafka, tls_registry):
            assert password not in output
