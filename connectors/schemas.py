"""The static Avro schemas of the repository's `schemas/` folder, shared by the edges.

The avro plugin embeds them (source block, transaction block, messages, heartbeats) in
the schemas it registers; the Kafka offsets record is written with `offsets.avsc`
without a registry. Both read them here, so neither edge package imports the other.

Where they are: `schemas/` beside the `connectors` package. That is the checkout's
top-level folder, and in an installed wheel the same folder beside the packages
(pyproject's [tool.maturin] include puts `schemas/*.avsc` there), so a plain `pip
install` finds them with nothing configured. `$PGCDC_SCHEMAS_DIR` overrides it.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import Any

SCHEMA_DIR = Path(
    os.environ.get("PGCDC_SCHEMAS_DIR", Path(__file__).resolve().parents[1] / "schemas")
)


@cache
def static_schema(name: str) -> str:
    """The text of `schemas/<name>.avsc`."""
    return (SCHEMA_DIR / f"{name}.avsc").read_text(encoding="utf-8")


def load_static(name: str) -> dict[str, Any]:
    """A fresh dict of `schemas/<name>.avsc` (callers may embed and mutate it)."""
    loaded: dict[str, Any] = json.loads(static_schema(name))
    return loaded
