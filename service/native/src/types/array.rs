//! Arrays (array.h, arrayfuncs.c): a one-dimensional or N-D array datum read into its
//! element datums, and array_out's text of them.
//!
//! Receives: an array varlena's payload (offsets below count from the 4-byte varlena
//! header, as in memory): int32 ndim, int32 dataoffset (0 when there is no null bitmap),
//! Oid elemtype, int32 dims[ndim], int32 lbound[ndim], the null bitmap (1 = present,
//! first element in the low bit) when dataoffset is not 0, then the elements from
//! dataoffset (or MAXALIGN(16 + 8 * ndim)) in row-major order, each aligned to the
//! element type's typalign, NULLs taking no space. The caller names the element type
//! it expects (OID, typlen, typalign in bytes).
//! Hands on: `Elements`: the dimensions, lower bounds and each element's stored form (a
//! varlena element's payload, a fixed-length element's bytes; None for NULL), or
//! array_out's text from the elements' own output texts (`write_text`).
//! Mirrors service.types.array.read_array and array_text check for check.
//!
//! Errors: an array the Python reference would read differently or reject (another
//! element type, more than MAXDIM dimensions, a negative or overflowing dimension, a
//! bitmap or element overrunning the datum, a compressed or external element) is
//! `Err(reason)`: the row falls back and Python decides. Pure, no panics.

use super::nested_varlena;

const VARHDRSZ: usize = 4;
const MAXDIM: usize = 6;
const BAD: &str = "array Python decides";

/// An array's dimensions, lower bounds and elements in row-major order.
pub struct Elements<'a> {
    pub dims: Vec<i32>,
    pub lbounds: Vec<i32>,
    pub items: Vec<Option<&'a [u8]>>,
}

fn i32_at(d: &[u8], at: usize) -> Result<i32, &'static str> {
    let b = d.get(at..at + 4).ok_or(BAD)?;
    Ok(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fn align_up(n: usize, a: usize) -> usize {
    (n + a - 1) & !(a - 1)
}

/// The elements of an array of `elem_oid` (typlen `attlen`, typalign `align` bytes).
pub fn elements(
    d: &[u8],
    elem_oid: u32,
    attlen: i16,
    align: usize,
) -> Result<Elements<'_>, &'static str> {
    let ndim = i32_at(d, 0)?;
    let dataoffset = i32_at(d, 4)?;
    let elemtype = i32_at(d, 8)? as u32;
    if !(0..=MAXDIM as i32).contains(&ndim) || elemtype != elem_oid || dataoffset < 0 {
        return Err(BAD);
    }
    if !matches!(align, 1 | 2 | 4 | 8) || attlen == 0 || attlen < -1 {
        return Err(BAD);
    }
    let ndim = ndim as usize;
    let mut dims = Vec::with_capacity(ndim);
    let mut lbounds = Vec::with_capacity(ndim);
    for i in 0..ndim {
        dims.push(i32_at(d, 12 + 4 * i)?);
        lbounds.push(i32_at(d, 12 + 4 * (ndim + i))?);
    }
    let mut nitems: usize = if ndim == 0 { 0 } else { 1 };
    for &dim in &dims {
        if dim < 0 {
            return Err(BAD);
        }
        nitems = nitems.checked_mul(dim as usize).ok_or(BAD)?;
    }
    // Every present element takes at least one byte, a NULL one bitmap bit.
    if nitems > d.len().saturating_mul(8) {
        return Err(BAD);
    }
    let bitmap_at = 12 + 8 * ndim;
    let has_nulls = dataoffset != 0;
    let first = if has_nulls {
        let at = dataoffset as usize;
        if at < VARHDRSZ + bitmap_at + nitems.div_ceil(8) {
            return Err(BAD);
        }
        at - VARHDRSZ
    } else {
        align_up(VARHDRSZ + bitmap_at, 8) - VARHDRSZ
    };
    if has_nulls && bitmap_at + nitems.div_ceil(8) > d.len() {
        return Err(BAD);
    }
    let mut items = Vec::with_capacity(nitems);
    let mut off = first;
    for i in 0..nitems {
        if has_nulls && (d[bitmap_at + (i >> 3)] >> (i & 7)) & 1 == 0 {
            items.push(None);
            continue;
        }
        off = align_up(off + VARHDRSZ, align) - VARHDRSZ;
        let (value, size) = if attlen == -1 {
            nested_varlena(d, off).map_err(|_| BAD)?
        } else {
            let size = attlen as usize;
            (d.get(off..off + size).ok_or(BAD)?, size)
        };
        if off + size > d.len() {
            return Err(BAD);
        }
        off += size;
        items.push(Some(value));
    }
    Ok(Elements {
        dims,
        lbounds,
        items,
    })
}

const SPACE: &[char] = &[' ', '\t', '\n', '\r', '\u{b}', '\u{c}'];

/// An element's text as array_out writes it (service.types.array._quote): quoted when
/// empty, NULL in any case, or holding `"` `\` `{` `}` the type's delimiter or
/// whitespace.
fn quote(out: &mut String, text: &str, delim: char) {
    let needs = text.is_empty()
        || text.eq_ignore_ascii_case("NULL")
        || text.contains(|c: char| {
            matches!(c, '"' | '\\' | '{' | '}') || c == delim || SPACE.contains(&c)
        });
    if !needs {
        out.push_str(text);
        return;
    }
    out.push('"');
    for c in text.chars() {
        if matches!(c, '"' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
}

/// array_out of the elements, each printed by `text` (its output function's text), with
/// the delimiter `,` (every element type's but box's: `write_text_delimited`).
pub fn write_text(
    out: &mut String,
    a: &Elements<'_>,
    text: impl FnMut(&mut String, &[u8]) -> Result<(), &'static str>,
) -> Result<(), &'static str> {
    write_text_delimited(out, a, ',', text)
}

/// array_out (arrayfuncs.c) of the elements with the element type's typdelim `delim`
/// (box's is `;`), each printed by `text`.
pub fn write_text_delimited(
    out: &mut String,
    a: &Elements<'_>,
    delim: char,
    mut text: impl FnMut(&mut String, &[u8]) -> Result<(), &'static str>,
) -> Result<(), &'static str> {
    if a.dims.is_empty() || a.dims.contains(&0) {
        out.push_str("{}");
        return Ok(());
    }
    if a.lbounds.iter().any(|&lb| lb != 1) {
        for (&lb, &dim) in a.lbounds.iter().zip(&a.dims) {
            out.push_str(&format!("[{lb}:{}]", lb as i64 + dim as i64 - 1));
        }
        out.push('=');
    }
    let mut shown = Vec::with_capacity(a.items.len());
    let mut one = String::new();
    for item in &a.items {
        shown.push(match item {
            None => "NULL".to_string(),
            Some(v) => {
                one.clear();
                text(&mut one, v)?;
                let mut q = String::with_capacity(one.len());
                quote(&mut q, &one, delim);
                q
            }
        });
    }
    nest(out, &shown, &a.dims, delim);
    Ok(())
}

/// Braces per dimension around the row-major texts, `delim` between them.
fn nest(out: &mut String, part: &[String], dims: &[i32], delim: char) {
    out.push('{');
    if dims.len() <= 1 {
        for (i, p) in part.iter().enumerate() {
            if i > 0 {
                out.push(delim);
            }
            out.push_str(p);
        }
    } else {
        let n = dims[0] as usize;
        let step = part.len() / n.max(1);
        for i in 0..n {
            if i > 0 {
                out.push(delim);
            }
            nest(out, &part[i * step..(i + 1) * step], &dims[1..], delim);
        }
    }
    out.push('}');
}

/// int2vectorout / oidvectorout (int.c, oid.c): the elements of an int2vector (`oid`
/// false: int2 elements) or oidvector (oid elements), each as its integer, separated by
/// single spaces; read as an array datum like service.types.array.vector_text (a NULL
/// element, which the server never stores, prints as nothing, as there).
pub fn vector_text(out: &mut String, d: &[u8], oid: bool) -> Result<(), &'static str> {
    use std::fmt::Write;
    let a = if oid {
        elements(d, 26, 4, 4)?
    } else {
        elements(d, 21, 2, 2)?
    };
    for (i, item) in a.items.iter().enumerate() {
        if i != 0 {
            out.push(' ');
        }
        match (item, oid) {
            (None, _) => {}
            (Some(v), true) => {
                let _ = write!(out, "{}", u32::from_le_bytes(super::fixed(v)?));
            }
            (Some(v), false) => {
                let _ = write!(out, "{}", i16::from_le_bytes(super::fixed(v)?));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An int4[] laid out as construct_md_array lays it out.
    fn int4_array(dims: &[i32], lbounds: &[i32], items: &[Option<i32>]) -> Vec<u8> {
        let nulls = items.iter().any(Option::is_none);
        let ndim = dims.len();
        let mut d = Vec::new();
        d.extend_from_slice(&(ndim as i32).to_le_bytes());
        let head = VARHDRSZ + 12 + 8 * ndim;
        let bitmap = if nulls { items.len().div_ceil(8) } else { 0 };
        let data_at = align_up(head + bitmap, 8);
        d.extend_from_slice(&(if nulls { data_at as i32 } else { 0 }).to_le_bytes());
        d.extend_from_slice(&23u32.to_le_bytes());
        for x in dims.iter().chain(lbounds) {
            d.extend_from_slice(&x.to_le_bytes());
        }
        if nulls {
            let mut bits = vec![0u8; bitmap];
            for (i, it) in items.iter().enumerate() {
                if it.is_some() {
                    bits[i / 8] |= 1 << (i % 8);
                }
            }
            d.extend_from_slice(&bits);
        }
        d.resize(data_at - VARHDRSZ, 0);
        for v in items.iter().flatten() {
            d.extend_from_slice(&v.to_le_bytes());
        }
        d
    }

    fn text(d: &[u8]) -> Result<String, &'static str> {
        let a = elements(d, 23, 4, 4)?;
        let mut s = String::new();
        write_text(&mut s, &a, |out, v| {
            let n = i32::from_le_bytes(v.try_into().map_err(|_| BAD)?);
            out.push_str(&n.to_string());
            Ok(())
        })?;
        Ok(s)
    }

    #[test]
    fn prints_as_array_out() {
        assert_eq!(text(&int4_array(&[], &[], &[])).unwrap(), "{}");
        assert_eq!(
            text(&int4_array(&[3], &[1], &[Some(1), None, Some(-3)])).unwrap(),
            "{1,NULL,-3}"
        );
        let square = [Some(1), Some(2), Some(3), Some(4), Some(5), Some(6)];
        assert_eq!(
            text(&int4_array(&[2, 3], &[1, 1], &square)).unwrap(),
            "{{1,2,3},{4,5,6}}"
        );
        assert_eq!(
            text(&int4_array(&[2], &[0], &[Some(7), Some(8)])).unwrap(),
            "[0:1]={7,8}"
        );
        let mut s = String::new();
        quote(&mut s, "a b", ',');
        quote(&mut s, "null", ',');
        quote(&mut s, "x\"\\", ',');
        quote(&mut s, "", ',');
        quote(&mut s, "é", ',');
        assert_eq!(s, "\"a b\"\"null\"\"x\\\"\\\\\"\"\"é");
        // the delimiter is quoted, a comma only where it is the delimiter
        s.clear();
        quote(&mut s, "(1,1);x", ';');
        quote(&mut s, "(1,1)", ';');
        assert_eq!(s, "\"(1,1);x\"(1,1)");
    }

    #[test]
    fn refuses_what_python_decides() {
        let good = int4_array(&[3], &[1], &[Some(1), None, Some(-3)]);
        assert!(elements(&good, 20, 8, 8).is_err()); // another element type
        let mut neg = good.clone();
        neg[12..16].copy_from_slice(&(-1i32).to_le_bytes());
        assert!(elements(&neg, 23, 4, 4).is_err());
        for cut in 0..good.len() {
            let _ = text(&good[..cut]);
        }
        for i in 0..good.len() {
            for flip in [0x01u8, 0x80, 0xFF] {
                let mut bad = good.clone();
                bad[i] ^= flip;
                let _ = text(&bad);
            }
        }
    }

    /// int2vector and oidvector print their elements space-separated (an empty one as
    /// nothing); another element type than the vector's is the Python path's.
    #[test]
    fn vectors_print_space_separated() {
        let mut int2 = 1i32.to_le_bytes().to_vec();
        int2.extend_from_slice(&0i32.to_le_bytes());
        int2.extend_from_slice(&21u32.to_le_bytes());
        int2.extend_from_slice(&3i32.to_le_bytes());
        int2.extend_from_slice(&0i32.to_le_bytes());
        for v in [1i16, -32768, 7] {
            int2.extend_from_slice(&v.to_le_bytes());
        }
        let mut out = String::new();
        vector_text(&mut out, &int2, false).unwrap();
        assert_eq!(out, "1 -32768 7");
        assert!(vector_text(&mut String::new(), &int2, true).is_err());
        let oids = int4_array(&[2], &[0], &[Some(23), Some(-1)]);
        let mut oids = oids;
        oids[8..12].copy_from_slice(&26u32.to_le_bytes());
        out.clear();
        vector_text(&mut out, &oids, true).unwrap();
        assert_eq!(out, "23 4294967295");
        let empty = int4_array(&[], &[], &[]);
        let mut empty = empty;
        empty[8..12].copy_from_slice(&26u32.to_le_bytes());
        out.clear();
        vector_text(&mut out, &empty, true).unwrap();
        assert_eq!(out, "");
    }
}
