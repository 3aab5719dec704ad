"""The layout's import rules that import-linter does not state: no module imports one
that imports it back, and every stage is a package of its own."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STAGES = ("wal", "decode", "reorder", "snapbuild", "schema", "types", "output", "tablesnap", "app")
EDGES = ("postgres", "kafka", "avro", "tablesnap")


def _module(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _imports() -> dict[str, set[str]]:
    """Every module of service/ and connectors/ → the project modules it imports
    (at any depth of the file, TYPE_CHECKING blocks and function bodies included)."""
    files = [*ROOT.joinpath("service").rglob("*.py"), *ROOT.joinpath("connectors").rglob("*.py")]
    modules = {_module(f): f for f in files}
    out: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            found.update(t for t in targets if t in modules and t != name)
        out[name] = found
    return out


def test_no_module_imports_one_that_imports_it_back() -> None:
    """A pair of modules importing each other (directly) is a layout defect."""
    graph = _imports()
    pairs = sorted(
        {
            tuple(sorted((a, b)))
            for a, deps in graph.items()
            for b in deps
            if a in graph.get(b, set())
        }
    )
    assert pairs == []


def test_each_stage_and_edge_is_a_package() -> None:
    """The folder names say where each stage lives (service/<stage>, connectors/<edge>)."""
    for stage in STAGES:
        assert (ROOT / "service" / stage / "__init__.py").is_file(), stage
    for edge in EDGES:
        assert (ROOT / "connectors" / edge / "__init__.py").is_file(), edge
    flat = sorted(p.name for p in (ROOT / "service").glob("*.py"))
    assert flat == [
        "__init__.py",
        "_binary.py",
        "backoff.py",
        "config.py",
        "errors.py",
        "impl.py",
        "lsn.py",
        "pgconst.py",
    ]


def test_table_snapshot_lives_in_its_stage() -> None:
    """The table snapshot has one name: no snapshot module is left in app/ or in the
    single-system edges (service/snapbuild is snapbuild.c's stage, a different one)."""
    stray = sorted(
        str(p.relative_to(ROOT))
        for folder in ("service/app", "connectors/postgres", "connectors/kafka")
        for p in (ROOT / folder).glob("*snapshot*.py")
    )
    assert stray == []
    assert sorted(p.name for p in (ROOT / "service" / "snapbuild").glob("*.py")) == [
        "__init__.py",
        "snapbuild.py",
    ]
