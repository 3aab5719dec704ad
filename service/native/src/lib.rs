//! pgcdc's native core: the Rust twins of the pure Python stages, one module per stage
//! (`wal`; `decode`, for heap records so far; `rows`, tuple deform straight to Avro
//! binary, or to test_decoding's text, against a per-table plan), each a port of
//! its Python reference with the same contract, results and typed errors.
//!
//! Without the `python` feature this crate is plain Rust (what `cargo test` runs). With
//! it, `py` is the extension module `service._native`: the WAL walk crosses the
//! Python/Rust boundary once per fed chunk (GIL released) and hands the records over in
//! slices, a run of plain inserts as one `py_batch::HeapRows` whose rows stay in Rust
//! (and spill as one record: `run_rows`, the rows as plain data and their dump);
//! `py_heap` decodes one heap record per call, as the Python parsers do;
//! `py_rows` encodes one row, or a run of one table's rows into their ready events, per
//! call against a compiled plan; `py_text` writes a run's test_decoding lines per call.

pub mod decode;
pub mod rows;
pub mod run_rows;
pub mod wal;

#[cfg(feature = "python")]
mod py;
#[cfg(feature = "python")]
mod py_batch;
#[cfg(feature = "python")]
mod py_copy;
#[cfg(feature = "python")]
mod py_heap;
#[cfg(feature = "python")]
mod py_rows;
#[cfg(feature = "python")]
mod py_slots;
#[cfg(feature = "python")]
mod py_text;
