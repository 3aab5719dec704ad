//! The native row encoder: a heap tuple deformed against a per-table plan and written
//! straight as the Avro binary of the avro plugin's Value and Key records.
//!
//! Receives: a `Plan`, compiled once per table definition by connectors.avro.native_rows
//! from the definition's columns (service.schema.tabledef.ColumnDef: attlen, attalign,
//! dropped, atthasmissing) and the Avro mapping connectors.avro.schema chose for each
//! live column (`Kind`, nullability); then per row a `Tuple`: the RawTuple the heap
//! decoder hands on (natts, infomask, t_hoff, the bytes from t_bits on).
//! Hands on: `Outcome::Encoded` with the Value record's bytes (its fields in plan order,
//! a nullable field as the `["null", T]` union) and the Key record's (the key columns,
//! required: a NULL becomes the type's zero value, as KeyFromValue); or
//! `Outcome::Fallback(reason)` when the row holds something only the Python path decides
//! (an external TOAST pointer, a missing attribute with a default, NaN/±Infinity, text
//! that is not UTF-8, a value an Avro `int` cannot hold, ...). A fallback is the whole
//! row: the caller encodes it with the Python reference, never half of each.
//!
//! Deform mirrors heap_deform_tuple (and service.types.deform.deform_at, check for
//! check): the null bitmap, each attribute aligned to its attalign relative to the tuple
//! start, except a varlena whose first byte is not zero (att_align_pointer); 1-byte and
//! 4-byte varlena headers; inline-compressed varlenas (toast_decompress_datum: pglz or
//! lz4, with the decompressors in crate::wal); attributes past natts are NULL (or fall
//! back when the column has a missing default, getmissingattr).
//!
//! Errors: a tuple that does not fit its definition is `RowError::Mismatch` (the Python
//! SchemaMismatchError) with deform_at's messages; a malformed varlena header is
//! `RowError::Decode` (DecodeError). Nothing here panics on any input (fuzzed by
//! tests/perf/fuzz_native_rows.py); the boundary still catches a panic.
//!
//! Pure: no Python, no I/O.

pub mod array;
pub mod avro;
pub mod copy;
pub mod datetime;
pub mod extension;
pub mod float;
pub mod formats;
pub mod geometric;
pub mod jsonb;
pub mod network;
pub mod numeric;
pub mod output;
pub mod pgvector;
pub mod postgis;
pub mod range;
pub mod text;
pub mod tsearch;

#[cfg(test)]
mod tests;

use std::borrow::Cow;

const HEAP_HASNULL: u16 = 0x0001;
const T_BITS_OFFSET: usize = 23; // offsetof(HeapTupleHeaderData, t_bits)
const VARLENA_EXTSIZE_MASK: u32 = 0x3FFF_FFFF;
const TOAST_PGLZ_COMPRESSION_ID: u32 = 0;
const TOAST_LZ4_COMPRESSION_ID: u32 = 1;

/// The Avro encoding of one column, as connectors.avro.schema maps its type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Bool,
    Int2,
    Int4,
    Int8,
    Oid,
    Float4,
    Float8,
    /// text, varchar, bpchar, json: the stored UTF-8 as an Avro string.
    Text,
    /// name: the bytes before the first NUL of NameData.
    Name,
    Bytea,
    Uuid,
    Date,
    Time,
    Timestamp,
    TimestampTz,
    /// numeric(precision, scale) in decimal.handling.mode=precise.
    Decimal {
        scale: u32,
        precision: u32,
    },
    /// unconstrained numeric: VariableScaleDecimal {scale int, value bytes}.
    VarDecimal,
    /// interval: MicroDuration (a long of µs, months of 30.4375 days).
    Interval,
    /// timetz: ZonedTime (the time in UTC as text).
    TimeTz,
    /// money in decimal.handling.mode=precise: Decimal(64, 2) of the cents.
    Money,
    /// "char": charout's text.
    Char,
    /// inet and cidr: the output function's text (`cidr` prints the mask always).
    Inet {
        cidr: bool,
    },
    /// macaddr and macaddr8: the output text.
    Mac,
    Mac8,
    /// bit(n > 1) and varbit: io.debezium.data.Bits (BitSet.toByteArray).
    Bits,
    /// bit(1): a boolean.
    Bit1,
    /// jsonb: jsonb_out's text (io.debezium.data.Json).
    Jsonb,
    /// xml: xml_out's text (io.debezium.data.Xml).
    Xml,
    /// An enum: the label of the stored pg_enum OID (io.debezium.data.Enum), from the
    /// column's `labels`.
    Enum,
    /// An array: an Avro array of `["null", T]` items, T the column's `elem` kind.
    Array,
    /// numeric in decimal.handling.mode=string: numeric_out's text.
    NumericText,
    /// numeric in decimal.handling.mode=double: the value as the nearest double.
    NumericDouble,
    /// money in decimal.handling.mode=string: cash_out's text.
    MoneyText,
    /// money in decimal.handling.mode=double.
    MoneyDouble,
    /// A type published as its output text (geometric but point, tsvector, tsquery,
    /// the built-in ranges and multiranges): a string.
    Output(output::Output),
    /// point: io.debezium.data.geometry.Point {x, y, wkb (a 2D WKB point), srid null}.
    Point,
    /// A composite: record_out's text (the column's `composite`), a string.
    Composite,
    /// hstore in hstore.handling.mode=json: io.debezium.data.Json, its pairs in
    /// java.util.HashMap order as Jackson writes them.
    HstoreJson,
    /// hstore in hstore.handling.mode=map: an Avro map of `["null", string]`.
    HstoreMap,
    /// PostGIS geometry / geography: io.debezium.data.geometry.Geometry / Geography
    /// {wkb: the EWKB, srid} (rows::postgis).
    Geometry,
    /// pgvector vector: io.debezium.data.DoubleVector, an array of double.
    DoubleVector,
    /// pgvector halfvec: io.debezium.data.FloatVector, an array of float.
    FloatVector,
    /// pgvector sparsevec: io.debezium.data.SparseDoubleVector {dimensions, vector: an
    /// array of MapEntry {key, value}}.
    SparseVector,
}

impl Kind {
    /// The name connectors.avro.native_rows passes for it.
    pub fn parse(name: &str, scale: u32, precision: u32) -> Option<Kind> {
        Some(match name {
            "bool" => Kind::Bool,
            "int2" => Kind::Int2,
            "int4" => Kind::Int4,
            "int8" => Kind::Int8,
            "oid" => Kind::Oid,
            "float4" => Kind::Float4,
            "float8" => Kind::Float8,
            "text" => Kind::Text,
            "name" => Kind::Name,
            "bytea" => Kind::Bytea,
            "uuid" => Kind::Uuid,
            "date" => Kind::Date,
            "time" => Kind::Time,
            "timestamp" => Kind::Timestamp,
            "timestamptz" => Kind::TimestampTz,
            "decimal" => Kind::Decimal { scale, precision },
            "variable_decimal" => Kind::VarDecimal,
            "interval" => Kind::Interval,
            "timetz" => Kind::TimeTz,
            "money" => Kind::Money,
            "char" => Kind::Char,
            "inet" => Kind::Inet { cidr: false },
            "cidr" => Kind::Inet { cidr: true },
            "macaddr" => Kind::Mac,
            "macaddr8" => Kind::Mac8,
            "bits" => Kind::Bits,
            "bit1" => Kind::Bit1,
            "jsonb" => Kind::Jsonb,
            "xml" => Kind::Xml,
            "enum" => Kind::Enum,
            "array" => Kind::Array,
            "numeric_text" => Kind::NumericText,
            "numeric_double" => Kind::NumericDouble,
            "money_text" => Kind::MoneyText,
            "money_double" => Kind::MoneyDouble,
            "point_record" => Kind::Point,
            "composite" => Kind::Composite,
            "hstore_json" => Kind::HstoreJson,
            "hstore_map" => Kind::HstoreMap,
            "geometry_record" => Kind::Geometry,
            "double_vector" => Kind::DoubleVector,
            "float_vector" => Kind::FloatVector,
            "sparse_vector" => Kind::SparseVector,
            _ => Kind::Output(output::Output::parse(name)?),
        })
    }

    /// The attlen the kind's stored form has (what the plan checks at compile time).
    pub fn attlen(self) -> i16 {
        match self {
            Kind::Bool | Kind::Char => 1,
            Kind::Int2 => 2,
            Kind::Int4 | Kind::Oid | Kind::Float4 | Kind::Date | Kind::Enum => 4,
            Kind::Int8
            | Kind::Float8
            | Kind::Time
            | Kind::Timestamp
            | Kind::TimestampTz
            | Kind::Money
            | Kind::MoneyText
            | Kind::MoneyDouble
            | Kind::Mac8 => 8,
            Kind::TimeTz => 12,
            Kind::Uuid | Kind::Interval | Kind::Point => 16,
            Kind::Output(o) => o.attlen(),
            Kind::Name => 64,
            Kind::Mac => 6,
            Kind::Text
            | Kind::Bytea
            | Kind::Decimal { .. }
            | Kind::VarDecimal
            | Kind::Inet { .. }
            | Kind::Bits
            | Kind::Bit1
            | Kind::Jsonb
            | Kind::Xml
            | Kind::Array
            | Kind::NumericText
            | Kind::NumericDouble
            | Kind::Composite
            | Kind::HstoreJson
            | Kind::HstoreMap
            | Kind::Geometry
            | Kind::DoubleVector
            | Kind::FloatVector
            | Kind::SparseVector => -1,
        }
    }
}

/// One attribute of the table definition, dropped ones included.
#[derive(Clone, Debug)]
pub struct Column {
    pub name: String,
    pub attlen: i16,
    /// 1, 2, 4 or 8 (attalign c, s, i, d).
    pub align: usize,
    pub dropped: bool,
    pub has_missing: bool,
    /// The field's encoding when the column is in the Value record (live, not
    /// excluded by a column filter); None: deformed past, never written.
    pub kind: Option<Kind>,
    /// The field is the `["null", T]` union (the column is nullable).
    pub optional: bool,
    /// Someone reads the value (deform decompresses it): a live column of the Value
    /// record, or one the text plan prints (rows::text).
    pub read: bool,
    /// An enum column's (or enum array's) labels by pg_enum OID; empty otherwise.
    pub labels: Labels,
    /// An array column's element type; None otherwise.
    pub elem: Option<Elem>,
    /// A composite column's fields; None otherwise.
    pub composite: Option<std::sync::Arc<text::Composite>>,
}

/// An array's element type: its encoding and stored form (pg_type's typlen, typalign).
#[derive(Clone, Copy, Debug)]
pub struct Elem {
    pub kind: Kind,
    pub oid: u32,
    pub attlen: i16,
    pub align: usize,
}

/// An enum type's labels by the OID its datums store.
pub type Labels = std::collections::HashMap<u32, String>;

/// A little-endian u32 at `at`, None past the end (the value readers' one bounds check).
pub fn u32_at(d: &[u8], at: usize) -> Option<u32> {
    let bytes = d.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes(bytes.try_into().ok()?))
}

/// Why a varlena nested in another datum (an array element, a range bound, a jsonb
/// numeric) is not read here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nested {
    /// A TOAST pointer (never nested in a valid datum).
    Toast,
    /// Inline-compressed: Python decompresses it.
    Compressed,
    /// Its header or size runs past the datum.
    Overrun,
}

/// The varlena at `at` of `d` (service.types.varlena.read_varlena for a nested datum):
/// its payload and its whole size, header included; a 1-byte or an uncompressed 4-byte
/// header.
pub fn nested_varlena(d: &[u8], at: usize) -> Result<(&[u8], usize), Nested> {
    let b0 = *d.get(at).ok_or(Nested::Overrun)?;
    if b0 == 0x01 {
        return Err(Nested::Toast);
    }
    if b0 & 0x01 != 0 {
        let size = (b0 >> 1) as usize;
        let payload = d.get(at + 1..at + size).ok_or(Nested::Overrun)?;
        return Ok((payload, size));
    }
    let size = (u32_at(d, at).ok_or(Nested::Overrun)? >> 2) as usize;
    let end = at.checked_add(size).ok_or(Nested::Overrun)?;
    if size < 4 || end > d.len() {
        return Err(Nested::Overrun);
    }
    if b0 & 0x03 == 0x02 {
        return Err(Nested::Compressed);
    }
    Ok((&d[at + 4..end], size))
}

/// Runs `write` on `out`; on Err, `out` is cut back to what it was (the output writers'
/// rule: a value that falls back leaves no partial text behind).
pub fn undo_on_err(
    out: &mut String,
    write: impl FnOnce(&mut String) -> Result<(), &'static str>,
) -> Result<(), &'static str> {
    let mark = out.len();
    let done = write(out);
    if done.is_err() {
        out.truncate(mark);
    }
    done
}

/// enum_out: the label of a stored pg_enum OID, or a fallback (Python raises its
/// UnknownTypeError naming the type).
pub fn enum_label<'a>(labels: &'a Labels, d: &[u8]) -> Result<&'a str, &'static str> {
    let oid = u32::from_le_bytes(fixed(d)?);
    labels
        .get(&oid)
        .map(String::as_str)
        .ok_or("enum label Python decides")
}

#[derive(Clone, Debug)]
pub struct Plan {
    pub columns: Vec<Column>,
    /// Indexes into `columns` of the Key record's fields, in key order.
    pub key: Vec<usize>,
}

/// A heap tuple as the WAL logs it (service.decode.events.RawTuple).
pub struct Tuple<'a> {
    pub natts: usize,
    pub infomask: u16,
    pub hoff: usize,
    pub data: &'a [u8],
}

#[derive(Debug, PartialEq, Eq)]
pub enum RowError {
    /// service.errors.SchemaMismatchError
    Mismatch {
        message: String,
        field: Option<String>,
    },
    /// service.errors.DecodeError
    Decode {
        message: String,
        field: Option<String>,
    },
}

#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Encoded { value: Vec<u8>, key: Vec<u8> },
    Fallback(&'static str),
}

/// What a deformed attribute is: NULL (or dropped, or absent) or its stored bytes.
pub type Datum<'a> = Option<Cow<'a, [u8]>>;

enum Step<'a> {
    Datums(Vec<Datum<'a>>),
    Fallback(&'static str),
}

/// The TOAST values a change's tuple points to: chunk id (`va_valueid`) -> the chunk_data
/// of all its chunks in chunk_seq order (`ReplayChange.toast`, as the reorder buffer
/// reassembled them: ReorderBufferToastReplace).
pub type Toast<'a> = std::collections::HashMap<u32, &'a [u8]>;

const VARTAG_ONDISK: u8 = 18;
/// varattrib_1b_e's header and its varatt_external (va_rawsize, va_extinfo, va_valueid,
/// va_toastrelid): the bytes an on-disk TOAST pointer takes in a tuple.
const TOAST_POINTER_SIZE: usize = 2 + 16;

/// detoast_external_attr of the on-disk TOAST pointer `ptr` (service.types.varlena's
/// resolve_toast): the value's payload from `toast`, decompressed; Err(reason) where the
/// Python path must decide (its chunks are not in this change: the unchanged-TOAST
/// marker; a size that disagrees or a stream that fails: its DecodeError).
fn resolve_toast<'a>(ptr: &[u8], toast: &Toast<'a>) -> Result<Cow<'a, [u8]>, &'static str> {
    let field = |at: usize| u32_at(ptr, at).ok_or("short TOAST pointer");
    if ptr.get(1) != Some(&VARTAG_ONDISK) {
        return Err("TOAST pointer of another tag");
    }
    let rawsize = field(2)? as usize;
    let extinfo = field(6)?;
    let valueid = field(10)?;
    let Some(&data) = toast.get(&valueid) else {
        return Err("external TOAST pointer");
    };
    let extsize = (extinfo & VARLENA_EXTSIZE_MASK) as usize;
    if data.len() != extsize {
        return Err("TOAST value of another size");
    }
    // VARATT_EXTERNAL_IS_COMPRESSED
    if extsize + 4 >= rawsize {
        return Ok(Cow::Borrowed(data));
    }
    let tcinfo = u32_at(data, 0).ok_or("short compressed TOAST value")?;
    let raw = (tcinfo & VARLENA_EXTSIZE_MASK) as usize;
    if raw + 4 != rawsize {
        return Err("compressed TOAST value of another size");
    }
    let out = match tcinfo >> 30 {
        TOAST_PGLZ_COMPRESSION_ID => crate::wal::pglz::decompress(&data[4..], raw).ok(),
        TOAST_LZ4_COMPRESSION_ID => crate::wal::lz4::decompress(&data[4..], raw).ok(),
        _ => None,
    };
    match out {
        Some(v) if v.len() == raw => Ok(Cow::Owned(v)),
        _ => Err("TOAST value that does not decompress"),
    }
}

fn mismatch(message: String, field: Option<&str>) -> RowError {
    RowError::Mismatch {
        message,
        field: field.map(str::to_string),
    }
}

fn decode_err(message: String, field: &str) -> RowError {
    RowError::Decode {
        message,
        field: Some(field.to_string()),
    }
}

impl Plan {
    /// heap_deform_tuple over the plan's columns (see the module docstring).
    fn deform<'a>(&self, t: &Tuple<'a>, toast: Option<&Toast<'a>>) -> Result<Step<'a>, RowError> {
        let n = self.columns.len();
        if t.natts > n {
            return Err(mismatch(
                format!("tuple has {} attributes, definition has {n}", t.natts),
                None,
            ));
        }
        let buf = t.data;
        let nbuf = buf.len();
        let has_nulls = t.infomask & HEAP_HASNULL != 0;
        if has_nulls && t.natts.div_ceil(8) > nbuf {
            return Err(mismatch("null bitmap overruns the tuple".into(), None));
        }
        if t.hoff < T_BITS_OFFSET {
            return Err(mismatch(
                format!("t_hoff {} lies inside the tuple header", t.hoff),
                None,
            ));
        }
        let end = nbuf + T_BITS_OFFSET;
        let mut off = t.hoff;
        let mut out: Vec<Datum<'a>> = Vec::with_capacity(n);
        for (i, col) in self.columns.iter().enumerate() {
            if i >= t.natts {
                if col.has_missing && !col.dropped {
                    return Ok(Step::Fallback("attribute missing with a default"));
                }
                out.push(None);
                continue;
            }
            if has_nulls && (buf[i >> 3] >> (i & 7)) & 1 == 0 {
                out.push(None);
                continue;
            }
            let overrun = |off: usize| {
                mismatch(
                    format!("column {} overruns the tuple at offset {off}", col.name),
                    Some(&col.name),
                )
            };
            let mask = col.align - 1;
            let (value, size): (Cow<'a, [u8]>, usize) = if col.attlen > 0 {
                off = (off + mask) & !mask;
                let p = off - T_BITS_OFFSET;
                let size = col.attlen as usize;
                if p + size > nbuf {
                    return Err(overrun(off));
                }
                (Cow::Borrowed(&buf[p..p + size]), size)
            } else if col.attlen == -1 {
                let mut p = off - T_BITS_OFFSET;
                let mut b0 = *buf.get(p).ok_or_else(|| overrun(off))?;
                if b0 == 0 {
                    off = (off + mask) & !mask;
                    p = off - T_BITS_OFFSET;
                    b0 = *buf.get(p).ok_or_else(|| overrun(off))?;
                }
                if b0 == 0x01 {
                    // VARATT_IS_EXTERNAL: the value is in the change's TOAST chunks.
                    let Some(toast) = toast else {
                        return Ok(Step::Fallback("external TOAST pointer"));
                    };
                    let ptr = buf
                        .get(p..p + TOAST_POINTER_SIZE)
                        .ok_or_else(|| overrun(off))?;
                    if col.dropped || !col.read {
                        (Cow::Borrowed(&buf[p..p]), TOAST_POINTER_SIZE)
                    } else {
                        match resolve_toast(ptr, toast) {
                            Ok(v) => (v, TOAST_POINTER_SIZE),
                            Err(why) => return Ok(Step::Fallback(why)),
                        }
                    }
                } else if b0 & 0x01 != 0 {
                    let size = (b0 >> 1) as usize;
                    if p + size > nbuf {
                        return Err(decode_err(
                            format!("short varlena of {size} bytes at offset {p} overruns datum"),
                            &col.name,
                        ));
                    }
                    (Cow::Borrowed(&buf[p + 1..p + size]), size)
                } else {
                    if p + 4 > nbuf {
                        return Err(decode_err(
                            format!("varlena header at offset {p} overruns datum"),
                            &col.name,
                        ));
                    }
                    let word = u32::from_le_bytes([buf[p], buf[p + 1], buf[p + 2], buf[p + 3]]);
                    let size = (word >> 2) as usize;
                    if size < 4 || p + size > nbuf {
                        return Err(decode_err(
                            format!("varlena of {size} bytes at offset {p} overruns datum"),
                            &col.name,
                        ));
                    }
                    if b0 & 0x03 == 0x02 {
                        if col.dropped || !col.read {
                            // Nobody reads it: skip without decompressing.
                            (Cow::Borrowed(&buf[p..p]), size)
                        } else {
                            match inline_decompress(&buf[p..p + size]) {
                                Some(v) => (Cow::Owned(v), size),
                                None => return Ok(Step::Fallback("inline compression")),
                            }
                        }
                    } else {
                        (Cow::Borrowed(&buf[p + 4..p + size]), size)
                    }
                }
            } else if col.attlen == -2 {
                off = (off + mask) & !mask;
                let p = off - T_BITS_OFFSET;
                let rest = buf.get(p..).ok_or_else(|| overrun(off))?;
                let nul = rest
                    .iter()
                    .position(|&b| b == 0)
                    .ok_or_else(|| overrun(off))?;
                (Cow::Borrowed(&rest[..nul]), nul + 1)
            } else {
                return Err(mismatch(
                    format!("column {} has invalid typlen {}", col.name, col.attlen),
                    None,
                ));
            };
            if off + size > end {
                return Err(mismatch(
                    format!(
                        "column {} ({size} bytes at {off}) overruns the tuple of {end} bytes",
                        col.name
                    ),
                    Some(&col.name),
                ));
            }
            off += size;
            out.push(if col.dropped { None } else { Some(value) });
        }
        Ok(Step::Datums(out))
    }

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
        let datums = match self.deform(t, toast)? {
            Step::Datums(d) => d,
            Step::Fallback(why) => return Ok(Outcome::Fallback(why)),
        };
        Ok(self.encode_datums(&datums, want_key, t.data.len() + 16))
    }

    /// The Value (and with `want_key` the Key) record of a row's datums, one per plan
    /// column (None: NULL, or not read), however they were obtained: deformed from a
    /// heap tuple (`encode_toasted`) or rewritten from COPY's send format (rows::copy).
    /// `capacity`: the Value record's expected size.
    pub fn encode_datums(&self, datums: &[Datum<'_>], want_key: bool, capacity: usize) -> Outcome {
        let mut value = Vec::with_capacity(capacity);
        for (col, datum) in self.columns.iter().zip(datums) {
            let Some(kind) = col.kind else { continue };
            if let Err(why) = field(&mut value, col, kind, col.optional, datum.as_deref()) {
                return Outcome::Fallback(why);
            }
        }
        let mut key = Vec::new();
        if want_key {
            for &k in &self.key {
                let col = &self.columns[k];
                let Some(kind) = col.kind else {
                    return Outcome::Fallback("key column not in the value record");
                };
                let datum = datums.get(k).and_then(|d| d.as_deref());
                if let Err(why) = field(&mut key, col, kind, false, datum) {
                    return Outcome::Fallback(why);
                }
            }
        }
        Outcome::Encoded { value, key }
    }
}

/// toast_decompress_datum of a whole 4-byte-header compressed varlena (header, then
/// va_tcinfo, then the stream). None where Python must decide (a failure: its error).
fn inline_decompress(varlena: &[u8]) -> Option<Vec<u8>> {
    if varlena.len() < 8 {
        return None;
    }
    let tcinfo = u32::from_le_bytes([varlena[4], varlena[5], varlena[6], varlena[7]]);
    let rawsize = (tcinfo & VARLENA_EXTSIZE_MASK) as usize;
    let stream = &varlena[8..];
    let out = match tcinfo >> 30 {
        TOAST_PGLZ_COMPRESSION_ID => crate::wal::pglz::decompress(stream, rawsize).ok()?,
        TOAST_LZ4_COMPRESSION_ID => crate::wal::lz4::decompress(stream, rawsize).ok()?,
        _ => return None,
    };
    (out.len() == rawsize).then_some(out)
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
        Kind::Geometry => {
            avro::bytes(out, &[0x01, 0x07, 0, 0, 0, 0, 0, 0, 0]);
            out.extend_from_slice(&[avro::SECOND_BRANCH, 0x00]);
        }
        // {"dimensions": 0, "vector": []}
        Kind::SparseVector => out.extend_from_slice(&[0x00, 0x00]),
        // "", b"", 0, false: a single zero byte each
        _ => out.push(0x00),
    }
}

fn fixed<const N: usize>(d: &[u8]) -> Result<[u8; N], &'static str> {
    d.try_into()
        .map_err(|_| "stored size differs from the type's")
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
            o.write(&mut text, d)?;
            avro::bytes(out, text.as_bytes());
        }
        Kind::Point => {
            let (x, y) = geometric::point_xy(d)?;
            point(out, x, y);
        }
        Kind::Geometry => {
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
            } else {
                numeric::text(&mut text, d).ok_or("numeric Python decides")?;
            }
            avro::bytes(out, text.as_bytes());
        }
        Kind::NumericDouble | Kind::MoneyDouble => {
            // float(Decimal): the decimal's text read as the nearest double.
            let mut text = String::new();
            if kind == Kind::MoneyDouble {
                formats::money_decimal(&mut text, d)?;
            } else {
                numeric::text(&mut text, d).ok_or("numeric Python decides")?;
            }
            let v: f64 = text.parse().map_err(|_| "numeric Python decides")?;
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
