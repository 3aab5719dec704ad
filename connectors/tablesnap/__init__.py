"""The table snapshot, its edges: the I/O of service.tablesnap's stage.

- `reader`: the single-transaction reader and the column plans (COPY BINARY, values
  exactly as the WAL path gives them);
- `chunks`: key or CTID chunks read between watermarks, or inside one shared snapshot;
- `snapshotter`: the chunked method (DBLog's watermarks while streaming goes on) and
  on-demand / signal-driven snapshots;
- `export`: the blocking method (parallel readers sharing one exported snapshot);
- `progress`: the progress record and the signal topic, in Kafka.

It sits above connectors.postgres and connectors.kafka (it uses both); neither of them,
nor connectors.avro, imports it.
"""
