"""The Kafka sink: exactly-once publishing of committed source transactions.

Receives, in commit order, the records an output plugin writes (`write`, which is the
plugin context's writer; `write_run`, a run of one topic's ready records; `write_runs`,
a transaction's runs of several tables in one call), and after each source transaction
the driver's
`end_source_txn(confirmed_lsn, restart_lsn, schema_version)`. Hands on: Kafka
transactions, each holding one source transaction or a bounded batch of consecutive
ones, followed by one `OffsetRecord` (connectors.kafka.offsets) on the compacted topic
`<prefix>.offsets`, keyed by the slot, written last before `commit_transaction`.
Schema-history snapshots staged with `stage` go into the same transaction, just before
the offset record.

Guarantees:
- One transactional producer (`transactional.id` = settings.transactional_id,
  idempotent, acks=all). `start` calls `init_transactions`, which fences any older
  producer with the same id and aborts its open transaction; the older one then gets
  a fatal "fenced" error on its next call, raised here as `FencedError`.
- A Kafka transaction begins at the first record after a commit, so records stream to
  the broker while the source transaction is still being replayed; under the native
  loop, short runs (a small transaction's few records, its BEGIN and END: SHORT_RUN)
  are held and produced together, before the commit, before a long run, or once
  HELD_MAX_RECORDS or HELD_MAX_BYTES are held, and dropped if the Kafka transaction
  aborts. It adapts to load:
  it commits when the WAL source is idle (`idle`: the decoder has consumed every byte
  received so far, so latency at low load is about one commit round trip), or when
  `settings.kafka.max_batch_txns` source transactions are in it, or its records exceed
  `max_batch_bytes`, or it is older than `max_batch_age_s`, checked at every
  `end_source_txn` and `poll`; `flush` commits unconditionally. A batch never ends in
  the middle of a source transaction.
- Partitioning: a keyed record goes to the partition Kafka Connect's Java producer
  (so Debezium) would choose, murmur2 of the key bytes (`partitioner`).
- Slot feedback: `on_committed(confirmed_lsn, restart_lsn)` is called only after
  `commit_transaction` returned; the driver moves the slot only then.
- Errors: the sink keeps no copy of the records it produced (memory stays bounded by
  librdkafka's queue, `queue.buffering.max.kbytes`, and the short runs held, at most
  HELD_MAX_BYTES and one run more, whatever the transaction size). A
  broker outage before a Kafka transaction holds anything (topics, init, begin) is
  retried with exponential backoff for `retry_budget_s` (kafka.retry_budget_s, one
  budget for the whole start), then `BrokerUnavailableError`, never sooner. Once records
  were produced, a failure of the Kafka transaction (a produce error, a transaction the
  broker aborted, a local queue that stays full for `retry_budget_s`) aborts it and
  raises `ReplayFromOffsetsError`: the worker restarts its session from the last
  committed offsets and decodes those source transactions again from the WAL (their
  restart LSN and the reorder buffer's spill), so nothing is published twice. A
  retriable failure of `commit_transaction` itself retries the commit, never the
  records, because the commit may already have happened; when that budget is spent the
  outcome is unknown: `RestartableError`. Fencing and other fatal producer errors:
  `FencedError` / `RestartableError`. A record over `kafka.message_max_bytes`, which
  every replay would produce again, aborts the Kafka transaction and raises
  `RecordTooLargeError` (fatal), naming the topic and the change's LSN.
- Own topics: the producer never auto-creates a topic (`ensure_topics` creates each
  before its first record). The offsets and schema-history topics are verified to be
  the ones pgcdc created (connectors.kafka.topics: compacted, one partition, same topic
  id) at `start`, before the offset is read and after, then before an offset record is
  written at most every few seconds, and after a failed commit. A topic that is not
  raises `OffsetsTopicError` (fatal); the open Kafka transaction is then not committed.

Large transactions. A source transaction is never split: however large, it is one
Kafka transaction. Kafka transactions have no size limit, only a time limit: the
producer's `transaction.timeout.ms` (`settings.kafka.transaction_timeout_ms`, 15 min
by default), which the broker caps at its `transaction.max.timeout.ms`. A Kafka
transaction still open when that time is nearly spent raises `TransactionTimeoutError`
(fatal: a restart would fail the same way), naming both settings to raise. Streaming
mode (publishing an in-progress source transaction into an open Kafka transaction,
stream_abort → abort_transaction) is not implemented: with one Kafka transaction per
slot it would block every other transaction behind the streamed one anyway.

Driver protocol: `sink = KafkaSink(settings, on_committed)`; `last = sink.start()`
(resume at `last.restart_lsn`, skip commits with end LSN <= `last.confirmed_lsn`); the
plugin context's writer is `sink.write`; after each plugin `commit` callback (or
heartbeat) `sink.end_source_txn(end_lsn, restart_lsn, schema_version)`; `sink.idle()`
when the WAL source has nothing more buffered; `sink.poll()` while idle;
`sink.close()` on SIGTERM. After `ReplayFromOffsetsError` the sink is spent: close it
and start a fresh one (its `init_transactions` ends whatever the broker still holds).

Non-transactional logical messages are written into the current batch and committed
with it; they carry no commit LSN, so a crash between their decoding and the next
committed offset can publish them again after restart (at-least-once).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import structlog
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from connectors.kafka.client_log import client_conf
from connectors.kafka.native_produce import direct_producer
from connectors.kafka.offsets import (
    OffsetRecord,
    history_topic,
    offsets_topic,
    read_last_offset,
)
from connectors.kafka.security import PROBE_S, check_broker, security_conf
from connectors.kafka.topics import STATE_TOPIC_CONFIG, STATE_TOPIC_PARTITIONS, TopicGuard
from service.backoff import Backoff
from service.config import Settings
from service.errors import (
    BrokerUnavailableError,
    ConfigError,
    FencedError,
    OffsetsTopicError,
    PgcdcError,
    RecordTooLargeError,
    ReplayFromOffsetsError,
    RestartableError,
    TransactionTimeoutError,
)
from service.lsn import format_lsn
from service.output.api import OutputRecord, RecordRun

log = structlog.get_logger(__name__)

RETRY_BUDGET_S = 60.0
# librdkafka's local queue: the only place produced records wait, so this bounds the
# sink's memory (the records are not kept anywhere else).
QUEUE_MAX_KBYTES = 64 * 1024
# A Kafka transaction this close to its timeout is given up before the broker aborts it.
_TIMEOUT_MARGIN = 0.9
_OP_TIMEOUT_S = 30.0
_BACKOFF_START_S, _BACKOFF_MAX_S = 0.2, 5.0
_POLL_EVERY = 1000
# Under the native loop, runs shorter than this (a small transaction's few records, its
# BEGIN and END) are held and produced together before the Kafka commit, or once the
# held ones reach HELD_MAX_RECORDS records or HELD_MAX_BYTES bytes: librdkafka's broker
# thread is then woken per batch, not per record (under pgbench -c4 it was woken about
# 2,200 times a second, and the worker's thread was switched out 3,500 times).
SHORT_RUN = 16
HELD_MAX_RECORDS = 1024
HELD_MAX_BYTES = 1 << 20
# produce()'s arguments between key and headers, passed by position at their defaults:
# any partition, no callback, no on_delivery, the current time. Every call passes all
# of them so that none is a keyword: CPython's keyword parser makes and hashes a str of
# each keyword name it looks up, per call, and `headers=` made a 1 KB record's produce()
# cost 3.7-4.6 µs against 2.5 µs by position (measured, Debezium's four context headers).
_DEFAULTS = (-1, None, None, 0)
# Admin errors that say the broker could not be reached (not a refusal): retried.
_UNREACHABLE = frozenset({KafkaError._TRANSPORT, KafkaError._TIMED_OUT})
_Headers = list[tuple[str, str | bytes | None]] | None  # as Producer.produce takes them

_FENCED_CODES = frozenset(
    {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
)

OnCommitted = Callable[[int, int], None]


class _Retry(Exception):
    """Internal: a producer call failed in a way that may pass (retry, or abort and replay)."""


class KafkaSink:
    """A transactional producer batching source transactions (see the module docstring)."""

    def __init__(
        self,
        settings: Settings,
        on_committed: OnCommitted | None = None,
        *,
        retry_budget_s: float = RETRY_BUDGET_S,
    ) -> None:
        self.settings = settings
        self.slot = settings.source.slot
        self.on_committed = on_committed
        self.retry_budget_s = retry_budget_s
        self._op_timeout = min(_OP_TIMEOUT_S, retry_budget_s)
        k = settings.kafka
        self.max_batch_txns = k.max_batch_txns
        self.max_batch_bytes = int(k.max_batch_bytes)
        self.max_batch_age_s = float(k.max_batch_age_s)
        self.transaction_timeout_s = k.transaction_timeout_ms / 1000
        self.offsets_topic = offsets_topic(settings)
        conf: dict[str, Any] = {
            "bootstrap.servers": k.bootstrap_servers,
            "transactional.id": settings.transactional_id,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            # Kafka Connect's Java producer (so Debezium) puts a keyed record in partition
            # toPositive(murmur2(key)) % partitions; librdkafka's default (consistent_random,
            # CRC32) places keys elsewhere in a topic of several partitions. murmur2_random
            # is the Java producer's rule for keys (tests/integration/test_partitioning_kafka).
            "partitioner": "murmur2_random",
            "compression.type": k.compression_type,
            "message.max.bytes": k.message_max_bytes,
            "transaction.timeout.ms": k.transaction_timeout_ms,
            "queue.buffering.max.messages": 500_000,
            "queue.buffering.max.kbytes": QUEUE_MAX_KBYTES,
            "message.timeout.ms": 300_000,
            # Every topic is created by `ensure_topics` before anything is produced to it.
            # A produce that auto-created a deleted offsets topic would give it the
            # broker's defaults (cleanup.policy=delete) and write offsets into it (issue 27).
            "allow.auto.create.topics": False,
            # No record has a delivery callback (a Kafka transaction's commit is what
            # says its records are written): a delivered record is freed by librdkafka's
            # broker thread, and only a failed one comes back to `poll` (on the worker's
            # thread it was 15% of a snapshot's publishing, one report per record).
            "delivery.report.only.error": True,
        }
        conf.update(security_conf(settings))
        self._producer = Producer(client_conf(conf))
        # Runs of records go through the native loop where it may be used (None: one
        # produce() per record; connectors.kafka.native_produce).
        self._direct = direct_producer(self._producer, str(conf.get("client.id", "rdkafka")))
        admin_conf = {"bootstrap.servers": k.bootstrap_servers, **security_conf(settings)}
        self._admin = AdminClient(client_conf(admin_conf))
        self._known_topics: set[str] = set()
        # The offsets and schema-history topics must stay the ones pgcdc created
        # (connectors.kafka.topics): verified at start and before offsets are written.
        self.guard = TopicGuard(
            self._admin, (self.offsets_topic, history_topic(settings)), self._op_timeout
        )
        # The open batch. Invariant: `_pending` is the offset it will commit, set only at
        # a source-transaction end; `_bytes` and `_txns` count what was produced into the
        # Kafka transaction in progress. Its records themselves are not kept: a failed
        # Kafka transaction is replayed from the WAL (ReplayFromOffsetsError).
        self._staged: list[OutputRecord] = []
        # Short runs held for one produce (SHORT_RUN), in order, with their records' and
        # bytes' count; part of the open Kafka transaction, dropped when it aborts.
        self._held: list[RecordRun] = []
        self._held_records = 0
        self._held_bytes = 0
        self._bytes = 0
        self._txns = 0
        self._in_txn = False
        self._doomed = False  # the open Kafka transaction failed and must be aborted
        # True from a source transaction's first record to its `end_source_txn`: the open
        # Kafka transaction then holds part of a source transaction and must never be
        # committed (issue 11, defect 1); `close` aborts it instead.
        self._mid_source_txn = False
        # Set when a retry budget was spent or a commit's outcome is unknown: `close`
        # then neither aborts (a commit may be in flight: only a fresh producer's
        # init_transactions may end it) nor waits out a second budget (issue 11, defect 7).
        self._gave_up = False
        self._opened_at = 0.0
        self._pending: OffsetRecord | None = None
        self._since_poll = 0
        self.last_committed: OffsetRecord | None = None
        self.started = False
        self.dead = False  # the producer hit a fatal error (fenced): it can do nothing more
        # Counters for metrics and benchmarks.
        self.kafka_txns = 0
        self.records_sent = 0
        self.retries = 0
        self.aborts = 0

    # --- life cycle ------------------------------------------------------------------

    def start(self) -> OffsetRecord | None:
        """Fence older producers of this id, then return the last committed offset.

        The offsets and schema-history topics are created if missing and verified to be
        pgcdc's (`OffsetsTopicError` otherwise) before and after the offset is read. A
        connection failure no retry cures (`connectors.kafka.security.check_broker`:
        TLS, SASL credentials) raises its fatal error first, within seconds. A
        sink whose guard already holds pins (a replay's fresh sink, `TopicGuard.adopt`)
        creates nothing: its topics must still be the earlier session's. A broker that
        cannot be reached is retried for the one retry budget of the start (topics and
        init_transactions together), then `BrokerUnavailableError`."""
        backoff = Backoff(self.retry_budget_s, _BACKOFF_START_S, _BACKOFF_MAX_S)
        # A wrong CA, certificate, password or security protocol is fatal here, within
        # seconds, instead of being retried for the whole budget below (which the probe
        # of an unreachable broker is part of).
        check_broker(self.settings, probe_s=min(PROBE_S, backoff.remaining()))
        state = list(self.guard.topics)
        if self.guard.pinned:
            self._known_topics.update(state)
        else:
            self.ensure_topics(state, compact=True, backoff=backoff)
        self.guard.verify()
        self._connect_producer(backoff)
        while True:
            try:
                self._producer.init_transactions(self._call_timeout(backoff))
                break
            except KafkaException as exc:
                err = exc.args[0]
                if err.code() == KafkaError.INVALID_TRANSACTION_TIMEOUT:
                    ms = self.settings.kafka.transaction_timeout_ms
                    raise ConfigError(
                        f"Kafka refused transaction.timeout.ms={ms}"
                        " (kafka.transaction_timeout_ms): it exceeds the broker's "
                        "transaction.max.timeout.ms; lower the one or raise the other",
                        field="kafka.transaction_timeout_ms",
                    ) from exc
                self._raise_if_fatal(err, "init_transactions")
                if backoff.spent():
                    raise BrokerUnavailableError(
                        f"Kafka at {self.settings.kafka.bootstrap_servers} did not accept "
                        f"init_transactions for {self.settings.transactional_id} within "
                        f"{self.retry_budget_s:.0f}s (kafka.retry_budget_s): {err.str()}"
                    ) from exc
                log.warning("kafka_retry", op="init_transactions", error=err.str())
                backoff.sleep()
        self.started = True
        last = read_last_offset(self.settings, self.slot)
        self.guard.verify()  # the offset just read came from the topic verified above
        self.last_committed = last
        return last

    def close(self, *, commit: bool = True) -> None:
        """Commit what is complete, then let the producer go (SIGTERM path).

        A Kafka transaction is committed only at a source-transaction boundary: with
        `commit=False` (the worker is stopping on an exception) or while a source
        transaction is half written, the open Kafka transaction is aborted instead; the
        stored offsets then still point before everything in it, so a restart decodes
        it all again. A fenced (dead) producer can neither commit nor abort: its open
        transaction is aborted by the broker for the worker that fenced it.
        """
        if self.dead:
            self._drop_held()
            return
        if self._gave_up:
            self._drop_held()
            self._producer.purge()  # the broker is gone or in doubt: nothing to wait for
            return
        if commit and self._pending is not None and not self._mid_source_txn:
            self.flush()
        elif self._in_txn:
            try:
                self._abort()
            except _Retry as exc:
                log.warning("kafka_abort_failed", error=str(exc))
        if self._in_txn:  # could not abort: a fresh producer's init_transactions will
            self._producer.purge()
            return
        self._producer.flush(self._op_timeout)

    # --- topics ----------------------------------------------------------------------

    def ensure_topics(
        self, topics: list[str], *, compact: bool = False, backoff: Backoff | None = None
    ) -> None:
        """Create the topics that do not exist yet (compacted ones for offsets/history).

        A broker that cannot be reached is retried within `backoff` (default: a new
        retry budget), then `BrokerUnavailableError`; a creation the broker refuses
        for good (not `retriable()`) raises it at once."""
        missing = [t for t in topics if t not in self._known_topics]
        if not missing:
            return
        backoff = backoff or Backoff(self.retry_budget_s, _BACKOFF_START_S, _BACKOFF_MAX_S)
        while True:
            try:
                self._create_missing(missing, compact, self._call_timeout(backoff))
                break
            except _Retry as exc:
                if backoff.spent():
                    raise BrokerUnavailableError(
                        f"Kafka at {self.settings.kafka.bootstrap_servers} stayed unreachable "
                        f"for {self.retry_budget_s:.0f}s (kafka.retry_budget_s): {exc}"
                    ) from exc
                log.warning("kafka_retry", op="ensure_topics", error=str(exc))
                backoff.sleep()
        self._known_topics.update(missing)

    def _create_missing(self, topics: list[str], compact: bool, timeout_s: float) -> None:
        """One attempt of `ensure_topics`; `_Retry` when it may pass."""
        try:
            existing = set(self._admin.list_topics(timeout=timeout_s).topics)
        except KafkaException as exc:
            raise _Retry(f"cannot list Kafka topics: {exc}") from exc
        create = [t for t in topics if t not in existing]
        if not create:
            return
        config = STATE_TOPIC_CONFIG if compact else {}
        partitions = STATE_TOPIC_PARTITIONS if compact else -1
        futures = self._admin.create_topics(
            [
                NewTopic(t, num_partitions=partitions, replication_factor=-1, config=config)
                for t in create
            ],
            operation_timeout=timeout_s,
        )
        for topic, fut in futures.items():
            try:
                fut.result()
            except KafkaException as exc:
                err = exc.args[0]
                if err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    continue
                if err.retriable() or err.code() in _UNREACHABLE:
                    raise _Retry(f"cannot create topic {topic}: {err.str()}") from exc
                raise BrokerUnavailableError(f"cannot create topic {topic}: {err.str()}") from exc

    def _connect_producer(self, backoff: Backoff) -> None:
        """Have the producer connect before `init_transactions`: one metadata request
        for the offsets topic, on the producer's own connection. Called while that
        connection is still being set up, init_transactions found no coordinator and
        waited for librdkafka's next 500 ms coordinator query about every other time:
        0.505 s against 0.055 s, and 0.07 s in all with this request first (fresh
        producers with the sink's configuration against the shared Kafka 4.1.1, six
        runs each), so a worker's start waited half a second for nothing. A failure
        here is only logged: init_transactions below retries and reports the broker."""
        try:
            self._producer.list_topics(self.offsets_topic, timeout=self._call_timeout(backoff))
        except KafkaException as exc:
            log.debug("kafka_producer_connect_failed", error=str(exc))

    def _call_timeout(self, backoff: Backoff) -> float:
        """A blocking producer or admin call's timeout: the usual one, but not past the
        retry budget (at least a second, so a call is never made to fail at once)."""
        return max(1.0, min(self._op_timeout, backoff.remaining()))

    # --- the data path ---------------------------------------------------------------

    def write(self, lsn: int, xid: int, record: object) -> None:
        """The PluginContext writer: one serialized record of the current batch."""
        if not isinstance(record, OutputRecord):
            raise PgcdcError(
                f"Kafka sink got {type(record).__name__}, not an OutputRecord", lsn=lsn, xid=xid
            )
        self._enter(record.topic, record.size)
        if self._direct is not None:
            self._hold(
                RecordRun(
                    record.topic, [record.key], [record.value], [lsn], record.headers, record.op
                ),
                record.size,
            )
            self._sent(1)
            return
        try:
            self._produce(record, lsn)
        except _Retry as exc:
            self._abort_for_replay(exc, lsn)

    def write_run(self, lsn: int, xid: int, run: RecordRun) -> None:
        """The PluginContext run writer: `write` for each record of `run`, in order, with
        the checks done once (one topic) and the headers converted once. Under the
        native loop (`_direct`) a short run is held and a long one enqueued by it
        (`_write_direct`), and a record it stopped at goes through produce() like any
        other (its error raised and handled there)."""
        topic, size = run.topic, run.size
        self._enter(topic, size)
        if self._direct is not None:
            self._write_direct(run, size)
            self._sent(len(run.values))
            return
        headers: _Headers = list(run.headers) if run.headers else None
        produce = self._producer.produce
        partition, callback, on_delivery, timestamp = _DEFAULTS
        keys, at = run.keys, 0
        try:
            for at, value in enumerate(run.values):
                key = keys[at]
                try:
                    produce(topic, value, key, partition, callback, on_delivery, timestamp, headers)
                except (BufferError, KafkaException):
                    self._produce_retrying(topic, value, key, headers, run.lsns[at])
        except _Retry as exc:
            self._abort_for_replay(exc, run.lsns[at])
        self._sent(len(run.values))

    def write_runs(self, lsn: int, xid: int, runs: list[RecordRun]) -> None:
        """The PluginContext runs writer: `write_run` of each of `runs` (a transaction's
        runs of several tables), in order, in one call; the records counted (and the
        producer served) once after the last."""
        if self._direct is None:
            for run in runs:
                self.write_run(lsn, xid, run)
            return
        n = 0
        for run in runs:
            size = run.size
            self._enter(run.topic, size)
            self._write_direct(run, size)
            n += len(run.values)
        self._sent(n)

    def _write_direct(self, run: RecordRun, size: int) -> None:
        """Under the native loop: hold a short run, or produce a long one (after the
        runs held before it, so that every partition keeps the order written)."""
        if len(run.values) < SHORT_RUN:
            self._hold(run, size)
            return
        self._produce_held()
        self._write_run_direct(run.topic, run)

    def _hold(self, run: RecordRun, size: int) -> None:
        """Hold `run` for `_produce_held`; produce what is held once it is enough."""
        self._held.append(run)
        self._held_records += len(run.values)
        self._held_bytes += size
        if self._held_records >= HELD_MAX_RECORDS or self._held_bytes >= HELD_MAX_BYTES:
            self._produce_held()

    def _produce_held(self) -> None:
        """Produce the held runs, in order (a failure aborts the Kafka transaction for a
        replay, naming the change of the record it failed at, as any produce does)."""
        held = self._held
        if not held:
            return
        self._held = []
        self._held_records = self._held_bytes = 0
        for run in held:
            self._write_run_direct(run.topic, run)

    def _drop_held(self) -> None:
        """The open Kafka transaction ends without them: forget the held runs."""
        self._held = []
        self._held_records = self._held_bytes = 0

    def _write_run_direct(self, topic: str, run: RecordRun) -> None:
        """`write_run`'s loop through the native loop (connectors.kafka.native_produce);
        the caller counts the records (`_sent`)."""
        direct: Any = self._direct
        keys, values, headers = run.keys, run.values, run.headers or ()
        at, n = 0, len(values)
        try:
            while at < n:
                at, _ = direct.produce(topic, keys, values, at, headers)
                if at < n:
                    # librdkafka refused this one (its queue full, the transaction
                    # failed, ...): produce() raises why, and waits out a full queue.
                    listed: _Headers = list(headers) if headers else None
                    self._produce_retrying(topic, values[at], keys[at], listed, run.lsns[at])
                    at += 1
        except _Retry as exc:
            self._abort_for_replay(exc, run.lsns[at])

    def _enter(self, topic: str, size: int) -> None:
        """Before producing `size` bytes to `topic`: the topic exists, a Kafka
        transaction is open, and the batch is mid source transaction."""
        if topic not in self._known_topics:
            self.ensure_topics([topic])
        if not self._in_txn:
            self._begin_with_retry()
        self._mid_source_txn = True
        self._bytes += size

    def stage(self, topic: str, key: bytes, value: bytes) -> None:
        """Add a record to the next commit, just before its offset record."""
        self.ensure_topics([topic], compact=True)
        self._staged.append(OutputRecord(topic, key, value))

    def end_source_txn(
        self,
        confirmed_lsn: int,
        restart_lsn: int,
        schema_version: int,
    ) -> bool:
        """A source transaction (or heartbeat) is complete; commit if the batch is full.

        Returns True when a Kafka transaction was committed.
        """
        if self._pending is None and not self._in_txn:
            self._opened_at = time.monotonic()  # a batch of offset-only transactions starts
        self._mid_source_txn = False
        self._pending = OffsetRecord(
            self.slot, confirmed_lsn, restart_lsn, schema_version, int(time.time() * 1000)
        )
        self._txns += 1
        if (
            self._txns >= self.max_batch_txns
            or self._bytes >= self.max_batch_bytes
            or time.monotonic() - self._opened_at >= self.max_batch_age_s
        ):
            self.flush()
            return True
        return False

    def idle(self) -> bool:
        """The WAL source has nothing more buffered: commit what is complete. True if
        committed. (The adaptive part of batching: at low load every source transaction
        is committed as soon as it is decoded; under load the caps decide.)"""
        if self._pending is None or self._mid_source_txn:
            return False
        self.flush()
        return True

    def poll(self) -> bool:
        """Serve producer events; commit a complete batch that is too old. True if committed."""
        self._poll(0)
        self._admin.poll(0)  # its queued log lines (connectors.kafka.client_log)
        if (
            self._pending is not None
            and not self._mid_source_txn
            and time.monotonic() - self._opened_at >= self.max_batch_age_s
        ):
            self.flush()
            return True
        return False

    def flush(self) -> None:
        """Commit the batch up to the last completed source transaction."""
        if self._pending is None and not self._staged:
            return
        if self._mid_source_txn:
            raise PgcdcError(
                "Kafka sink asked to commit in the middle of a source "
                "transaction; only whole source transactions are committed"
            )
        offset = self._pending or self.last_committed
        if offset is None:
            raise PgcdcError("Kafka sink asked to commit before any source transaction ended")
        deadline = time.monotonic() + self.retry_budget_s
        if self._doomed:
            self._abort_for_replay(_Retry("an earlier call failed"), offset.confirmed_lsn)
        if self.guard.due():
            # Raised here, the open Kafka transaction is aborted by `close(commit=False)`.
            self.guard.verify()
        if not self._in_txn:
            # Only offset or staged records (heartbeat, snapshot progress): nothing to
            # replay, so a failing begin is retried in place.
            self._begin_with_retry()
        try:
            self._produce_held()
            for rec in self._staged:
                self._produce(rec, offset.confirmed_lsn)
            record = OutputRecord(self.offsets_topic, self.slot.encode(), offset.encode())
            self._produce(record, offset.confirmed_lsn)
            self._commit(deadline)
        except _Retry as exc:
            self._abort_for_replay(exc, offset.confirmed_lsn)
        self.kafka_txns += 1
        self._staged.clear()
        self._bytes = 0
        self._txns = 0
        self._pending = None
        self.last_committed = offset
        if self.on_committed is not None:
            self.on_committed(offset.confirmed_lsn, offset.restart_lsn)

    # --- producer calls and error mapping ----------------------------------------------

    def _raise_if_fatal(self, err: KafkaError, op: str) -> None:
        if err.fatal() or err.code() in _FENCED_CODES:
            self.dead = True
            # A broker that aborts a timed-out transaction bumps the producer's epoch,
            # which looks like fencing: say what really happened.
            self._check_timeout(op, err.str(), margin=1.0)
        if err.code() in _FENCED_CODES or (err.fatal() and "fenced" in err.str().lower()):
            raise FencedError(
                f"another worker with transactional.id {self.settings.transactional_id} "
                f"took over slot {self.slot}; this worker must stop ({op}: {err.str()})"
            )
        if err.fatal():
            raise RestartableError(f"Kafka producer failed fatally in {op}: {err.str()}")

    def _poll(self, timeout: float) -> None:
        """producer.poll, whose KafkaException is a fatal error librdkafka raised since the
        last call (the producer has no error_cb): a worker that took over fenced this one
        between two produce calls, say. Raised as the produce and commit paths raise it
        (`_raise_if_fatal`: FencedError naming the slot), not as an uncaught exception."""
        try:
            self._producer.poll(timeout)
        except KafkaException as exc:
            # `_classify` raises what is fatal; the rest is no retry of a produce here
            reason = self._classify(exc, "poll")
            raise RestartableError(f"Kafka producer failed in {reason}") from exc

    def _classify(self, exc: KafkaException, op: str) -> _Retry:
        err = exc.args[0]
        if not isinstance(err, KafkaError):
            return _Retry(f"{op}: {exc}")
        self._raise_if_fatal(err, op)
        return _Retry(f"{op}: {err.str()}")

    def _produce(self, record: OutputRecord, lsn: int | None = None) -> None:
        self._produce_retrying(
            record.topic,
            record.value,
            record.key,
            list(record.headers) if record.headers else None,
            lsn,
        )
        self._sent(1)

    def _produce_retrying(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        headers: _Headers,
        lsn: int | None = None,
    ) -> None:
        """produce(), waiting out a full local queue within the retry budget; a record
        over message.max.bytes is fatal (`_refuse_too_large`); any other failure raises
        _Retry (or fatal). A run's records come here only after a plain produce()
        failed. `lsn`: the record's change, for the error."""
        full_since: float | None = None  # the local queue has been full since then
        while True:
            try:
                self._producer.produce(topic, value, key, *_DEFAULTS, headers)
                break
            except BufferError as exc:
                now = time.monotonic()
                full_since = full_since if full_since is not None else now
                if now - full_since > self.retry_budget_s:
                    raise _Retry(
                        f"produce: librdkafka's queue stayed full for {self.retry_budget_s:.0f}s"
                    ) from exc
                self._check_timeout("produce", "the local queue is full")
                self._poll(0.1)
            except KafkaException as exc:
                err = exc.args[0]
                if isinstance(err, KafkaError) and err.code() == KafkaError.MSG_SIZE_TOO_LARGE:
                    size = len(value or b"") + len(key or b"")
                    size += sum(len(n) + len(v or b"") for n, v in headers or ())
                    self._refuse_too_large(f"a record of {size} bytes", topic, err, lsn)
                if isinstance(err, KafkaError) and err.code() == KafkaError._STATE:
                    self._state_cause(lsn)
                raise self._classify(exc, "produce") from exc

    def _state_cause(self, lsn: int | None) -> None:
        """produce() refused with _STATE inside a Kafka transaction: librdkafka takes no
        more records once the transaction failed (a record the broker refused put it in
        its abortable-error state). commit_transaction cannot commit in that state and
        returns the error that caused it (rd_kafka_txn_require_state); a record the
        broker refused for its size is fatal, anything else goes on as a replay."""
        if not self._in_txn:
            return
        try:
            self._producer.commit_transaction(min(self._op_timeout, 5.0))
        except KafkaException as exc:
            cause = exc.args[0]
            if isinstance(cause, KafkaError) and cause.code() == KafkaError.MSG_SIZE_TOO_LARGE:
                self._refuse_too_large("a record of this Kafka transaction", None, cause, lsn)
            return
        # Not reachable in librdkafka's state machine. If it were, the transaction's records
        # were committed without their offset record, and the replay from the stored
        # offsets publishes them again: the error says so.
        self._in_txn, self._gave_up = False, True
        raise RestartableError(
            "produce was refused with _STATE, yet commit_transaction then committed: the "
            "records of that Kafka transaction went out without their offset and are "
            "published again from the stored offsets",
            lsn=lsn,
        )

    def _abort_before_fatal(self) -> None:
        """Abort the open Kafka transaction before a fatal error, briefly; a failure is
        only logged (the fresh producer of a restart aborts it then)."""
        try:
            self._producer.abort_transaction(min(self._op_timeout, 5.0))
            self._in_txn = False
        except KafkaException as exc:
            log.warning("kafka_abort_failed", error=str(exc))

    def _refuse_too_large(
        self, what: str, topic: str | None, err: KafkaError, lsn: int | None
    ) -> None:
        """Raise RecordTooLargeError for `what`, having aborted the open Kafka transaction:
        Kafka refuses the record whenever it is sent, so a replay would loop on it (as
        Debezium's task fails on RecordTooLargeException)."""
        self._abort_before_fatal()
        limit = self.settings.kafka.message_max_bytes
        raise RecordTooLargeError(
            f"{what} is larger than Kafka takes ({err.str()}): the producer sends at most "
            f"kafka.message_max_bytes={limit} bytes before compression, and the broker "
            "takes at most the topic's max.message.bytes (the broker's message.max.bytes) "
            "after it. Raise kafka.message_max_bytes (PGCDC_KAFKA__MESSAGE_MAX_BYTES) and "
            "the topic's max.message.bytes together",
            lsn=lsn,
            relation=topic,
        )

    def _sent(self, n: int) -> None:
        """Count `n` produced records; serve delivery callbacks every _POLL_EVERY."""
        self.records_sent += n
        self._since_poll += n
        if self._since_poll >= _POLL_EVERY:
            self._since_poll = 0
            self._poll(0)
            self._check_timeout("produce", "still producing")

    def _check_timeout(self, op: str, why: str, *, margin: float = _TIMEOUT_MARGIN) -> None:
        """Stop before the broker aborts a Kafka transaction for its age (see the module
        docstring): a restart would replay the same source transaction into the same
        limit, so this is fatal."""
        if not self._in_txn:
            return
        age = time.monotonic() - self._opened_at
        if age < self.transaction_timeout_s * margin:
            return
        ms = self.settings.kafka.transaction_timeout_ms
        self._abort_before_fatal()
        raise TransactionTimeoutError(
            f"a Kafka transaction was still open after {age:.0f}s ({op}: {why}): the source "
            f"transaction could not be published within transaction.timeout.ms={ms}. Raise "
            "the broker's transaction.max.timeout.ms and kafka.transaction_timeout_ms "
            "(PGCDC_KAFKA__TRANSACTION_TIMEOUT_MS) together, or make the transaction smaller",
            lsn=self._pending.confirmed_lsn if self._pending is not None else None,
        )

    def _begin(self) -> None:
        try:
            self._producer.begin_transaction()
        except KafkaException as exc:
            raise self._classify(exc, "begin_transaction") from exc
        self._in_txn = True
        self._opened_at = time.monotonic()

    def _begin_with_retry(self) -> None:
        """begin_transaction, retried with backoff: nothing is in the transaction yet."""
        backoff = Backoff(self.retry_budget_s, _BACKOFF_START_S, _BACKOFF_MAX_S)
        while True:
            try:
                self._begin()
                return
            except _Retry as exc:
                self.retries += 1
                if backoff.spent():
                    self._gave_up = True
                    raise BrokerUnavailableError(
                        f"Kafka did not begin a transaction within {self.retry_budget_s:.0f}s "
                        f"(kafka.retry_budget_s): {exc}"
                    ) from exc
                log.warning("kafka_retry", op="begin_transaction", error=str(exc))
                backoff.sleep()

    def _abort_for_replay(self, exc: _Retry, lsn: int) -> None:
        """The open Kafka transaction failed after records went into it: abort it and
        have the worker decode them again (the sink keeps no copy; see the docstring)."""
        self.retries += 1
        try:
            self._abort()
        except _Retry as abort_exc:  # the fresh producer's init_transactions aborts it
            log.warning("kafka_abort_failed", error=str(abort_exc))
            self._gave_up = True
        self._mid_source_txn = False
        log.warning("kafka_txn_replay", error=str(exc), lsn=format_lsn(lsn))
        raise ReplayFromOffsetsError(
            f"Kafka transaction aborted ({exc}); replaying from the last committed offsets",
            lsn=lsn,
        ) from exc

    def _abort(self) -> None:
        """abort_transaction; a failure that may be retried raises _Retry."""
        self._drop_held()
        if not self._in_txn:
            return
        try:
            self._producer.abort_transaction(self._op_timeout)
        except KafkaException as exc:
            raise self._classify(exc, "abort_transaction") from exc
        self.aborts += 1
        self._in_txn = False
        self._doomed = False

    def _check_topics_after(self, exc: KafkaException) -> None:
        """After a failed commit: a produce to a deleted offsets topic stalls the commit
        until it times out, so the topics are verified (briefly: a broker outage fails
        commits too, and is handled as before). A lost topic is fatal; the commit is then
        in doubt, and only a fresh producer's init_transactions may end it."""
        try:
            self.guard.verify(min(self._op_timeout, 5.0))
        except OffsetsTopicError as lost:
            self._gave_up = True
            raise lost from exc
        except BrokerUnavailableError as unknown:
            log.warning("kafka_topics_unverified", error=str(unknown))

    def _commit(self, deadline: float) -> None:
        """commit_transaction, retried in place while the error says a retry is safe."""
        backoff = _BACKOFF_START_S
        while True:
            try:
                self._producer.commit_transaction(self._op_timeout)
                self._in_txn = False
                return
            except KafkaException as exc:
                err = exc.args[0]
                self._raise_if_fatal(err, "commit_transaction")
                if err.code() == KafkaError.MSG_SIZE_TOO_LARGE:  # the broker refused one
                    lsn = self._pending.confirmed_lsn if self._pending is not None else None
                    self._refuse_too_large("a record of this Kafka transaction", None, err, lsn)
                self._check_topics_after(exc)
                if err.txn_requires_abort():
                    self._doomed = True
                    raise _Retry(f"commit_transaction: {err.str()}") from exc
                if not err.retriable() or time.monotonic() + backoff > deadline:
                    # Unknown outcome: only a fresh producer (init_transactions) can tell,
                    # so the worker restarts from the stored offsets.
                    self._gave_up = True
                    raise RestartableError(
                        f"commit_transaction failed with an unknown outcome: {err.str()}"
                    ) from exc
                log.warning("kafka_retry", op="commit_transaction", error=err.str())
                time.sleep(backoff)
                backoff = min(backoff * 2, _BACKOFF_MAX_S)
