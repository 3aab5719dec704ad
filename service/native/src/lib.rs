//! pgcdc's native core: the Rust twins of the pure Python stages, one module per stage
//! (`wal` now; `decode`, `types`, `avro` later), each a port of its Python reference
//! with the same contract, results and typed errors.
//!
//! Without the `python` feature this crate is plain Rust (what `cargo test` and the fuzz
//! loop run). With it, `py` is the extension module `service._native`, which crosses the
//! Python/Rust boundary once per fed chunk: `records()` walks every record available
//! with the GIL released and hands back the whole batch of `XLogRecord`s at once.

pub mod wal;

#[cfg(feature = "python")]
mod py;
