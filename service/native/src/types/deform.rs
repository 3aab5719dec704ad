//! heap_deform_tuple: a heap tuple split into its attributes' stored bytes, against the
//! table definition's attributes (service.types.deform.deform_at, check for check).
//!
//! Receives: the definition's attributes (anything `Attribute`: attlen, attalign,
//! dropped, atthasmissing, whether someone reads the value) and a `Tuple` (the RawTuple
//! the heap decoder hands on: natts, infomask, t_hoff, the bytes from t_bits on), with
//! the change's reassembled TOAST values when it has them.
//! Hands on: `Deformed::Datums`, one per attribute (None: NULL, dropped, or absent; the
//! `UNCHANGED` marker, `is_unchanged`, for an on-disk TOAST pointer without its chunks
//! in a column whose caller writes a placeholder), or `Deformed::Fallback(reason)` where
//! the Python path decides the whole row (an external TOAST pointer without its chunks
//! in any other column, a missing attribute with a default, a compression it cannot
//! undo).
//!
//! Mirrors heap_deform_tuple: the null bitmap, each attribute aligned to its attalign
//! relative to the tuple start, except a varlena whose first byte is not zero
//! (att_align_pointer); 1-byte and 4-byte varlena headers; inline-compressed varlenas
//! (toast_decompress_datum: pglz or lz4, with the decompressors in crate::wal);
//! external ones from the change's chunks (detoast_external_attr); attributes past
//! natts read as getmissingattr does: NULL, or, for an attribute with atthasmissing, its
//! attmissingval as the plan carries it (`Attribute::missing`, the stored datum the Python
//! decoder resolved); one without it is the Python path's.
//!
//! Errors: a tuple that does not fit its definition is `RowError::Mismatch` (the Python
//! SchemaMismatchError) with deform_at's messages; a malformed varlena header is
//! `RowError::Decode` (DecodeError). Pure, no panics on any input (fuzzed by
//! tests/perf/fuzz_native_rows.py).

use std::borrow::Cow;

use super::u32_at;

pub(crate) const HEAP_HASNULL: u16 = 0x0001;
const T_BITS_OFFSET: usize = 23; // offsetof(HeapTupleHeaderData, t_bits)
const VARLENA_EXTSIZE_MASK: u32 = 0x3FFF_FFFF;
const TOAST_PGLZ_COMPRESSION_ID: u32 = 0;
const TOAST_LZ4_COMPRESSION_ID: u32 = 1;

/// What deform needs of one attribute of the definition (pg_attribute's attlen,
/// attalign, attisdropped, atthasmissing), dropped ones included.
pub trait Attribute {
    fn name(&self) -> &str;
    fn attlen(&self) -> i16;
    /// 1, 2, 4 or 8 (attalign c, s, i, d).
    fn align(&self) -> usize;
    fn dropped(&self) -> bool;
    fn has_missing(&self) -> bool;
    /// attmissingval as a stored datum (the payload deform hands on for a value, varlena
    /// header stripped), where the plan has one; None: NULL, or the Python path decides.
    fn missing(&self) -> Option<&[u8]>;
    /// Someone reads the value: deform decompresses it (else it only steps past it).
    fn read(&self) -> bool;
    /// The caller writes a placeholder for the value when its TOAST chunks are not in
    /// the change: deform then hands on `UNCHANGED` instead of giving the row up.
    fn placeholder(&self) -> bool {
        false
    }
}

/// The datum deform hands on for an on-disk TOAST pointer whose chunks the change does
/// not hold (the Python decoder's UNCHANGED_TOAST), for a column with a placeholder:
/// told apart from any stored value by its address (`is_unchanged`), as no datum
/// borrows from it otherwise.
static UNCHANGED: [u8; 1] = [0xFF];

/// Whether `d` is deform's `UNCHANGED` marker.
pub fn is_unchanged(d: &[u8]) -> bool {
    std::ptr::eq(d.as_ptr(), UNCHANGED.as_ptr()) && d.len() == UNCHANGED.len()
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

/// What a deformed attribute is: NULL (or dropped, or absent) or its stored bytes.
pub type Datum<'a> = Option<Cow<'a, [u8]>>;

/// A deformed tuple, or the reason the Python path decides it.
pub enum Deformed<'a> {
    Datums(Vec<Datum<'a>>),
    Fallback(&'static str),
}

/// The TOAST values a change's tuple points to: chunk id (`va_valueid`) -> the chunk_data
/// of all its chunks in chunk_seq order (`ReplayChange.toast`, as the reorder buffer
/// reassembled them: ReorderBufferToastReplace).
pub type Toast<'a> = std::collections::HashMap<u32, &'a [u8]>;

const VARTAG_ONDISK: u8 = 18;
/// The fallback reason of an on-disk TOAST pointer whose chunks the change lacks.
const EXTERNAL: &str = "external TOAST pointer";
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
        return Err(EXTERNAL);
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

/// heap_deform_tuple over `columns` (see the module docstring).
pub fn deform<'a, A: Attribute>(
    columns: &[A],
    t: &Tuple<'a>,
    toast: Option<&Toast<'a>>,
) -> Result<Deformed<'a>, RowError> {
    let n = columns.len();
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
    for (i, col) in columns.iter().enumerate() {
        if i >= t.natts {
            // getmissingattr: the attribute's attmissingval, or NULL without one
            if col.has_missing() && !col.dropped() {
                match col.missing() {
                    Some(d) => out.push(Some(Cow::Owned(d.to_vec()))),
                    None => return Ok(Deformed::Fallback("attribute missing with a default")),
                }
                continue;
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
                format!("column {} overruns the tuple at offset {off}", col.name()),
                Some(col.name()),
            )
        };
        let mask = col.align() - 1;
        let (value, size): (Cow<'a, [u8]>, usize) = if col.attlen() > 0 {
            off = (off + mask) & !mask;
            let p = off - T_BITS_OFFSET;
            let size = col.attlen() as usize;
            if p + size > nbuf {
                return Err(overrun(off));
            }
            (Cow::Borrowed(&buf[p..p + size]), size)
        } else if col.attlen() == -1 {
            let mut p = off - T_BITS_OFFSET;
            let mut b0 = *buf.get(p).ok_or_else(|| overrun(off))?;
            if b0 == 0 {
                off = (off + mask) & !mask;
                p = off - T_BITS_OFFSET;
                // past the end after the padding: read_varlena's DecodeError in deform_at
                b0 = *buf.get(p).ok_or_else(|| {
                    decode_err(
                        format!("varlena at offset {p} is past the end of a {nbuf}-byte datum"),
                        col.name(),
                    )
                })?;
            }
            if b0 == 0x01 {
                // VARATT_IS_EXTERNAL: the value is in the change's TOAST chunks.
                let placeholder = col.placeholder() && !col.dropped() && col.read();
                if toast.is_none() && !placeholder {
                    return Ok(Deformed::Fallback(EXTERNAL));
                }
                // read_varlena's DecodeError for a pointer cut short
                let ptr = buf.get(p..p + TOAST_POINTER_SIZE).ok_or_else(|| {
                    decode_err(
                        format!("external varlena at offset {p} overruns datum"),
                        col.name(),
                    )
                })?;
                if col.dropped() || !col.read() {
                    (Cow::Borrowed(&buf[p..p]), TOAST_POINTER_SIZE)
                } else {
                    let none = Toast::new();
                    match resolve_toast(ptr, toast.unwrap_or(&none)) {
                        Ok(v) => (v, TOAST_POINTER_SIZE),
                        // unchanged: its chunks are not in this change (and the pointer
                        // is a well-formed on-disk one, resolve_toast read it)
                        Err(EXTERNAL) if placeholder => {
                            (Cow::Borrowed(&UNCHANGED[..]), TOAST_POINTER_SIZE)
                        }
                        Err(why) => return Ok(Deformed::Fallback(why)),
                    }
                }
            } else if b0 & 0x01 != 0 {
                let size = (b0 >> 1) as usize;
                if p + size > nbuf {
                    return Err(decode_err(
                        format!("short varlena of {size} bytes at offset {p} overruns datum"),
                        col.name(),
                    ));
                }
                (Cow::Borrowed(&buf[p + 1..p + size]), size)
            } else {
                if p + 4 > nbuf {
                    return Err(decode_err(
                        format!("varlena header at offset {p} overruns datum"),
                        col.name(),
                    ));
                }
                let word = u32::from_le_bytes([buf[p], buf[p + 1], buf[p + 2], buf[p + 3]]);
                let size = (word >> 2) as usize;
                if size < 4 || p + size > nbuf {
                    return Err(decode_err(
                        format!("varlena of {size} bytes at offset {p} overruns datum"),
                        col.name(),
                    ));
                }
                if b0 & 0x03 == 0x02 {
                    if col.dropped() || !col.read() {
                        // Nobody reads it: skip without decompressing.
                        (Cow::Borrowed(&buf[p..p]), size)
                    } else {
                        match inline_decompress(&buf[p..p + size]) {
                            Some(v) => (Cow::Owned(v), size),
                            None => return Ok(Deformed::Fallback("inline compression")),
                        }
                    }
                } else {
                    (Cow::Borrowed(&buf[p + 4..p + size]), size)
                }
            }
        } else if col.attlen() == -2 {
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
                format!("column {} has invalid typlen {}", col.name(), col.attlen()),
                None,
            ));
        };
        if off + size > end {
            return Err(mismatch(
                format!(
                    "column {} ({size} bytes at {off}) overruns the tuple of {end} bytes",
                    col.name()
                ),
                Some(col.name()),
            ));
        }
        off += size;
        out.push(if col.dropped() { None } else { Some(value) });
    }
    Ok(Deformed::Datums(out))
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
