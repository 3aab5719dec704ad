//! The send → stored rewrites of the types published as their output text
//! (`Kind::Output`): the geometric types, the built-in ranges and multiranges, tsvector,
//! pg_lsn, xid, xid8, pg_snapshot/txid_snapshot and tid, and ranges over an enum;
//! tsquery's is tablesnap::tsquery. tablesnap::copy's `stored` hands a field of such a
//! column here.
//!
//! Receives: one non-NULL COPY BINARY field (the type's typsend bytes) and the column's
//! `Output`. Hands on: the stored payload the WAL path's types::outtext writer reads
//! for the same value (a fixed-length type's little-endian image, a varlena's payload
//! without its header), laid out as the Python reference lays it out, check for check:
//! service.types.geometric (fixed_send_to_stored, path_send_to_stored,
//! poly_send_to_stored), service.types.sendform._range, service.types.multirange.
//! multirange_send_to_stored and service.types.tsearch.tsvector_send_to_stored.
//! Each rewrite names the PostgreSQL receive function whose input it reads:
//! - line_recv, lseg_recv, box_recv, circle_recv (geo_ops.c): float8s in network order;
//!   stored, each little-endian (box_send's corners come from a stored box, already
//!   high-then-low, so box_recv's reordering never applies);
//! - path_recv: a closed byte, int32 npts, the points; stored PATH {npts, closed,
//!   padding, points}; poly_recv: int32 npts, the points; stored POLYGON {npts,
//!   boundbox, points}, the box as make_bound_box computes it (high x, high y, low x,
//!   low y; Python's max/min, which no output function reads);
//! - range_recv (rangetypes.c): the flags byte, then the lower and the upper bound
//!   (RANGE_HAS_LBOUND / RANGE_HAS_UBOUND) each as int32 length and the subtype's send
//!   bytes; stored (range_serialize): the rangetypid, the bounds' stored forms aligned to
//!   the subtype's typalign counted from the varlena header (a numeric with a 4-byte
//!   header), the flags byte last;
//! - multirange_recv (multirangetypes.c): int32 range count, each range as int32 length
//!   and range_recv's input; stored (write_multirange_data): multirangetypid, the count,
//!   count - 1 items (every MULTIRANGE_ITEM_OFFSET_STRIDE-th an offset with the high bit
//!   set, the others the previous range's length), a flags byte per range, then from
//!   the next typalign boundary each range's bounds, each range padded to typalign;
//! - tsvectorrecv (tsvector.c): int32 lexeme count, per lexeme its NUL-terminated text,
//!   a uint16 position count and the uint16 positions; stored: the count, a WordEntry
//!   (haspos:1, len:11, pos:20) per lexeme, then the lexemes, each one's positions at the
//!   next even offset as uint16 npos and the positions (entries in the sent order:
//!   tsvectorsend sends a stored, already sorted tsvector);
//! - pg_lsn_recv, xidrecv, xid8recv: pq_getmsgint64 / pq_getmsgint, byte-swapped;
//! - tidrecv (tid.c): a uint32 block number and a uint16 offset, in network order;
//!   stored ItemPointerData (`tid`), for a tid column and a range bound alike;
//! - a range or multirange over an enum: each bound enum_send's label, back to its
//!   pg_enum OID through the column's labels (`enum_range`);
//! - pg_snapshot_recv: int32 nxip and nxip + 2 int64s; stored uint32 nxip and the
//!   FullTransactionIds, each little-endian.
//!
//! Errors: `Rewrite::Bad(reason)` for a field the reference rejects (a wrong size, a
//! count or length overrunning the field, trailing bytes) and for one it would store
//! unreadably (a negative bound length, a lexeme past tsvector's 11-bit length or
//! 20-bit offset); `Rewrite::Unsupported` for an `Output` without a rewrite here (the
//! table is the Python path's, `rewrites`). Nothing panics on any input (tests below and
//! tests/perf/fuzz_native_copy.py). Pure: no Python, no I/O.

use super::copy::{enum_oid, numeric, stored, Rewrite};
use crate::output::kind::Kind;
use crate::output::plan::Labels;
use crate::types::outtext::Output;
use crate::types::range::RangeSub;

const RANGE_EMPTY: u8 = 0x01;
const RANGE_LB_INF: u8 = 0x08;
const RANGE_UB_INF: u8 = 0x10;
const MULTIRANGE_ITEM_OFF_BIT: u32 = 0x8000_0000;
const MULTIRANGE_ITEM_OFFSET_STRIDE: usize = 4;
/// tsvector's WordEntry: an 11-bit length and a 20-bit offset (MAXSTRLEN, MAXSTRPOS).
const MAXSTRLEN: usize = (1 << 11) - 1;
const MAXSTRPOS: usize = (1 << 20) - 1;

/// Does `o` have a rewrite here (`output`)? The others keep their table on the Python
/// path: the extension types published as their text.
pub fn rewrites(o: Output) -> bool {
    if over_enum(o) {
        return false; // enum_send sends labels: a column's only (`enum_range`)
    }
    matches!(
        o,
        Output::Point
            | Output::Line
            | Output::Lseg
            | Output::Box
            | Output::Path
            | Output::Polygon
            | Output::Circle
            | Output::Range(..)
            | Output::Multirange(..)
            | Output::Tsvector
            | Output::Tsquery
            | Output::PgLsn
            | Output::Xid
            | Output::Xid8
            | Output::Snapshot
            | Output::Tid
    )
}

fn bad(m: String) -> Rewrite {
    Rewrite::Bad(m)
}

fn be_i32(d: &[u8], at: usize) -> Option<i32> {
    Some(i32::from_be_bytes(
        d.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

/// One send value of an `Output` column as its stored payload (module docstring).
pub fn output(o: Output, d: &[u8]) -> Result<Vec<u8>, Rewrite> {
    Ok(match o {
        Output::Point => floats(d, 2, "point")?,
        Output::Line => floats(d, 3, "line")?,
        Output::Lseg => floats(d, 4, "lseg")?,
        Output::Box => floats(d, 4, "box")?,
        Output::Circle => floats(d, 3, "circle")?,
        Output::Path => path(d)?,
        Output::Polygon => polygon(d)?,
        Output::Range(sub, oid) => range(d, sub, oid, None)?,
        Output::Multirange(sub, oid) => multirange(d, sub, oid, None)?,
        Output::Tsvector => tsvector(d)?,
        Output::Tsquery => super::tsquery::tsquery(d)?,
        Output::PgLsn => swapped(d, 8, "pg_lsn")?,
        Output::Xid8 => swapped(d, 8, "xid8")?,
        Output::Xid => swapped(d, 4, "xid")?,
        Output::Snapshot => snapshot(d)?,
        Output::Tid => tid(d)?,
        _ => return Err(Rewrite::Unsupported),
    })
}

/// pg_snapshot_recv (xid8funcs.c; txid_snapshot's too): int32 nxip, int64 xmin, int64
/// xmax, then nxip int64 xips; stored (pg_snapshot): uint32 nxip, then xmin, xmax and the
/// xips as FullTransactionIds, little-endian (service.types.snapshot_types.
/// snapshot_send_to_stored).
fn snapshot(d: &[u8]) -> Result<Vec<u8>, Rewrite> {
    let nxip = be_i32(d, 0).ok_or_else(|| bad("pg_snapshot send value is too short".into()))?;
    let fits = usize::try_from(nxip)
        .ok()
        .and_then(|n| n.checked_mul(8)?.checked_add(20))
        == Some(d.len());
    if d.len() < 20 || !fits {
        return Err(bad(format!(
            "pg_snapshot send value of {} bytes says {nxip} xips",
            d.len()
        )));
    }
    let mut out = Vec::with_capacity(d.len());
    out.extend_from_slice(&nxip.to_le_bytes());
    out.extend(d[4..].chunks_exact(8).flat_map(|c| c.iter().rev().copied()));
    Ok(out)
}

fn swapped(d: &[u8], width: usize, what: &str) -> Result<Vec<u8>, Rewrite> {
    if d.len() != width {
        return Err(bad(format!(
            "{what} send value has {} bytes, not {width}",
            d.len()
        )));
    }
    Ok(d.iter().rev().copied().collect())
}

/// `count` network-order float8s, exactly, each made little-endian.
fn floats(d: &[u8], count: usize, what: &str) -> Result<Vec<u8>, Rewrite> {
    if d.len() != 8 * count {
        return Err(bad(format!(
            "{what} send value has {} bytes, not {}",
            d.len(),
            8 * count
        )));
    }
    Ok(d.chunks_exact(8)
        .flat_map(|c| c.iter().rev().copied())
        .collect())
}

/// The int32 point count at `at` and a check that exactly that many points follow.
fn points_at(d: &[u8], at: usize, what: &str) -> Result<usize, Rewrite> {
    let npts = be_i32(d, at).ok_or_else(|| bad(format!("{what} send value is too short")))?;
    let n = usize::try_from(npts).ok();
    let fits = n.and_then(|n| n.checked_mul(16)?.checked_add(at + 4)) == Some(d.len());
    match n {
        Some(n) if fits => Ok(n),
        _ => Err(bad(format!(
            "{what} send value of {} bytes says {npts} points",
            d.len()
        ))),
    }
}

/// path_recv's input as PATH without its varlena header.
fn path(d: &[u8]) -> Result<Vec<u8>, Rewrite> {
    if d.len() < 5 {
        return Err(bad("path send value is too short".into()));
    }
    let npts = points_at(d, 1, "path")?;
    let mut out = Vec::with_capacity(12 + 16 * npts);
    out.extend_from_slice(&(npts as i32).to_le_bytes());
    out.extend_from_slice(&i32::from(d[0] != 0).to_le_bytes());
    out.extend_from_slice(&0i32.to_le_bytes());
    out.extend(floats(&d[5..], 2 * npts, "path")?);
    Ok(out)
}

/// poly_recv's input as POLYGON without its varlena header. A polygon has a point.
fn polygon(d: &[u8]) -> Result<Vec<u8>, Rewrite> {
    let npts = points_at(d, 0, "polygon")?;
    if npts == 0 {
        return Err(bad("polygon send value has 0 points".into()));
    }
    let pts = floats(&d[4..], 2 * npts, "polygon")?;
    let coord = |i: usize| {
        let b: [u8; 8] = pts[8 * i..8 * i + 8].try_into().unwrap_or([0; 8]);
        f64::from_le_bytes(b)
    };
    // Python's max()/min(): the first value, replaced only by one strictly beyond it.
    let (mut hx, mut hy, mut lx, mut ly) = (coord(0), coord(1), coord(0), coord(1));
    for i in 1..npts {
        let (x, y) = (coord(2 * i), coord(2 * i + 1));
        if x > hx {
            hx = x;
        }
        if y > hy {
            hy = y;
        }
        if x < lx {
            lx = x;
        }
        if y < ly {
            ly = y;
        }
    }
    let mut out = Vec::with_capacity(36 + pts.len());
    out.extend_from_slice(&(npts as i32).to_le_bytes());
    for v in [hx, hy, lx, ly] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend(pts);
    Ok(out)
}

/// Is `o` a range or multirange over an enum? COPY sends its bounds as enum_send's
/// labels, so its rewrite needs the column's labels (`enum_range`); `rewrites` leaves
/// it out (a composite field or an array element has none).
pub fn over_enum(o: Output) -> bool {
    matches!(
        o,
        Output::Range(RangeSub::Enum, _) | Output::Multirange(RangeSub::Enum, _)
    )
}

/// One send value of a range or multirange over an enum (`over_enum`) as its stored
/// payload: range_recv / multirange_recv, each bound through enum_recv, which looks the
/// label up in pg_enum; here in `labels`, the column's (pg_enum OID -> label). A label
/// not among them is `Unsupported`: the row is the Python path's, as an enum column's.
pub fn enum_range(o: Output, d: &[u8], labels: &Labels) -> Result<Vec<u8>, Rewrite> {
    match o {
        Output::Range(RangeSub::Enum, oid) => range(d, RangeSub::Enum, oid, Some(labels)),
        Output::Multirange(RangeSub::Enum, oid) => multirange(d, RangeSub::Enum, oid, Some(labels)),
        _ => Err(Rewrite::Unsupported),
    }
}

/// A range bound's send bytes as its stored form (the subtype's *_recv): the subtypes
/// of user ranges only as a column of their type is rewritten (copy::stored); an enum's
/// label through `labels` (`enum_range`).
fn bound(d: &[u8], sub: RangeSub, labels: Option<&Labels>) -> Result<Vec<u8>, Rewrite> {
    let column = |kind: Kind| stored(kind, d).map(std::borrow::Cow::into_owned);
    match sub {
        RangeSub::Int4 => swapped(d, 4, "int4"),
        RangeSub::Date => swapped(d, 4, "date"),
        RangeSub::Int8 => swapped(d, 8, "int8"),
        RangeSub::Timestamp => swapped(d, 8, "timestamp"),
        RangeSub::TimestampTz => swapped(d, 8, "timestamptz"),
        RangeSub::Numeric => numeric(d),
        RangeSub::Float8 => swapped(d, 8, "float8"),
        RangeSub::Int2 => column(Kind::Int2),
        RangeSub::Oid => column(Kind::Oid),
        RangeSub::Float4 => column(Kind::Float4),
        RangeSub::Text => column(Kind::Text),
        RangeSub::Time => column(Kind::Time),
        RangeSub::TimeTz => column(Kind::TimeTz),
        RangeSub::Interval => column(Kind::Interval),
        RangeSub::Inet => column(Kind::Inet { cidr: false }),
        RangeSub::Cidr => column(Kind::Inet { cidr: true }),
        RangeSub::Uuid => column(Kind::Uuid),
        RangeSub::Bytea => column(Kind::Bytea),
        RangeSub::Mac => column(Kind::Mac),
        RangeSub::Mac8 => column(Kind::Mac8),
        RangeSub::Bool => column(Kind::Bool),
        RangeSub::Char => column(Kind::Char),
        RangeSub::Name => column(Kind::Name),
        RangeSub::Money => column(Kind::Money),
        RangeSub::Bits => column(Kind::Bits),
        RangeSub::PgLsn => swapped(d, 8, "pg_lsn"),
        RangeSub::Xid8 => swapped(d, 8, "xid8"),
        RangeSub::Tid => tid(d),
        // enum_send sends the label: its OID is the catalog's, known here only from a
        // column's labels (`enum_range`)
        RangeSub::Enum => labels.map_or(Err(Rewrite::Unsupported), |l| enum_oid(l, d)),
    }
}

/// tidrecv (tid.c): a uint32 block number and a uint16 offset number, in network order;
/// stored (ItemPointerData): BlockIdData's bi_hi and bi_lo, then the offset, each a
/// little-endian uint16 (service.types.sendform._tid).
fn tid(d: &[u8]) -> Result<Vec<u8>, Rewrite> {
    let [b0, b1, b2, b3, o0, o1]: [u8; 6] = d
        .try_into()
        .map_err(|_| bad(format!("tid send value has {} bytes, not 6", d.len())))?;
    Ok(vec![b1, b0, b3, b2, o1, o0])
}

/// `out` zero-padded to a multiple of `align` counted from `origin`.
fn pad(out: &mut Vec<u8>, origin: usize, align: usize) {
    let len = out.len() - origin;
    out.resize(origin + len.div_ceil(align) * align, 0);
}

/// range_recv's input as the stored range of type `range_oid` (rangetypid, bounds,
/// flags).
fn range(
    d: &[u8],
    sub: RangeSub,
    range_oid: u32,
    labels: Option<&Labels>,
) -> Result<Vec<u8>, Rewrite> {
    let (&flags, _) = d
        .split_first()
        .ok_or_else(|| bad("range send value is empty".into()))?;
    // Built behind the varlena header's 4 bytes, so that alignment counts from it.
    let mut out = vec![0u8; 4];
    out.extend_from_slice(&range_oid.to_le_bytes());
    let mut off = 1;
    for absent in [RANGE_EMPTY | RANGE_LB_INF, RANGE_EMPTY | RANGE_UB_INF] {
        if flags & absent != 0 {
            continue;
        }
        let size = be_i32(d, off).ok_or_else(|| bad("range send value is short".into()))?;
        off += 4;
        let value = usize::try_from(size)
            .ok()
            .and_then(|n| d.get(off..off.checked_add(n)?))
            .ok_or_else(|| bad(format!("range bound of {size} bytes overruns its value")))?;
        off += value.len();
        let stored = bound(value, sub, labels)?;
        pad(&mut out, 0, sub.typalign());
        if sub.typlen().is_none() {
            out.extend_from_slice(&(((stored.len() + 4) as u32) << 2).to_le_bytes());
        }
        out.extend(stored);
    }
    if off != d.len() {
        return Err(bad(format!(
            "range send value has {} trailing bytes",
            d.len() - off
        )));
    }
    out.push(flags);
    out.drain(..4);
    Ok(out)
}

/// multirange_recv's input as the stored multirange of type `multirange_oid` (module
/// docstring).
fn multirange(
    d: &[u8],
    sub: RangeSub,
    multirange_oid: u32,
    labels: Option<&Labels>,
) -> Result<Vec<u8>, Rewrite> {
    let count = be_i32(d, 0).ok_or_else(|| bad("multirange send value is short".into()))?;
    // Every range takes at least its 4-byte length and a flags byte.
    let count = usize::try_from(count)
        .ok()
        .filter(|&n| n <= d.len() / 5)
        .ok_or_else(|| bad(format!("multirange send value says {count} ranges")))?;
    let mut off = 4;
    let mut ranges = Vec::with_capacity(count);
    for _ in 0..count {
        let size = be_i32(d, off).ok_or_else(|| bad("multirange send value is short".into()))?;
        off += 4;
        let value = usize::try_from(size)
            .ok()
            .and_then(|n| d.get(off..off.checked_add(n)?))
            .ok_or_else(|| {
                bad(format!(
                    "multirange range of {size} bytes overruns its value"
                ))
            })?;
        off += value.len();
        // (each range's rangetypid is dropped below: a multirange stores none)
        ranges.push(range(value, sub, 0, labels)?);
    }
    if off != d.len() {
        return Err(bad(format!(
            "multirange send value has {} trailing bytes",
            d.len() - off
        )));
    }
    let mut out = Vec::new();
    out.extend_from_slice(&multirange_oid.to_le_bytes());
    out.extend_from_slice(&(count as u32).to_le_bytes());
    let items_at = out.len();
    out.resize(items_at + 4 * count.saturating_sub(1), 0);
    // each stored range: rangetypid, bounds, flags (never shorter than 5 bytes)
    out.extend(ranges.iter().map(|r| r[r.len() - 1]));
    // the bounds start at a typalign boundary counted from the varlena header
    out.splice(0..0, [0u8; 4]);
    pad(&mut out, 0, sub.typalign());
    let bounds_at = out.len();
    let mut prev = 0;
    for (i, r) in ranges.iter().enumerate() {
        let here = out.len() - bounds_at;
        if i > 0 {
            let item = if i % MULTIRANGE_ITEM_OFFSET_STRIDE == 0 {
                here as u32 | MULTIRANGE_ITEM_OFF_BIT
            } else {
                (here - prev) as u32
            };
            let at = 4 + items_at + 4 * (i - 1);
            out[at..at + 4].copy_from_slice(&item.to_le_bytes());
            prev = here;
        }
        out.extend_from_slice(&r[4..r.len() - 1]);
        pad(&mut out, bounds_at, sub.typalign());
    }
    out.drain(..4);
    Ok(out)
}

fn be_u16(d: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(
        d.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}

/// tsvectorrecv's input as the stored tsvector (module docstring).
fn tsvector(d: &[u8]) -> Result<Vec<u8>, Rewrite> {
    let short = || bad("tsvector send value is short".into());
    let count = be_i32(d, 0).ok_or_else(|| bad("tsvector send value is too short".into()))?;
    // Every lexeme takes at least its NUL and its uint16 position count.
    let count = usize::try_from(count)
        .ok()
        .filter(|&n| n <= d.len() / 3)
        .ok_or_else(|| bad(format!("tsvector send value says {count} lexemes")))?;
    let mut off = 4;
    let mut words = Vec::with_capacity(4 + 4 * count);
    words.extend_from_slice(&(count as i32).to_le_bytes());
    let mut strings = Vec::new();
    for _ in 0..count {
        let rest = d.get(off..).ok_or_else(short)?;
        let len = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| bad("tsvector lexeme has no NUL".into()))?;
        let lexeme = &rest[..len];
        off += len + 1;
        let npos = be_u16(d, off).ok_or_else(short)?;
        off += 2;
        let pos = strings.len();
        if len > MAXSTRLEN || pos > MAXSTRPOS {
            return Err(bad(format!(
                "tsvector lexeme of {len} bytes at {pos} does not fit a WordEntry"
            )));
        }
        let word = u32::from(npos != 0) | ((len as u32) << 1) | ((pos as u32) << 12);
        words.extend_from_slice(&word.to_le_bytes());
        strings.extend_from_slice(lexeme);
        if npos != 0 {
            if strings.len() % 2 == 1 {
                strings.push(0);
            }
            strings.extend_from_slice(&npos.to_le_bytes());
            for _ in 0..npos {
                let p = be_u16(d, off).ok_or_else(short)?;
                off += 2;
                strings.extend_from_slice(&p.to_le_bytes());
            }
        }
    }
    if off != d.len() {
        return Err(bad(format!(
            "tsvector send value has {} trailing bytes",
            d.len() - off
        )));
    }
    words.extend(strings);
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{geometric, range as rtext, tsearch};

    fn be(values: &[f64]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_be_bytes()).collect()
    }

    fn text(f: fn(&mut String, &[u8]) -> Result<(), &'static str>, d: &[u8]) -> String {
        let mut s = String::new();
        f(&mut s, d).unwrap();
        s
    }

    /// line, lseg, box and circle: each float8 swapped; read back by the WAL path's text
    /// writers; a wrong size is Bad.
    #[test]
    fn fixed_geometric() {
        let st = output(Output::Box, &be(&[1.0, 2.0, -0.5, 0.0])).unwrap();
        assert_eq!(text(geometric::box_text, &st), "(1,2),(-0.5,0)");
        let st = output(Output::Circle, &be(&[1.0, 2.0, 3.5])).unwrap();
        assert_eq!(text(geometric::circle_text, &st), "<(1,2),3.5>");
        let st = output(Output::Line, &be(&[1.0, -1.0, 0.0])).unwrap();
        assert_eq!(text(geometric::line_text, &st), "{1,-1,0}");
        let st = output(Output::Lseg, &be(&[0.0, 0.0, 1e300, -1e-300])).unwrap();
        assert_eq!(text(geometric::lseg_text, &st), "[(0,0),(1e+300,-1e-300)]");
        for (o, n) in [(Output::Box, 32), (Output::Circle, 24), (Output::Line, 24)] {
            assert!(matches!(output(o, &[0; 40][..n - 1]), Err(Rewrite::Bad(_))));
            assert!(matches!(output(o, &[0; 40][..n + 1]), Err(Rewrite::Bad(_))));
        }
    }

    /// pg_snapshot: read back as pg_snapshot_out prints it; a count that disagrees with
    /// the size, or a negative one, is Bad.
    #[test]
    fn pg_snapshot() {
        let mut send = 2i32.to_be_bytes().to_vec();
        for x in [100u64, 110, 103, 105] {
            send.extend_from_slice(&x.to_be_bytes());
        }
        let st = output(Output::Snapshot, &send).unwrap();
        let mut t = String::new();
        crate::types::snapshot::snapshot_text(&mut t, &st).unwrap();
        assert_eq!(t, "100:110:103,105");
        assert!(matches!(
            output(Output::Snapshot, &send[..28]),
            Err(Rewrite::Bad(_))
        ));
        let mut neg = (-1i32).to_be_bytes().to_vec();
        neg.extend_from_slice(&[0; 16]);
        assert!(matches!(
            output(Output::Snapshot, &neg),
            Err(Rewrite::Bad(_))
        ));
        assert!(matches!(
            output(Output::Snapshot, &[0; 3]),
            Err(Rewrite::Bad(_))
        ));
    }

    /// path (open and closed) and polygon, read back as path_out / poly_out print them;
    /// counts that disagree with the size, and a polygon of no points, are Bad.
    #[test]
    fn path_and_polygon() {
        let mut send = vec![1u8];
        send.extend_from_slice(&2i32.to_be_bytes());
        send.extend(be(&[0.0, 0.0, 1.0, 1.5]));
        let st = output(Output::Path, &send).unwrap();
        assert_eq!(text(geometric::path_text, &st), "((0,0),(1,1.5))");
        send[0] = 0;
        let st = output(Output::Path, &send).unwrap();
        assert_eq!(text(geometric::path_text, &st), "[(0,0),(1,1.5)]");
        assert!(matches!(
            output(Output::Path, &send[..send.len() - 1]),
            Err(Rewrite::Bad(_))
        ));
        let mut poly = 3i32.to_be_bytes().to_vec();
        poly.extend(be(&[0.0, 0.0, 0.0, 1.0, 1.0, 0.0]));
        let st = output(Output::Polygon, &poly).unwrap();
        assert_eq!(text(geometric::polygon_text, &st), "((0,0),(0,1),(1,0))");
        // make_bound_box: high (1,1), low (0,0)
        let bbox: Vec<u8> = [1.0f64, 1.0, 0.0, 0.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(&st[4..36], &bbox[..]);
        assert!(matches!(
            output(Output::Polygon, &0i32.to_be_bytes()),
            Err(Rewrite::Bad(_))
        ));
        assert!(matches!(
            output(Output::Polygon, &(-1i32).to_be_bytes()),
            Err(Rewrite::Bad(_))
        ));
        assert!(matches!(
            output(Output::Polygon, &poly[..20]),
            Err(Rewrite::Bad(_))
        ));
        assert!(matches!(
            output(Output::Path, &[1, 0x7f, 0xff, 0xff, 0xff]),
            Err(Rewrite::Bad(_))
        ));
    }

    fn range_send(flags: u8, bounds: &[&[u8]]) -> Vec<u8> {
        let mut out = vec![flags];
        for b in bounds {
            out.extend_from_slice(&(b.len() as i32).to_be_bytes());
            out.extend_from_slice(b);
        }
        out
    }

    /// User ranges over the subtypes of user ranges only (textrecv, interval_recv,
    /// int2recv, inet_recv, timetz_recv): rewritten as a column of the subtype is, laid
    /// out at its alignment, and read back by range_out's writer.
    #[test]
    fn user_ranges_over_other_subtypes() {
        let mut s = String::new();
        let other = |sub: RangeSub, send: &[u8]| {
            let st = output(Output::Range(sub, 16501), send).unwrap();
            let mut s = String::new();
            rtext::range_text_of(&mut s, &st, sub, 16501).unwrap();
            s
        };
        // tidrecv: uint32 block, uint16 offset (network order); byterecv, namerecv,
        // cash_recv, bit_recv, boolrecv as a column of theirs
        let tid = [[0, 1, 0, 2, 0, 3], [0xff; 6]].map(|t| t.to_vec());
        let tids = range_send(0x02 | 0x04, &[&tid[0], &tid[1]]);
        assert_eq!(
            other(RangeSub::Tid, &tids),
            "[\"(65538,3)\",\"(4294967295,65535)\"]"
        );
        assert!(output(
            Output::Range(RangeSub::Tid, 16501),
            &range_send(0x10, &[&[0; 5]])
        )
        .is_err());
        let by = range_send(0x02 | 0x10, &[&[0xfe]]);
        assert_eq!(other(RangeSub::Bytea, &by), "[\"\\\\xfe\",)");
        let nm = range_send(0x08, &[b"a b"]);
        assert_eq!(other(RangeSub::Name, &nm), "(,\"a b\")");
        let mo = range_send(0x10, &[&(-150i64).to_be_bytes()]);
        assert_eq!(other(RangeSub::Money, &mo), "(-$1.50,)");
        let bits = [3i32.to_be_bytes().to_vec(), vec![0b1010_0000]].concat();
        assert_eq!(other(RangeSub::Bits, &range_send(0x10, &[&bits])), "(101,)");
        let bo = range_send(0x02 | 0x04, &[&[0], &[1]]);
        assert_eq!(other(RangeSub::Bool, &bo), "[f,t]");
        let lsn = range_send(0x10, &[&0x1_0000_00FFu64.to_be_bytes()]);
        assert_eq!(other(RangeSub::PgLsn, &lsn), "(1/FF,)");
        let mut back = |sub: RangeSub, send: &[u8]| {
            let st = output(Output::Range(sub, 16500), send).unwrap();
            s.clear();
            rtext::range_text_of(&mut s, &st, sub, 16500).unwrap();
            s.clone()
        };
        let text = range_send(0x02, &[b"a b", b"z\"\\"]);
        assert_eq!(back(RangeSub::Text, &text), "[\"a b\",\"z\"\"\\\\\")");
        // interval_recv: time int8, day int4, month int4 (network order)
        let day = [
            0i64.to_be_bytes().to_vec(),
            [1i32, 0].map(i32::to_be_bytes).concat(),
        ]
        .concat();
        let interval = range_send(0x02 | 0x10, &[&day]);
        assert_eq!(back(RangeSub::Interval, &interval), "[\"1 day\",)");
        let int2 = range_send(0x04, &[&(-1i16).to_be_bytes(), &2i16.to_be_bytes()]);
        assert_eq!(back(RangeSub::Int2, &int2), "(-1,2]");
        // inet_recv: family, bits, is_cidr, nb, the address
        let inet = range_send(0x02 | 0x10, &[&[2, 32, 0, 4, 192, 168, 0, 1]]);
        assert_eq!(back(RangeSub::Inet, &inet), "[192.168.0.1,)");
        let tz = [
            1_000_000i64.to_be_bytes().to_vec(),
            0i32.to_be_bytes().to_vec(),
        ]
        .concat();
        assert_eq!(
            back(RangeSub::TimeTz, &range_send(0x08, &[&tz])),
            "(,00:00:01+00)"
        );
        assert!(output(
            Output::Range(RangeSub::Int2, 16500),
            &range_send(0, &[&[1]])
        )
        .is_err());
    }

    /// Ranges and multiranges over an enum: each label sent (enum_send) back to its
    /// pg_enum OID through the column's labels, read back by range_out's writer with
    /// them; a label not among them is Unsupported (the row is the Python path's), and
    /// without labels there is no rewrite at all.
    #[test]
    fn ranges_over_an_enum() {
        let labels: Labels = [(16500, "happy".to_string()), (16501, "sad".to_string())]
            .into_iter()
            .collect();
        let range_of = Output::Range(RangeSub::Enum, 16510);
        assert!(over_enum(range_of) && !rewrites(range_of));
        let send = range_send(0x02, &[b"happy", b"sad"]);
        let st = enum_range(range_of, &send, &labels).unwrap();
        let mut s = String::new();
        rtext::range_text_labeled(&mut s, &st, RangeSub::Enum, 16510, &labels).unwrap();
        assert_eq!(s, "[happy,sad)");
        assert_eq!(output(range_of, &send), Err(Rewrite::Unsupported));
        let unknown = range_send(0x02, &[b"happy", b"glad"]);
        assert_eq!(
            enum_range(range_of, &unknown, &labels),
            Err(Rewrite::Unsupported)
        );
        let short = range_send(0x10, &[b"happy"]);
        assert!(matches!(
            enum_range(range_of, &short[..short.len() - 1], &labels),
            Err(Rewrite::Bad(_))
        ));
        // a multirange of two: the second from the first's upper bound, unbounded above
        let multi = Output::Multirange(RangeSub::Enum, 16511);
        let ranges = [
            range_send(0x02 | 0x04, &[b"happy", b"happy"]),
            range_send(0x02 | 0x10, &[b"sad"]),
        ];
        let mut send = 2i32.to_be_bytes().to_vec();
        for r in &ranges {
            send.extend_from_slice(&(r.len() as i32).to_be_bytes());
            send.extend_from_slice(r);
        }
        let st = enum_range(multi, &send, &labels).unwrap();
        s.clear();
        rtext::multirange_text_labeled(&mut s, &st, RangeSub::Enum, &labels).unwrap();
        assert_eq!(s, "{[happy,happy],[sad,)}");
        assert_eq!(
            enum_range(Output::Tsvector, &send, &labels),
            Err(Rewrite::Unsupported)
        );
    }

    /// Ranges of int4, int8 and numeric bounds, empty and infinite, read back by
    /// range_out's writer; short, overrunning and trailing bytes are Bad.
    #[test]
    fn ranges() {
        let one = 1i32.to_be_bytes();
        let five = 5i32.to_be_bytes();
        let st = output(
            Output::Range(RangeSub::Int4, RangeSub::Int4.range_oid()),
            &range_send(0x02, &[&one, &five]),
        )
        .unwrap();
        let mut s = String::new();
        rtext::range_text(&mut s, &st, RangeSub::Int4).unwrap();
        assert_eq!(s, "[1,5)");
        // a user-defined range over int4 stores its own type OID
        let st = output(
            Output::Range(RangeSub::Int4, 16401),
            &range_send(0x02, &[&one, &five]),
        )
        .unwrap();
        assert_eq!(st[..4], 16401u32.to_le_bytes());
        s.clear();
        rtext::range_text_of(&mut s, &st, RangeSub::Int4, 16401).unwrap();
        assert_eq!(s, "[1,5)");
        let st = output(
            Output::Range(RangeSub::Int8, RangeSub::Int8.range_oid()),
            &range_send(0x08 | 0x04, &[&7i64.to_be_bytes()]),
        )
        .unwrap();
        s.clear();
        rtext::range_text(&mut s, &st, RangeSub::Int8).unwrap();
        assert_eq!(s, "(,7]");
        assert_eq!(
            st.len(),
            4 + 8 + 1,
            "rangetypid, the bound unpadded (8 from the header), flags"
        );
        let st = output(
            Output::Range(RangeSub::Int4, RangeSub::Int4.range_oid()),
            &[RANGE_EMPTY],
        )
        .unwrap();
        s.clear();
        rtext::range_text(&mut s, &st, RangeSub::Int4).unwrap();
        assert_eq!(s, "empty");
        // numeric 1.5 (ndigits 2, weight 0, dscale 1: 1, 5000) to NaN
        let n15: &[u8] = &[0, 2, 0, 0, 0, 0, 0, 1, 0, 1, 0x13, 0x88];
        let nan: &[u8] = &[0, 0, 0, 0, 0xC0, 0, 0, 0];
        let st = output(
            Output::Range(RangeSub::Numeric, RangeSub::Numeric.range_oid()),
            &range_send(0x06, &[n15, nan]),
        )
        .unwrap();
        s.clear();
        rtext::range_text(&mut s, &st, RangeSub::Numeric).unwrap();
        assert_eq!(s, "[1.5,NaN]");
        let good = range_send(0x02, &[&one, &five]);
        for n in 0..good.len() {
            assert!(
                matches!(
                    output(
                        Output::Range(RangeSub::Int4, RangeSub::Int4.range_oid()),
                        &good[..n]
                    ),
                    Err(Rewrite::Bad(_))
                ),
                "{n}"
            );
        }
        let mut long = good.clone();
        long.push(0);
        assert!(matches!(
            output(
                Output::Range(RangeSub::Int4, RangeSub::Int4.range_oid()),
                &long
            ),
            Err(Rewrite::Bad(_))
        ));
        assert!(matches!(
            output(
                Output::Range(RangeSub::Int4, RangeSub::Int4.range_oid()),
                &range_send(0x02, &[&one, &[0; 3]])
            ),
            Err(Rewrite::Bad(_))
        ));
        let mut negative = vec![0x10];
        negative.extend_from_slice(&(-4i32).to_be_bytes());
        assert!(matches!(
            output(
                Output::Range(RangeSub::Int4, RangeSub::Int4.range_oid()),
                &negative
            ),
            Err(Rewrite::Bad(_))
        ));
    }

    /// Multiranges of 0 and 6 ranges (items as lengths and, every fourth, an offset)
    /// read back by multirange_out's writer; damaged ones are Bad.
    #[test]
    fn multiranges() {
        let mut send = Vec::new();
        let n: i32 = 6;
        send.extend_from_slice(&n.to_be_bytes());
        let mut want = Vec::new();
        for i in 0..n {
            let lo = (10 * i as i64).to_be_bytes();
            let hi = (10 * i as i64 + 3).to_be_bytes();
            let r = range_send(0x02, &[&lo, &hi]);
            send.extend_from_slice(&(r.len() as i32).to_be_bytes());
            send.extend(r);
            want.push(format!("[{},{})", 10 * i, 10 * i + 3));
        }
        let st = output(
            Output::Multirange(
                RangeSub::TimestampTz,
                RangeSub::TimestampTz.multirange_oid(),
            ),
            &send,
        );
        assert!(st.is_ok());
        let st = output(
            Output::Multirange(RangeSub::Int8, RangeSub::Int8.multirange_oid()),
            &send,
        )
        .unwrap();
        let mut s = String::new();
        rtext::multirange_text(&mut s, &st, RangeSub::Int8).unwrap();
        assert_eq!(s, format!("{{{}}}", want.join(",")));
        let st = output(
            Output::Multirange(RangeSub::Int4, RangeSub::Int4.multirange_oid()),
            &0i32.to_be_bytes(),
        )
        .unwrap();
        s.clear();
        rtext::multirange_text(&mut s, &st, RangeSub::Int4).unwrap();
        assert_eq!(s, "{}");
        for cut in 0..send.len() {
            assert!(
                output(
                    Output::Multirange(RangeSub::Int8, RangeSub::Int8.multirange_oid()),
                    &send[..cut]
                )
                .is_err(),
                "{cut}"
            );
        }
        let mut huge = send.clone();
        huge[..4].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(matches!(
            output(
                Output::Multirange(RangeSub::Int8, RangeSub::Int8.multirange_oid()),
                &huge
            ),
            Err(Rewrite::Bad(_))
        ));
    }

    /// A tsvector with and without positions read back by tsvectorout's writer; a
    /// lexeme without its NUL, a short position list and trailing bytes are Bad.
    #[test]
    fn tsvectors() {
        let mut send = 3i32.to_be_bytes().to_vec();
        send.extend_from_slice(b"a\0");
        send.extend_from_slice(&1u16.to_be_bytes());
        send.extend_from_slice(&(0xC000u16 | 1).to_be_bytes());
        send.extend_from_slice(b"bb\0");
        send.extend_from_slice(&2u16.to_be_bytes());
        send.extend_from_slice(&(0x8000u16 | 2).to_be_bytes());
        send.extend_from_slice(&3u16.to_be_bytes());
        send.extend_from_slice(b"it's\0");
        send.extend_from_slice(&0u16.to_be_bytes());
        let st = output(Output::Tsvector, &send).unwrap();
        assert_eq!(
            text(tsearch::tsvector_text, &st),
            "'a':1A 'bb':2B,3 'it''s'"
        );
        for cut in 0..send.len() {
            assert!(output(Output::Tsvector, &send[..cut]).is_err(), "{cut}");
        }
        let mut long = send.clone();
        long.push(0);
        assert!(matches!(
            output(Output::Tsvector, &long),
            Err(Rewrite::Bad(_))
        ));
        let mut big = 1i32.to_be_bytes().to_vec();
        big.extend(std::iter::repeat_n(b'x', MAXSTRLEN + 1));
        big.extend_from_slice(&[0, 0, 0]);
        assert!(matches!(
            output(Output::Tsvector, &big),
            Err(Rewrite::Bad(_))
        ));
        let st = output(Output::Tsvector, &0i32.to_be_bytes()).unwrap();
        assert_eq!(text(tsearch::tsvector_text, &st), "");
    }

    /// pg_lsn, xid and xid8 swap; the extension types published as text stay unsupported.
    #[test]
    fn scalars_and_unsupported() {
        let st = output(Output::PgLsn, &[0, 0, 0, 1, 0, 0x16, 0xB3, 0x74]).unwrap();
        assert_eq!(st, 0x0000_0001_0016_B374u64.to_le_bytes());
        assert!(matches!(output(Output::Xid, &[0; 8]), Err(Rewrite::Bad(_))));
        assert_eq!(output(Output::Ltree, b""), Err(Rewrite::Unsupported));
        assert!(!rewrites(Output::Hstore));
        assert!(rewrites(Output::Multirange(
            RangeSub::Date,
            RangeSub::Date.multirange_oid()
        )));
    }
}
