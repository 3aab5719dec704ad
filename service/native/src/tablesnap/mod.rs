//! The table snapshot's native half (service.tablesnap / connectors.tablesnap in
//! Python): the binary COPY a chunk reader fetched, parsed and rewritten into the stored
//! form the stream's rows have, so that the avro plugin's encoder writes snapshot rows
//! byte for byte as it writes WAL rows. Pure: no Python, no I/O.

pub mod copy;
pub mod extension;
pub mod record;
pub mod sendform;
pub mod tsquery;
