"""The table snapshot, its pure core: every existing row of the captured tables, once.

Not to be confused with service.snapbuild (snapbuild.c: when decoding is consistent).
This stage's pure modules, I/O-free like the rest of the core:
- `plan`: the resumable state, the tables queued and their chunks committed / planned;
- `watermark`: DBLog's window, which chunk rows the stream overrides;
- `markers`: Debezium 3.6's `source.snapshot` marker of each snapshot row.

Its edges (SQL reads, Kafka progress and signals, the reader threads) are
connectors.tablesnap: the same stage, on the other side of the layering.
"""
