"""Which implementation of the pure stages runs: the Python reference or the native core.

Receives: the environment variable `PGCDC_IMPL`, read at each call (as psycopg's
`PSYCOPG_IMPL`):
- `python`: the Python stages (`service.wal.reader.XLogReader`), always available;
- `native`: the Rust twins (`service.wal.native.NativeXLogReader`, built from
  service/native into `service._native`); if the extension is not built this is a
  `ConfigError`, never a silent fallback;
- unset or empty: native when the extension imports, else python with a warning
  (`native_core_unavailable`), so a checkout without a Rust build still runs.
Hands on: `xlog_reader_class()`, the reader class to construct, with one interface
(`XLogReaderLike`) whichever it is. Both produce equal records and equal typed errors
(tests/service/wal/test_native_reader.py). And `native_row_core()`: the extension
module whose `RowPlan`/`envelope` the avro plugin's native row encoder uses
(connectors.avro.native_rows), or None for the Python path (fastavro); both write the
same bytes (tests/connectors/avro/test_native_rows*.py); `native_name_cache()` gives the
catalog stage's name resolver (connectors.postgres.catalog_types.CatalogNames) the cache
that encoder reads reg* and aclitem names from. And `native_text_core()`: the
module whose `TextPlan` the text plugin writes test_decoding's lines with
(service.output.native_text), or None for the Python path; both write the same lines
(tests/service/output/test_native_text.py, and the test_decoding differential tests in
both modes).

Callers choose the class once per session, e.g.
`reader = xlog_reader_class()(start_lsn, segment_size=size)`: the decoding session
(`service.app.session`) and the archive reader (`connectors.postgres.archive`) do.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Protocol

import structlog

from service.errors import ConfigError
from service.wal.format import WalFormat
from service.wal.reader import HeaderTuple, XLogReader
from service.wal.record import XLogRecord

if TYPE_CHECKING:
    from service.decode.events import InsertRun, PredecodedRecord

log = structlog.get_logger(__name__)

ENV = "PGCDC_IMPL"
CHOICES = ("python", "native")


class XLogReaderLike(Protocol):
    """What both readers offer (see service.wal.reader for the contract)."""

    @property
    def version(self) -> int | None: ...
    @property
    def wal_format(self) -> WalFormat: ...
    @property
    def end_of_wal(self) -> bool: ...
    @property
    def last_lsn(self) -> int | None: ...
    @property
    def end_lsn(self) -> int: ...
    @property
    def next_lsn(self) -> int: ...
    @property
    def buffered_bytes(self) -> int: ...
    def feed(self, data: bytes, at_lsn: int) -> None: ...
    def records(self) -> Iterator[XLogRecord]: ...
    def walk_headers(self) -> Iterator[HeaderTuple]: ...


class XLogReaderFactory(Protocol):
    """The constructor signature both reader classes share."""

    def __call__(
        self,
        start_lsn: int,
        *,
        segment_size: int = ...,
        prev_lsn: int | None = ...,
        verify_crc: bool = ...,
    ) -> XLogReaderLike: ...


def predecoding(
    reader: XLogReaderLike,
    bare_rmids: Collection[int] = (),
    *,
    runs: bool = False,
    runs_from: int = 0,
    inert_ops: Collection[tuple[int, int]] = (),
) -> Callable[[], Iterator[XLogRecord | PredecodedRecord | InsertRun]] | None:
    """Arm `reader`, when it is the native one, to decode table-change heap records in
    its walk, and to hand on the records of `bare_rmids` (rmgrs the decoder gives no
    events for) without their bodies (`service.decode.native_heap.predecode`), and with
    `runs` its plain inserts, updates and deletes as InsertRuns (none holding a record
    before `runs_from`; the XLOG, Heap and Heap2 records of `inert_ops` inside them):
    its `decoded_records`, whose items the decoding driver takes as they come
    (`Decoding.process`); None, having done nothing, for the Python reader."""
    if isinstance(reader, XLogReader):
        return None
    from service.decode.native_heap import predecode  # noqa: PLC0415 (needs the extension)
    from service.wal.native import NativeXLogReader  # noqa: PLC0415 (needs the extension)

    if not isinstance(reader, NativeXLogReader) or not predecode(
        reader, bare_rmids, runs=runs, runs_from=runs_from, inert_ops=inert_ops
    ):
        return None
    return reader.decoded_records


def native_available() -> bool:
    """Whether the extension module `service._native` imports."""
    try:
        import service._native  # noqa: F401, PLC0415 (probing the optional extension)
    except ImportError:
        return False
    return True


def selected() -> str:
    """`python` or `native`: what `PGCDC_IMPL` asks for, resolved as described above."""
    wanted = os.environ.get(ENV, "").strip().lower()
    if wanted not in ("", *CHOICES):
        raise ConfigError(
            f"{ENV}={wanted!r} is not one of {', '.join(CHOICES)} (or unset for the default)",
            field=ENV,
        )
    if wanted == "python":
        return "python"
    if native_available():
        return "native"
    if wanted == "native":
        raise ConfigError(
            f"{ENV}=native, but the native core (service._native) is not built: run "
            "`pip install -e .` (needs cargo) or set PGCDC_IMPL=python",
            field=ENV,
        )
    log.warning("native_core_unavailable", fallback="python", env=ENV)
    return "python"


def xlog_reader_class() -> XLogReaderFactory:
    """The XLog reader class that `PGCDC_IMPL` selects."""
    if selected() == "native":
        from service.wal.native import NativeXLogReader  # noqa: PLC0415 (needs the extension)

        return NativeXLogReader
    return XLogReader


def native_row_core() -> ModuleType | None:
    """The native core for the avro plugin's row encoder, or None when `PGCDC_IMPL`
    selects python. An extension built before the row encoder existed (no `RowPlan`)
    counts as not built: a ConfigError under `PGCDC_IMPL=native`, else a warning."""
    return _native_core("row encoder", ("RowPlan", "envelope"))


def native_name_cache() -> object | None:
    """A new `service._native.NameCache` (the native image of a catalog name resolver's
    cache, which the row encoder prints reg* and aclitem values from) when the native
    row encoder is selected (`native_row_core`), else None."""
    core = native_row_core()
    cache = None if core is None else getattr(core, "NameCache", None)
    return None if cache is None else cache()


def native_text_core() -> ModuleType | None:
    """The native core for the text plugin's line writer (`TextPlan`), or None when
    `PGCDC_IMPL` selects python; an extension that predates it as `native_row_core`."""
    return _native_core("text writer", ("TextPlan",))


def _native_core(part: str, names: tuple[str, ...]) -> ModuleType | None:
    if selected() != "native":
        return None
    import service._native as core  # noqa: PLC0415 (needs the extension)

    if all(hasattr(core, name) for name in names):
        return core
    if os.environ.get(ENV, "").strip().lower() == "native":
        raise ConfigError(
            f"{ENV}=native, but the native core (service._native) predates the {part}: "
            "rebuild it, or set PGCDC_IMPL=python",
            field=ENV,
        )
    log.warning(f"native_{part.replace(' ', '_')}_unavailable", fallback="python", env=ENV)
    return None
