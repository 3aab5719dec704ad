"""`pgcdc run` with one injected broker error, for the replay-from-offsets test.

    python -m tests.faults.replay_worker

Runs the real CLI, configured by the same `PGCDC_*` environment as a plain worker, with
`KafkaSink._produce` wrapped: the `PGCDC_TEST_FAIL_AT`-th record produced to a topic whose
name ends in `PGCDC_TEST_FAIL_TOPIC` raises the KafkaException librdkafka raises for a
lost broker (`_TRANSPORT`), once per process. Everything else is the production code.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from connectors.kafka import sink as sink_module
from service.app.cli import main
from service.output.api import OutputRecord


def install() -> None:
    """Wrap KafkaSink._produce so that one produce call fails (see the docstring)."""
    fail_at = int(os.environ["PGCDC_TEST_FAIL_AT"])
    suffix = os.environ["PGCDC_TEST_FAIL_TOPIC"]
    real = sink_module.KafkaSink._produce
    seen = {"n": 0, "failed": False}

    def produce(self: Any, record: OutputRecord) -> None:
        if not seen["failed"] and record.topic.endswith(suffix):
            seen["n"] += 1
            if seen["n"] == fail_at:
                seen["failed"] = True
                print("INJECTED", flush=True)
                try:
                    raise KafkaException(KafkaError(KafkaError._TRANSPORT, "injected broker loss"))
                except KafkaException as exc:
                    raise self._classify(exc, "produce") from exc
        real(self, record)

    sink_module.KafkaSink._produce = produce  # type: ignore[method-assign]


if __name__ == "__main__":
    install()
    sys.exit(main(["run"]))
