"""One captured table as the avro plugin publishes it: its plan, registered serializers
and row encoders (built by `connectors.avro.plugin`, read by `connectors.avro.native_rows`
too, which is why it lives apart from both).

`rows` builds the Value record of a row; `key_of` takes the Key record from a Value
record of the same row (set iff `key` is).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from connectors.avro.codec import KeyFromValue, RowEncoder
from connectors.avro.schema import TablePlan

Serialize = Callable[[Any], bytes]


@dataclass(slots=True)
class Table:
    """A table plan with its registered serializers and row encoders (module docstring)."""

    plan: TablePlan
    key: Serialize | None
    value: Serialize
    rows: RowEncoder
    key_of: KeyFromValue | None
    schema: str
    table: str
    collection: str  # "schema.table", as Debezium names a data collection
    value_name: str  # full Avro name of the Value record
