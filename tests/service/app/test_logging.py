"""service.app.logging: JSON and console rendering, bound slot/xid/lsn, secret masking."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from service.app.logging import (
    EVENT_NAME_RE,
    MASK,
    bind_position,
    bound_position,
    configure_logging,
    get_logger,
    reset_logging,
)
from service.config import LogSettings, Settings
from service.errors import DecodeError

ANSI = re.compile(r"\x1b\[[0-9;]*m")


class FakeTTY(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _clean_logging() -> Iterator[None]:
    root = logging.getLogger()
    level = root.level
    yield
    reset_logging()
    root.setLevel(level)


def json_lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


def test_json_lines_carry_bound_slot_xid_lsn() -> None:
    """After bind_contextvars(slot, xid, lsn) every JSON line has them, the LSN as X/X."""
    out = io.StringIO()
    configure_logging(LogSettings(format="json"), stream=out)
    structlog.contextvars.bind_contextvars(slot="orders", xid=740, lsn=0x16B374D848)
    log = get_logger("pgcdc.test")
    log.info("txn_committed", changes=3)
    log.warning("spill_started", spill_lsn=0x10)
    lines = json_lines(out)
    assert len(lines) == 2
    for line in lines:
        assert line["slot"] == "orders"
        assert line["xid"] == 740
        assert line["lsn"] == "16/B374D848"
        assert line["logger"] == "pgcdc.test"
        assert "timestamp" in line
    assert lines[0]["event"] == "txn_committed"
    assert lines[0]["level"] == "info"
    assert lines[0]["changes"] == 3
    assert lines[1]["spill_lsn"] == "0/10"
    assert list(lines[0])[:4] == ["timestamp", "level", "logger", "event"]


def test_foreign_stdlib_records_are_json_with_context() -> None:
    """A library's stdlib log record goes through the same pipeline and gets the context."""
    out = io.StringIO()
    configure_logging(LogSettings(format="json"), stream=out)
    bind_position(slot="orders", xid=9, lsn=0x1_00000028)
    logging.getLogger("some.library").warning("connection %s lost", "A")
    (line,) = json_lines(out)
    assert line["event"] == "connection A lost"
    assert line["level"] == "warning"
    assert line["logger"] == "some.library"
    assert (line["slot"], line["xid"], line["lsn"]) == ("orders", 9, "1/28")


def test_auto_format_is_json_off_a_tty() -> None:
    """format=auto on a non-TTY stream (a container's stdout) writes JSON."""
    out = io.StringIO()
    configure_logging(LogSettings(format="auto"), stream=out)
    get_logger("t").info("worker_started")
    (line,) = json_lines(out)
    assert line["event"] == "worker_started"


def test_auto_format_is_console_on_a_tty() -> None:
    """format=auto on a TTY writes a readable key=value line with colours, not JSON."""
    out = FakeTTY()
    configure_logging(LogSettings(format="auto"), stream=out)
    with bound_position(slot="orders", xid=740, lsn=0x16B374D848):
        get_logger("t").info("txn_committed", changes=3)
    text = out.getvalue()
    assert "\x1b[" in text  # coloured on a terminal
    plain = ANSI.sub("", text)
    assert not plain.lstrip().startswith("{")
    assert "txn_committed" in plain
    assert "info" in plain
    for pair in ("slot=orders", "xid=740", "lsn=16/B374D848", "changes=3"):
        assert pair in plain


def test_console_format_without_tty_has_no_colours() -> None:
    """format=console forced on a plain file is readable but has no escape codes."""
    out = io.StringIO()
    configure_logging(LogSettings(format="console"), stream=out)
    get_logger("t").info("worker_started", slot="s1")
    text = out.getvalue()
    assert "\x1b[" not in text
    assert "worker_started" in text and "slot=s1" in text


def test_bound_position_restores_previous_context() -> None:
    """bound_position binds for a block only; the outer binding comes back afterwards."""
    out = io.StringIO()
    configure_logging(LogSettings(format="json"), stream=out)
    log = get_logger("t")
    bind_position(slot="orders")
    with bound_position(xid=1, lsn=0x20):
        log.info("inside")
    log.info("outside")
    inside, outside = json_lines(out)
    assert (inside["slot"], inside["xid"], inside["lsn"]) == ("orders", 1, "0/20")
    assert outside["slot"] == "orders"
    assert "xid" not in outside and "lsn" not in outside


def test_level_filters_lower_levels() -> None:
    """level=warning drops info and debug lines, ours and foreign."""
    out = io.StringIO()
    configure_logging(LogSettings(format="json", level="warning"), stream=out)
    log = get_logger("t")
    log.debug("d")
    log.info("i")
    logging.getLogger("lib").info("foreign info")
    log.warning("w")
    log.error("e")
    assert [line["event"] for line in json_lines(out)] == ["w", "e"]


def test_reconfiguring_replaces_the_handler() -> None:
    """configure_logging twice writes each line once, to the latest stream only."""
    first, second = io.StringIO(), io.StringIO()
    configure_logging(LogSettings(format="json"), stream=first)
    configure_logging(LogSettings(format="json"), stream=second)
    get_logger("t").info("once")
    assert first.getvalue() == ""
    assert len(json_lines(second)) == 1


def test_secret_keys_are_masked_at_any_depth() -> None:
    """password/secret/sasl_password/basic_auth values never reach the stream."""
    out = io.StringIO()
    configure_logging(LogSettings(format="json"), stream=out)
    get_logger("t").info(
        "config_loaded",
        password="hunter2",
        sasl_password="kafka-pw",
        secret="s3",
        kafka={"sasl_username": "svc", "sasl_password": "kafka-pw"},
        registry={"basic_auth": "user:reg-pw", "url": "http://reg:8080"},
        items=[{"password": "hunter2"}],
        empty_password=None,
    )
    text = out.getvalue()
    for secret in ("hunter2", "kafka-pw", 's3"', "reg-pw"):
        assert secret not in text
    (line,) = json_lines(out)
    assert line["password"] == MASK
    assert line["kafka"] == {"sasl_username": "svc", "sasl_password": MASK}
    assert line["registry"]["basic_auth"] == MASK
    assert line["registry"]["url"] == "http://reg:8080"
    assert line["items"] == [{"password": MASK}]
    assert line["empty_password"] is None


def test_settings_secrets_dsn_and_urls_are_masked() -> None:
    """Secrets from Settings stay masked: SecretStr, the libpq DSN, URL user info."""
    out = io.StringIO()
    configure_logging(LogSettings(format="json"), stream=out)
    settings = Settings(
        source={"password": "pg-secret-1"},
        kafka={"sasl_username": "u", "sasl_password": "kafka-secret-2"},
        registry={
            "basic_auth": "u:reg-secret-3",
            "url": "http://u:url-secret-4@reg:8080/apis/ccompat/v7",
        },
    )
    log = get_logger("t")
    log.info("settings", settings=settings.redacted())
    log.info("connecting", dsn=settings.source.dsn(), registry_url=settings.registry.url)
    log.info("secret_object", value=settings.source.password)
    text = out.getvalue()
    for secret in ("pg-secret-1", "kafka-secret-2", "reg-secret-3", "url-secret-4"):
        assert secret not in text
    connecting = json_lines(out)[1]
    assert f"password={MASK}" in connecting["dsn"]
    assert "host=127.0.0.1" in connecting["dsn"]
    assert connecting["registry_url"] == f"http://u:{MASK}@reg:8080/apis/ccompat/v7"


def test_exception_text_and_frames_are_masked_and_error_context_kept() -> None:
    """A logged PgcdcError keeps lsn/xid as error_* keys; its message and locals leak nothing."""
    out = io.StringIO()
    configure_logging(LogSettings(format="json"), stream=out)
    password = "local-secret-5"
    try:
        raise DecodeError(f"connect failed: password={password}", lsn=0x1_0000_0000, xid=42)
    except DecodeError:
        get_logger("t").exception("decode_failed")
    assert "local-secret-5" not in out.getvalue()
    (line,) = json_lines(out)
    assert line["event"] == "decode_failed"
    assert line["error"] == "DecodeError"
    assert (line["error_lsn"], line["error_xid"]) == ("1/0", 42)
    assert line["exception"][0]["exc_type"] == "DecodeError"


def test_console_tracebacks_are_masked() -> None:
    """The console renderer's traceback text is masked too."""
    out = FakeTTY()
    configure_logging(LogSettings(format="console"), stream=out)
    try:
        raise DecodeError("password=console-secret-6")
    except DecodeError:
        get_logger("t").exception("decode_failed")
    text = out.getvalue()
    assert "console-secret-6" not in text
    assert "Traceback" in text


def test_event_name_pattern() -> None:
    """EVENT_NAME_RE accepts stable snake_case names and rejects prose or camelCase."""
    for good in ("txn_committed", "slot_created", "snapshot_table_done", "kafka_error2"):
        assert EVENT_NAME_RE.match(good), good
    for bad in ("Txn committed", "txnCommitted", "_private", "ends_", "double__under", ""):
        assert not EVENT_NAME_RE.match(bad), bad
