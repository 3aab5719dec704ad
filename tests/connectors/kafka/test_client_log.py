"""connectors.kafka.client_log: librdkafka's lines go through structlog, never raw to stderr."""

from __future__ import annotations

import ast
import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from connectors.kafka.client_log import LIBRDKAFKA_LOG, client_conf

REPO = Path(__file__).resolve().parents[3]
CLIENTS = {"Producer", "AdminClient", "Consumer"}

# Run in a child process: librdkafka writes its default lines to file descriptor 2,
# which pytest's capture of sys.stderr does not see.
CHILD = """
import sys, time
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from connectors.kafka.client_log import client_conf
from service.app.logging import configure_logging
from service.config import LogSettings

configure_logging(LogSettings(format="json", level="info"))
conf = client_conf if sys.argv[1] == "routed" else dict
dead = sys.argv[2]
producer = Producer(conf({"bootstrap.servers": dead, "transactional.id": "log-test"}))
admin = AdminClient(conf({"bootstrap.servers": dead}))
consumer = Consumer(conf({"bootstrap.servers": dead, "group.id": "log-test"}))
consumer.subscribe(["log-test"])
deadline = time.monotonic() + 3
while time.monotonic() < deadline:
    producer.poll(0.1)
    admin.poll(0.1)
    consumer.poll(0.1)
consumer.close()
"""


def _dead_address() -> str:
    """A loopback port nothing listens on (connections are refused at once)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


def _run_child(mode: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, mode, _dead_address()],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stderr


def test_every_kafka_client_is_built_with_the_log_route() -> None:
    """Every Producer, AdminClient and Consumer constructed in service/ and connectors/
    gets its configuration through `client_conf` (a new one without it would write
    raw librdkafka lines to stderr again)."""
    sites: list[str] = []
    for path in sorted([*REPO.glob("service/**/*.py"), *REPO.glob("connectors/**/*.py")]):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name not in CLIENTS:
                continue
            where = f"{path.relative_to(REPO)}:{node.lineno}"
            sites.append(where)
            (conf,) = node.args
            assert (
                isinstance(conf, ast.Call)
                and isinstance(conf.func, ast.Name)
                and conf.func.id == "client_conf"
            ), f"{where}: {name}(...) without client_conf(...)"
    # The sink's producer and admin client, the offsets reader, the signal topic's admin
    # client and consumer, the demo's consumer.
    assert len(sites) >= 6, sites


def test_client_conf_adds_the_logger_and_keeps_the_rest() -> None:
    """client_conf copies the configuration and sets `logger`; the original is unchanged."""
    conf = {"bootstrap.servers": "h:1", "acks": "all"}
    routed = client_conf(conf)
    assert routed == {**conf, "logger": LIBRDKAFKA_LOG}
    assert "logger" not in conf


@pytest.mark.parametrize(
    ("args", "fields"),
    [
        (
            ("FAIL", "rdkafka#producer-1", "[thrd:x]: Connect failed "),
            {
                "facility": "FAIL",
                "client": "rdkafka#producer-1",
                "message": "[thrd:x]: Connect failed",
            },
        ),
        (("GETPID",), {"message": "GETPID"}),
    ],
)
def test_a_librdkafka_line_becomes_one_event(args: tuple[str, ...], fields: dict[str, str]) -> None:
    """confluent-kafka's call (level, "%s [%s] %s", facility, client, text) is one
    `kafka_client_log` event at that level with the three parts as keys; any other
    shape keeps the formatted line."""
    fmt = "%s [%s] %s" if len(args) == 3 else "%s"
    with capture_logs() as logs:
        LIBRDKAFKA_LOG.log(30, fmt, *args)
    assert logs == [{"event": "kafka_client_log", "log_level": "warning", **fields}]


def test_librdkafka_lines_reach_stderr_only_as_json() -> None:
    """A producer, an admin client and a consumer that cannot reach their broker, in a
    process logging JSON: with client_conf every stderr line is a JSON object, and each
    client's connection failures are `kafka_client_log` errors naming it; without it,
    librdkafka's own `%3|...|FAIL|...` lines are there (what broke log.format: json)."""
    raw = _run_child("raw")
    assert re.search(r"^%\d\|[\d.]+\|FAIL\|rdkafka#", raw, re.MULTILINE), raw[-2000:]

    routed = _run_child("routed")
    events = [json.loads(line) for line in routed.splitlines()]  # each line must parse
    failures = {
        e["client"].rsplit("-", 1)[0]
        for e in events
        if e["event"] == "kafka_client_log" and e["facility"] == "FAIL" and e["level"] == "error"
    }
    assert failures == {"rdkafka#producer", "rdkafka#consumer"}, routed[-2000:]
    clients = {e["client"] for e in events if e["event"] == "kafka_client_log"}
    assert len([c for c in clients if c.startswith("rdkafka#producer")]) == 2, clients
