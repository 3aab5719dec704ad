//! The send → stored rewrites of the extension types the snapshot reads in their send
//! format: hstore, pgvector's vector, halfvec and sparsevec, and PostGIS geometry and
//! geography (the others, ltree, lquery, cube, seg, the isn types, are read as their
//! text and keep their table on the Python path).
//!
//! Receives: one non-NULL COPY BINARY field of such a column. Hands on: the stored
//! payload the WAL path's readers (types::extension, types::pgvector, types::postgis)
//! take for the same value, laid out as the Python reference lays it out, check for
//! check (service.types.hstore.hstore_send_to_stored, service.types.pgvector.
//! *_send_to_stored, service.types.postgis.ewkb_to_gserialized):
//! - hstore_recv (hstore_io.c): int32 pair count, per pair the key and the value each as
//!   int32 length (-1: a NULL value) and bytes; stored: uint32 count | HS_FLAG_NEWVERSION,
//!   two HEntry per pair (the end offset, HENTRY_ISFIRST on the first, HENTRY_ISNULL on a
//!   NULL value), then keys and values (pairs in the sent order: hstore_send sends a
//!   stored, already sorted and unique hstore, so hstoreUniquePairs changes nothing);
//! - vector_recv / halfvec_recv (pgvector): int16 dim, int16 unused, dim float4 / half;
//!   sparsevec_recv: int32 dim, nnz, unused, nnz int32 indices, nnz float4 values;
//!   stored: the same fields little-endian, byte for byte (a NaN keeps its bits);
//! - geometry_recv / geography_recv (PostGIS): extended WKB, each geometry in its own
//!   byte order (1: little-endian, anything else big), its type word's Z, M and SRID
//!   flags (the SRID kept on the top level only); stored: a version 2 GSERIALIZED
//!   without a bounding box: the SRID's low 21 bits big-endian, the flags byte
//!   (version, Z, M, geodetic for geography), then per geometry its uint32 type (WKB's
//!   15, 16, 17 as liblwgeom's 13, 15, 14) and count and its float8s little-endian: a
//!   point empty when all its coordinates are the default NaN (count 0), a polygon's
//!   ring sizes padded to 8, a triangle's first ring size, collections recursing.
//!
//! Errors: `Rewrite::Bad` where the reference raises (a short value, a count the size
//! disagrees with, a NULL hstore key, an unknown WKB type, trailing bytes) and for a
//! geometry nested deeper than `MAX_DEPTH` (the reference's recursion has a limit of
//! its own). Nothing panics on any input. Pure.

use super::copy::Rewrite;

const HS_FLAG_NEWVERSION: u32 = 0x8000_0000;
const HENTRY_ISFIRST: u32 = 0x8000_0000;
const HENTRY_ISNULL: u32 = 0x4000_0000;
const HENTRY_POSMASK: usize = 0x3FFF_FFFF;

const G_Z: u8 = 0x01;
const G_M: u8 = 0x02;
const G_GEODETIC: u8 = 0x08;
const G2_VERSION: u8 = 0x40;
const WKB_Z: u32 = 0x8000_0000;
const WKB_M: u32 = 0x4000_0000;
const WKB_SRID: u32 = 0x2000_0000;
const POINT: u32 = 1;
const LINE: u32 = 2;
const POLYGON: u32 = 3;
const CIRCSTRING: u32 = 8;
const TRIANGLE: u32 = 14;
/// The default NaN an empty point's coordinates carry (little-endian).
const EMPTY_NAN: u64 = 0x7FF8_0000_0000_0000;
/// The deepest geometry collection nesting rewritten here.
pub const MAX_DEPTH: usize = 200;

fn bad(m: impl Into<String>) -> Rewrite {
    Rewrite::Bad(m.into())
}

fn be_i32(d: &[u8], at: usize) -> Option<i32> {
    Some(i32::from_be_bytes(
        d.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

/// hstore_recv's input as the stored hstore (module docstring).
pub fn hstore(d: &[u8]) -> Result<Vec<u8>, Rewrite> {
    let count = be_i32(d, 0).ok_or_else(|| bad("hstore send value is too short"))?;
    // Every pair takes at least its two lengths.
    let count = usize::try_from(count)
        .ok()
        .filter(|&n| n <= d.len() / 8)
        .ok_or_else(|| bad(format!("hstore send value says {count} pairs")))?;
    let mut at = 4;
    let mut entries = Vec::with_capacity(2 * count);
    let mut strings = Vec::new();
    for _ in 0..count {
        let part = |at: &mut usize| -> Result<Option<&[u8]>, Rewrite> {
            let n = be_i32(d, *at).ok_or_else(|| bad("hstore send value ends inside a pair"))?;
            *at += 4;
            if n < 0 {
                return Ok(None);
            }
            let v = d
                .get(*at..at.saturating_add(n as usize))
                .ok_or_else(|| bad("hstore send value ends inside a pair"))?;
            *at += v.len();
            Ok(Some(v))
        };
        let key = part(&mut at)?.ok_or_else(|| bad("hstore send value has a NULL key"))?;
        let value = part(&mut at)?;
        strings.extend_from_slice(key);
        let first = if entries.is_empty() {
            HENTRY_ISFIRST
        } else {
            0
        };
        entries.push(end(strings.len())? | first);
        let null = match value {
            Some(v) => {
                strings.extend_from_slice(v);
                0
            }
            None => HENTRY_ISNULL,
        };
        entries.push(end(strings.len())? | null);
    }
    if at != d.len() {
        return Err(bad(format!(
            "hstore send value has {} trailing bytes",
            d.len() - at
        )));
    }
    let mut out = Vec::with_capacity(4 + 4 * entries.len() + strings.len());
    out.extend_from_slice(&(count as u32 | HS_FLAG_NEWVERSION).to_le_bytes());
    for e in entries {
        out.extend_from_slice(&e.to_le_bytes());
    }
    out.extend(strings);
    Ok(out)
}

/// An HEntry's end offset, which has 30 bits.
fn end(n: usize) -> Result<u32, Rewrite> {
    if n > HENTRY_POSMASK {
        return Err(bad("hstore of more than 1 GB"));
    }
    Ok(n as u32)
}

/// vector_recv (`width` 4) / halfvec_recv (`width` 2): int16 dim, int16 unused, the
/// elements, each made little-endian.
pub fn dense(d: &[u8], width: usize, what: &str) -> Result<Vec<u8>, Rewrite> {
    let dim = match d {
        [a, b, _, _, ..] => i16::from_be_bytes([*a, *b]),
        _ => return Err(bad(format!("{what} send value is too short"))),
    };
    if usize::try_from(dim).map(|n| 4 + width * n) != Ok(d.len()) {
        return Err(bad(format!(
            "{what} send value of {} bytes for {dim} dimensions",
            d.len()
        )));
    }
    let mut out = Vec::with_capacity(d.len());
    for c in [&d[..2], &d[2..4]] {
        out.extend(c.iter().rev());
    }
    for c in d[4..].chunks_exact(width) {
        out.extend(c.iter().rev());
    }
    Ok(out)
}

/// sparsevec_recv: int32 dim, nnz, unused, nnz int32 indices, nnz float4 values, each
/// made little-endian.
pub fn sparse(d: &[u8]) -> Result<Vec<u8>, Rewrite> {
    if d.len() < 12 {
        return Err(bad("sparsevec send value is too short"));
    }
    let nnz = be_i32(d, 4).unwrap_or(-1);
    if usize::try_from(nnz)
        .ok()
        .and_then(|n| n.checked_mul(8)?.checked_add(12))
        != Some(d.len())
    {
        return Err(bad(format!(
            "sparsevec send value of {} bytes for {nnz} elements",
            d.len()
        )));
    }
    Ok(d.chunks_exact(4)
        .flat_map(|c| c.iter().rev())
        .copied()
        .collect())
}

/// An EWKB reader: where it is, and the bytes.
struct Wkb<'a> {
    d: &'a [u8],
    at: usize,
}

impl<'a> Wkb<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], Rewrite> {
        let v = self
            .at
            .checked_add(n)
            .and_then(|e| self.d.get(self.at..e))
            .ok_or_else(|| bad("EWKB value ends early"))?;
        self.at += v.len();
        Ok(v)
    }

    fn word(&mut self, little: bool) -> Result<u32, Rewrite> {
        let b: [u8; 4] = self.take(4)?.try_into().unwrap_or([0; 4]);
        Ok(if little {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        })
    }
}

/// geometry_recv / geography_recv's EWKB as the stored GSERIALIZED (module docstring).
pub fn gserialized(d: &[u8], geodetic: bool) -> Result<Vec<u8>, Rewrite> {
    let mut r = Wkb { d, at: 0 };
    let mut body = Vec::with_capacity(d.len() + 8);
    let (srid, zm) = geometry(&mut r, &mut body, 0)?;
    if r.at != d.len() {
        return Err(bad("EWKB value has trailing bytes"));
    }
    let flags = G2_VERSION | zm | if geodetic { G_GEODETIC } else { 0 };
    let raw = srid as u32 & 0x1F_FFFF;
    let mut out = vec![(raw >> 16) as u8, (raw >> 8) as u8, raw as u8, flags];
    out.extend(body);
    Ok(out)
}

/// One geometry (and its members) appended to `body`; its SRID (top level only) and its
/// Z/M flags.
fn geometry(r: &mut Wkb<'_>, body: &mut Vec<u8>, depth: usize) -> Result<(i32, u8), Rewrite> {
    if depth > MAX_DEPTH {
        return Err(bad("EWKB geometry nested too deep"));
    }
    let little = r.take(1)? == [1];
    let raw_type = r.word(little)?;
    let zm =
        if raw_type & WKB_Z != 0 { G_Z } else { 0 } | if raw_type & WKB_M != 0 { G_M } else { 0 };
    let ndims = 2 + usize::from(zm & G_Z != 0) + usize::from(zm & G_M != 0);
    let mut srid = 0;
    if raw_type & WKB_SRID != 0 {
        srid = r.word(little)? as i32;
    }
    if depth > 0 {
        srid = 0;
    }
    let kind = match raw_type & 0x0FFF_FFFF {
        15 => 13,
        16 => 15,
        17 => 14,
        k => k,
    };
    let points = |r: &mut Wkb<'_>, body: &mut Vec<u8>, n: u32| -> Result<(), Rewrite> {
        let size = (n as usize)
            .checked_mul(8 * ndims)
            .ok_or_else(|| bad("EWKB value ends early"))?;
        for c in r.take(size)?.chunks_exact(8) {
            if little {
                body.extend_from_slice(c);
            } else {
                body.extend(c.iter().rev());
            }
        }
        Ok(())
    };
    let word = |body: &mut Vec<u8>, v: u32| body.extend_from_slice(&v.to_le_bytes());
    match kind {
        POINT => {
            let mut coords = Vec::with_capacity(8 * ndims);
            points(r, &mut coords, 1)?;
            let empty = coords.chunks_exact(8).all(|c| c == EMPTY_NAN.to_le_bytes());
            word(body, POINT);
            word(body, u32::from(!empty));
            if !empty {
                body.extend(coords);
            }
        }
        LINE | CIRCSTRING => {
            let n = r.word(little)?;
            word(body, kind);
            word(body, n);
            points(r, body, n)?;
        }
        POLYGON | TRIANGLE => {
            let rings = r.word(little)?;
            let mut sizes = Vec::new();
            let mut data = Vec::new();
            for _ in 0..rings {
                let n = r.word(little)?;
                sizes.push(n);
                points(r, &mut data, n)?;
            }
            word(body, kind);
            if kind == TRIANGLE {
                word(body, sizes.first().copied().unwrap_or(0));
            } else {
                word(body, rings);
                for n in &sizes {
                    word(body, *n);
                }
                if rings % 2 == 1 {
                    word(body, 0);
                }
            }
            body.extend(data);
        }
        4..=7 | 9..=13 | 15 => {
            let n = r.word(little)?;
            word(body, kind);
            word(body, n);
            for _ in 0..n {
                geometry(r, body, depth + 1)?;
            }
        }
        k => {
            return Err(bad(format!(
                "EWKB geometry type {k} is not a PostGIS geometry type"
            )))
        }
    }
    Ok((srid, zm))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tablesnap::put_field;
    use crate::types::{extension, pgvector, postgis};

    fn pairs(items: &[(&[u8], Option<&[u8]>)]) -> Vec<u8> {
        let mut out = (items.len() as i32).to_be_bytes().to_vec();
        for (k, v) in items {
            out.extend_from_slice(&(k.len() as i32).to_be_bytes());
            out.extend_from_slice(k);
            put_field(&mut out, *v);
        }
        out
    }

    /// Pairs with a NULL value and an empty key, read back by hstore_out's writer; a
    /// NULL key, truncations and trailing bytes are Bad.
    #[test]
    fn hstores() {
        let send = pairs(&[(b"", Some(b"")), (b"a", Some(b"1")), (b"b", None)]);
        let st = hstore(&send).unwrap();
        let mut s = String::new();
        extension::hstore_text(&mut s, &st).unwrap();
        assert_eq!(s, r#"""=>"", "a"=>"1", "b"=>NULL"#);
        let st = hstore(&0i32.to_be_bytes()).unwrap();
        s.clear();
        extension::hstore_text(&mut s, &st).unwrap();
        assert_eq!(s, "");
        for n in 0..send.len() {
            assert!(matches!(hstore(&send[..n]), Err(Rewrite::Bad(_))), "{n}");
        }
        let mut long = send.clone();
        long.push(0);
        assert!(matches!(hstore(&long), Err(Rewrite::Bad(_))));
        let mut null_key = 1i32.to_be_bytes().to_vec();
        null_key.extend_from_slice(&(-1i32).to_be_bytes());
        null_key.extend_from_slice(&(-1i32).to_be_bytes());
        assert!(matches!(hstore(&null_key), Err(Rewrite::Bad(_))));
    }

    /// vector, halfvec and sparsevec read back by the WAL path's readers; sizes that
    /// disagree with the counts are Bad.
    #[test]
    fn vectors() {
        let mut v = 2i16.to_be_bytes().to_vec();
        v.extend_from_slice(&0i16.to_be_bytes());
        v.extend_from_slice(&1.5f32.to_be_bytes());
        v.extend_from_slice(&(-2.0f32).to_be_bytes());
        let st = dense(&v, 4, "vector").unwrap();
        assert_eq!(pgvector::double_vector(&st).unwrap(), vec![1.5, -2.0]);
        assert!(matches!(dense(&v[..11], 4, "vector"), Err(Rewrite::Bad(_))));
        assert!(matches!(dense(&v[..3], 4, "vector"), Err(Rewrite::Bad(_))));
        let mut h = 1i16.to_be_bytes().to_vec();
        h.extend_from_slice(&[0, 0, 0x3C, 0x00]); // 1.0 as a half
        let st = dense(&h, 2, "halfvec").unwrap();
        assert_eq!(pgvector::float_vector(&st).unwrap(), vec![1.0f32]);
        let mut sp = Vec::new();
        for x in [5i32, 1, 0, 3] {
            sp.extend_from_slice(&x.to_be_bytes());
        }
        sp.extend_from_slice(&0.25f32.to_be_bytes());
        let st = sparse(&sp).unwrap();
        // stored index 3 is Debezium's 1-based key 4
        assert_eq!(pgvector::sparse_vector(&st).unwrap(), (5, vec![(4, 0.25)]));
        assert!(matches!(sparse(&sp[..19]), Err(Rewrite::Bad(_))));
        assert!(matches!(sparse(&sp[..8]), Err(Rewrite::Bad(_))));
    }

    /// EWKB (big- and little-endian, with an SRID, Z, an empty point, a polygon and a
    /// collection) becomes a GSERIALIZED the WAL path turns back into the same EWKB in
    /// little-endian order; damaged EWKB is Bad.
    #[test]
    fn geometries() {
        // SRID=4326;POINT(1 2), big-endian
        let mut be = vec![0u8];
        be.extend_from_slice(&(POINT | WKB_SRID).to_be_bytes());
        be.extend_from_slice(&4326i32.to_be_bytes());
        be.extend_from_slice(&1.0f64.to_be_bytes());
        be.extend_from_slice(&2.0f64.to_be_bytes());
        let st = gserialized(&be, false).unwrap();
        let (wkb, srid) = postgis::geometry_value(&st).unwrap();
        let mut le = vec![1u8];
        le.extend_from_slice(&(POINT | WKB_SRID).to_le_bytes());
        le.extend_from_slice(&4326i32.to_le_bytes());
        le.extend_from_slice(&1.0f64.to_le_bytes());
        le.extend_from_slice(&2.0f64.to_le_bytes());
        assert_eq!((wkb, srid), (le.clone(), 4326));
        assert_eq!(gserialized(&le, false).unwrap(), st);
        // GEOMETRYCOLLECTION Z (POINT Z EMPTY, POLYGON Z ((0 0 0, 1 0 0, 0 1 0, 0 0 0)))
        let mut gc = vec![1u8];
        gc.extend_from_slice(&(7 | WKB_Z).to_le_bytes());
        gc.extend_from_slice(&2u32.to_le_bytes());
        gc.push(1);
        gc.extend_from_slice(&(POINT | WKB_Z).to_le_bytes());
        for _ in 0..3 {
            gc.extend_from_slice(&f64::NAN.to_le_bytes());
        }
        gc.push(1);
        gc.extend_from_slice(&(POLYGON | WKB_Z).to_le_bytes());
        gc.extend_from_slice(&1u32.to_le_bytes());
        gc.extend_from_slice(&4u32.to_le_bytes());
        for p in [
            [0.0, 0.0, 0.0],
            [1.0, 0.0, 0.0],
            [0.0, 1.0, 0.0],
            [0.0, 0.0, 0.0],
        ] {
            for c in p {
                gc.extend_from_slice(&f64::to_le_bytes(c));
            }
        }
        let st = gserialized(&gc, true).unwrap();
        assert_eq!(st[3], G2_VERSION | G_Z | G_GEODETIC);
        let (wkb, srid) = postgis::geometry_value(&st).unwrap();
        assert_eq!((wkb, srid), (gc.clone(), 0));
        for n in 0..gc.len() {
            assert!(
                matches!(gserialized(&gc[..n], false), Err(Rewrite::Bad(_))),
                "{n}"
            );
        }
        let mut long = gc.clone();
        long.push(0);
        assert!(matches!(gserialized(&long, false), Err(Rewrite::Bad(_))));
        let mut unknown = le.clone();
        unknown[1] = 99;
        assert!(matches!(gserialized(&unknown, false), Err(Rewrite::Bad(_))));
        // a collection nested past MAX_DEPTH
        let mut deep = Vec::new();
        for _ in 0..=MAX_DEPTH + 1 {
            deep.push(1);
            deep.extend_from_slice(&7u32.to_le_bytes());
            deep.extend_from_slice(&1u32.to_le_bytes());
        }
        assert!(matches!(gserialized(&deep, false), Err(Rewrite::Bad(_))));
    }
}
