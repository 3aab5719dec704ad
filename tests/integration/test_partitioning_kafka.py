"""Key partitioning end to end: each record lands in the partition Debezium's would.

Debezium writes through Kafka Connect's Java producer, which puts a keyed record in
partition `toPositive(murmur2(key bytes)) % partitions` (BuiltInPartitioner.
partitionForKey, when no partitioner.class is set). librdkafka's default partitioner
is `consistent_random` (CRC32 of the key), which places the same key elsewhere as soon
as a topic has more than one partition. A topic pre-created with several partitions,
as production clusters do, would then scatter a table's keys differently from
Debezium: a consumer that relies on the placement (co-partitioned joins in Kafka
Streams or ksqlDB) breaks, and a switch from Debezium to pgcdc would put a key's later
events in another partition than its earlier ones, so they would no longer be read in
order.

The oracle is the Java client itself (`data/KeyPartitions.java`, run by the JDK's
source launcher on the broker's own classpath): every record of a six-partition table
topic (snapshot reads, inserts, updates, deletes and their tombstones) must be in the
partition it names for the record's key bytes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tests.integration.pipeline_kafka_support import insert_lsn, pipeline, read_all

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "deploy" / "local"))
import svc_kafka

pytestmark = pytest.mark.integration

ORACLE = Path(__file__).resolve().parent / "data" / "KeyPartitions.java"
PARTITIONS = 6
DDL = ["CREATE TABLE parts (id int PRIMARY KEY, name text NOT NULL)"]


def java_partitions(keys: list[bytes], partitions: int) -> list[int]:
    """The partition the Java producer gives each key (see the module docstring)."""
    classpath = svc_kafka.Kafka().classpath_file().read_text().strip()
    done = subprocess.run(
        ["java", "-cp", classpath, str(ORACLE), str(partitions)],
        input="".join(f"{k.hex()}\n" for k in keys),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = [int(line) for line in done.stdout.split()]
    assert len(out) == len(keys), done.stdout
    return out


def test_java_oracle_agrees_with_kafkas_own_murmur2_vectors() -> None:
    """The oracle is what it says: Kafka's UtilsTest gives murmur2("21") = -973932308,
    murmur2("foobar") = -790332482 and murmur2("") = 275646681."""
    got = java_partitions([b"21", b"foobar", b""], 1_000_003)
    assert got == [(h & 0x7FFFFFFF) % 1_000_003 for h in (-973932308, -790332482, 275646681)]


def test_records_land_in_the_partition_javas_producer_would_choose(
    pg15: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    """A table topic created with six partitions before the worker starts: every record
    (snapshot, stream, tombstone) sits where the Java producer would put its key."""
    with pipeline(pg15, kafka, registry, "partkafka", DDL) as p:
        topic = p.topic("parts")
        admin = AdminClient({"bootstrap.servers": kafka["bootstrap"]})
        created = admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS)])
        created[topic].result(timeout=30)
        p.execute("INSERT INTO parts SELECT g, 'snap ' || g FROM generate_series(1, 100) g")
        worker = p.start_worker()
        worker.wait_event(["snapshot_committed"], 300)
        with p.connect() as conn, conn.cursor() as cur:
            cur.execute("INSERT INTO parts SELECT g, 'new ' || g FROM generate_series(101, 200) g")
            conn.commit()
            cur.execute("UPDATE parts SET name = name || '!' WHERE id % 7 = 0")
            conn.commit()
            cur.execute("DELETE FROM parts WHERE id % 11 = 0")
            conn.commit()
            end = insert_lsn(cur)
        p.wait_confirmed(end - 1, 300, worker)
        assert worker.terminate() == 0

        records = read_all(p.settings(), [topic], deserialize=False, timeout_s=120)
        ops = {"r": 100, "c": 100, "u": 28, "d": 18}
        assert len(records) == sum(ops.values()) + ops["d"]  # each delete's tombstone too
        keys = [r.key for r in records]
        assert all(isinstance(k, bytes) for k in keys)
        want = java_partitions(keys, PARTITIONS)
        wrong = [
            (r.key.hex(), r.partition, w)
            for r, w in zip(records, want, strict=True)
            if r.partition != w
        ]
        assert not wrong, f"{len(wrong)} of {len(records)} records misplaced: {wrong[:5]}"
        assert len({r.partition for r in records}) == PARTITIONS
