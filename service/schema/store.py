"""Where the schema history is persisted: the `SchemaStore` interface and a local file.

Receives `(version, snapshot)` pairs, where `snapshot` is `SchemaHistory.to_snapshot()`
(JSON-able) and `version` is `SchemaHistory.version` at that moment; the offsets record
names the version it goes with. Hands back the latest saved pair (`load_latest`).

`LocalFileSchemaStore` writes one JSON file, atomically: a temporary file in the same
directory, fsync, then rename over the old one (and fsync of the directory), so a crash
leaves either the old or the new history, never a torn one. A Kafka-backed store
(compacted topic, written in the same Kafka transaction as the offsets) implements the
same Protocol elsewhere.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Protocol

from service.errors import ConfigError


class SchemaStore(Protocol):
    """Persistence of schema-history snapshots."""

    def save(self, version: int, snapshot: dict[str, Any]) -> None:
        """Store `snapshot` as `version`, replacing older versions."""

    def load_latest(self) -> tuple[int, dict[str, Any]] | None:
        """The newest stored (version, snapshot), or None if nothing was stored."""


class LocalFileSchemaStore:
    """A `SchemaStore` in one JSON file, replaced atomically on each save."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def save(self, version: int, snapshot: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        data = json.dumps({"version": version, "snapshot": snapshot}, separators=(",", ":"))
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def load_latest(self) -> tuple[int, dict[str, Any]] | None:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            doc = json.loads(text)
            return int(doc["version"]), dict(doc["snapshot"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(
                f"schema history file {self.path} is unreadable: {exc}", field="schema_store"
            ) from exc
