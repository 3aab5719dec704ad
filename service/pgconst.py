"""PostgreSQL constants that more than one stage needs, each defined once.

- The epoch. PostgreSQL stores dates as int32 days and timestamps as int64 microseconds
  since 2000-01-01 (`POSTGRES_EPOCH_JDATE`); commit timestamps in the WAL use the same
  epoch. Consumers (Avro, Kafka, Prometheus) want Unix time, 1970-01-01: the offsets
  between the two are here.
- Built-in type OIDs that code outside the type tables refers to by number
  (pg_type.dat). The full per-type facts live in `service.types.registry`.
"""

from __future__ import annotations

import datetime as dt

PG_EPOCH_DATE = dt.date(2000, 1, 1)
"""Day 0 of a stored date (`POSTGRES_EPOCH_JDATE`)."""
PG_EPOCH = dt.datetime(2000, 1, 1)
"""Microsecond 0 of a stored timestamp."""
PG_EPOCH_UTC = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
"""Microsecond 0 of a stored timestamptz, and of WAL commit timestamps."""

USECS_PER_DAY = 86_400_000_000
UNIX_EPOCH_DAYS = 10_957
"""Days from 1970-01-01 to 2000-01-01: Unix days = stored days + this."""
UNIX_EPOCH_SECS = UNIX_EPOCH_DAYS * 86_400
UNIX_EPOCH_MSECS = UNIX_EPOCH_SECS * 1_000
UNIX_EPOCH_USECS = UNIX_EPOCH_DAYS * USECS_PER_DAY

BOOL_OID = 16
TEXT_OID = 25
TEXT_ARRAY_OID = 1009
XML_OID = 142
JSONB_OID = 3802
