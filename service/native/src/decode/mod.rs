//! The decode stage of the native core: verified records in, the events decode.c
//! queues out (the native twins of service/decode_*.py).
//!
//! Receives: the parts of one record the parser needs (main data, block 0, xl_info),
//! already CRC-checked and decoded by the WAL stage.
//! Hands on: events as plain Rust values; the boundary (py.rs) builds the same
//! service.events objects the Python parsers build.
//! Errors: a message for the `DecodeError` the Python parser raises; the boundary
//! attaches the record's LSN.
//!
//! Modules: `heap` (DecodeInsert .. DecodeMultiInsert, service/decode_heap.py).

pub mod heap;
