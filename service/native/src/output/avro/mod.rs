//! The avro plugin's native row encoder: a heap tuple deformed against a per-table
//! `Plan` and written straight as the Avro binary of the plugin's Value and Key records
//! (connectors.avro.native_rows is its glue on the Python side, glue::avro on this one).
//!
//! Receives: a `Plan` (output::plan), compiled once per table definition from the
//! definition's columns and the Avro mapping connectors.avro.schema chose for each live
//! column (`Kind`, nullability); then per row a `Tuple` (with the change's TOAST values
//! when it has them), or datums another reader made (tablesnap::copy).
//! Hands on: `Outcome::Encoded` with the Value record's bytes (its fields in plan order,
//! a nullable field as the `["null", T]` union) and the Key record's (the key columns,
//! required: a NULL becomes the type's zero value, as KeyFromValue); or
//! `Outcome::Fallback(reason)` when the row holds something only the Python path decides
//! (an external TOAST pointer without its chunks in a column without a placeholder or in
//! a key column (a column with one writes it: Debezium's `__debezium_unavailable_value`,
//! `Column::placeholder`), a missing attribute with a default, NaN/±Infinity in a
//! NOT NULL decimal column (in a nullable one it is written as null and the column
//! flagged for the caller's warning, `Plan::take_dropped`), text
//! that is not UTF-8, a value an Avro `int` cannot hold, ...). A fallback is the whole
//! row: the caller encodes it with the Python reference, never half of each.
//!
//! Errors: the deform's `RowError` (crate::types::deform). Nothing here panics on any
//! input (fuzzed by tests/perf/fuzz_native_rows.py); the boundary still catches a panic.
//! Pure: no Python, no I/O.

pub mod binary;

#[cfg(test)]
mod tests;

use crate::types::deform::{is_unchanged, Datum, Deformed, RowError, Toast, Tuple};
use crate::types::{
    array, datetime, enum_label, extension, fixed, formats, geometric, jsonb, network, numeric,
    pgvector, postgis, regproc,
};

use super::kind::Kind;
use super::plan::{Column, Plan};
use super::text;
use binary as avro;

#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Encoded { value: Vec<u8>, key: Vec<u8> },
    Fallback(&'static str),
}

impl Plan {
    /// The Value record (and, with `want_key`, the Key record) of one tuple.
    pub fn encode(&self, t: &Tuple<'_>, want_key: bool) -> Result<Outcome, RowError> {
        self.encode_toasted(t, want_key, None)
    }

    /// `encode` of a tuple whose external TOAST pointers are resolved from `toast`.
    pub fn encode_toasted<'a>(
        &self,
        t: &Tuple<'a>,
        want_key: bool,
        toast: Option<&Toast<'a>>,
    ) -> Result<Outcome, RowError> {
        let mut value = Vec::with_capacity(t.data.len() + 16);
        Ok(
            match self.encode_toasted_into(t, want_key, toast, &mut value)? {
                Ok(value_end) => {
                    let key = value.split_off(value_end);
                    Outcome::Encoded { value, key }
                }
                Err(why) => Outcome::Fallback(why),
            },
        )
    }

    /// `encode_toasted` appended to `out`, as `encode_datums_into` writes: Ok(Ok(where
    /// the Value record ends)), the Key record after it; Ok(Err(reason)) for a fallback,
    /// `out` as it was. For a caller that reuses one buffer for a run's rows (no
    /// allocation per row once it has grown).
    pub fn encode_toasted_into<'a>(
        &self,
        t: &Tuple<'a>,
        want_key: bool,
        toast: Option<&Toast<'a>>,
        out: &mut Vec<u8>,
    ) -> Result<Result<usize, &'static str>, RowError> {
        Ok(match self.deform(t, toast)? {
            Deformed::Datums(datums) => self.encode_datums_into(&datums, want_key, out),
            Deformed::Fallback(why) => Err(why),
        })
    }

    /// The Value record of a row's datums, one per plan column (None: NULL, or not read),
    /// however they were obtained (deformed from a heap tuple, `encode_toasted_into`, or
    /// rewritten from COPY's send format, tablesnap::copy), then with `want_key` its Key
    /// record, appended to `out`; Ok(where the Value record ends). On a fallback `out`
    /// is as it was. For a caller that keeps records end to end or reuses one buffer.
    pub fn encode_datums_into(
        &self,
        datums: &[Datum<'_>],
        want_key: bool,
        out: &mut Vec<u8>,
    ) -> Result<usize, &'static str> {
        let start = out.len();
        let written = self.write_records(datums, want_key, out);
        if written.is_err() {
            out.truncate(start);
        }
        written
    }

    fn write_records(
        &self,
        datums: &[Datum<'_>],
        want_key: bool,
        out: &mut Vec<u8>,
    ) -> Result<usize, &'static str> {
        for (col, datum) in self.columns.iter().zip(datums) {
            let Some(kind) = col.kind else { continue };
            let datum = datum.as_deref();
            match (datum, &col.placeholder) {
                // an unchanged TOAST value: the placeholder the compiler encoded
                (Some(d), Some(p)) if is_unchanged(d) => out.extend_from_slice(p),
                _ => field(out, col, kind, col.optional, datum)?,
            }
        }
        let value_end = out.len();
        if want_key {
            for &k in &self.key {
                let col = &self.columns[k];
                let Some(kind) = col.kind else {
                    return Err("key column not in the value record");
                };
                let datum = datums.get(k).and_then(|d| d.as_deref());
                if datum.is_some_and(is_unchanged) {
                    return Err("unchanged TOAST value in the key");
                }
                field(out, col, kind, false, datum)?;
            }
        }
        Ok(value_end)
    }
}

/// The type's zero value, written where a required field meets NULL
/// (connectors.avro.schema.FieldPlan.zero, as fastavro writes it).
fn zero(out: &mut Vec<u8>, kind: Kind) {
    match kind {
        Kind::Float4 => out.extend_from_slice(&[0; 4]),
        Kind::Float8 | Kind::NumericDouble | Kind::MoneyDouble => out.extend_from_slice(&[0; 8]),
        // Decimal(0): one zero byte of unscaled value.
        Kind::Decimal { .. } | Kind::Money => out.extend_from_slice(&[0x02, 0x00]),
        // {"scale": 0, "value": b"\x00"}
        Kind::VarDecimal => out.extend_from_slice(&[0x00, 0x02, 0x00]),
        // point_datum of (0, 0)
        Kind::Point => point(out, 0.0, 0.0),
        // the hstore zero of json mode is "{}" (the map's is the empty map: 0)
        Kind::HstoreJson => avro::bytes(out, b"{}"),
        // an empty GEOMETRYCOLLECTION (createEmpty), srid 0
        Kind::Geometry { .. } => {
            avro::bytes(out, &[0x01, 0x07, 0, 0, 0, 0, 0, 0, 0]);
            out.extend_from_slice(&[avro::SECOND_BRANCH, 0x00]);
        }
        // {"dimensions": 0, "vector": []}
        Kind::SparseVector => out.extend_from_slice(&[0x00, 0x00]),
        // "", b"", 0, false: a single zero byte each
        _ => out.push(0x00),
    }
}

/// The Point record (connectors.avro.extension_types.point_datum): x, y, the WKB of a 2D
/// point (little-endian byte order 1, type 1, x, y) in the `["null", bytes]` union, and
/// srid null.
fn point(out: &mut Vec<u8>, x: f64, y: f64) {
    out.extend_from_slice(&x.to_le_bytes());
    out.extend_from_slice(&y.to_le_bytes());
    out.push(avro::SECOND_BRANCH);
    avro::long(out, 21);
    out.push(1);
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(&x.to_le_bytes());
    out.extend_from_slice(&y.to_le_bytes());
    out.push(avro::NULL_BRANCH);
}

/// One field: the union branch if `optional`, then the value (or null / zero).
fn field(
    out: &mut Vec<u8>,
    col: &Column,
    kind: Kind,
    optional: bool,
    datum: Option<&[u8]>,
) -> Result<(), &'static str> {
    let Some(d) = datum else {
        if optional {
            out.push(avro::NULL_BRANCH);
        } else {
            zero(out, kind);
        }
        return Ok(());
    };
    if optional
        && matches!(kind, Kind::Decimal { .. } | Kind::VarDecimal)
        && numeric::special(d).is_some()
    {
        // An Avro decimal cannot hold NaN/±Infinity: a nullable column gets null, as
        // connectors.avro.schema._numeric_mapping's `special` gives it, and the caller
        // warns (Plan::take_dropped). A NOT NULL column (and every key field) stays
        // the Python path's, which raises naming it.
        out.push(avro::NULL_BRANCH);
        col.special_dropped
            .store(true, std::sync::atomic::Ordering::Relaxed);
        return Ok(());
    }
    let mark = out.len();
    if optional {
        out.push(avro::SECOND_BRANCH);
    }
    let done = write_value(out, col, kind, d);
    if done.is_err() {
        out.truncate(mark);
    }
    done
}

fn write_value(out: &mut Vec<u8>, col: &Column, kind: Kind, d: &[u8]) -> Result<(), &'static str> {
    match kind {
        Kind::Bool => out.push(u8::from(fixed::<1>(d)?[0] != 0)),
        Kind::Int2 => avro::long(out, i16::from_le_bytes(fixed(d)?) as i64),
        Kind::Int4 => avro::long(out, i32::from_le_bytes(fixed(d)?) as i64),
        Kind::Int8 => avro::long(out, i64::from_le_bytes(fixed(d)?)),
        Kind::Oid => avro::long(out, u32::from_le_bytes(fixed(d)?) as i64),
        Kind::Float4 => {
            let b: [u8; 4] = fixed(d)?;
            if f32::from_le_bytes(b).is_nan() {
                // a NaN's payload may not survive float4 -> Python float -> float
                return Err("float4 NaN");
            }
            out.extend_from_slice(&b);
        }
        Kind::Float8 => out.extend_from_slice(&fixed::<8>(d)?),
        Kind::Text => {
            std::str::from_utf8(d).map_err(|_| "text is not UTF-8")?;
            avro::bytes(out, d);
        }
        Kind::Name => {
            let end = d.iter().position(|&b| b == 0).unwrap_or(d.len());
            std::str::from_utf8(&d[..end]).map_err(|_| "name is not UTF-8")?;
            avro::bytes(out, &d[..end]);
        }
        Kind::Bytea => avro::bytes(out, d),
        Kind::Uuid => {
            let b: [u8; 16] = fixed(d)?;
            let mut s = [0u8; 36];
            let hex = b"0123456789abcdef";
            let mut j = 0;
            for (i, byte) in b.iter().enumerate() {
                if matches!(i, 4 | 6 | 8 | 10) {
                    s[j] = b'-';
                    j += 1;
                }
                s[j] = hex[(byte >> 4) as usize];
                s[j + 1] = hex[(byte & 0x0f) as usize];
                j += 2;
            }
            avro::bytes(out, &s);
        }
        Kind::Date => {
            let days =
                datetime::date_days(i32::from_le_bytes(fixed(d)?)).ok_or("date beyond int")?;
            avro::long(out, days as i64);
        }
        Kind::Time => avro::long(out, i64::from_le_bytes(fixed(d)?)),
        Kind::Timestamp => avro::long(
            out,
            datetime::micro_timestamp(i64::from_le_bytes(fixed(d)?)),
        ),
        Kind::TimestampTz => {
            let mut text = [0u8; datetime::ZONED_MAX];
            let n = datetime::zoned_timestamp_to(&mut text, i64::from_le_bytes(fixed(d)?));
            avro::bytes(out, &text[..n]);
        }
        Kind::Decimal { scale, precision } => {
            let b = numeric::fixed(d, scale, precision).ok_or("numeric Python decides")?;
            avro::bytes(out, &b);
        }
        Kind::VarDecimal => {
            let (scale, b) = numeric::variable(d).ok_or("numeric Python decides")?;
            avro::long(out, scale as i64);
            avro::bytes(out, &b);
        }
        Kind::Interval => avro::long(out, formats::duration_micros(d)?),
        Kind::Enum => avro::bytes(out, enum_label(&col.labels, d)?.as_bytes()),
        Kind::Output(o) => {
            let mut text = String::new();
            o.write_labeled(&mut text, d, &col.labels)?;
            avro::bytes(out, text.as_bytes());
        }
        Kind::Point => {
            let (x, y) = geometric::point_xy(d)?;
            point(out, x, y);
        }
        Kind::Geometry { .. } => {
            let (wkb, srid) = postgis::geometry_value(d)?;
            avro::bytes(out, &wkb);
            out.push(avro::SECOND_BRANCH);
            avro::long(out, srid as i64);
        }
        Kind::DoubleVector => {
            let values = pgvector::double_vector(d)?;
            if !values.is_empty() {
                avro::long(out, values.len() as i64);
                for v in &values {
                    out.extend_from_slice(&v.to_le_bytes());
                }
            }
            avro::long(out, 0);
        }
        Kind::FloatVector => {
            let values = pgvector::float_vector(d)?;
            if !values.is_empty() {
                avro::long(out, values.len() as i64);
                for v in &values {
                    out.extend_from_slice(&v.to_le_bytes());
                }
            }
            avro::long(out, 0);
        }
        Kind::SparseVector => {
            let (dimensions, entries) = pgvector::sparse_vector(d)?;
            avro::long(out, dimensions as i64);
            if !entries.is_empty() {
                avro::long(out, entries.len() as i64);
                for (key, value) in &entries {
                    avro::long(out, *key as i64);
                    out.extend_from_slice(&value.to_le_bytes());
                }
            }
            avro::long(out, 0);
        }
        Kind::HstoreJson => {
            let mut text = String::new();
            extension::hstore_json(&mut text, d)?;
            avro::bytes(out, text.as_bytes());
        }
        Kind::HstoreMap => {
            // fastavro's map: one block of the entries (when any), then the empty block
            let pairs = extension::hstore_pairs(d)?;
            if !pairs.is_empty() {
                avro::long(out, pairs.len() as i64);
                for (key, value) in &pairs {
                    avro::bytes(out, key.as_bytes());
                    match value {
                        None => out.push(avro::NULL_BRANCH),
                        Some(v) => {
                            out.push(avro::SECOND_BRANCH);
                            avro::bytes(out, v.as_bytes());
                        }
                    }
                }
            }
            avro::long(out, 0);
        }
        Kind::Composite => {
            let c = col.composite.as_deref().ok_or("composite Python decides")?;
            let mut text = String::new();
            text::composite_text(&mut text, c, d)?;
            avro::bytes(out, text.as_bytes());
        }
        Kind::NumericText | Kind::MoneyText => {
            let mut text = String::new();
            if kind == Kind::MoneyText {
                formats::money_text(&mut text, d)?;
            } else if let Some(word) = numeric::special(d) {
                // str(Decimal('NaN')) and the infinities: the string mode keeps them
                text.push_str(word);
            } else {
                numeric::text(&mut text, d).ok_or("numeric Python decides")?;
            }
            avro::bytes(out, text.as_bytes());
        }
        Kind::NumericDouble | Kind::MoneyDouble => {
            // float(Decimal): the decimal's text read as the nearest double; NaN and the
            // infinities as themselves (float(Decimal('NaN')) is the quiet NaN fastavro
            // packs as 0x7ff8000000000000, f64::NAN's bits too).
            let mut text = String::new();
            let v: f64 = match (kind, numeric::special(d)) {
                (Kind::NumericDouble, Some("NaN")) => f64::NAN,
                (Kind::NumericDouble, Some("Infinity")) => f64::INFINITY,
                (Kind::NumericDouble, Some(_)) => f64::NEG_INFINITY,
                _ => {
                    if kind == Kind::MoneyDouble {
                        formats::money_decimal(&mut text, d)?;
                    } else {
                        numeric::text(&mut text, d).ok_or("numeric Python decides")?;
                    }
                    text.parse().map_err(|_| "numeric Python decides")?
                }
            };
            out.extend_from_slice(&v.to_le_bytes());
        }
        Kind::Array => {
            // The array's items, flattened row-major, as fastavro writes a list: one block
            // of them (when any), then the empty block.
            let e = col.elem.ok_or("array Python decides")?;
            if e.kind == Kind::Array {
                return Err("array Python decides");
            }
            let a = array::elements(d, e.oid, e.attlen, e.align)?;
            if !a.items.is_empty() {
                avro::long(out, a.items.len() as i64);
                for item in &a.items {
                    match item {
                        None => out.push(avro::NULL_BRANCH),
                        Some(v) => {
                            out.push(avro::SECOND_BRANCH);
                            write_value(out, col, e.kind, v)?;
                        }
                    }
                }
            }
            avro::long(out, 0);
        }
        Kind::Reg(_) | Kind::AclItem { .. } => {
            // a name the Python resolver has not resolved yet is its row's fallback
            let names = col.names.as_deref().ok_or("reg* Python decides")?;
            let mut text = String::new();
            match kind {
                Kind::Reg(reg) => regproc::reg_text(&mut text, names, reg, d)?,
                _ => regproc::aclitem_text(&mut text, names, d)?,
            }
            avro::bytes(out, text.as_bytes());
        }
        Kind::Money => avro::bytes(out, &formats::unscaled(formats::money_cents(d)?)),
        Kind::Bits => avro::bytes(out, &formats::bits_bytes(d)?),
        Kind::Bit1 => out.push(u8::from(formats::bit_bool(d)?)),
        Kind::TimeTz
        | Kind::Char
        | Kind::Inet { .. }
        | Kind::Mac
        | Kind::Mac8
        | Kind::Jsonb
        | Kind::Xml => {
            let mut text = String::new();
            match kind {
                Kind::TimeTz => formats::zoned_time(&mut text, d)?,
                Kind::Char => formats::char_text(&mut text, d)?,
                Kind::Inet { cidr } => network::inet_text(&mut text, d, cidr)?,
                Kind::Mac | Kind::Mac8 => network::mac_text(&mut text, d)?,
                Kind::Xml => formats::xml_text(&mut text, d)?,
                _ => jsonb::text(&mut text, d)?,
            }
            avro::bytes(out, text.as_bytes());
        }
    }
    Ok(())
}
