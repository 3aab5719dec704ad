//! pgcdc's native core: the Rust twins of the pure Python stages, split by stage as the
//! Python packages are, so that the two trees read side by side:
//!
//! - `wal`: the xlogreader (service.wal): pages, records, the decompressors;
//! - `decode`: heap records to changes (service.decode.heap);
//! - `reorder`: a run of inserts kept as plain data through the buffer and its spill
//!   (service.reorder);
//! - `types`: the type family decoders and heap_deform_tuple (service.types);
//! - `output`: the plugins' rows: the per-table plan, the avro plugin's records
//!   (connectors.avro) and test_decoding's text (service.output.text);
//! - `tablesnap`: the snapshot's binary COPY rows, rewritten for the same encoder
//!   (service.tablesnap, connectors.tablesnap).
//!
//! Each is a port of its Python reference with the same contract, results and typed
//! errors, and each imports only stages below it (types sit below output).
//!
//! Without the `python` feature this crate is plain Rust (what `cargo test` runs). With
//! it, `glue` is the extension module `service._native`, one glue module per stage (see
//! glue/mod.rs): the WAL walk crosses the boundary once per fed chunk (GIL released)
//! and hands the records over in slices, a run of plain inserts as one `HeapRows` whose
//! rows stay in Rust until the plugin encodes them.

pub mod decode;
pub mod output;
pub mod reorder;
pub mod tablesnap;
pub mod types;
pub mod wal;

#[cfg(feature = "python")]
mod glue;
