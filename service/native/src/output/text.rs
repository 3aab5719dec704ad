//! test_decoding's text of a heap tuple, written natively: what the text plugin
//! (service.output.text.TestDecodingPlugin._tuple) prints for a row's values.
//!
//! Receives: a `TextPlan`, compiled once per table definition by
//! service.output.native_text: the definition's layout (a `Plan` whose columns carry
//! attlen, attalign, dropped, atthasmissing; `read` set on the printed ones) and, per
//! printed column, its head (` name[type]:`, the name quoted as quote_identifier does)
//! and how its value prints (`TextKind`); then per row a `Tuple`.
//! Hands on: the tuple's part of the line, appended to a String: per printed column its
//! head, then `null` (not when `skip_nulls`, the old key of a DELETE) or the literal as
//! print_literal writes the output function's text: integers, oid, floats and numeric bare;
//! bool as true/false; every other kind single-quoted with quotes doubled. Or the
//! reason the row is the Python path's (a fallback, the whole row): an external TOAST
//! pointer, a missing attribute with a default, NaN/±Infinity numerics, a float whose
//! shortest decimal is a rounding bound (types::float), text that is not UTF-8, a stored
//! size that differs from the type's, a reg* or aclitem value naming an OID whose name
//! the column's `names` (the Python resolver's cache, types::regproc) does not hold yet.
//!
//! The text is each output function's under the settings service.types.convert names
//! (DateStyle=ISO, TimeZone=UTC, bytea_output=hex, extra_float_digits=1), as
//! types::numeric, types::float and types::datetime write it. Errors are the deform's (`RowError`). Pure, no panics.

use std::fmt::Write;

use crate::types::deform::{Deformed, RowError, Tuple};
use crate::types::{
    array, datetime, enum_label, fixed, float, formats, jsonb, network, numeric, regproc,
};

use super::kind::TextKind;
pub use super::plan::TextElem;
use super::plan::{Column, Composite, Plan};
use crate::types::outtext::Output;

/// A printed column: its head (` name[type]:`) and value kind.
#[derive(Clone, Debug)]
pub struct Printed {
    pub head: String,
    pub kind: TextKind,
    /// An array column's element type; None otherwise.
    pub elem: Option<TextElem>,
    /// A domain's column (its kind the base type's): print_literal's default case, the
    /// output text quoted whatever the kind, as test_decoding's print_literal switches
    /// on the column's own type OID, which is the domain's.
    pub quoted: bool,
}

/// A table definition's layout and what of it prints (`printed[i]` for `layout.columns[i]`;
/// None for a dropped column or one the relation leaves out).
#[derive(Clone, Debug)]
pub struct TextPlan {
    pub layout: Plan,
    pub printed: Vec<Option<Printed>>,
}

impl TextPlan {
    /// Appends the tuple's text (see the module docstring) to `out`: Ok(None) when
    /// written, Ok(Some(reason)) with `out` as it was when the row is the Python path's.
    pub fn tuple(
        &self,
        out: &mut String,
        t: &Tuple<'_>,
        skip_nulls: bool,
    ) -> Result<Option<&'static str>, RowError> {
        let datums = match self.layout.deform(t, None)? {
            Deformed::Datums(d) => d,
            Deformed::Fallback(why) => return Ok(Some(why)),
        };
        let mark = out.len();
        for ((printed, datum), col) in self.printed.iter().zip(&datums).zip(&self.layout.columns) {
            let Some(p) = printed else { continue };
            match datum {
                None if skip_nulls => {}
                None => {
                    out.push_str(&p.head);
                    out.push_str("null");
                }
                Some(d) => {
                    out.push_str(&p.head);
                    if let Err(why) = literal(out, p, col, d) {
                        out.truncate(mark);
                        return Ok(Some(why));
                    }
                }
            }
        }
        Ok(None)
    }
}

/// `'text'` with each quote doubled (print_literal's default case).
fn quoted(out: &mut String, text: &str) {
    out.push('\'');
    for (i, part) in text.split('\'').enumerate() {
        if i > 0 {
            out.push_str("''");
        }
        out.push_str(part);
    }
    out.push('\'');
}

fn utf8(d: &[u8]) -> Result<&str, &'static str> {
    std::str::from_utf8(d).map_err(|_| "text is not UTF-8")
}

/// One value as print_literal writes its output function's text: integers, oid, floats
/// and numeric bare, bool as true/false, bit strings as B'…', everything else quoted.
fn literal(out: &mut String, p: &Printed, col: &Column, d: &[u8]) -> Result<(), &'static str> {
    if p.quoted {
        let mut text = String::new();
        output(&mut text, p.kind, col, d)?;
        quoted(out, &text);
        return Ok(());
    }
    match p.kind {
        TextKind::Bool => out.push_str(if fixed::<1>(d)?[0] != 0 {
            "true"
        } else {
            "false"
        }),
        TextKind::Int2
        | TextKind::Int4
        | TextKind::Int8
        | TextKind::Oid
        | TextKind::Float4
        | TextKind::Float8
        | TextKind::Numeric => output(out, p.kind, col, d)?,
        TextKind::Bits => {
            out.push_str("B'");
            formats::bits_text(out, d)?;
            out.push('\'');
        }
        TextKind::Text => quoted(out, utf8(d)?),
        // Output texts that never hold a quote: written in place, no copy to double quotes
        // in (these are most columns of a table: the row's hot path).
        TextKind::Bytea
        | TextKind::Uuid
        | TextKind::Date
        | TextKind::Time
        | TextKind::Timestamp
        | TextKind::TimestampTz
        | TextKind::Interval
        | TextKind::TimeTz
        | TextKind::Money
        | TextKind::Inet
        | TextKind::Cidr
        | TextKind::Mac
        | TextKind::Mac8 => {
            out.push('\'');
            output(out, p.kind, col, d)?;
            out.push('\'');
        }
        TextKind::Array => {
            let e = p.elem.ok_or("array Python decides")?;
            let a = array::elements(d, e.oid, e.attlen, e.align)?;
            let mut text = String::new();
            let delim = delimiter(e.kind);
            array::write_text_delimited(&mut text, &a, delim, |one, v| {
                output(one, e.kind, col, v)
            })?;
            quoted(out, &text);
        }
        kind => {
            let mut text = String::new();
            output(&mut text, kind, col, d)?;
            quoted(out, &text);
        }
    }
    Ok(())
}

/// The element type's typdelim, as array_out (arrayfuncs.c) takes it from pg_type: `;`
/// for box (pg_type.dat), `:` for PostGIS geometry and geography (their CREATE TYPE's
/// `delimiter = ':'`), `,` for every other type the writer prints.
fn delimiter(kind: TextKind) -> char {
    match kind {
        TextKind::Output(Output::Box) => ';',
        TextKind::Output(Output::Geometry) => ':',
        _ => ',',
    }
}

/// record_out of a composite datum's payload (service.types.composite.composite_text):
/// the nested tuple (its header from datum_typmod on, the fields from t_bits) deformed
/// against the type's fields, `(` the fields' texts `,`-separated `)`, a NULL as nothing,
/// a field quoted when empty or holding `"` `\` `(` `)` `,` or whitespace, with `"` and
/// `\` doubled. An enum field prints its label, an array field array_out of its
/// elements, a composite field its own record_out (each field's text quoted again, as
/// record_out quotes any field's output). Another type than the column's, a damaged
/// tuple or a field Python must judge is a fallback.
pub fn composite_text(out: &mut String, c: &Composite, d: &[u8]) -> Result<(), &'static str> {
    const BAD: &str = "composite Python decides";
    if d.len() < 19 {
        return Err(BAD);
    }
    let typeid = u32::from_le_bytes([d[4], d[5], d[6], d[7]]);
    let natts = (u16::from_le_bytes([d[14], d[15]]) & 0x07FF) as usize;
    let infomask = u16::from_le_bytes([d[16], d[17]]);
    if typeid != c.oid {
        return Err(BAD);
    }
    let t = Tuple {
        natts,
        infomask,
        hoff: d[18] as usize,
        data: &d[19..],
    };
    let datums = match c.layout.deform(&t, None) {
        Ok(Deformed::Datums(datums)) => datums,
        _ => return Err(BAD),
    };
    out.push('(');
    let mut first = true;
    let mut one = String::new();
    let fields = c
        .kinds
        .iter()
        .zip(&c.elems)
        .zip(&datums)
        .zip(&c.layout.columns);
    for (((kind, elem), datum), field) in fields {
        let Some(kind) = kind else { continue };
        if !first {
            out.push(',');
        }
        first = false;
        let Some(v) = datum else { continue };
        one.clear();
        match (kind, elem) {
            // an array field: array_out of its elements (a nested composite's or enum's
            // through the field's own column)
            (TextKind::Array, Some(e)) => {
                let a = array::elements(v, e.oid, e.attlen, e.align)?;
                array::write_text_delimited(&mut one, &a, delimiter(e.kind), |s, x| {
                    output(s, e.kind, field, x)
                })?;
            }
            _ => output(&mut one, *kind, field, v)?,
        }
        let special = |ch: char| {
            matches!(ch, '"' | '\\' | '(' | ')' | ',') || ch.is_ascii_whitespace() || ch == '\u{b}'
        };
        if one.is_empty() || one.contains(special) {
            out.push('"');
            for ch in one.chars() {
                if matches!(ch, '"' | '\\') {
                    out.push(ch);
                }
                out.push(ch);
            }
            out.push('"');
        } else {
            out.push_str(&one);
        }
    }
    out.push(')');
    Ok(())
}

/// The output function's text of one value (service.types.convert.to_text), as it
/// stands before print_literal: also an array element's text. `col` carries an enum's
/// labels.
fn output(out: &mut String, kind: TextKind, col: &Column, d: &[u8]) -> Result<(), &'static str> {
    match kind {
        TextKind::Bool => out.push(if fixed::<1>(d)?[0] != 0 { 't' } else { 'f' }),
        TextKind::Int2 => {
            let _ = write!(out, "{}", i16::from_le_bytes(fixed(d)?));
        }
        TextKind::Int4 => {
            let _ = write!(out, "{}", i32::from_le_bytes(fixed(d)?));
        }
        TextKind::Int8 => {
            let _ = write!(out, "{}", i64::from_le_bytes(fixed(d)?));
        }
        TextKind::Oid => {
            let _ = write!(out, "{}", u32::from_le_bytes(fixed(d)?));
        }
        TextKind::Float4 => float::float4(out, f32::from_le_bytes(fixed(d)?))?,
        TextKind::Float8 => float::float8(out, f64::from_le_bytes(fixed(d)?))?,
        TextKind::Numeric => numeric::text(out, d).ok_or("numeric Python decides")?,
        TextKind::Text => out.push_str(utf8(d)?),
        TextKind::Name => {
            let end = d.iter().position(|&b| b == 0).unwrap_or(d.len());
            out.push_str(utf8(&d[..end])?);
        }
        TextKind::Bytea => formats::bytea_text(out, d),
        TextKind::Uuid => formats::uuid_text(out, d)?,
        TextKind::Date => datetime::pg_date(out, i32::from_le_bytes(fixed(d)?)),
        TextKind::Time => datetime::pg_clock(out, i64::from_le_bytes(fixed(d)?)),
        TextKind::Timestamp | TextKind::TimestampTz => {
            let micros = i64::from_le_bytes(fixed(d)?);
            datetime::pg_timestamp(out, micros, kind == TextKind::TimestampTz);
        }
        TextKind::Enum => out.push_str(enum_label(&col.labels, d)?),
        TextKind::Bits => formats::bits_text(out, d)?,
        TextKind::Interval => formats::interval_text(out, d)?,
        TextKind::TimeTz => formats::timetz_text(out, d)?,
        TextKind::Money => formats::money_text(out, d)?,
        TextKind::Char => formats::char_text(out, d)?,
        TextKind::Inet => network::inet_text(out, d, false)?,
        TextKind::Cidr => network::inet_text(out, d, true)?,
        TextKind::Mac | TextKind::Mac8 => network::mac_text(out, d)?,
        TextKind::Xml => formats::xml_text(out, d)?,
        TextKind::Jsonb => jsonb::text(out, d)?,
        TextKind::Output(o) => o.write_labeled(out, d, &col.labels)?,
        // regclassout .. regcollationout, aclitemout: the names the Python resolver
        // resolved; one it has not is its row's fallback (a composite's field carries
        // them when the text plugin's plan gave them, glue::text; without them the row is
        // Python's)
        TextKind::Reg(reg) => {
            let names = col.names.as_deref().ok_or("reg* Python decides")?;
            regproc::reg_text(out, names, reg, d)?;
        }
        TextKind::AclItem { .. } => {
            let names = col.names.as_deref().ok_or("aclitem Python decides")?;
            regproc::aclitem_text(out, names, d)?;
        }
        TextKind::Composite => {
            let c = col.composite.as_deref().ok_or("composite Python decides")?;
            composite_text(out, c, d)?;
        }
        // an array of arrays is not an element kind (array_out of an element is Python's)
        TextKind::Array => return Err("array Python decides"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::plan::Column;

    fn column(name: &str, attlen: i16, align: usize) -> Column {
        Column {
            name: name.into(),
            attlen,
            align,
            dropped: false,
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

    fn plan(cols: &[(&str, i16, usize, TextKind, &str)]) -> TextPlan {
        TextPlan {
            layout: Plan {
                columns: cols.iter().map(|c| column(c.0, c.1, c.2)).collect(),
                key: vec![],
            },
            printed: cols
                .iter()
                .map(|c| {
                    Some(Printed {
                        head: format!(" {}[{}]:", c.0, c.4),
                        kind: c.3,
                        elem: None,
                        quoted: false,
                    })
                })
                .collect(),
        }
    }

    fn text(plan: &TextPlan, natts: usize, infomask: u16, data: &[u8], skip: bool) -> String {
        let mut out = String::new();
        let t = Tuple {
            natts,
            infomask,
            hoff: 24,
            data,
        };
        assert_eq!(plan.tuple(&mut out, &t, skip).unwrap(), None);
        out
    }

    #[test]
    fn prints_as_print_literal() {
        // int4 id = -7, text note = "it's" (short varlena), bool ok = true
        let p = plan(&[
            ("id", 4, 4, TextKind::Int4, "integer"),
            ("note", -1, 4, TextKind::Text, "text"),
            ("ok", 1, 1, TextKind::Bool, "boolean"),
        ]);
        let mut data = vec![0u8]; // pad to offset 24
        data.extend_from_slice(&(-7i32).to_le_bytes());
        data.push(((4 + 1) << 1) | 1);
        data.extend_from_slice(b"it's");
        data.push(1);
        assert_eq!(
            text(&p, 3, 0, &data, false),
            " id[integer]:-7 note[text]:'it''s' ok[boolean]:true"
        );
    }

    #[test]
    fn nulls_print_or_are_skipped() {
        let p = plan(&[
            ("id", 4, 4, TextKind::Int4, "integer"),
            ("note", -1, 4, TextKind::Text, "text"),
        ]);
        // HEAP_HASNULL, bitmap 0b01: id present, note NULL; data from offset 24
        let mut data = vec![0b01u8];
        data.extend_from_slice(&5i32.to_le_bytes());
        assert_eq!(
            text(&p, 2, 1, &data, false),
            " id[integer]:5 note[text]:null"
        );
        assert_eq!(text(&p, 2, 1, &data, true), " id[integer]:5");
    }

    #[test]
    fn a_fallback_leaves_the_text_as_it_was() {
        let p = plan(&[("note", -1, 4, TextKind::Text, "text")]);
        let mut data = vec![0u8];
        data.push(((2 + 1) << 1) | 1);
        data.extend_from_slice(&[0xff, 0xfe]);
        let mut out = String::from("head");
        let t = Tuple {
            natts: 1,
            infomask: 0,
            hoff: 24,
            data: &data,
        };
        assert_eq!(
            p.tuple(&mut out, &t, false).unwrap(),
            Some("text is not UTF-8")
        );
        assert_eq!(out, "head");
    }

    fn lit(out: &mut String, kind: TextKind, d: &[u8]) -> Result<(), &'static str> {
        let p = Printed {
            head: String::new(),
            kind,
            elem: None,
            quoted: false,
        };
        literal(out, &p, &column("c", kind.attlen(), 1), d)
    }

    /// A domain's column: its base kind's output text, quoted whatever the kind (bool's
    /// `t`, not `true`; bit's without B''; int4's quoted).
    #[test]
    fn domains_print_their_base_text_quoted() {
        let quoted = |kind: TextKind, d: &[u8]| {
            let p = Printed {
                head: String::new(),
                kind,
                elem: None,
                quoted: true,
            };
            let mut out = String::new();
            literal(&mut out, &p, &column("c", kind.attlen(), 1), d).map(|()| out)
        };
        assert_eq!(quoted(TextKind::Int4, &7i32.to_le_bytes()).unwrap(), "'7'");
        assert_eq!(quoted(TextKind::Bool, &[1]).unwrap(), "'t'");
        let bits = [3i32.to_le_bytes().to_vec(), vec![0b1010_0000]].concat();
        assert_eq!(quoted(TextKind::Bits, &bits).unwrap(), "'101'");
        assert_eq!(quoted(TextKind::Text, b"it's").unwrap(), "'it''s'");
        assert!(quoted(TextKind::Int4, &[1]).is_err());
    }

    /// box[]: array_out with box's delimiter `;`, so a box's commas need no quotes.
    #[test]
    fn box_arrays_use_their_delimiter() {
        let boxes = [[1.0f64, 1.0, 0.0, 0.0], [3.0, 3.0, 2.0, 2.0]]
            .map(|b| b.map(f64::to_le_bytes).concat());
        let mut d = Vec::new();
        for v in [1i32, 0, 603, 2, 1] {
            d.extend_from_slice(&v.to_le_bytes()); // ndim, no bitmap, box, dims, lbound
        }
        d.resize(20, 0); // the items from the next 8-byte boundary of the varlena
        d.extend(boxes.concat());
        let e = TextElem {
            kind: TextKind::Output(Output::Box),
            oid: 603,
            attlen: 32,
            align: 8,
        };
        let p = Printed {
            head: String::new(),
            kind: TextKind::Array,
            elem: Some(e),
            quoted: false,
        };
        let mut out = String::new();
        literal(&mut out, &p, &column("c", -1, 8), &d).unwrap();
        assert_eq!(out, "'{(1,1),(0,0);(3,3),(2,2)}'");
    }

    /// array_out's delimiter of each element kind: PostGIS' `:` (geometry[] and
    /// geography[] print their hex EWKBs `:`-separated), box's `;`, else `,`.
    #[test]
    fn element_delimiters() {
        assert_eq!(delimiter(TextKind::Output(Output::Geometry)), ':');
        assert_eq!(delimiter(TextKind::Output(Output::Box)), ';');
        for kind in ["hstore", "ltree", "cube", "seg", "ean13", "vector", "int4"] {
            assert_eq!(delimiter(TextKind::parse(kind).unwrap()), ',', "{kind}");
        }
    }

    fn one(kind: TextKind, d: &[u8]) -> String {
        let mut out = String::new();
        lit(&mut out, kind, d).unwrap();
        out
    }

    #[test]
    fn literals_of_each_kind() {
        assert_eq!(one(TextKind::Oid, &u32::MAX.to_le_bytes()), "4294967295");
        assert_eq!(
            one(TextKind::Int8, &i64::MIN.to_le_bytes()),
            i64::MIN.to_string()
        );
        assert_eq!(one(TextKind::Bytea, b"\x00\xab'"), "'\\x00ab27'");
        let mut name = b"ab'c".to_vec();
        name.resize(64, 0);
        assert_eq!(one(TextKind::Name, &name), "'ab''c'");
        let uuid: Vec<u8> = (0u8..16).collect();
        assert_eq!(
            one(TextKind::Uuid, &uuid),
            "'00010203-0405-0607-0809-0a0b0c0d0e0f'"
        );
        assert_eq!(one(TextKind::Date, &0i32.to_le_bytes()), "'2000-01-01'");
        assert_eq!(one(TextKind::Date, &i32::MAX.to_le_bytes()), "'infinity'");
        // day -730119 is 0001-01-01; the day before it is the last of 1 BC
        assert_eq!(
            one(TextKind::Date, &(-730_120i32).to_le_bytes()),
            "'0001-12-31 BC'"
        );
        let t = 86_400_000_000i64 + 3_723_500_000; // 2000-01-02 01:02:03.5
        assert_eq!(
            one(TextKind::TimestampTz, &t.to_le_bytes()),
            "'2000-01-02 01:02:03.5+00'"
        );
        assert_eq!(
            one(TextKind::Timestamp, &(-1i64).to_le_bytes()),
            "'1999-12-31 23:59:59.999999'"
        );
        assert_eq!(
            one(TextKind::Time, &86_400_000_000i64.to_le_bytes()),
            "'24:00:00'"
        );
        // numeric -12.340 (dscale 3): long form, weight 0, digits 12, 3400
        let mut n = (0x4000u16 | 3).to_le_bytes().to_vec();
        n.extend_from_slice(&0i16.to_le_bytes());
        n.extend_from_slice(&12i16.to_le_bytes());
        n.extend_from_slice(&3400i16.to_le_bytes());
        assert_eq!(one(TextKind::Numeric, &n), "-12.340");
        // 0.000012 (weight -2, digit 1200, dscale 6) and 10000 (weight 1, digit 1)
        let mut n = 6u16.to_le_bytes().to_vec();
        n.extend_from_slice(&(-2i16).to_le_bytes());
        n.extend_from_slice(&1200i16.to_le_bytes());
        assert_eq!(one(TextKind::Numeric, &n), "0.000012");
        let mut n = 0u16.to_le_bytes().to_vec();
        n.extend_from_slice(&1i16.to_le_bytes());
        n.extend_from_slice(&1i16.to_le_bytes());
        assert_eq!(one(TextKind::Numeric, &n), "10000");
    }

    #[test]
    fn what_python_decides() {
        let mut out = String::new();
        assert!(lit(&mut out, TextKind::Numeric, &0xC000u16.to_le_bytes()).is_err());
        assert!(lit(&mut out, TextKind::Int4, &[1, 2]).is_err());
        assert!(lit(&mut out, TextKind::Text, &[0xc3]).is_err());
        assert_eq!(out, "");
    }

    /// A composite datum's payload (from datum_typmod on) of type `typeid`, each field
    /// `(align, stored bytes)` laid out from the header start as heap_fill_tuple does; a
    /// varlena field's bytes carry their 4-byte header.
    fn row_datum(typeid: u32, fields: &[Option<(usize, Vec<u8>)>]) -> Vec<u8> {
        let nulls = fields.iter().any(Option::is_none);
        let bitmap = if nulls { fields.len().div_ceil(8) } else { 0 };
        let hoff = (23 + bitmap).div_ceil(8) * 8;
        let mut d = (-1i32).to_le_bytes().to_vec();
        d.extend_from_slice(&typeid.to_le_bytes());
        d.extend_from_slice(&[0; 6]);
        d.extend_from_slice(&(fields.len() as u16).to_le_bytes());
        d.extend_from_slice(&u16::from(nulls).to_le_bytes());
        d.push(hoff as u8);
        let mut bits = vec![0u8; bitmap];
        for (i, f) in fields.iter().enumerate() {
            if f.is_some() && nulls {
                bits[i / 8] |= 1 << (i % 8);
            }
        }
        d.extend_from_slice(&bits);
        d.resize(hoff - 4, 0);
        for (align, bytes) in fields.iter().flatten() {
            d.resize((d.len() + 4).div_ceil(*align) * align - 4, 0);
            d.extend_from_slice(bytes);
        }
        d
    }

    fn varlena(payload: &[u8]) -> Vec<u8> {
        let mut v = (((payload.len() + 4) as u32) << 2).to_le_bytes().to_vec();
        v.extend_from_slice(payload);
        v
    }

    /// An int4[] or enum[] (4-byte elements, no NULLs, one dimension) as
    /// construct_md_array lays it out, without its varlena header.
    fn array4(elemtype: u32, items: &[u32]) -> Vec<u8> {
        let mut d = 1i32.to_le_bytes().to_vec();
        d.extend_from_slice(&0i32.to_le_bytes());
        d.extend_from_slice(&elemtype.to_le_bytes());
        d.extend_from_slice(&(items.len() as i32).to_le_bytes());
        d.extend_from_slice(&1i32.to_le_bytes());
        for v in items {
            d.extend_from_slice(&v.to_le_bytes());
        }
        d
    }

    /// record_out of a composite with a regclass field: the name from the field's
    /// `names` (a quote and a comma in it, so record_out quotes it), a name not cached
    /// the row's fallback, a field without names Python's.
    #[test]
    fn composite_reg_fields_print_cached_names() {
        use crate::types::regproc::{Named, Names, Reg};
        let names = std::sync::Arc::new(Names::default());
        names.put(Named::Reg(Reg::Class), 1259, "\"it's, odd\"".into());
        let mut cl = column("cl", 4, 4);
        cl.names = Some(std::sync::Arc::clone(&names));
        let kind = TextKind::Reg(Reg::Class);
        let c = composite_of(
            70_010,
            vec![(cl, kind, None), (column("n", 4, 4), TextKind::Int4, None)],
        );
        let d = row_datum(
            70_010,
            &[
                Some((4, 1259u32.to_le_bytes().to_vec())),
                Some((4, 5i32.to_le_bytes().to_vec())),
            ],
        );
        let mut s = String::new();
        composite_text(&mut s, &c, &d).unwrap();
        assert_eq!(s, r#"("""it's, odd""",5)"#);
        let miss = row_datum(70_010, &[Some((4, 1260u32.to_le_bytes().to_vec())), None]);
        assert_eq!(
            composite_text(&mut String::new(), &c, &miss),
            Err("reg* name not cached")
        );
        let bare = composite_of(70_010, vec![(column("cl", 4, 4), kind, None)]);
        let d = row_datum(70_010, &[Some((4, 1259u32.to_le_bytes().to_vec()))]);
        assert!(composite_text(&mut String::new(), &bare, &d).is_err());
    }

    fn composite_of(oid: u32, fields: Vec<(Column, TextKind, Option<TextElem>)>) -> Composite {
        Composite {
            oid,
            kinds: fields.iter().map(|f| Some(f.1)).collect(),
            elems: fields.iter().map(|f| f.2).collect(),
            layout: Plan {
                columns: fields.into_iter().map(|f| f.0).collect(),
                key: vec![],
            },
        }
    }

    /// record_out of a composite whose fields are an enum (its label), an int4[]
    /// (array_out, quoted for its comma), a nested composite (its record_out, quoted),
    /// an array of enums and a NULL, as PostgreSQL prints
    /// `('b','{1,2}','(7,"x y")','{a,b}',NULL)::outer`.
    #[test]
    fn nested_composites_enums_and_arrays() {
        let inner = composite_of(
            70_001,
            vec![
                (column("i", 4, 4), TextKind::Int4, None),
                (column("t", -1, 4), TextKind::Text, None),
            ],
        );
        let mut e = column("e", 4, 4);
        e.labels = [(900, "a".to_string()), (901, "b".to_string())].into();
        let arr = column("arr", -1, 4);
        let mut nested = column("n", -1, 8);
        nested.composite = Some(std::sync::Arc::new(inner));
        let mut earr = column("ea", -1, 4);
        earr.labels = e.labels.clone();
        let elem = |kind, oid| TextElem {
            kind,
            oid,
            attlen: 4,
            align: 4,
        };
        let outer = composite_of(
            70_002,
            vec![
                (e, TextKind::Enum, None),
                (arr, TextKind::Array, Some(elem(TextKind::Int4, 23))),
                (nested, TextKind::Composite, None),
                (earr, TextKind::Array, Some(elem(TextKind::Enum, 70_003))),
                (column("z", 4, 4), TextKind::Int4, None),
            ],
        );
        let inner_d = row_datum(
            70_001,
            &[
                Some((4, 7i32.to_le_bytes().to_vec())),
                Some((4, varlena(b"x y"))),
            ],
        );
        let d = row_datum(
            70_002,
            &[
                Some((4, 901u32.to_le_bytes().to_vec())),
                Some((4, varlena(&array4(23, &[1, 2])))),
                Some((8, varlena(&inner_d))),
                Some((4, varlena(&array4(70_003, &[900, 901])))),
                None,
            ],
        );
        let mut s = String::new();
        composite_text(&mut s, &outer, &d).unwrap();
        assert_eq!(s, r#"(b,"{1,2}","(7,""x y"")","{a,b}",)"#);
        // an enum OID without a label, and a nested datum of another type, are Python's
        let bad = row_datum(
            70_002,
            &[
                Some((4, 5u32.to_le_bytes().to_vec())),
                None,
                None,
                None,
                None,
            ],
        );
        assert!(composite_text(&mut String::new(), &outer, &bad).is_err());
        let other = row_datum(70_009, &[Some((4, 1i32.to_le_bytes().to_vec())), None]);
        let d = row_datum(
            70_002,
            &[None, None, Some((8, varlena(&other))), None, None],
        );
        assert!(composite_text(&mut String::new(), &outer, &d).is_err());
    }

    #[test]
    fn reg_and_aclitem_print_cached_names_quoted() {
        use crate::types::regproc::{Named, Names, Reg};
        let names = std::sync::Arc::new(Names::default());
        names.put(Named::Reg(Reg::Class), 1259, "\"it's\"".into());
        names.put(Named::Role, 10, "postgres".into());
        let print = |kind: TextKind, d: &[u8]| {
            let mut col = column("c", kind.attlen(), 4);
            col.names = Some(std::sync::Arc::clone(&names));
            let p = Printed {
                head: String::new(),
                kind,
                elem: None,
                quoted: false,
            };
            let mut out = String::from("kept");
            literal(&mut out, &p, &col, d).map(|()| out)
        };
        // print_literal's default case: quoted, the quote in the name doubled
        let class = TextKind::Reg(Reg::Class);
        assert_eq!(
            print(class, &1259u32.to_le_bytes()).unwrap(),
            "kept'\"it''s\"'"
        );
        let acl15 = [0u32, 10, 0b11 | 1 << 17].map(u32::to_le_bytes).concat();
        let acl = print(TextKind::AclItem { pg15: true }, &acl15).unwrap();
        assert_eq!(acl, "kept'=ar*/postgres'");
        // a name the resolver has not resolved is the row's fallback
        assert_eq!(
            print(class, &1260u32.to_le_bytes()),
            Err("reg* name not cached")
        );
        let unknown = [0u32, 11, 1].map(u32::to_le_bytes).concat();
        assert_eq!(
            print(TextKind::AclItem { pg15: true }, &unknown),
            Err("aclitem role name not cached")
        );
        // without the names (no cache given): Python's
        assert_eq!(
            lit(&mut String::new(), class, &1259u32.to_le_bytes()),
            Err("reg* Python decides")
        );
        assert_eq!(
            TextKind::parse("aclitem_pg15").map(TextKind::attlen),
            Some(12)
        );
        assert_eq!(TextKind::parse("aclitem").map(TextKind::attlen), Some(16));
        assert_eq!(TextKind::parse("regrole"), Some(TextKind::Reg(Reg::Role)));
    }
}
