//! The initial snapshot's rows for the row encoder: `COPY ... TO STDOUT (FORMAT binary)`
//! output split into fields, and each field's send format rewritten into the stored form
//! the plan's value converters read.
//!
//! Receives: the bytes of one whole COPY BINARY stream (a snapshot chunk, as the server
//! sent it: signature, header, rows, trailer) and the number of fields a row has; then,
//! per field of a row the plan encodes, the column's `Kind` and the field's bytes.
//! Hands on: `Chunk`, where every field of every row sits in the stream (`field`: its
//! (offset, length), `None` for NULL); `stored`, one field's stored payload: exactly what heap_deform_tuple
//! would hand on for the same value (a fixed-length type's little-endian image, a
//! varlena's payload without its header), the Python reference being
//! service.types.sendform.to_stored, check for check.
//!
//! The layout is copyto.c's (CopyToBinary... : CopySendData of BinarySignature, the flags
//! word and the header extension length; per tuple an int16 field count, per field an
//! int32 length, -1 for NULL, and the typsend bytes; the trailer is a field count of -1),
//! mirrored from connectors.postgres.copy_binary (the Python parser).
//!
//! Each rewrite mirrors a type's *_recv (int2recv ... timestamptz_recv, numeric_recv,
//! interval_recv, timetz_recv, uuid_recv, bit_recv, inet/cidr recv, macaddr(8)_recv,
//! point_recv): network byte order turned into the stored image; the types published as
//! their output text (geometric, ranges and multiranges, tsvector, pg_lsn, xid, xid8)
//! have theirs in tablesnap::sendform; the extension types valued as their text (ltree,
//! lquery, cube, seg, isn), jsonpath, the reg* types and aclitem are selected as `::text`,
//! so their field is the string the encoder writes (`copy_kind`, `read_as_text`); int2vector and oidvector are arrays of int2 / oid
//! (`array`). enum_send is the label,
//! which is what the encoder writes (checked against the plan's labels). jsonb has no
//! stored form reachable from jsonb_send (a version byte and jsonb_out's text), so a
//! jsonb field is handed on as that text and the caller encodes it as a string
//! (`copy_kind`): the value Debezium's Json is, jsonb_out's text. array_recv's input is
//! laid out as the ArrayType types::array reads (`array`), for elements of the kinds above
//! (an enum's label as its OID; a jsonb element as its text, which the copy plan reads
//! as a text element, `copy_plan`; a composite as its datum; a text-read type's array is
//! selected as `::text[]` and planned as a text array); record_recv's input as the
//! composite datum in tablesnap::record (nested composites, enum and array fields too); hstore, pgvector's and PostGIS's in tablesnap::extension. A kind
//! without a rewrite here is
//! `Unsupported`: the caller leaves the whole table to the Python path.
//!
//! Errors: malformed streams and fields are `CopyError` (a message; the boundary raises
//! DecodeError with the table). Nothing here panics on any input (tests below and
//! tests/perf/fuzz_native_copy.py). Pure: no Python, no I/O.

use std::borrow::Cow;

use super::{extension, record, sendform};
#[cfg(test)]
use crate::output::avro::Outcome;
use crate::output::kind::Kind;
use crate::output::plan::{Column, Composite, Elem, Labels, Plan};
use crate::types::deform::{Datum, RowError};
use crate::types::outtext::Output;

/// PostgreSQL's BinarySignature (copyto.c): "PGCOPY\n\377\r\n\0".
pub const SIGNATURE: &[u8; 11] = b"PGCOPY\n\xff\r\n\0";
const NAMEDATALEN: usize = 64;
const NUMERIC_SPECIAL: u16 = 0xC000;
const NUMERIC_DSCALE_MASK: u16 = 0x3FFF;

/// A malformed COPY stream or field: what the Python parser / to_stored raise as
/// DecodeError, with the same wording where they have one.
#[derive(Debug, PartialEq, Eq)]
pub struct CopyError(pub String);

/// One COPY BINARY stream split into rows: `starts[row * ncols + i]` is where field `i`
/// of row `row` sits in the stream, at its int32 length word (`field` reads it: -1 is
/// NULL). One word per field, not an (offset, length) pair: a chunk held while it waits
/// for its window (connectors.tablesnap.snapshotter's read-ahead) costs a third of the
/// memory a pair would, and the length was checked once by `parse`.
#[derive(Debug, Default)]
pub struct Chunk {
    pub ncols: usize,
    starts: Vec<usize>,
}

impl Chunk {
    /// The number of rows.
    pub fn len(&self) -> usize {
        self.starts.len().checked_div(self.ncols).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// Field `i` of row `row` in `data`, the stream `parse` split (`row < len()`,
    /// `i < ncols`): `Some((offset, length))` of its bytes, or None for NULL.
    pub fn field(&self, data: &[u8], row: usize, i: usize) -> Option<(usize, usize)> {
        let at = self.starts[row * self.ncols + i];
        let size = be_i32(data, at)?;
        // parse checked every length: -1 (NULL) or a size that fits the stream
        usize::try_from(size).ok().map(|n| (at + 4, n))
    }

    /// The fields of row `row`, in order, as `field` gives them.
    pub fn row<'a>(
        &'a self,
        data: &'a [u8],
        row: usize,
    ) -> impl Iterator<Item = Option<(usize, usize)>> + 'a {
        (0..self.ncols).map(move |i| self.field(data, row, i))
    }
}

fn be_i16(d: &[u8], at: usize) -> Option<i16> {
    Some(i16::from_be_bytes(d.get(at..at + 2)?.try_into().ok()?))
}

fn be_i32(d: &[u8], at: usize) -> Option<i32> {
    Some(i32::from_be_bytes(
        d.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

/// Split a whole COPY BINARY stream of rows of `ncols` fields (module docstring). `ncols`
/// is at least 1: the snapshot selects `NULL` for a table without live columns.
pub fn parse(data: &[u8], ncols: usize) -> Result<Chunk, CopyError> {
    let err = |m: &str| Err(CopyError(m.to_string()));
    if ncols == 0 || ncols > i16::MAX as usize {
        return Err(CopyError(format!("COPY rows of {ncols} fields")));
    }
    if data.len() < SIGNATURE.len() + 8 {
        return err("COPY BINARY output ended without its trailer");
    }
    if &data[..SIGNATURE.len()] != SIGNATURE {
        return err("COPY BINARY output does not start with its signature");
    }
    let ext = be_i32(data, SIGNATURE.len() + 4).unwrap_or(-1);
    if ext < 0 {
        return Err(CopyError(format!(
            "COPY BINARY header extension of {ext} bytes"
        )));
    }
    let mut pos = SIGNATURE.len() + 8 + ext as usize;
    let mut chunk = Chunk {
        ncols,
        starts: Vec::new(),
    };
    loop {
        let Some(count) = be_i16(data, pos) else {
            return err("COPY BINARY output ended without its trailer");
        };
        pos += 2;
        if count == -1 {
            break;
        }
        if count as usize != ncols || count < 0 {
            return Err(CopyError(format!(
                "COPY row has {count} fields, expected {ncols}"
            )));
        }
        for _ in 0..ncols {
            let Some(size) = be_i32(data, pos) else {
                return err("COPY BINARY output ended inside a row");
            };
            chunk.starts.push(pos);
            pos += 4;
            if size == -1 {
                continue;
            }
            if size < 0 {
                return Err(CopyError(format!("COPY field of length {size}")));
            }
            let size = size as usize;
            if data.len() - pos < size {
                return err("COPY BINARY output ended inside a row");
            }
            pos += size;
        }
    }
    if pos != data.len() {
        return err("COPY data after its trailer");
    }
    chunk.starts.shrink_to_fit();
    Ok(chunk)
}

/// Why a field is not rewritten here.
#[derive(Debug, PartialEq, Eq)]
pub enum Rewrite {
    /// The kind has no native rewrite: the table is the Python path's.
    Unsupported,
    /// A malformed send value (the Python reference's DecodeError).
    Bad(String),
}

/// The kind a column is encoded with when read from COPY: jsonb's field is its text
/// (module docstring), every other kind its own; None for a kind `stored` cannot rewrite.
pub fn copy_kind(kind: Kind) -> Option<Kind> {
    Some(match kind {
        // jsonb_send's text; enum_send's label (checked against the plan's labels)
        Kind::Jsonb | Kind::Enum => Kind::Text,
        Kind::Bool
        | Kind::Char
        | Kind::Int2
        | Kind::Int4
        | Kind::Int8
        | Kind::Oid
        | Kind::Float4
        | Kind::Float8
        | Kind::Date
        | Kind::Time
        | Kind::Timestamp
        | Kind::TimestampTz
        | Kind::Money
        | Kind::MoneyText
        | Kind::MoneyDouble
        | Kind::Text
        | Kind::Xml
        | Kind::Name
        | Kind::Bytea
        | Kind::Uuid
        | Kind::Decimal { .. }
        | Kind::VarDecimal
        | Kind::NumericText
        | Kind::NumericDouble
        | Kind::Interval
        | Kind::TimeTz
        | Kind::Mac
        | Kind::Mac8
        | Kind::Inet { .. }
        | Kind::Bits
        | Kind::Bit1
        | Kind::Point
        | Kind::Composite
        | Kind::HstoreJson
        | Kind::HstoreMap
        | Kind::DoubleVector
        | Kind::FloatVector
        | Kind::SparseVector
        | Kind::Geometry { .. }
        | Kind::Array => kind,
        Kind::Output(o) if sendform::rewrites(o) => kind,
        k if read_as_text(k) => Kind::Text,
        Kind::Output(Output::Int2Vector | Output::OidVector) => kind,
        _ => return None,
    })
}

/// A text array's elements (pg_type: text -1/i), for an array of a `text_read` type,
/// which the snapshot selects as `::text[]`.
const TEXT_ELEM: Elem = Elem {
    kind: Kind::Text,
    oid: 25,
    attlen: -1,
    align: 4,
};

/// int2vector's and oidvector's elements, for `array` (pg_type: int2 2/2, oid 4/4).
const VECTOR_INT2: Elem = Elem {
    kind: Kind::Int2,
    oid: 21,
    attlen: 2,
    align: 2,
};
const VECTOR_OID: Elem = Elem {
    kind: Kind::Oid,
    oid: 26,
    attlen: 4,
    align: 4,
};

fn vector(o: Output) -> bool {
    matches!(o, Output::Int2Vector | Output::OidVector)
}

/// The types published as their output text which the snapshot selects as `::text`
/// (service.types.snapshot_rewrites.EXTENSION_TEXT_VALUED: ltree, lquery, cube and
/// earth, seg, the isn types; and TEXT_VALUED's jsonpath, whose `::text` is the I/O
/// cast, jsonpath_out's text): the field is the value, encoded as a string.
fn text_read(o: Output) -> bool {
    matches!(
        o,
        Output::Ltree
            | Output::Lquery
            | Output::Cube
            | Output::Seg
            | Output::Isn(_)
            | Output::Jsonpath
    )
}

/// A column of `kind` the snapshot selects as `::text`, its field the value the encoder
/// writes as a string: the `text_read` types, and the reg* types and aclitem
/// (service.types.snapshot_rewrites.TEXT_VALUED: their text needs the catalog, which
/// the server's own output function reads for the snapshot, as the Python path takes it).
fn read_as_text(kind: Kind) -> bool {
    match kind {
        Kind::Output(o) => text_read(o),
        Kind::Reg(_) | Kind::AclItem { .. } => true,
        _ => false,
    }
}

/// int2recv, int4recv, oidrecv, int8recv, float4recv, float8recv, date_recv, time_recv,
/// timestamp_recv, timestamptz_recv, cash_recv (pq_getmsgint*): the kinds whose send
/// image is the stored one byte-reversed, with its width and the type's name.
fn swapped(kind: Kind) -> Option<(usize, &'static str)> {
    Some(match kind {
        Kind::Int2 => (2, "int2"),
        Kind::Int4 => (4, "int4"),
        Kind::Oid => (4, "oid"),
        Kind::Float4 => (4, "float4"),
        Kind::Date => (4, "date"),
        Kind::Int8 => (8, "int8"),
        Kind::Float8 => (8, "float8"),
        Kind::Time => (8, "time"),
        Kind::Timestamp => (8, "timestamp"),
        Kind::TimestampTz => (8, "timestamptz"),
        Kind::Money | Kind::MoneyText | Kind::MoneyDouble => (8, "money"),
        _ => return None,
    })
}

/// numeric_recv's kinds: the send image rewritten by `numeric`.
fn numeric_kind(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::Decimal { .. } | Kind::VarDecimal | Kind::NumericText | Kind::NumericDouble
    )
}

/// `d` byte-reversed onto `out` (a big-endian send image of `width` bytes as the
/// little-endian stored one), as sendform._swap; `width` and `what` as `swapped` gives.
fn swap_into(d: &[u8], width: usize, what: &str, out: &mut Vec<u8>) -> Result<(), Rewrite> {
    if d.len() != width {
        return Err(Rewrite::Bad(format!(
            "{what} send value has {} bytes, not {width}",
            d.len()
        )));
    }
    out.extend(d.iter().rev());
    Ok(())
}

/// `d` in `width`-byte pieces, each reversed (point: two float8s; interval's pieces
/// differ, so it has its own).
fn swap_each(d: &[u8], width: usize, total: usize, what: &str) -> Result<Vec<u8>, Rewrite> {
    if d.len() != total {
        return Err(Rewrite::Bad(format!(
            "{what} send value has {} bytes",
            d.len()
        )));
    }
    Ok(d.chunks(width)
        .flat_map(|c| c.iter().rev().copied())
        .collect())
}

/// One non-NULL field of a column of `kind` (its plan kind, not `copy_kind`'s): the
/// stored payload (module docstring).
pub fn stored(kind: Kind, d: &[u8]) -> Result<Cow<'_, [u8]>, Rewrite> {
    // the fixed-width integers and floats: reversed (`swapped`)
    if let Some((width, what)) = swapped(kind) {
        let mut out = Vec::with_capacity(width);
        swap_into(d, width, what, &mut out)?;
        return Ok(Cow::Owned(out));
    }
    match kind {
        // boolrecv, charrecv, uuid_recv, macaddr_recv, macaddr8_recv: the bytes as stored
        Kind::Bool | Kind::Char => fixed_same(d, 1, "bool"),
        Kind::Uuid => fixed_same(d, 16, "uuid"),
        Kind::Mac => fixed_same(d, 6, "macaddr"),
        Kind::Mac8 => fixed_same(d, 8, "macaddr8"),
        // textrecv, varcharrecv, bpcharrecv, json_recv, byterearecv: the bytes; xml is
        // selected as its stored text; enum_recv's label is written as the text it is
        // (`CopyPlan::encode_into` checks it is one of the type's)
        Kind::Text | Kind::Xml | Kind::Bytea | Kind::Enum => Ok(Cow::Borrowed(d)),
        // namerecv: NameData, NUL-padded
        Kind::Name => {
            if d.len() >= NAMEDATALEN {
                return Err(Rewrite::Bad(format!(
                    "name send value of {} bytes is too long",
                    d.len()
                )));
            }
            let mut out = d.to_vec();
            out.resize(NAMEDATALEN, 0);
            Ok(Cow::Owned(out))
        }
        // jsonb_recv: version 1, then the text
        Kind::Jsonb => match d.split_first() {
            Some((1, text)) => Ok(Cow::Borrowed(text)),
            _ => Err(Rewrite::Bad(
                "jsonb send value does not start with version 1".into(),
            )),
        },
        k if numeric_kind(k) => numeric(d).map(Cow::Owned),
        // interval_recv: time int8, day int4, month int4
        Kind::Interval => {
            if d.len() != 16 {
                return Err(Rewrite::Bad(format!(
                    "interval send value has {} bytes",
                    d.len()
                )));
            }
            let mut out = Vec::with_capacity(16);
            out.extend(d[..8].iter().rev());
            out.extend(d[8..12].iter().rev());
            out.extend(d[12..].iter().rev());
            Ok(Cow::Owned(out))
        }
        // timetz_recv: time int8, zone int4
        Kind::TimeTz => {
            if d.len() != 12 {
                return Err(Rewrite::Bad(format!(
                    "timetz send value has {} bytes",
                    d.len()
                )));
            }
            let mut out = Vec::with_capacity(12);
            out.extend(d[..8].iter().rev());
            out.extend(d[8..].iter().rev());
            Ok(Cow::Owned(out))
        }
        // point_recv: x, y float8
        Kind::Point => swap_each(d, 8, 16, "point").map(Cow::Owned),
        // inet_recv / cidr_recv: family, bits, is_cidr, nb, the address; stored:
        // family, bits, the address (inet_struct behind the varlena header)
        Kind::Inet { .. } => {
            let nb = *d
                .get(3)
                .ok_or_else(|| Rewrite::Bad("inet send value is short".into()))?;
            if d.len() != 4 + nb as usize {
                return Err(Rewrite::Bad(format!(
                    "inet send value of {} bytes says {nb} address bytes",
                    d.len()
                )));
            }
            let mut out = Vec::with_capacity(2 + nb as usize);
            out.extend_from_slice(&d[..2]);
            out.extend_from_slice(&d[4..]);
            Ok(Cow::Owned(out))
        }
        // bit_recv / varbit_recv: bit_len int4, then the bits
        Kind::Bits | Kind::Bit1 => {
            let len = be_i32(d, 0).ok_or_else(|| Rewrite::Bad("bit send value is short".into()))?;
            let mut out = Vec::with_capacity(d.len());
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(&d[4..]);
            Ok(Cow::Owned(out))
        }
        // the types selected as their text (`read_as_text`): the text itself
        k if read_as_text(k) => Ok(Cow::Borrowed(d)),
        // int2vectorrecv, oidvectorrecv: array_recv's input of one dimension; stored, the
        // ArrayType of int2 / oid elements (types::array::vector_text reads it)
        Kind::Output(Output::Int2Vector) => {
            array(d, &VECTOR_INT2, &Labels::new(), None).map(Cow::Owned)
        }
        Kind::Output(Output::OidVector) => {
            array(d, &VECTOR_OID, &Labels::new(), None).map(Cow::Owned)
        }
        // the geometric types, ranges, multiranges, tsvector, pg_lsn, xid(8)
        Kind::Output(o) => sendform::output(o, d).map(Cow::Owned),
        // hstore_recv, vector_recv, halfvec_recv, sparsevec_recv, geometry_recv and
        // geography_recv (tablesnap::extension)
        Kind::HstoreJson | Kind::HstoreMap => extension::hstore(d).map(Cow::Owned),
        Kind::DoubleVector => extension::dense(d, 4, "vector").map(Cow::Owned),
        Kind::FloatVector => extension::dense(d, 2, "halfvec").map(Cow::Owned),
        Kind::SparseVector => extension::sparse(d).map(Cow::Owned),
        Kind::Geometry { geodetic } => extension::gserialized(d, geodetic).map(Cow::Owned),
        _ => Err(Rewrite::Unsupported),
    }
}

fn fixed_same<'a>(d: &'a [u8], width: usize, what: &str) -> Result<Cow<'a, [u8]>, Rewrite> {
    if d.len() != width {
        return Err(Rewrite::Bad(format!(
            "{what} send value has {} bytes, not {width}",
            d.len()
        )));
    }
    Ok(Cow::Borrowed(d))
}

/// Can an array's elements of `kind` be rewritten into their stored form (`stored`, or an
/// enum label into its pg_enum OID)? A jsonb element becomes its text (`stored`) and the
/// copy plan reads it as text (`copy_plan`), as a jsonb column's field.
/// Not a type read as text (an array of one is selected as `::text[]`, which
/// `copy_plan` plans as a text array), nor int2vector / oidvector (arrays themselves), nor
/// a composite (`copy_plan` checks its fields, record::field_rewrites).
fn element_rewrites(kind: Kind) -> bool {
    let text = read_as_text(kind) || matches!(kind, Kind::Output(o) if vector(o));
    kind != Kind::Array && kind != Kind::Composite && !text && copy_kind(kind).is_some()
}

const MAXDIM: i32 = 6;

/// array_recv's input (ndim, flags, element type OID, per dimension its size and lower
/// bound, then per element its length, -1 for NULL, and its send bytes) as the stored
/// ArrayType payload types::array reads, laid out as construct_md_array lays it out: the
/// null bitmap only when an element is NULL (dataoffset set then), elements aligned to
/// their typalign counted from the varlena header, varlena elements with 4-byte headers
/// (as sendform._array). An enum element's label becomes its pg_enum OID (`labels`); a
/// composite element is record_recv's input (`composite`: tablesnap::record).
fn array(
    d: &[u8],
    e: &Elem,
    labels: &Labels,
    composite: Option<&Composite>,
) -> Result<Vec<u8>, Rewrite> {
    array_with(d, e.attlen, e.align, |item| match e.kind {
        Kind::Enum => enum_oid(labels, item).map(Cow::Owned),
        Kind::Composite => {
            let c = composite.ok_or(Rewrite::Unsupported)?;
            record::record(item, c).map(Cow::Owned)
        }
        kind => stored(kind, item),
    })
}

/// enum_recv of a label: its pg_enum OID, as the stored 4 bytes. A label the plan does
/// not know is `Unsupported` (the row is the Python path's, as a column's is).
pub(super) fn enum_oid(labels: &Labels, label: &[u8]) -> Result<Vec<u8>, Rewrite> {
    labels
        .iter()
        .find(|(_, l)| l.as_bytes() == label)
        .map(|(oid, _)| oid.to_le_bytes().to_vec())
        .ok_or(Rewrite::Unsupported)
}

/// `array`'s layout, each non-NULL element's send bytes rewritten by `item` into its
/// stored form, laid out with the element type's `attlen` and `align`.
pub(super) fn array_with<'d>(
    d: &'d [u8],
    attlen: i16,
    align: usize,
    item: impl Fn(&'d [u8]) -> Result<Cow<'d, [u8]>, Rewrite>,
) -> Result<Vec<u8>, Rewrite> {
    let bad = |m: &str| Rewrite::Bad(format!("array send value {m}"));
    let head = |at| be_i32(d, at).ok_or_else(|| bad("is short"));
    let ndim = head(0)?;
    if !(0..=MAXDIM).contains(&ndim) {
        return Err(Rewrite::Bad(format!(
            "array send value has {ndim} dimensions"
        )));
    }
    let elemtype = head(8)? as u32;
    let ndim = ndim as usize;
    let mut dims = Vec::with_capacity(ndim);
    let mut lbounds = Vec::with_capacity(ndim);
    let mut nitems: usize = usize::from(ndim > 0);
    for i in 0..ndim {
        let dim = head(12 + 8 * i)?;
        lbounds.push(head(16 + 8 * i)?);
        let dim_u = usize::try_from(dim).map_err(|_| bad("has a negative dimension"))?;
        nitems = nitems
            .checked_mul(dim_u)
            .filter(|&n| n <= d.len() / 4)
            .ok_or_else(|| bad("has more elements than bytes"))?;
        dims.push(dim);
    }
    let mut off = 12 + 8 * ndim;
    let mut items: Vec<Option<Cow<'_, [u8]>>> = Vec::with_capacity(nitems);
    for _ in 0..nitems {
        let size = head(off)?;
        off += 4;
        if size < 0 {
            items.push(None);
            continue;
        }
        let value = d
            .get(off..off + size as usize)
            .ok_or_else(|| bad("ends inside an element"))?;
        off += size as usize;
        items.push(Some(item(value)?));
    }
    if off != d.len() {
        return Err(Rewrite::Bad(format!(
            "array send value has {} trailing bytes",
            d.len() - off
        )));
    }
    let has_nulls = items.iter().any(Option::is_none);
    // Built with the varlena header's 4 bytes in front, so that offsets count from it.
    let mut out = vec![0u8; 4];
    out.extend_from_slice(&(ndim as i32).to_le_bytes());
    out.extend_from_slice(&0i32.to_le_bytes());
    out.extend_from_slice(&elemtype.to_le_bytes());
    for dim in &dims {
        out.extend_from_slice(&dim.to_le_bytes());
    }
    for lb in &lbounds {
        out.extend_from_slice(&lb.to_le_bytes());
    }
    if has_nulls {
        let mut bitmap = vec![0u8; nitems.div_ceil(8)];
        for (i, v) in items.iter().enumerate() {
            if v.is_some() {
                bitmap[i >> 3] |= 1 << (i & 7);
            }
        }
        out.extend_from_slice(&bitmap);
    }
    out.resize(out.len().div_ceil(8) * 8, 0);
    if has_nulls {
        let dataoffset = out.len() as i32;
        out[8..12].copy_from_slice(&dataoffset.to_le_bytes());
    }
    let align = align.max(1);
    for v in items.iter().flatten() {
        out.resize(out.len().div_ceil(align) * align, 0);
        if attlen == -1 {
            out.extend_from_slice(&(((v.len() + 4) as u32) << 2).to_le_bytes());
        } else if usize::try_from(attlen) != Ok(v.len()) {
            return Err(bad("has an element of another width"));
        }
        out.extend_from_slice(v);
    }
    out.drain(..4);
    Ok(out)
}

/// numeric_recv's input (ndigits, weight, sign, dscale, digits, all big-endian) as the
/// long stored form (NumericLong: sign | dscale, weight, the digits), or a special
/// value's header alone (as sendform._numeric).
pub(super) fn numeric(d: &[u8]) -> Result<Vec<u8>, Rewrite> {
    let mut out = Vec::with_capacity(d.len());
    numeric_into(d, &mut out)?;
    Ok(out)
}

/// `numeric` appended to `out` (left as it was on an error).
fn numeric_into(d: &[u8], out: &mut Vec<u8>) -> Result<(), Rewrite> {
    let head = |at| be_i16(d, at).ok_or_else(|| Rewrite::Bad("numeric send value is short".into()));
    let ndigits = head(0)?;
    let weight = head(2)?;
    let sign = head(4)? as u16;
    let dscale = head(6)? as u16;
    if ndigits < 0 || d.len() != 8 + 2 * ndigits as usize {
        return Err(Rewrite::Bad(format!(
            "numeric send value of {} bytes has {ndigits} digits",
            d.len()
        )));
    }
    if sign & NUMERIC_SPECIAL == NUMERIC_SPECIAL {
        out.extend_from_slice(&sign.to_le_bytes());
        return Ok(());
    }
    out.reserve(4 + 2 * ndigits as usize);
    out.extend_from_slice(&(sign | (dscale & NUMERIC_DSCALE_MASK)).to_le_bytes());
    out.extend_from_slice(&weight.to_le_bytes());
    for digit in d[8..].chunks_exact(2) {
        out.push(digit[1]);
        out.push(digit[0]);
    }
    Ok(())
}

/// The plan a COPY row is encoded with: `plan` with each read column's kind as
/// `copy_kind` gives it; Err(reason naming the column) when a column's kind has no
/// rewrite here (the table is the Python path's).
pub fn copy_plan(plan: &Plan) -> Result<Plan, String> {
    let mut out = plan.clone();
    for col in &mut out.columns {
        if let Some(kind) = col.kind {
            if matches!(kind, Kind::Output(o) if sendform::over_enum(o)) {
                // enum_send's labels, mapped back through the column's (`encode`)
                if col.labels.is_empty() {
                    return Err(format!(
                        "column {}: a range over an enum without its labels",
                        col.name
                    ));
                }
                continue;
            }
            col.kind =
                Some(copy_kind(kind).ok_or_else(|| {
                    format!("column {}: {kind:?} has no native send form", col.name)
                })?);
            // a composite column, or an array of composites (record_recv's input per
            // element): laid out as the column's composite
            let elem_kind = col.elem.map(|e| e.kind);
            if kind == Kind::Composite || elem_kind == Some(Kind::Composite) {
                match &col.composite {
                    Some(c) if record::field_rewrites(c) => {
                        col.composite = Some(record::composite_plan(c))
                    }
                    _ => {
                        return Err(format!(
                            "column {}: a composite field has no native send form",
                            col.name
                        ))
                    }
                }
            }
            if kind == Kind::Array {
                match &mut col.elem {
                    Some(e) if e.kind == Kind::Composite => {}
                    // jsonb_send's text, in a text varlena under the header's jsonb OID
                    Some(e) if e.kind == Kind::Jsonb => e.kind = Kind::Text,
                    // selected as `::text[]` (its elements' output text, their value):
                    // a text array, its elements encoded as the strings they are
                    Some(e) if read_as_text(e.kind) => *e = TEXT_ELEM,
                    Some(e) if element_rewrites(e.kind) => {}
                    e => {
                        return Err(format!(
                            "column {}: array of {:?} has no native send form",
                            col.name,
                            e.as_ref().map(|e| e.kind)
                        ))
                    }
                }
            }
        }
    }
    Ok(out)
}

/// A compiled COPY encoding: the table's plan, its `copy_plan`, and where each plan column
/// sits in a COPY row (`fields[c]`: the field index, None for a column that is always
/// NULL here, a virtual generated column, or is not read).
pub struct CopyPlan<'p> {
    pub plan: &'p Plan,
    pub copy: Plan,
    pub fields: Vec<Option<usize>>,
}

/// Where `CopyPlan::encode_into` keeps a field's stored bytes while it writes the row.
enum Place {
    Null,
    /// the field's own bytes, or some of them: `data[at..at + len]`
    Data(usize, usize),
    /// rewritten into `RowScratch::bytes[start..end]`
    Scratch(usize, usize),
    /// rewritten by `stored` into a buffer of its own (the rarer kinds)
    Owned(Vec<u8>),
}

/// What `CopyPlan::encode_into` reuses from one row to the next: the fixed-width fields
/// and numerics are rewritten into one buffer rather than each into its own allocation.
#[derive(Default)]
pub struct RowScratch {
    bytes: Vec<u8>,
    places: Vec<Place>,
}

impl CopyPlan<'_> {
    /// Row `row` of `chunk` (over the stream `data`): its datums rewritten (`stored`),
    /// then the records, as `Plan::encode_datums_into` writes a WAL row's. A malformed field is
    /// `RowError::Decode` naming the column. The callers append (`encode_into`); this
    /// form, each record in a buffer of its own, is the tests'.
    #[cfg(test)]
    pub fn encode(
        &self,
        data: &[u8],
        chunk: &Chunk,
        row: usize,
        want_key: bool,
    ) -> Result<Outcome, RowError> {
        let mut out = Vec::new();
        Ok(
            match self.encode_into(
                data,
                chunk,
                row,
                want_key,
                &mut RowScratch::default(),
                &mut out,
            )? {
                Ok(value_end) => {
                    let key = out.split_off(value_end);
                    Outcome::Encoded { value: out, key }
                }
                Err(why) => Outcome::Fallback(why),
            },
        )
    }

    /// `encode` appended to `out` (`Plan::encode_datums_into`): Ok(Ok(where the Value
    /// record ends, the Key record after it)), or Ok(Err(the fallback's reason)) with
    /// `out` as it was. `scratch` is any RowScratch, best the same for a chunk's rows.
    pub fn encode_into(
        &self,
        data: &[u8],
        chunk: &Chunk,
        row: usize,
        want_key: bool,
        scratch: &mut RowScratch,
        out: &mut Vec<u8>,
    ) -> Result<Result<usize, &'static str>, RowError> {
        scratch.bytes.clear();
        scratch.places.clear();
        for (col, at) in self.plan.columns.iter().zip(&self.fields) {
            let (Some(kind), Some(i)) = (col.kind, *at) else {
                scratch.places.push(Place::Null);
                continue;
            };
            let Some((off, len)) = (i < chunk.ncols)
                .then(|| chunk.field(data, row, i))
                .flatten()
            else {
                scratch.places.push(Place::Null);
                continue;
            };
            let field = &data[off..off + len];
            if kind == Kind::Enum && !col.labels.values().any(|l| l.as_bytes() == field) {
                // enum_recv of a label the plan does not know: Python's error
                return Ok(Err("enum label Python decides"));
            }
            match self.place(col, kind, field, off, &mut scratch.bytes) {
                Ok(p) => scratch.places.push(p),
                Err(Rewrite::Bad(message)) => {
                    return Err(RowError::Decode {
                        message,
                        field: Some(col.name.clone()),
                    })
                }
                Err(Rewrite::Unsupported) => return Ok(Err("type without a native send form")),
            }
        }
        let bytes = &scratch.bytes;
        let datums: Vec<Datum<'_>> = scratch
            .places
            .iter()
            .map(|p| match p {
                Place::Null => None,
                Place::Data(at, len) => Some(Cow::Borrowed(&data[*at..*at + len])),
                Place::Scratch(start, end) => Some(Cow::Borrowed(&bytes[*start..*end])),
                Place::Owned(v) => Some(Cow::Borrowed(v.as_slice())),
            })
            .collect();
        Ok(self.copy.encode_datums_into(&datums, want_key, out))
    }

    /// A non-NULL field (at `off` in the stream) of `col`, of plan kind `kind`, rewritten
    /// into its stored form: the swapped kinds and numerics into `scratch`, the
    /// borrowed ones in place, the others as `stored` (or the array, composite and enum
    /// range rewrites) make them.
    fn place(
        &self,
        col: &Column,
        kind: Kind,
        field: &[u8],
        off: usize,
        scratch: &mut Vec<u8>,
    ) -> Result<Place, Rewrite> {
        let start = scratch.len();
        if let Some((width, what)) = swapped(kind) {
            swap_into(field, width, what, scratch)?;
            return Ok(Place::Scratch(start, scratch.len()));
        }
        if numeric_kind(kind) {
            numeric_into(field, scratch)?;
            return Ok(Place::Scratch(start, scratch.len()));
        }
        let rewritten = match (kind, col.elem, &col.composite) {
            (Kind::Array, Some(e), c) => {
                // selected as `::text[]`: text elements, whatever the type's width
                let e = if read_as_text(e.kind) { TEXT_ELEM } else { e };
                return array(field, &e, &col.labels, c.as_deref()).map(Place::Owned);
            }
            (Kind::Composite, _, Some(c)) => return record::record(field, c).map(Place::Owned),
            (Kind::Output(o), _, _) if sendform::over_enum(o) => {
                return sendform::enum_range(o, field, &col.labels).map(Place::Owned)
            }
            _ => stored(kind, field)?,
        };
        Ok(match rewritten {
            Cow::Borrowed(b) => {
                // the field or a part of it (jsonb's text) is where it lies in the stream
                let (base, at) = (field.as_ptr() as usize, b.as_ptr() as usize);
                if at >= base && at + b.len() <= base + field.len() {
                    Place::Data(off + (at - base), b.len())
                } else {
                    Place::Owned(b.to_vec())
                }
            }
            Cow::Owned(v) => Place::Owned(v),
        })
    }
}

#[cfg(test)]
#[path = "copy_tests.rs"]
mod tests;
