"""The static Avro schemas (`connectors/schemas/*.avsc`), shared by the edges.

The avro plugin embeds them (source block, transaction block, messages, heartbeats) in
the schemas it registers; the Kafka offsets record is written with `offsets.avsc`
without a registry. Both read them here, so neither edge package imports the other.
They are package data: the wheel carries them beside this module (pyproject's
[tool.maturin] include), so a plain `pip install` finds them with nothing configured.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any


@cache
def static_schema(name: str) -> str:
    """The text of `<name>.avsc`."""
    return resources.files(__name__).joinpath(f"{name}.avsc").read_text(encoding="utf-8")


def load_static(name: str) -> dict[str, Any]:
    """A fresh dict of `<name>.avsc` (callers may embed and mutate it)."""
    loaded: dict[str, Any] = json.loads(static_schema(name))
    return loaded
