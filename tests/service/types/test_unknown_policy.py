"""decoding.unknown_types: the policy's decisions, the start check's reporting (warning
and metric), the removed setting, and which type inside a column is the unknown one."""

from __future__ import annotations

from typing import Any

import pytest
import structlog
from prometheus_client import CollectorRegistry

from service.app.metrics import Metrics
from service.app.unknown_types import make_policy
from service.config import load_settings
from service.errors import ConfigError, UnknownTypeError
from service.types.convert import undecodable_part
from service.types.deform import Column
from service.types.registry import TypeInfo, TypeRegistry
from service.types.unknown import UnknownColumn, UnknownTypePolicy

COLS = [
    UnknownColumn("public.t", "q", "query_int", "query_int"),
    UnknownColumn("public.t", "qa", "query_int[]", "query_int"),
]


def test_fail_lists_every_column_and_the_setting() -> None:
    with pytest.raises(UnknownTypeError) as info:
        UnknownTypePolicy().decide(COLS, lsn=0x16B374D848)
    text = str(info.value)
    assert "public.t.q query_int;" in text
    assert "public.t.qa query_int[] (inside: query_int)" in text
    assert info.value.field == "decoding.unknown_types" and info.value.lsn == 0x16B374D848
    assert UnknownTypePolicy().decide([]) == "fail"  # nothing unknown: nothing to decide


@pytest.mark.parametrize("mode", ["omit", "bytes"])
def test_omit_and_bytes_report_each_column_once(mode: str) -> None:
    seen: list[tuple[str, UnknownColumn]] = []
    policy = UnknownTypePolicy(mode, lambda m, c: seen.append((m, c)))
    assert policy.decide(COLS) == mode
    assert policy.decide(COLS[:1]) == mode  # the same column again: not reported again
    assert seen == [(mode, COLS[0]), (mode, COLS[1])]
    with pytest.raises(UnknownTypeError):
        UnknownTypePolicy("text")


@pytest.mark.parametrize("mode", ["omit", "bytes"])
def test_worker_policy_warns_and_sets_the_metric(mode: str) -> None:
    settings = load_settings(source={"slot": "s1"}, decoding={"unknown_types": mode})
    metrics = Metrics("s1", registry=CollectorRegistry())
    policy = make_policy(settings, metrics)
    with structlog.testing.capture_logs() as logs:
        policy.decide(COLS)
    assert [(e["event"], e["column"], e["mode"]) for e in logs] == [
        ("unknown_type_column", "q", mode),
        ("unknown_type_column", "qa", mode),
    ]
    assert all(e["log_level"] == "warning" for e in logs)
    name = "pgcdc_omitted_columns" if mode == "omit" else "pgcdc_bytes_columns"
    labels = {"slot": "s1", "table": "public.t", "column": "qa", "type": "query_int[]"}
    assert metrics.registry.get_sample_value(name, labels) == 1.0


def test_removed_setting_is_refused_naming_the_new_one() -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(decoding={"unknown_types_as_text": True})
    assert "decoding.unknown_types" in str(info.value)
    with pytest.raises(ConfigError):
        load_settings(decoding={"unknown_types": "text"})
    assert load_settings().decoding.unknown_types == "fail"


def _registry() -> TypeRegistry:
    odd = TypeInfo(90001, "odd", -1, False, "i", "b", "odd_out")
    return TypeRegistry(
        [
            odd,
            TypeInfo(90002, "_odd", -1, False, "i", "b", "array_out", typelem=90001),
            TypeInfo(90003, "odd_d", -1, False, "i", "d", "domain_out", typbasetype=90001),
            TypeInfo(90004, "oddrange", -1, False, "i", "r", "range_out", range_subtype=90001),
            TypeInfo(
                90005, "oddmulti", -1, False, "i", "m", "multirange_out", multirange_range=90004
            ),
            TypeInfo(
                90006,
                "oddrow",
                -1,
                False,
                "d",
                "c",
                "record_out",
                fields=(
                    Column(1, "a", 23, -1, 4, True, "i", False, False),
                    Column(2, "b", 90003, -1, -1, False, "i", False, False),
                ),
            ),
            TypeInfo(90007, "okrange", -1, False, "i", "r", "range_out", range_subtype=23),
        ]
    )


def test_the_unknown_type_inside_a_column() -> None:
    """Array elements, domain bases, composite fields, range and multirange subtypes
    are looked into; a range over a known type is fine."""
    reg = _registry()
    for oid in (90001, 90002, 90003, 90004, 90005, 90006):
        found: Any = undecodable_part(reg.get(oid), reg)
        assert found is not None and found.name == "odd", oid
    assert undecodable_part(reg.get(90007), reg) is None


def test_worker_policy_covers_only_captured_columns() -> None:
    """Tables and columns the filters exclude are never published, so never decided."""
    settings = load_settings(
        filters={"exclude_tables": [r"public\.hidden"], "exclude_columns": [r"public\.t\.q"]}
    )
    policy = make_policy(settings)
    assert policy.covers("public", "t", "qa")
    assert not policy.covers("public", "t", "q")
    assert not policy.covers("public", "hidden", "x")
    assert make_policy(settings, filtered=False).covers("public", "hidden", "x")
