//! The table snapshot's native half (service.tablesnap / connectors.tablesnap in
//! Python): the binary COPY a chunk reader fetched, parsed and rewritten into the stored
//! form the stream's rows have, so that the avro plugin's encoder writes snapshot rows
//! byte for byte as it writes WAL rows. Pure: no Python, no I/O.

pub mod copy;
pub mod extension;
pub mod record;
pub mod sendform;
pub mod tsquery;

/// Test support: `field` as the COPY binary format and the send functions lay out a
/// length-prefixed value (a big-endian i32 length, -1 for NULL, then the bytes),
/// appended to `out`.
#[cfg(test)]
pub(crate) fn put_field(out: &mut Vec<u8>, field: Option<&[u8]>) {
    match field {
        None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        Some(b) => {
            let len = i32::try_from(b.len()).expect("a test value is shorter than 2 GB");
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(b);
        }
    }
}
