//! Extension types' output text and Debezium values, from their stored datums: contrib
//! hstore, ltree / lquery, cube, seg and isn.
//!
//! Receives: exactly what the Python reference function receives: a varlena's payload
//! without its header (hstore, ltree, lquery, cube) or the fixed-length image (seg: 12
//! bytes, the isn types: 8).
//!
//! Hands on, appended to a `String` (or, for `hstore_pairs`, returned):
//! - `hstore_text` (hstore_out), `hstore_json` and `hstore_pairs` (the Debezium value in
//!   hstore.handling.mode json and map: the pairs in java.util.HashMap iteration order,
//!   the JSON compact as Jackson writes it): `hstore`;
//! - `ltree_text`, `lquery_text` (ltree_out, lquery_out): `ltree`;
//! - `cube_text` (cube_out; earthdistance's `earth` too), `seg_text` (seg_out): `cube`;
//! - `isn_text` (ean13_out for ean13, isbn13, ismn13, issn13; isn_out for isbn, ismn,
//!   issn, upc): `isn`, with the hyphenation tables in `isn_ranges`.
//!
//! The Python reference, mirrored check for check: service.types.hstore,
//! service.types.ltree, service.types.cube (cube_text, seg_text), service.types.isn,
//! and connectors.avro.extension_types (hstore_json, hstore_map, java_hash_order,
//! java_string_hash, _json_string).
//!
//! Errors: whatever the Python reference rejects (its DecodeError, and the
//! UnicodeDecodeError / IndexError it would raise on a damaged datum) is
//! `Err(reason)`, and so is anything not known to match it byte for byte (a float that
//! `super::float` leaves to Python); `out` is then as it was.
//!
//! Pure, no panics: every read is checked, arithmetic is checked or widened, and every
//! loop is bounded by the datum's length or a fixed cap.

mod cube;
mod hstore;
mod isn;
mod isn_ranges;
mod ltree;

#[cfg(test)]
mod tests;

pub use cube::{cube_text, seg_text};
pub use hstore::{hstore_json, hstore_pairs, hstore_text, java_hash_order, java_string_hash};
pub use isn::{isn_text, IsnKind};
pub use ltree::{lquery_text, ltree_text};

use super::u32_at;
use super::undo_on_err as atomic;

fn u16_at(d: &[u8], at: usize) -> Option<u16> {
    let bytes = d.get(at..at.checked_add(2)?)?;
    Some(u16::from_le_bytes(bytes.try_into().ok()?))
}

fn f64_at(d: &[u8], at: usize) -> Option<f64> {
    let bytes = d.get(at..at.checked_add(8)?)?;
    Some(f64::from_le_bytes(bytes.try_into().ok()?))
}

/// `n` rounded up to a multiple of 8 (MAXALIGN); None past usize.
fn maxalign(n: usize) -> Option<usize> {
    Some(n.checked_add(7)? & !7)
}
