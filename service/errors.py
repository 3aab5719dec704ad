"""The one error hierarchy of pgcdc.

Every error the worker raises on purpose is a `PgcdcError`. Subclasses are split by what
the worker should do about them, not by where they were raised:

- `RetryableError`: a passing condition (broker or registry unreachable, a dropped
  replication connection). The caller backs off and tries again, then gives up with
  the same error once its budget is spent.
- `RestartableError`: the worker's in-memory state can no longer be trusted, but what
  was committed downstream is intact. Restart from the stored offsets.
- `FatalError`: input or configuration that will not get better by retrying (corrupt
  WAL, an unsupported PostgreSQL version, a tuple that disagrees with its table's
  definition, bad configuration). Stop, and say exactly where.

Context is attached as keyword-only attributes (`lsn`, `xid`, `relation`, `field`) and
rendered into the message, so a log line alone says where the problem is. Causes are
chained with `raise ... from exc`.
"""

from __future__ import annotations

from service.lsn import format_lsn


class PgcdcError(Exception):
    """Base of every error pgcdc raises deliberately."""

    def __init__(
        self,
        message: str,
        *,
        lsn: int | None = None,
        xid: int | None = None,
        relation: str | None = None,
        field: str | None = None,
    ) -> None:
        self.message = message
        self.lsn = lsn
        self.xid = xid
        self.relation = relation
        self.field = field
        super().__init__(self._render())

    def _render(self) -> str:
        context = []
        if self.lsn is not None:
            context.append(f"lsn={format_lsn(self.lsn)}")
        if self.xid is not None:
            context.append(f"xid={self.xid}")
        if self.relation is not None:
            context.append(f"relation={self.relation}")
        if self.field is not None:
            context.append(f"field={self.field}")
        if not context:
            return self.message
        return f"{self.message} ({', '.join(context)})"


class RetryableError(PgcdcError):
    """A passing condition: back off and try again."""


class RestartableError(PgcdcError):
    """In-memory state is lost or untrusted; restart from the stored offsets."""


class FatalError(PgcdcError):
    """Input or configuration that retrying will not fix: stop and report."""


# --- WAL reading (xlogreader) -------------------------------------------------------


class WalError(FatalError):
    """Malformed or unexpected WAL. Always carries the LSN where it was found."""


class UnsupportedVersionError(WalError):
    """The WAL page magic names a PostgreSQL version pgcdc has no format table for."""


class WalCorruptionError(WalError):
    """A page header, record header or CRC check failed."""


class UnexpectedTimelineError(WalCorruptionError):
    """A page header carries a timeline ID the timeline history does not assign to its
    page (service.wal.timeline): WAL from another timeline, or from one abandoned past
    its switch point."""


class TimelineHistoryError(FatalError):
    """A timeline history file is malformed, or does not match what pgcdc streamed
    (its timeline is not in the server's history, or the server's history ends that
    timeline at a different switch point)."""


class TimelineDivergedError(FatalError):
    """pgcdc decoded WAL of a timeline past the point where the source's history says
    that timeline ended: what it published from there on belongs to an abandoned
    timeline (an asynchronous standby was promoted without it). `lsn` is the switch
    point."""


class WalEndOfDataError(PgcdcError):
    """The reader needs more bytes than it has been given (not an error in streaming)."""


# --- decoding -----------------------------------------------------------------------


class DecodeError(FatalError):
    """A record's contents could not be decoded, or its type is not in the table."""


class SchemaMismatchError(FatalError):
    """A tuple does not fit the table definition valid at its LSN."""


class UnknownTypeError(FatalError):
    """A column's type OID has no decoder and the configuration does not allow text."""


# --- edges --------------------------------------------------------------------------


class ConfigError(FatalError):
    """Configuration is malformed; `field` names the offending setting."""


class TlsError(FatalError):
    """A TLS connection (source, Kafka or schema registry) failed in a way retrying will
    not fix: the server's certificate is not signed by the configured CA or does not
    name the host, the server refused the client certificate, or one side speaks TLS and
    the other does not. `field` names the setting to fix (`source.sslrootcert`,
    `kafka.security_protocol`, `registry.ca_location`, ...)."""


class KafkaAuthError(FatalError):
    """The broker refused the SASL credentials or mechanism (`field` names which)."""


class RegistryAuthError(FatalError):
    """The schema registry refused the credentials (HTTP 401 or 403)."""


class SourceUnavailableError(RetryableError):
    """The PostgreSQL server or its replication connection cannot be reached."""


class SourceSetupError(FatalError):
    """The source database does not meet pgcdc's requirements (wal_level, privileges)."""


class SourceAuthError(SourceSetupError):
    """The source refused the credentials (wrong password, no pg_hba.conf entry)."""


class SourcePrivilegeError(SourceSetupError):
    """The role pgcdc connects as lacks privileges the worker needs
    (connectors.postgres.privileges). `grants` are the statements a superuser runs to
    give them, every missing one, in the order they were checked; the message ends with
    them, so the log line alone says what to run."""

    def __init__(self, message: str, *, grants: tuple[str, ...]) -> None:
        self.grants = grants
        super().__init__(message)

    def _render(self) -> str:
        return f"{self.message}; as a superuser run: {' '.join(g + ';' for g in self.grants)}"


class SlotTypeError(SourceSetupError):
    """The slot pgcdc is configured with exists but is not a physical slot."""


class SlotBusyError(SourceSetupError):
    """The slot stayed active under another process for longer than the grace period."""


class WalRemovedError(FatalError):
    """WAL needed to continue without a gap has been removed from the server."""


class SlotGapError(WalRemovedError):
    """The slot no longer covers the restart LSN of the stored offsets (it was moved,
    dropped and recreated, or invalidated): resuming would skip what lies between."""


class RestoreCommandError(FatalError):
    """`source.archive`'s restore command failed in a way that is not "the archive has
    no such file": killed by a signal, or exit status above 125 (126 not executable,
    127 not found: the shell's own failures, as PostgreSQL's RestoreArchivedFile treats
    them), or exit 0 without the file at %p, or a file of the wrong size. `command`,
    `file_name` and `status` (the exit status, or -signal) name which."""

    def __init__(
        self, message: str, *, command: str, file_name: str, status: int, lsn: int | None = None
    ) -> None:
        self.command = command
        self.file_name = file_name
        self.status = status
        super().__init__(message, lsn=lsn, field="source.archive")


class OffsetsMissingError(FatalError):
    """No stored offsets, but the schema-history topic shows that an earlier run
    published: the offsets topic was lost, and starting over would silently re-snapshot
    and skip what changed in between."""


class OffsetsTopicError(FatalError):
    """The offsets or schema-history topic is not the one pgcdc created (it is missing,
    was deleted and re-created, is not compacted or has more than one partition): a
    broker with auto.create.topics.enable=true re-creates a deleted topic with its own
    defaults, and trusting one would resume from, or later lose, the wrong offsets.
    `topic` names it; the message says what differs and what to do."""

    def __init__(self, message: str, *, topic: str) -> None:
        self.topic = topic
        super().__init__(message)

    def _render(self) -> str:
        return f"{self.message} (topic={self.topic})"


class BrokerUnavailableError(RetryableError):
    """Kafka cannot be reached or refused the request transiently."""


class RegistryUnavailableError(RetryableError):
    """The schema registry cannot be reached."""


class RegistryRejectedError(FatalError):
    """The schema registry rejected a schema (for example an incompatible change)."""


class ReplayFromOffsetsError(RestartableError):
    """A Kafka transaction failed and was aborted: nothing of it is visible, and the sink
    keeps no copy of its records. The worker restarts its session from the last
    committed offsets (in process), re-decoding those transactions from the WAL."""


class TimelineSwitchReplay(ReplayFromOffsetsError):
    """The source switched timeline at `lsn` after pgcdc had received WAL of the old
    timeline past that point (bytes the promoted server never replayed). The reader
    cannot take bytes back: the worker replays from its stored offsets, on the new
    timeline. If what Kafka already holds was decoded past `lsn`, that replay stops
    with `TimelineDivergedError` instead."""


class TransactionTimeoutError(FatalError):
    """A source transaction could not be published within the Kafka transaction timeout
    (the producer's transaction.timeout.ms, at most the broker's
    transaction.max.timeout.ms); retrying would fail the same way."""


class RecordTooLargeError(FatalError):
    """A record larger than Kafka takes: refused by the producer (over
    kafka.message_max_bytes) or by the broker (over the topic's max.message.bytes). It
    would be refused again after every replay, so the worker stops, naming the topic
    (`relation`), the LSN and both limits."""


class FencedError(FatalError):
    """Another worker with the same transactional.id took over this slot."""


class PluginError(FatalError):
    """An output plugin is missing required callbacks or failed inside one."""


class SpillFileError(RestartableError):
    """A reorder-buffer spill file is unreadable, truncated or not this run's."""


class WalLevelError(DecodeError):
    """An XLOG_PARAMETER_CHANGE lowered wal_level below logical: from this LSN on the WAL
    lacks what decoding needs (full new tuples, old keys, NEW_CID, invalidations)."""
