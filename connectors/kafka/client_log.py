"""librdkafka's own log lines, routed through structlog for every Kafka client pgcdc makes.

Receives: the configuration dict of a confluent-kafka client (Producer, AdminClient,
Consumer). Hands on: `client_conf(conf)`, the same dict with `logger` set to
`LIBRDKAFKA_LOG`; every client in service/ and connectors/ is constructed with it
(tests/connectors/kafka/test_client_log.py checks the source tree for any that is not).

Why: without a `logger`, librdkafka writes its lines straight to file descriptor 2 in
its own format, such as `%4|1700000000.123|GETPID|rdkafka#producer-1| [thrd:main]: ...`
or `%6|...|BGQUEUE|...`, and a worker configured with log.format: json then writes lines
no log pipeline can parse.

Guarantees:
- With `logger` set, confluent-kafka queues the client's lines and hands each to
  `LIBRDKAFKA_LOG.log(level, "%s [%s] %s", facility, client name, text)` when that
  client is served (poll, flush, consume, close), on the serving thread; never from
  librdkafka's own threads. Each becomes the structlog event `kafka_client_log` with
  `facility` (GETPID, FAIL, BGQUEUE...), `client` (rdkafka#producer-1...) and
  `message`, at the level confluent-kafka maps librdkafka's syslog level onto
  (0 to 2: critical, 3: error, 4: warning, 5 and 6: info, 7: debug), through the same processors,
  renderer and masking as every other line.
- A client that is never served keeps its lines queued; they go with it when it is
  destroyed. None is written to stderr raw.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

_log = structlog.get_logger("connectors.kafka.librdkafka")

EVENT = "kafka_client_log"


class LibrdkafkaLog:
    """The `logger` confluent-kafka calls: the subset of logging.Logger it uses."""

    def log(self, level: int, msg: str, *args: object) -> None:
        if len(args) == 3:  # confluent-kafka's "%s [%s] %s": facility, client, text
            facility, client, text = (str(a) for a in args)
            _log.log(level, EVENT, facility=facility, client=client, message=text.strip())
            return
        # Any other shape (a future confluent-kafka): the formatted line, unsplit.
        _log.log(level, EVENT, message=(msg % args if args else msg).strip())


LIBRDKAFKA_LOG = LibrdkafkaLog()


def client_conf(conf: Mapping[str, Any]) -> dict[str, Any]:
    """`conf` with librdkafka's lines routed through structlog (module docstring)."""
    return {**conf, "logger": LIBRDKAFKA_LOG}
