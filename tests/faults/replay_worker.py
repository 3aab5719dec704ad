"""`pgcdc run` with one injected broker error, for the replay-from-offsets test.

    python -m tests.faults.replay_worker

Runs the real CLI, configured by the same `PGCDC_*` environment as a plain worker, with
the sink's librdkafka producer subclassed: the `PGCDC_TEST_FAIL_AT`-th record produced to
a topic whose name ends in `PGCDC_TEST_FAIL_TOPIC` raises the KafkaException librdkafka
raises for a lost broker (`_TRANSPORT`), once per process, and so does the sink's
immediate retry of that same record (`KafkaSink._produce_retrying`). The failure is injected
under both the single-record path (`write`) and the record runs (`write_run`).
Everything else is the production code.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from connectors.kafka import sink as sink_module
from service.app.cli import main


def install() -> None:
    """Give the sink a producer whose one produce call fails (see the docstring)."""
    fail_at = int(os.environ["PGCDC_TEST_FAIL_AT"])
    suffix = os.environ["PGCDC_TEST_FAIL_TOPIC"]
    done = object()  # `failed` once the injection is over
    seen: dict[str, Any] = {"n": 0, "failed": None}  # failed: the value that failed

    class FailingProducer(Producer):  # type: ignore[misc]
        def produce(
            self, topic: str, value: Any = None, key: Any = None, *args: Any, **kw: Any
        ) -> None:
            if value is not None and value is seen["failed"]:
                seen["failed"] = done  # the retry of the failed record fails too, once
                raise KafkaException(KafkaError(KafkaError._TRANSPORT, "injected broker loss"))
            if seen["failed"] is None and topic.endswith(suffix):
                seen["n"] += 1
                if seen["n"] == fail_at:
                    seen["failed"] = value
                    print("INJECTED", flush=True)
                    raise KafkaException(KafkaError(KafkaError._TRANSPORT, "injected broker loss"))
            super().produce(topic, value, key, *args, **kw)

    sink_module.Producer = FailingProducer  # type: ignore[misc]


if __name__ == "__main__":
    install()
    sys.exit(main(["run"]))
