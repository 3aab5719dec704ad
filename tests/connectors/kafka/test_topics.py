"""Recognising pgcdc's own offsets and schema-history topics (issue 27).

`judge` is checked case by case.
"""

from __future__ import annotations

import pytest
from confluent_kafka.admin import ConfigSource  # type: ignore[attr-defined]

from connectors.kafka.topics import TopicFacts, judge

OURS = TopicFacts("id-a", 1, "compact", ConfigSource.DYNAMIC_TOPIC_CONFIG)


@pytest.mark.parametrize(
    ("facts", "pinned", "why"),
    [
        (OURS, None, None),
        (OURS, "id-a", None),
        (None, None, "does not exist"),
        (None, "id-a", "was deleted while this worker ran"),
        (OURS, "id-b", "was deleted and re-created"),
        (TopicFacts("id-a", 3, "compact", ConfigSource.DYNAMIC_TOPIC_CONFIG), None, "3 part"),
        (TopicFacts("id-a", 1, "delete", ConfigSource.DEFAULT_CONFIG), None, "policy=delete"),
        (
            TopicFacts("id-a", 1, "compact,delete", ConfigSource.DYNAMIC_TOPIC_CONFIG),
            None,
            "policy=compact,delete",
        ),
        (
            TopicFacts("id-a", 1, "compact", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            None,
            "inherited from the broker",
        ),
        (
            TopicFacts("id-a", 1, "compact", ConfigSource.STATIC_BROKER_CONFIG),
            None,
            "auto-created it",
        ),
    ],
)
def test_judge_accepts_only_the_topic_pgcdc_made(
    facts: TopicFacts | None, pinned: str | None, why: str | None
) -> None:
    """Only one compacted partition, its policy set on the topic, with the pinned id (if
    any) passes; each other case is refused with a reason saying what differs. A broker
    whose default policy is compact still cannot make an auto-created topic pass."""
    verdict = judge("p.offsets", facts, pinned)
    if why is None:
        assert verdict is None
    else:
        assert verdict is not None and why in verdict, verdict
