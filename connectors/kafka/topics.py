"""Recognising pgcdc's own topics: the offsets and schema-history topics a restart trusts.

Receives: the admin client of a sink and the names of the topics whose records decide
where a restart resumes (`<prefix>.offsets` and `<prefix>.schema-history`). The sink
creates them with `STATE_TOPIC_PARTITIONS` partitions and `STATE_TOPIC_CONFIG` set on
the topic itself. Hands on nothing: `TopicGuard.verify` returns, or raises.

Why (issue 27): a broker with auto.create.topics.enable=true re-creates a deleted topic
as soon as any client produces to it or asks for its metadata with auto-creation
allowed, with the broker's defaults (cleanup.policy=delete, num.partitions). A worker
that accepted such a topic resumed from whatever landed in it, and would later lose its
offsets to retention. pgcdc's producer never asks for auto-creation (the sink sets
allow.auto.create.topics=false), but any other client may.

A topic is recognised as pgcdc's when all of these hold (`judge`, pure):
- it exists and has exactly `STATE_TOPIC_PARTITIONS` (1) partition;
- its cleanup.policy is `compact` and is set on the topic itself (config source
  DYNAMIC_TOPIC_CONFIG). An auto-created topic inherits its policy from the broker
  (DEFAULT_CONFIG, STATIC_BROKER_CONFIG or a dynamic broker default), so even a broker
  whose default policy is compact cannot make one look like pgcdc's; an operator who
  creates the topic by hand with that configuration makes the same topic pgcdc would;
- its topic id is the one this guard saw first (`pinned`). A topic deleted and
  re-created under the same name, by anyone, pgcdc included, is a new topic: whatever
  the old one held is gone, so it is refused for the rest of the worker's life (the
  worker's in-process replays hand the pins to their fresh sink: `adopt`).

When: at start, after the sink created what was missing and again after the offsets
were read (so the offsets trusted came from a verified topic); then before the sink
writes an offset record whenever `due()` (at most every `every_s` seconds, so the hot
path pays two admin round trips per interval, not per commit); and after a Kafka commit
failed, because a produce to a deleted topic stalls the commit until it times out.

Errors: `OffsetsTopicError` (fatal), naming the topic, what differs and what to do.
A pinned topic that is missing was deleted: fatal at once. One not yet pinned that is
missing (just created; metadata still propagating) is waited for until the deadline.
A broker that does not answer in time (it fails the requests for any reason but a
missing permission or feature, retried until then): `BrokerUnavailableError`. No
Describe/DescribeConfigs permission, or a broker too old to describe topics:
`OffsetsTopicError`, saying so.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from service.errors import BrokerUnavailableError, OffsetsTopicError

STATE_TOPIC_PARTITIONS = 1
STATE_TOPIC_CONFIG = {"cleanup.policy": "compact"}
CHECK_EVERY_S = 5.0

_T = TypeVar("_T")
_SET_ON_TOPIC = ConfigSource.DYNAMIC_TOPIC_CONFIG
_RETRY_S = 0.2
# Errors no retry will fix: the principal may not describe the topics, or the broker
# cannot. Any other error (a broker restarting, a request timing out) is retried.
_DENIED = frozenset(
    {
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.UNSUPPORTED_VERSION,
        KafkaError._UNSUPPORTED_FEATURE,
    }
)
_WHAT_TO_DO = (
    "pgcdc creates this topic itself ({partitions} partition, cleanup.policy=compact set "
    "on the topic). Restore the original, or delete this one and start over deliberately "
    "with a new snapshot: `pgcdc run --fresh-start` (snapshot.fresh_start)"
)


@dataclass(slots=True, frozen=True)
class TopicFacts:
    """What the broker says about one topic (None: it does not exist)."""

    topic_id: str
    partitions: int
    cleanup_policy: str
    policy_source: ConfigSource


def judge(topic: str, facts: TopicFacts | None, pinned_id: str | None) -> str | None:
    """Why `topic` is not the one pgcdc created, or None if it is (see the docstring)."""
    if facts is None:
        if pinned_id is not None:
            return "was deleted while this worker ran"
        return "does not exist"
    if pinned_id is not None and facts.topic_id != pinned_id:
        return (
            f"was deleted and re-created while this worker ran (topic id {facts.topic_id}, "
            f"was {pinned_id}): what the old topic held is gone"
        )
    if facts.partitions != STATE_TOPIC_PARTITIONS:
        return f"has {facts.partitions} partitions, not {STATE_TOPIC_PARTITIONS}"
    if facts.cleanup_policy != STATE_TOPIC_CONFIG["cleanup.policy"]:
        return (
            f"has cleanup.policy={facts.cleanup_policy}: its offsets would be dropped by "
            "retention, and a topic a broker auto-created looks like this"
        )
    if facts.policy_source != _SET_ON_TOPIC:
        return (
            f"has cleanup.policy=compact inherited from the broker ({facts.policy_source.name}), "
            "not set on the topic: the broker auto-created it, pgcdc did not"
        )
    return None


@dataclass(slots=True)
class TopicGuard:
    """Verifies that `topics` are the ones pgcdc created (see the module docstring)."""

    admin: AdminClient
    topics: Sequence[str]
    timeout_s: float
    every_s: float = CHECK_EVERY_S
    # topic -> the topic id seen at its first verification. Invariant: once a topic is
    # pinned, only a topic with that id passes under its name.
    pinned: dict[str, str] = field(default_factory=dict)
    # time.monotonic() of the last verification that passed; -inf until the first.
    checked_at: float = -math.inf

    def due(self) -> bool:
        """True when `every_s` has passed since the last verification that passed."""
        return time.monotonic() - self.checked_at >= self.every_s

    def adopt(self, other: TopicGuard) -> None:
        """Take over `other`'s pins (a fresh sink of the same worker's replay)."""
        self.pinned.update(other.pinned)

    def verify(self, timeout_s: float | None = None) -> None:
        """Raise OffsetsTopicError unless every topic is pgcdc's; pin them on first sight."""
        deadline = time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)
        facts = self._facts(deadline)
        for topic in self.topics:
            why = judge(topic, facts[topic], self.pinned.get(topic))
            if why is not None:
                raise OffsetsTopicError(
                    f"Kafka topic {topic} is not the one pgcdc created: it {why}. "
                    + _WHAT_TO_DO.format(partitions=STATE_TOPIC_PARTITIONS),
                    topic=topic,
                )
        for topic in self.topics:
            fact = facts[topic]
            assert fact is not None  # judge refused every missing topic above
            self.pinned.setdefault(topic, fact.topic_id)
        self.checked_at = time.monotonic()

    def _facts(self, deadline: float) -> dict[str, TopicFacts | None]:
        """Each topic's facts; a topic not pinned yet and missing is waited for."""
        while True:
            described = self._call(self._describe, deadline)
            waiting = [t for t, d in described.items() if d is None and t not in self.pinned]
            if not waiting or time.monotonic() + _RETRY_S > deadline:
                break
            time.sleep(_RETRY_S)
        present = [t for t, d in described.items() if d is not None]
        policies = self._call(lambda remaining: self._policies(present, remaining), deadline)
        out: dict[str, TopicFacts | None] = {}
        for topic, desc in described.items():
            policy = policies.get(topic)
            if desc is None or policy is None:  # deleted between the two requests
                out[topic] = None
                continue
            out[topic] = TopicFacts(desc[0], desc[1], policy[0], policy[1])
        return out

    def _call(self, request: Callable[[float], _T], deadline: float) -> _T:
        """`request(timeout)`, retried until the deadline unless the error is one no
        retry fixes (no Describe/DescribeConfigs permission, say), which is fatal."""
        while True:
            remaining = max(deadline - time.monotonic(), 0.1)
            try:
                return request(remaining)
            except KafkaException as exc:
                err = exc.args[0]
                if not isinstance(err, KafkaError) or err.code() in _DENIED:
                    raise OffsetsTopicError(
                        f"cannot verify that Kafka topics {', '.join(self.topics)} are "
                        f"pgcdc's: {exc}; pgcdc needs Describe and DescribeConfigs on them",
                        topic=", ".join(self.topics),
                    ) from exc
                if time.monotonic() + _RETRY_S > deadline:
                    raise BrokerUnavailableError(
                        f"Kafka did not describe topics {', '.join(self.topics)}: {err.str()}"
                    ) from exc
                time.sleep(_RETRY_S)

    def _describe(self, timeout_s: float) -> dict[str, tuple[str, int] | None]:
        """topic -> (topic id, partition count), or None when it does not exist."""
        futures = self.admin.describe_topics(
            TopicCollection(list(self.topics)), request_timeout=timeout_s
        )
        out: dict[str, tuple[str, int] | None] = {}
        for topic, future in futures.items():
            try:
                desc = future.result()  # completes by request_timeout
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise
                out[topic] = None
                continue
            out[topic] = (str(desc.topic_id), len(desc.partitions))
        return out

    def _policies(
        self, topics: list[str], timeout_s: float
    ) -> dict[str, tuple[str, ConfigSource] | None]:
        """topic -> (cleanup.policy, where its value comes from), or None when missing."""
        if not topics:
            return {}
        resources = [ConfigResource(ResourceType.TOPIC, t) for t in topics]
        futures = self.admin.describe_configs(resources, request_timeout=timeout_s)
        out: dict[str, tuple[str, ConfigSource] | None] = {}
        for resource, future in futures.items():
            try:
                entries = future.result()  # completes by request_timeout
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise
                out[resource.name] = None
                continue
            entry = entries["cleanup.policy"]
            out[resource.name] = (str(entry.value), ConfigSource(entry.source))
        return out
