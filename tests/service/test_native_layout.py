"""The native crate's layout mirrors the Python stages, and its imports run one way.

The crate (service/native/src) has one module per stage, named as the Python package it
twins (wal, decode, reorder, types, output, tablesnap), and `glue`, the PyO3 boundary,
one module per stage. These tests read the Rust sources as text (comments stripped) and
check what the folders promise a reader: each stage imports only the stages below it
(types below output: a type decoder never knows how a value is published), nothing but
`glue` touches Python, and every Python-visible class is defined in `glue`.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "service" / "native" / "src"
REPO = SRC.parents[2]

# A stage may use the stages of a lower layer only (never one of its own layer).
LAYER = {"wal": 0, "decode": 1, "types": 1, "reorder": 2, "output": 3, "tablesnap": 4, "glue": 5}
# The Python package each Rust stage twins.
TWIN = {
    "wal": "service/wal",
    "decode": "service/decode",
    "reorder": "service/reorder",
    "types": "service/types",
    "output": "service/output",
    "tablesnap": "service/tablesnap",
}
# glue/<name>.rs: a stage's boundary (the avro and text plugins are output's two), and
# the Kafka sink's (connectors.kafka: its runs of records enqueued into librdkafka).
GLUE = {"wal", "decode", "reorder", "avro", "text", "tablesnap", "kafka"}
# What the glue shares: slotted result classes, and the catalog name cache (NameCache)
# the plans of both plugins print reg* and aclitem from.
GLUE_HELPERS = {"mod", "slots", "names"}

_COMMENT = re.compile(r"//[^\n]*")
_CRATE_PATH = re.compile(r"\bcrate::([a-z_]+)")


def _code(path: Path) -> str:
    return _COMMENT.sub("", path.read_text())


def _stage_files(stage: str) -> list[Path]:
    return sorted((SRC / stage).rglob("*.rs"))


def test_the_crate_has_exactly_the_stage_modules() -> None:
    """src/ holds lib.rs and one folder per stage (plus glue), each twinned by a
    Python package of the same name."""
    entries = {p.name for p in SRC.iterdir()}
    assert entries == {"lib.rs", *LAYER}, entries
    for stage, package in TWIN.items():
        assert (REPO / package / "__init__.py").is_file(), (stage, package)


@pytest.mark.parametrize("stage", sorted(set(LAYER) - {"glue"}))
def test_a_stage_imports_only_the_stages_below_it(stage: str) -> None:
    """`crate::<other>` in a stage's code names only a stage of a lower layer (types
    never imports output), and no stage but glue names pyo3."""
    for path in _stage_files(stage):
        code = _code(path)
        for used in set(_CRATE_PATH.findall(code)) - {stage}:
            assert used in LAYER, (path, used)
            assert LAYER[used] < LAYER[stage], f"{path.relative_to(SRC)} uses crate::{used}"
        assert "pyo3" not in code, path
        assert "super::super::super" not in code, path


def test_glue_has_one_module_per_stage_and_owns_every_python_class() -> None:
    """glue/ holds one module per stage boundary (and its shared helpers), and every
    `#[pyclass]`/`#[pyfunction]`/`#[pymodule]` is defined there."""
    names = {p.stem for p in (SRC / "glue").glob("*.rs")}
    assert names == GLUE | GLUE_HELPERS, names
    for path in SRC.rglob("*.rs"):
        if path.parent == SRC / "glue":
            continue
        code = _code(path)
        for attr in ("#[pyclass", "#[pyfunction", "#[pymodule", "#[pymethods"):
            assert attr not in code, (path, attr)
