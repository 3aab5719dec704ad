//! The output plugins' native halves: what a decoded row becomes when it leaves pgcdc,
//! as service.output (the plugin API, the text plugin) and connectors.avro (the avro
//! plugin) write it in Python.
//!
//! `kind` names how each column is published (Avro) or printed (text); `plan` is the
//! per-table plan both compile from a table definition; `avro` writes the avro plugin's
//! Value and Key records; `text` writes test_decoding's lines. They read values through
//! crate::types and never the other way round. Pure: no Python, no I/O.

pub mod avro;
pub mod kind;
pub mod plan;
pub mod text;
