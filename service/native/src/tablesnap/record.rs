//! The send → stored rewrite of a composite column (record_recv's input, rowtypes.c):
//! a COPY BINARY field of a composite laid out as the composite datum the WAL path's
//! output::text::composite_text reads, as service.types.sendform._record lays it out.
//!
//! Receives: one non-NULL field (record_send's bytes: int32 column count, then per
//! non-dropped attribute its type OID, an int32 length, -1 for NULL, and its send bytes)
//! and the column's `Composite` (the type's OID, its attributes' layout, dropped ones
//! included, and each live one's `TextKind`). Hands on: the datum without its varlena
//! header, as heap_form_tuple builds it for record_recv: a HeapTupleHeader (typmod -1,
//! the type's OID, a zero ctid, infomask2 the attribute count, HEAP_HASNULL when a field
//! is NULL or dropped, t_hoff), the null bitmap only then, the header padded to 8, and
//! each present field's stored form (`field`) aligned to its typalign counted from the
//! header, a varlena with a 4-byte header, a cstring with its NUL.
//!
//! `composite_plan` is the Composite the copy plan prints with: a jsonb field's kind
//! becomes text (its stored form here is jsonb_send's text, as a jsonb column's is).
//! Which field kinds have a rewrite: `field_rewrites` (an enum, array or composite field
//! has none; output::plan never builds a Composite with one).
//!
//! The sent type OIDs are not checked against the attributes (record_recv does; the
//! Python reference does not, and this mirrors it). Errors: `Rewrite::Bad` for a column
//! count other than the live attributes', a field overrunning the value, trailing
//! bytes, or a field's own rewrite rejecting it. Nothing panics on any input. Pure.

use std::borrow::Cow;
use std::sync::Arc;

use super::copy::{stored, Rewrite};
use super::sendform;
use crate::output::kind::{Kind, TextKind};
use crate::output::plan::Composite;

const HEAP_HASNULL: u16 = 0x0001;
/// offsetof(HeapTupleHeaderData, t_bits): the header before the null bitmap.
const SIZEOF_HEADER: usize = 23;

/// The `Kind` whose `stored` rewrite a composite field of `kind` takes, or None.
fn field_kind(kind: TextKind) -> Option<Kind> {
    Some(match kind {
        TextKind::Bool => Kind::Bool,
        TextKind::Int2 => Kind::Int2,
        TextKind::Int4 => Kind::Int4,
        TextKind::Int8 => Kind::Int8,
        TextKind::Oid => Kind::Oid,
        TextKind::Float4 => Kind::Float4,
        TextKind::Float8 => Kind::Float8,
        TextKind::Text => Kind::Text,
        TextKind::Name => Kind::Name,
        TextKind::Bytea => Kind::Bytea,
        TextKind::Uuid => Kind::Uuid,
        TextKind::Numeric => Kind::VarDecimal,
        TextKind::Date => Kind::Date,
        TextKind::Time => Kind::Time,
        TextKind::Timestamp => Kind::Timestamp,
        TextKind::TimestampTz => Kind::TimestampTz,
        TextKind::Interval => Kind::Interval,
        TextKind::TimeTz => Kind::TimeTz,
        TextKind::Money => Kind::Money,
        TextKind::Char => Kind::Char,
        TextKind::Inet => Kind::Inet { cidr: false },
        TextKind::Cidr => Kind::Inet { cidr: true },
        TextKind::Mac => Kind::Mac,
        TextKind::Mac8 => Kind::Mac8,
        TextKind::Bits => Kind::Bits,
        TextKind::Jsonb => Kind::Jsonb,
        TextKind::Xml => Kind::Xml,
        TextKind::Output(o) if sendform::rewrites(o) => Kind::Output(o),
        TextKind::Output(_) | TextKind::Enum | TextKind::Array | TextKind::Composite => {
            return None
        }
    })
}

/// Does every live field of `c` have a rewrite?
pub fn field_rewrites(c: &Composite) -> bool {
    c.kinds.iter().flatten().all(|&k| field_kind(k).is_some())
}

/// `c` as the copy plan prints it: jsonb fields as text (module docstring).
pub fn composite_plan(c: &Arc<Composite>) -> Arc<Composite> {
    if !c.kinds.contains(&Some(TextKind::Jsonb)) {
        return Arc::clone(c);
    }
    Arc::new(Composite {
        oid: c.oid,
        layout: c.layout.clone(),
        kinds: c
            .kinds
            .iter()
            .map(|k| match k {
                Some(TextKind::Jsonb) => Some(TextKind::Text),
                k => *k,
            })
            .collect(),
        elems: c.elems.clone(),
    })
}

fn be_i32(d: &[u8], at: usize) -> Option<i32> {
    Some(i32::from_be_bytes(
        d.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

/// `out` zero-padded to a multiple of `align` (counted from its start, the header).
fn pad(out: &mut Vec<u8>, align: usize) {
    out.resize(out.len().div_ceil(align.max(1)) * align.max(1), 0);
}

/// record_recv's input as the stored composite datum (module docstring).
pub fn record(d: &[u8], c: &Composite) -> Result<Vec<u8>, Rewrite> {
    let short = || Rewrite::Bad("composite send value is short".into());
    let live = c.kinds.iter().filter(|k| k.is_some()).count();
    let ncols = be_i32(d, 0).ok_or_else(short)?;
    if usize::try_from(ncols) != Ok(live) {
        return Err(Rewrite::Bad(format!(
            "composite sent {ncols} fields, type has {live}"
        )));
    }
    let mut off = 4;
    let mut values: Vec<Option<Cow<'_, [u8]>>> = Vec::with_capacity(c.kinds.len());
    for kind in &c.kinds {
        let Some(kind) = kind else {
            values.push(None);
            continue;
        };
        let size = be_i32(d, off + 4).ok_or_else(short)?;
        off += 8;
        if size < 0 {
            values.push(None);
            continue;
        }
        let value = d
            .get(off..off.saturating_add(size as usize))
            .ok_or_else(|| Rewrite::Bad(format!("composite field of {size} bytes overruns")))?;
        off += value.len();
        let k = field_kind(*kind).ok_or(Rewrite::Unsupported)?;
        values.push(Some(stored(k, value)?));
    }
    if off != d.len() {
        return Err(Rewrite::Bad(format!(
            "composite send value has {} trailing bytes",
            d.len() - off
        )));
    }
    let natts = c.layout.columns.len();
    if natts != values.len() || natts > 0x07FF {
        return Err(Rewrite::Bad(format!(
            "composite of {natts} attributes, {} kinds",
            values.len()
        )));
    }
    let has_nulls = values.iter().any(Option::is_none);
    let mut bitmap = Vec::new();
    if has_nulls {
        bitmap = vec![0u8; natts.div_ceil(8)];
        for (i, v) in values.iter().enumerate() {
            if v.is_some() {
                bitmap[i >> 3] |= 1 << (i & 7);
            }
        }
    }
    let hoff = (SIZEOF_HEADER + bitmap.len()).div_ceil(8) * 8;
    let mut out = Vec::with_capacity(hoff + d.len());
    out.extend_from_slice(&0u32.to_le_bytes()); // datum_len_, dropped below
    out.extend_from_slice(&(-1i32).to_le_bytes());
    out.extend_from_slice(&c.oid.to_le_bytes());
    out.extend_from_slice(&[0; 6]);
    out.extend_from_slice(&(natts as u16).to_le_bytes());
    let infomask = if has_nulls { HEAP_HASNULL } else { 0 };
    out.extend_from_slice(&infomask.to_le_bytes());
    out.push(hoff as u8);
    out.extend_from_slice(&bitmap);
    out.resize(hoff, 0);
    for (field, v) in c.layout.columns.iter().zip(&values) {
        let Some(v) = v else { continue };
        pad(&mut out, field.align);
        match field.attlen {
            -1 => out.extend_from_slice(&(((v.len() + 4) as u32) << 2).to_le_bytes()),
            -2 => {}
            n if usize::try_from(n) == Ok(v.len()) => {}
            n => {
                return Err(Rewrite::Bad(format!(
                    "composite field {} of {} bytes, not {n}",
                    field.name,
                    v.len()
                )))
            }
        }
        out.extend_from_slice(v);
        if field.attlen == -2 {
            out.push(0);
        }
    }
    out.drain(..4);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::plan::{Column, Plan};
    use crate::output::text::composite_text;

    fn col(name: &str, attlen: i16, align: usize, dropped: bool) -> Column {
        Column {
            name: name.into(),
            attlen,
            align,
            dropped,
            has_missing: false,
            missing: None,
            kind: None,
            optional: true,
            read: true,
            labels: Default::default(),
            elem: None,
            composite: None,
        }
    }

    /// (a int4, <dropped>, b text, j jsonb, t timestamptz, r int4range)
    fn composite() -> Arc<Composite> {
        Arc::new(Composite {
            oid: 77_001,
            layout: Plan {
                columns: vec![
                    col("a", 4, 4, false),
                    col("gone", 4, 4, true),
                    col("b", -1, 4, false),
                    col("j", -1, 4, false),
                    col("t", 8, 8, false),
                    col("r", -1, 4, false),
                ],
                key: vec![],
            },
            kinds: vec![
                Some(TextKind::Int4),
                None,
                Some(TextKind::Text),
                Some(TextKind::Jsonb),
                Some(TextKind::TimestampTz),
                Some(TextKind::Output(crate::types::outtext::Output::Range(
                    crate::types::range::RangeSub::Int4,
                ))),
            ],
            elems: vec![None; 6],
        })
    }

    fn send(fields: &[Option<&[u8]>]) -> Vec<u8> {
        let mut out = (fields.len() as i32).to_be_bytes().to_vec();
        for f in fields {
            out.extend_from_slice(&0u32.to_be_bytes());
            match f {
                None => out.extend_from_slice(&(-1i32).to_be_bytes()),
                Some(b) => {
                    out.extend_from_slice(&(b.len() as i32).to_be_bytes());
                    out.extend_from_slice(b);
                }
            }
        }
        out
    }

    /// A composite with a dropped attribute, a NULL, jsonb, a timestamptz and a range is
    /// read back by record_out's writer (the copy plan's, jsonb as text).
    #[test]
    fn record_to_stored() {
        let c = composite();
        let mut range = vec![0x02u8];
        for v in [1i32, 5] {
            range.extend_from_slice(&4i32.to_be_bytes());
            range.extend_from_slice(&v.to_be_bytes());
        }
        let five = 5i32.to_be_bytes();
        let epoch = 0i64.to_be_bytes();
        let d = send(&[
            Some(&five),
            Some(b"x y"),
            Some(b"\x01{\"k\": 1}"),
            Some(&epoch),
            Some(&range),
        ]);
        let st = record(&d, &c).unwrap();
        assert!(field_rewrites(&c));
        let printed = composite_plan(&c);
        let mut s = String::new();
        composite_text(&mut s, &printed, &st).unwrap();
        assert_eq!(
            s,
            r#"(5,"x y","{""k"": 1}","2000-01-01 00:00:00+00","[1,5)")"#
        );
        let d = send(&[None, Some(b""), None, None, None]);
        let st = record(&d, &c).unwrap();
        s.clear();
        composite_text(&mut s, &printed, &st).unwrap();
        assert_eq!(s, r#"(,"",,,)"#);
    }

    /// Every truncation, a wrong column count, trailing bytes and a bad field are Bad;
    /// a composite with an array field has no rewrite.
    #[test]
    fn damaged_records() {
        let c = composite();
        let five = 5i32.to_be_bytes();
        let d = send(&[Some(&five), Some(b"t"), None, None, None]);
        assert!(record(&d, &c).is_ok());
        for n in 0..d.len() {
            assert!(matches!(record(&d[..n], &c), Err(Rewrite::Bad(_))), "{n}");
        }
        let mut long = d.clone();
        long.push(0);
        assert!(matches!(record(&long, &c), Err(Rewrite::Bad(_))));
        let four = send(&[Some(&five), Some(b"t"), None, None]);
        assert!(matches!(record(&four, &c), Err(Rewrite::Bad(_))));
        let bad_int = send(&[Some(&five[..3]), Some(b"t"), None, None, None]);
        assert!(matches!(record(&bad_int, &c), Err(Rewrite::Bad(_))));
        let mut huge = d.clone();
        huge[8..12].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(matches!(record(&huge, &c), Err(Rewrite::Bad(_))));
        let arr = Composite {
            oid: 1,
            layout: Plan {
                columns: vec![col("a", -1, 4, false)],
                key: vec![],
            },
            kinds: vec![Some(TextKind::Array)],
            elems: vec![None],
        };
        assert!(!field_rewrites(&arr));
    }
}
