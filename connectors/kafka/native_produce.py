"""The Kafka sink's switch between confluent-kafka's produce() and the native run loop.

Receives: the sink's confluent-kafka `Producer` and its `client.id`, once, when the sink
is made. Hands on: `direct_producer(producer, client_id)`, a `service._native.
DirectProducer` bound to that producer's own librdkafka handle, or None, in which case
the sink calls produce() per record (the Python reference path). Its `produce(topic,
keys, values, start, headers)` enqueues a run's records from `start` on, with the GIL
released, and returns (where it stopped, librdkafka's error code there or 0); see
service/native/src/glue/kafka.rs for what it does and why.

The native loop is used only when all of these hold, else None is returned and the
reason logged once (`kafka_direct_produce_off`):
- the native core is selected (service.impl `native_row_core`; PGCDC_IMPL=python keeps
  the reference path);
- confluent-kafka is the version pinned in pyproject.toml (`PINNED`): the loop reads the
  librdkafka handle from that version's C struct, so another version is not trusted
  until it has been checked again (tests/connectors/kafka/test_native_produce.py);
- the librdkafka confluent-kafka loaded is found in this process (/proc/self/maps) and
  the extension's checks of it pass (its version, a producer named after `client.id`).

Both paths put the same records in the same partitions with the same headers, inside the
same Kafka transaction (tests/integration/test_native_produce_kafka.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import confluent_kafka
import structlog

from service.impl import native_row_core

log = structlog.get_logger(__name__)

PINNED = "2.16.1"  # confluent-kafka, as pyproject.toml pins it
_MAPS = Path("/proc/self/maps")


def loaded_librdkafka(maps: Path = _MAPS) -> str | None:
    """The path of the librdkafka shared object mapped into this process, or None."""
    try:
        lines = maps.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and Path(fields[5]).name.startswith("librdkafka"):
            return fields[5]
    return None


def direct_producer(producer: Any, client_id: str) -> Any | None:
    """The native run loop bound to `producer`, or None (module docstring)."""
    native = native_row_core()
    installed = str(getattr(confluent_kafka, "__version__", ""))
    why = ""
    if native is None:
        why = "the Python core is selected"
    elif installed != PINNED:
        why = f"confluent-kafka {installed} is not the pinned {PINNED}"
    elif type(producer) is not confluent_kafka.Producer:
        why = f"the producer is a {type(producer).__name__}, not confluent_kafka.Producer"
    else:
        library = loaded_librdkafka()
        if library is None:
            why = "confluent-kafka's librdkafka was not found in /proc/self/maps"
        else:
            try:
                direct = native.DirectProducer(
                    producer, library, confluent_kafka.libversion()[1], client_id
                )
            except ValueError as exc:
                why = str(exc)
            else:
                log.debug("kafka_direct_produce_on", library=library)
                return direct
    log.info("kafka_direct_produce_off", reason=why)
    return None
