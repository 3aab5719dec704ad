"""Structured logging for pgcdc: one structlog pipeline for our own and for foreign logs.

What it receives: calls such as `get_logger(__name__).info("slot_created", slot=...)` from
any module, plus every record logged through the standard `logging` module by libraries.
What it hands on: one line per call on the configured stream (stderr by default, so that
`pgcdc peek` can keep stdout for decoded output).

Guarantees:
- **Format.** `LogSettings.format` = `json` writes one JSON object per line (containers,
  files, anything that is not a terminal); `console` writes a readable, aligned line;
  `auto` (the default) picks `console` when the stream is a TTY and `json` otherwise.
- **Context.** Values bound with `structlog.contextvars.bind_contextvars` (or
  `bind_position`) appear on every line logged in that context, in particular `slot`,
  `xid` and `lsn`. They are merged into foreign (stdlib) records too.
- **LSNs** are rendered the way PostgreSQL prints them (`16/B374D848`): an int under the
  key `lsn` or any key ending in `_lsn` is formatted with `service.errors.format_lsn`.
- **Event names** are stable snake_case identifiers (`EVENT_NAME_RE`), the thing alerting
  and log queries key on; variable data go in key/value pairs, never in the event.
- **Errors.** When a `PgcdcError` is logged with `exc_info`, its context (lsn, xid,
  relation, field) is copied into `error_*` keys, so it is searchable without parsing the
  traceback.
- **Secrets never reach the stream.** pydantic `SecretStr` values render as `**********`;
  as a second line of defence any key named like a secret (`password`, `secret`,
  `sasl_password`, `basic_auth`, ...; at any nesting depth) is masked, and so are
  `password=...` pairs of libpq connection strings and `user:password@` in URLs.

Configuration is global (structlog and the root stdlib logger), done once at start by
`configure_logging`; calling it again replaces the previous configuration.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TextIO

import structlog
from pydantic import SecretStr
from structlog.typing import EventDict, Processor, WrappedLogger

from service.config import LogSettings
from service.errors import PgcdcError
from service.lsn import format_lsn

__all__ = [
    "EVENT_NAME_RE",
    "MASK",
    "SECRET_KEYS",
    "bind_position",
    "bound_position",
    "configure_logging",
    "format_lsn",
    "format_lsn_fields",
    "get_logger",
    "mask_secrets",
    "reset_logging",
]

MASK = "**********"  # what pydantic's SecretStr prints, so both look the same in a log

# Keys whose values are secrets wherever they occur (compared lower-cased). Settings keys
# (`password`, `sasl_password`, `basic_auth`) are here, plus the usual suspects.
SECRET_KEYS = frozenset(
    {
        "password",
        "passwd",
        "secret",
        "sasl_password",
        "basic_auth",
        "token",
        "api_key",
        "authorization",
    }
)
_SECRET_SUFFIXES = ("_password", "_secret", "_token")

# A stable event name: lower-case snake_case, starting with a letter.
EVENT_NAME_RE = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$")

# `password=...` in a libpq connection string (quoted or not) and `user:pass@` in a URL.
_DSN_PASSWORD_RE = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)
_URL_USERINFO_RE = re.compile(r"(://[^/\s:@]+:)[^/\s@]+(@)")

_LEVELS: Mapping[str, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


class _PgcdcHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The root handler configure_logging installs (a class of its own so it can be found
    and replaced on reconfiguration without touching handlers others installed)."""


# --- processors -----------------------------------------------------------------------


def format_lsn_fields(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """Render int values of `lsn` and `*_lsn` keys as PostgreSQL prints LSNs (X/X)."""
    for key, value in event_dict.items():
        if (
            (key == "lsn" or key.endswith("_lsn"))
            and isinstance(value, int)
            and not isinstance(value, bool)
        ):
            event_dict[key] = format_lsn(value)
    return event_dict


def _is_secret_key(key: object) -> bool:
    if not isinstance(key, str):
        return False
    lowered = key.lower()
    return lowered in SECRET_KEYS or lowered.endswith(_SECRET_SUFFIXES)


def _mask_text(text: str) -> str:
    if "=" in text:
        text = _DSN_PASSWORD_RE.sub(lambda m: m.group(1) + MASK, text)
    if "@" in text:
        text = _URL_USERINFO_RE.sub(lambda m: m.group(1) + MASK + m.group(2), text)
    return text


def _mask_value(value: Any) -> Any:
    if isinstance(value, str):
        return _mask_text(value)
    if isinstance(value, SecretStr):
        return MASK
    if isinstance(value, Mapping):
        return {
            k: (MASK if _is_secret_key(k) and v is not None else _mask_value(v))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_mask_value(v) for v in value]
    return value


def mask_secrets(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """Mask secret-named keys (at any depth), SecretStr values and passwords in DSNs/URLs."""
    for key, value in event_dict.items():
        if key.startswith("_"):
            continue  # structlog's own bookkeeping (_record, _from_structlog)
        if _is_secret_key(key) and value is not None:
            event_dict[key] = MASK
        else:
            event_dict[key] = _mask_value(value)
    return event_dict


def _exception_of(exc_info: object) -> BaseException | None:
    if isinstance(exc_info, BaseException):
        return exc_info
    if isinstance(exc_info, tuple) and len(exc_info) == 3:
        candidate = exc_info[1]
        return candidate if isinstance(candidate, BaseException) else None
    if exc_info is True:
        return sys.exc_info()[1]
    return None


def add_error_context(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """Copy a logged PgcdcError's lsn/xid/relation/field into `error_*` keys."""
    exc = _exception_of(event_dict.get("exc_info"))
    if isinstance(exc, PgcdcError):
        event_dict.setdefault("error", type(exc).__name__)
        if exc.lsn is not None:
            event_dict.setdefault("error_lsn", format_lsn(exc.lsn))
        if exc.xid is not None:
            event_dict.setdefault("error_xid", exc.xid)
        if exc.relation is not None:
            event_dict.setdefault("error_relation", exc.relation)
        if exc.field is not None:
            event_dict.setdefault("error_field", exc.field)
    return event_dict


def _shared_processors() -> list[Processor]:
    """Run for every line, ours and foreign, before the renderer."""
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        add_error_context,
        format_lsn_fields,
        structlog.processors.StackInfoRenderer(),
    ]


_FIRST_KEYS = ("timestamp", "level", "logger", "event", "slot", "xid", "lsn")


def _order_keys(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """Put the keys a reader scans first (time, level, event, position) at the front."""
    ordered = {key: event_dict.pop(key) for key in _FIRST_KEYS if key in event_dict}
    ordered.update(event_dict)
    return ordered


# Tracebacks as data, without frame locals: a local variable may hold a password.
_dict_tracebacks = structlog.processors.ExceptionRenderer(
    structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
)


def _use_console(fmt: str, stream: TextIO) -> bool:
    match fmt:
        case "console":
            return True
        case "json":
            return False
        case "auto":
            isatty = getattr(stream, "isatty", None)
            return bool(isatty is not None and isatty())
        case _:
            raise ValueError(f"log.format: unknown format {fmt!r}")


# --- configuration --------------------------------------------------------------------


def configure_logging(settings: LogSettings, *, stream: TextIO | None = None) -> None:
    """Configure structlog and the root stdlib logger from `settings` (stderr by default)."""
    out: TextIO = stream if stream is not None else sys.stderr
    level = _LEVELS[settings.level]
    # Tracebacks are rendered to text/data before masking, so that exception messages and
    # frames are masked too; masking runs last for our lines and foreign ones alike.
    renderer: list[Processor]
    if _use_console(settings.format, out):
        colors = bool(out.isatty()) and "NO_COLOR" not in os.environ
        renderer = [
            structlog.processors.format_exc_info,
            mask_secrets,
            structlog.dev.ConsoleRenderer(colors=colors),
        ]
    else:
        renderer = [
            _dict_tracebacks,
            mask_secrets,
            _order_keys,
            structlog.processors.JSONRenderer(),
        ]

    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=_shared_processors(),
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *renderer],
    )
    handler = _PgcdcHandler(out)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    _remove_our_handlers(root)
    root.addHandler(handler)
    root.setLevel(level)
    # The registry client logs every HTTP request at INFO; that is noise, not events.
    for chatty in ("httpx", "httpx2", "httpcore"):
        logging.getLogger(chatty).setLevel(max(level, logging.WARNING))

    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *_shared_processors(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        # Module-level loggers are created at import, before configure_logging runs;
        # not caching lets them follow the configuration made later (and in tests).
        cache_logger_on_first_use=False,
    )


def _remove_our_handlers(root: logging.Logger) -> None:
    for existing in [h for h in root.handlers if isinstance(h, _PgcdcHandler)]:
        root.removeHandler(existing)


def reset_logging() -> None:
    """Undo configure_logging: structlog defaults, our root handler removed, context cleared."""
    _remove_our_handlers(logging.getLogger())
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    """The logger for module `name` (pass `__name__`); its name appears as `logger`."""
    logger: structlog.stdlib.BoundLogger = structlog.stdlib.get_logger(name)
    return logger


# --- context --------------------------------------------------------------------------


def _position(slot: str | None, xid: int | None, lsn: int | None) -> dict[str, Any]:
    values: dict[str, Any] = {}
    if slot is not None:
        values["slot"] = slot
    if xid is not None:
        values["xid"] = xid
    if lsn is not None:
        values["lsn"] = format_lsn(lsn)
    return values


def bind_position(
    *, slot: str | None = None, xid: int | None = None, lsn: int | None = None
) -> None:
    """Bind slot/xid/lsn (those given) to every later line in this context."""
    structlog.contextvars.bind_contextvars(**_position(slot, xid, lsn))


@contextmanager
def bound_position(
    *, slot: str | None = None, xid: int | None = None, lsn: int | None = None
) -> Iterator[None]:
    """Bind slot/xid/lsn for the duration of a block, restoring the previous values."""
    with structlog.contextvars.bound_contextvars(**_position(slot, xid, lsn)):
        yield
