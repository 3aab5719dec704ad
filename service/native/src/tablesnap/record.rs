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
//! Fields of other composite fields' kinds: an enum's label becomes its pg_enum OID
//! (the field's labels; enum_recv); a composite field is this same rewrite, recursively
//! (its layout column's `Composite`); an array field is array_recv's input, each element
//! rewritten as a field of the element's kind would be (tablesnap::copy's `array_with`).
//! A label the plan does not know is `Rewrite::Unsupported`: the row is the Python path's.
//!
//! `composite_plan` is the Composite the copy plan prints with: a jsonb field's kind, or
//! an array field's jsonb element, becomes text at every depth (its stored form here is
//! jsonb_send's text, as a jsonb column's is). Which fields have a rewrite:
//! `field_rewrites` (not an array of arrays, nor a kind `stored` has no rewrite for: a
//! jsonpath field, whose send form is its text and whose stored form is the item tree
//! only the jsonpath parser builds).
//!
//! The sent type OIDs are not checked against the attributes (record_recv does; the
//! Python reference does not, and this mirrors it). Errors: `Rewrite::Bad` for a column
//! count other than the live attributes', a field overrunning the value, trailing
//! bytes, or a field's own rewrite rejecting it. Nothing panics on any input. Pure.

use std::borrow::Cow;
use std::sync::Arc;

use super::copy::{array_with, enum_oid, stored, Rewrite};
use super::sendform;
use crate::output::kind::{Kind, TextKind};
use crate::output::plan::{Column, Composite, TextElem};
use crate::types::outtext::Output;

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
        // array_recv's input of int2 / oid (tablesnap::copy's `stored`)
        TextKind::Output(o @ (Output::Int2Vector | Output::OidVector)) => Kind::Output(o),
        // reg* and aclitem: a composite's field prints the catalog names on the stream
        // (glue::avro::named_composite); record_send gives its OID, which no rewrite
        // here names: the table's snapshot is the Python path's
        TextKind::Output(_)
        | TextKind::Enum
        | TextKind::Array
        | TextKind::Composite
        | TextKind::Reg(_)
        | TextKind::AclItem { .. } => return None,
    })
}

/// Does every live field of `c` have a rewrite? An enum field does (its label becomes
/// its OID through the field's labels); a composite field does when its own fields do;
/// an array field when its element does (an enum, a composite whose fields do, or a
/// kind with a `stored` rewrite).
pub fn field_rewrites(c: &Composite) -> bool {
    c.kinds
        .iter()
        .zip(&c.elems)
        .zip(&c.layout.columns)
        .all(|((kind, elem), col)| match kind {
            None => true,
            Some(TextKind::Array) => elem.is_some_and(|e| kind_rewrites(e.kind, col)),
            Some(k) => kind_rewrites(*k, col),
        })
}

/// Has a field (or an array field's element) of `kind` a rewrite? `col` is the field's
/// layout column (a composite's fields are there).
fn kind_rewrites(kind: TextKind, col: &Column) -> bool {
    match kind {
        TextKind::Enum => true,
        TextKind::Composite => col.composite.as_deref().is_some_and(field_rewrites),
        TextKind::Array => false,
        k => field_kind(k).is_some(),
    }
}

/// `c` as the copy plan prints it: jsonb fields and jsonb elements of array fields as
/// text, in nested composites too (module docstring).
pub fn composite_plan(c: &Arc<Composite>) -> Arc<Composite> {
    if !has_jsonb(c) {
        return Arc::clone(c);
    }
    let text = |k: TextKind| match k {
        TextKind::Jsonb => TextKind::Text,
        k => k,
    };
    let mut layout = c.layout.clone();
    for col in &mut layout.columns {
        col.composite = col.composite.as_ref().map(composite_plan);
    }
    Arc::new(Composite {
        oid: c.oid,
        layout,
        kinds: c.kinds.iter().map(|k| k.map(text)).collect(),
        elems: c
            .elems
            .iter()
            .map(|e| {
                e.map(|e| TextElem {
                    kind: text(e.kind),
                    ..e
                })
            })
            .collect(),
    })
}

/// Is jsonb among `c`'s fields or array fields' elements, nested composites included?
fn has_jsonb(c: &Composite) -> bool {
    c.kinds.contains(&Some(TextKind::Jsonb))
        || c.elems.iter().flatten().any(|e| e.kind == TextKind::Jsonb)
        || c.layout
            .columns
            .iter()
            .filter_map(|col| col.composite.as_deref())
            .any(has_jsonb)
}

/// One field's (or array element's) send bytes as its stored form: an enum's label as
/// its OID, a composite as its datum (recursively), any other kind by `stored`.
fn rewrite<'d>(kind: TextKind, col: &Column, value: &'d [u8]) -> Result<Cow<'d, [u8]>, Rewrite> {
    match kind {
        TextKind::Enum => enum_oid(&col.labels, value).map(Cow::Owned),
        TextKind::Composite => {
            let c = col.composite.as_deref().ok_or(Rewrite::Unsupported)?;
            record(value, c).map(Cow::Owned)
        }
        k => stored(field_kind(k).ok_or(Rewrite::Unsupported)?, value),
    }
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
    for ((kind, elem), col) in c.kinds.iter().zip(&c.elems).zip(&c.layout.columns) {
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
        values.push(Some(match (kind, elem) {
            (TextKind::Array, Some(e)) => Cow::Owned(array_with(value, e.attlen, e.align, |v| {
                rewrite(e.kind, col, v)
            })?),
            (TextKind::Array, None) => return Err(Rewrite::Unsupported),
            (k, _) => rewrite(*k, col, value)?,
        }));
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
    use crate::tablesnap::put_field;

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
            special_dropped: Default::default(),
            placeholder: None,
            names: None,
        }
    }

    fn composite_of(
        oid: u32,
        columns: Vec<Column>,
        kinds: Vec<Option<TextKind>>,
        elems: Vec<Option<TextElem>>,
    ) -> Composite {
        Composite {
            oid,
            layout: Plan {
                columns,
                key: vec![],
            },
            kinds,
            elems,
        }
    }

    /// array_send's layout: ndim 1, `flags`, the element type, `items.len()` items from
    /// `lbound`, each its length (-1: NULL) and bytes.
    fn array_send(flags: i32, elemtype: i32, lbound: i32, items: &[Option<&[u8]>]) -> Vec<u8> {
        let mut out = Vec::new();
        for w in [1, flags, elemtype, items.len() as i32, lbound] {
            out.extend_from_slice(&w.to_be_bytes());
        }
        for item in items {
            put_field(&mut out, *item);
        }
        out
    }

    /// (a int4, <dropped>, b text, j jsonb, t timestamptz, r int4range)
    fn composite() -> Arc<Composite> {
        Arc::new(composite_of(
            77_001,
            vec![
                col("a", 4, 4, false),
                col("gone", 4, 4, true),
                col("b", -1, 4, false),
                col("j", -1, 4, false),
                col("t", 8, 8, false),
                col("r", -1, 4, false),
            ],
            vec![
                Some(TextKind::Int4),
                None,
                Some(TextKind::Text),
                Some(TextKind::Jsonb),
                Some(TextKind::TimestampTz),
                Some(TextKind::Output(crate::types::outtext::Output::Range(
                    crate::types::range::RangeSub::Int4,
                    3904,
                ))),
            ],
            vec![None; 6],
        ))
    }

    fn send(fields: &[Option<&[u8]>]) -> Vec<u8> {
        let mut out = (fields.len() as i32).to_be_bytes().to_vec();
        for f in fields {
            out.extend_from_slice(&0u32.to_be_bytes());
            put_field(&mut out, *f);
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

    /// (e mood, n (a int4, <dropped>, b text, j jsonb, t timestamptz, r int4range),
    /// xs int4[], ms mood[], js jsonb[]): an enum field, a nested composite with jsonb,
    /// arrays of int4, of an enum and of jsonb, read back by record_out's writer (the copy
    /// plan's, jsonb as text at every depth); a label the plan does not know is the
    /// Python path's (Unsupported), a damaged nested field is Bad.
    #[test]
    fn nested_record_to_stored() {
        let labels: crate::output::plan::Labels =
            [(901, "sad".to_string()), (902, "ok".to_string())].into();
        let mut e = col("e", 4, 4, false);
        e.labels = labels.clone();
        let mut n = col("n", -1, 8, false);
        n.composite = Some(composite());
        let mut ms = col("ms", -1, 4, false);
        ms.labels = labels.clone();
        let elem = |kind, oid, attlen, align| {
            Some(TextElem {
                kind,
                oid,
                attlen,
                align,
            })
        };
        let outer = Arc::new(composite_of(
            77_002,
            vec![e, n, col("xs", -1, 4, false), ms, col("js", -1, 4, false)],
            vec![
                Some(TextKind::Enum),
                Some(TextKind::Composite),
                Some(TextKind::Array),
                Some(TextKind::Array),
                Some(TextKind::Array),
            ],
            vec![
                None,
                None,
                elem(TextKind::Int4, 23, 4, 4),
                elem(TextKind::Enum, 77_003, 4, 4),
                elem(TextKind::Jsonb, 3802, -1, 4),
            ],
        ));
        assert!(field_rewrites(&outer));
        let array = |elemtype: i32, items: &[Option<&[u8]>]| array_send(1, elemtype, 1, items);
        let seven = 7i32.to_be_bytes();
        let epoch = 0i64.to_be_bytes();
        let inner = send(&[
            Some(&seven),
            Some(b"in"),
            Some(b"\x01[1]"),
            Some(&epoch),
            None,
        ]);
        let xs = array(23, &[Some(&seven), None]);
        let moods = array(77_003, &[Some(b"ok"), Some(b"sad")]);
        let docs = array(3802, &[Some(b"\x01{\"a\": 2}"), None]);
        let d = send(&[
            Some(b"ok"),
            Some(&inner),
            Some(&xs),
            Some(&moods),
            Some(&docs),
        ]);
        let st = record(&d, &outer).unwrap();
        let printed = composite_plan(&outer);
        let mut s = String::new();
        composite_text(&mut s, &printed, &st).unwrap();
        assert_eq!(
            s,
            r#"(ok,"(7,in,[1],""2000-01-01 00:00:00+00"",)","{7,NULL}","{ok,sad}","{""{\\""a\\"": 2}"",NULL}")"#
        );
        let unknown = send(&[Some(b"glad"), None, None, None, None]);
        assert!(matches!(
            record(&unknown, &outer),
            Err(Rewrite::Unsupported)
        ));
        let unknown_elem = array(77_003, &[Some(b"glad")]);
        let d = send(&[None, None, None, Some(&unknown_elem), None]);
        assert!(matches!(record(&d, &outer), Err(Rewrite::Unsupported)));
        let d = send(&[None, Some(&inner[..inner.len() - 1]), None, None, None]);
        assert!(matches!(record(&d, &outer), Err(Rewrite::Bad(_))));
        // every truncation of a nested value, and every byte flipped: an error or a
        // datum, never a panic
        let d = send(&[
            Some(b"ok"),
            Some(&inner),
            Some(&xs),
            Some(&moods),
            Some(&docs),
        ]);
        for n in 0..d.len() {
            assert!(record(&d[..n], &outer).is_err(), "{n}");
        }
        for i in 0..d.len() {
            let mut bent = d.clone();
            bent[i] ^= 0xA5;
            let _ = record(&bent, &outer);
        }
    }

    /// (v int2vector, o oidvector): array_recv's input of int2 / oid, printed as
    /// int2vectorout / oidvectorout print them; a jsonpath field has no rewrite.
    #[test]
    fn vector_fields_to_stored() {
        let c = Arc::new(composite_of(
            77_004,
            vec![col("v", -1, 4, false), col("o", -1, 4, false)],
            vec![
                Some(TextKind::Output(Output::Int2Vector)),
                Some(TextKind::Output(Output::OidVector)),
            ],
            vec![None, None],
        ));
        assert!(field_rewrites(&c));
        let vector = |elemtype: i32, items: &[&[u8]]| {
            let items: Vec<Option<&[u8]>> = items.iter().map(|b| Some(*b)).collect();
            array_send(0, elemtype, 0, &items)
        };
        let v = vector(21, &[&1i16.to_be_bytes(), &(-2i16).to_be_bytes()]);
        let o = vector(26, &[&23u32.to_be_bytes()]);
        let st = record(&send(&[Some(&v), Some(&o)]), &c).unwrap();
        let mut s = String::new();
        composite_text(&mut s, &c, &st).unwrap();
        assert_eq!(s, r#"("1 -2",23)"#);
        let jp = composite_of(
            77_005,
            vec![col("j", -1, 4, false)],
            vec![Some(TextKind::Output(Output::Jsonpath))],
            vec![None],
        );
        assert!(!field_rewrites(&jp));
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
        let arr = composite_of(
            1,
            vec![col("a", -1, 4, false)],
            vec![Some(TextKind::Array)],
            vec![None],
        );
        assert!(!field_rewrites(&arr));
    }

    /// A reg* or aclitem field (which the avro plugin's stream prints from the catalog
    /// names, glue::avro::named_composite) has no rewrite, in a nested composite too: a
    /// table with one is the snapshot's Python path, as before.
    #[test]
    fn named_fields_have_no_rewrite() {
        use crate::types::regproc::Reg;
        for kind in [TextKind::Reg(Reg::Class), TextKind::AclItem { pg15: false }] {
            let c = Arc::new(composite_of(
                77_006,
                vec![col("r", 4, 4, false), col("n", 4, 4, false)],
                vec![Some(kind), Some(TextKind::Int4)],
                vec![None, None],
            ));
            assert!(!field_rewrites(&c));
            let mut inner = col("i", -1, 8, false);
            inner.composite = Some(c);
            let outer = composite_of(
                77_007,
                vec![inner],
                vec![Some(TextKind::Composite)],
                vec![None],
            );
            assert!(!field_rewrites(&outer));
        }
    }
}
