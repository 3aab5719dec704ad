//! The built-in types whose Debezium value is their output text, named once for both
//! plugins: the Avro plugin writes the text as a string (`Kind::Output`), the text
//! plugin quotes it (`TextKind::Output`).
//!
//! Receives: the name service.output.native_text / connectors.avro.native_rows pass for
//! the type, then per value its stored form (a fixed-length image, or a varlena's
//! payload). Hands on: `Output`, its stored length (`attlen`) and its output text
//! (`write`): the geometric types (types::geometric), tsvector and tsquery
//! (types::tsearch), the built-in ranges and multiranges (types::range), pg_lsn, xid,
//! cid, xid8 and tid (service.types.text), txid_snapshot and pg_snapshot (types::snapshot),
//! int2vector and oidvector (types::array::vector_text), jsonpath (types::jsonpath), and
//! the extension types hstore, ltree, lquery,
//! cube, seg and the isn types (types::extension), PostGIS geometry and geography
//! (types::postgis) and pgvector's vector, halfvec and sparsevec (types::pgvector).
//! Errors: each writer's `Err(reason)` (the row falls back to Python). Pure, no panics.

use std::fmt::Write;

use super::extension::{self, IsnKind};
use super::{
    array, fixed, geometric, jsonpath, pgvector, postgis, range::RangeSub, snapshot, tsearch,
};

/// A built-in type published as its output text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    Point,
    Line,
    Lseg,
    Box,
    Path,
    Polygon,
    Circle,
    Tsvector,
    Tsquery,
    /// A range over `RangeSub` whose datums store this range type OID: a built-in
    /// range (`int4range`), or a user-defined one over the same subtype, named
    /// `int4range@<oid>` (its text is the built-in one's).
    Range(RangeSub, u32),
    /// A multirange over `RangeSub` (its OID, as a range's; the datum's own is not
    /// checked, as Python does not check it).
    Multirange(RangeSub, u32),
    /// pg_lsn_out: `%X/%X`.
    PgLsn,
    /// xidout, cidout: the unsigned 32-bit number.
    Xid,
    /// xid8out: the unsigned 64-bit number.
    Xid8,
    /// tidout (tid.c): `(block,offset)` of an ItemPointerData (`tid_text`).
    Tid,
    /// pg_snapshot_out (txid_snapshot and pg_snapshot, types::snapshot).
    Snapshot,
    /// int2vectorout, oidvectorout (types::array::vector_text).
    Int2Vector,
    OidVector,
    /// jsonpath_out (types::jsonpath): the item tree printed.
    Jsonpath,
    /// Extension types (types::extension): hstore_out, ltree_out, lquery_out, cube_out
    /// (earth too), seg_out, isn_out / ean13_out.
    Hstore,
    Ltree,
    Lquery,
    Cube,
    Seg,
    Isn(IsnKind),
    /// PostGIS geometry and geography: the hex EWKB (types::postgis).
    Geometry,
    /// pgvector (types::pgvector): vector_out, halfvec_out, sparsevec_out.
    Vector,
    Halfvec,
    Sparsevec,
}

/// The subtype prefixes of the range kinds' names (service.output.native_text's
/// `_RANGE_SUBTYPES`): a built-in range's, and from float8 on the subtypes of
/// user-defined ranges only (`float8range@<oid>`: no built-in range has the name).
const SUBS: [(&str, RangeSub); 29] = [
    ("int4", RangeSub::Int4),
    ("int8", RangeSub::Int8),
    ("num", RangeSub::Numeric),
    ("date", RangeSub::Date),
    ("ts", RangeSub::Timestamp),
    ("tstz", RangeSub::TimestampTz),
    ("float8", RangeSub::Float8),
    ("int2", RangeSub::Int2),
    ("oid", RangeSub::Oid),
    ("float4", RangeSub::Float4),
    ("text", RangeSub::Text),
    ("time", RangeSub::Time),
    ("timetz", RangeSub::TimeTz),
    ("interval", RangeSub::Interval),
    ("inet", RangeSub::Inet),
    ("cidr", RangeSub::Cidr),
    ("uuid", RangeSub::Uuid),
    ("bytea", RangeSub::Bytea),
    ("macaddr", RangeSub::Mac),
    ("macaddr8", RangeSub::Mac8),
    ("bool", RangeSub::Bool),
    ("char", RangeSub::Char),
    ("name", RangeSub::Name),
    ("money", RangeSub::Money),
    ("bit", RangeSub::Bits),
    ("tid", RangeSub::Tid),
    ("pg_lsn", RangeSub::PgLsn),
    ("xid8", RangeSub::Xid8),
    ("enum", RangeSub::Enum),
];

/// (subtype, is a multirange) of `<subtype prefix>range` / `<subtype prefix>multirange`.
fn range_name(name: &str) -> Option<(RangeSub, bool)> {
    SUBS.iter()
        .find_map(|&(prefix, sub)| match name.strip_prefix(prefix) {
            Some("range") => Some((sub, false)),
            Some("multirange") => Some((sub, true)),
            _ => None,
        })
}

impl Output {
    /// The type's name (`int4range`, `tstzmultirange`, `box`, ...); a user-defined range
    /// or multirange over a built-in range's subtype as that range's name, `@` and its
    /// own OID (`numrange@16401`).
    pub fn parse(name: &str) -> Option<Output> {
        if let Some((base, oid)) = name.split_once('@') {
            let oid: u32 = oid.parse().ok().filter(|&o| o != 0)?;
            return match range_name(base)? {
                (sub, false) => Some(Output::Range(sub, oid)),
                (sub, true) => Some(Output::Multirange(sub, oid)),
            };
        }
        Some(match name {
            "point" => Output::Point,
            "line" => Output::Line,
            "lseg" => Output::Lseg,
            "box" => Output::Box,
            "path" => Output::Path,
            "polygon" => Output::Polygon,
            "circle" => Output::Circle,
            "tsvector" => Output::Tsvector,
            "tsquery" => Output::Tsquery,
            "pg_lsn" => Output::PgLsn,
            "xid" => Output::Xid,
            "xid8" => Output::Xid8,
            "tid" => Output::Tid,
            "pg_snapshot" => Output::Snapshot,
            "int2vector" => Output::Int2Vector,
            "oidvector" => Output::OidVector,
            "jsonpath" => Output::Jsonpath,
            "hstore" => Output::Hstore,
            "ltree" => Output::Ltree,
            "lquery" => Output::Lquery,
            "cube" => Output::Cube,
            "seg" => Output::Seg,
            "geometry" | "geography" => Output::Geometry,
            "vector" => Output::Vector,
            "halfvec" => Output::Halfvec,
            "sparsevec" => Output::Sparsevec,
            _ => {
                if let Some(kind) = IsnKind::from_name(name) {
                    return Some(Output::Isn(kind));
                }
                // a built-in range's name (the user-range-only subtypes have none)
                return match range_name(name)? {
                    (sub, _) if sub.range_oid() == 0 => None,
                    (sub, false) => Some(Output::Range(sub, sub.range_oid())),
                    (sub, true) => Some(Output::Multirange(sub, sub.multirange_oid())),
                };
            }
        })
    }

    /// The stored form's attlen.
    pub fn attlen(self) -> i16 {
        match self {
            Output::Point => 16,
            Output::Line | Output::Circle => 24,
            Output::Lseg | Output::Box => 32,
            Output::Xid => 4,
            Output::Tid => 6,
            Output::PgLsn | Output::Xid8 | Output::Isn(_) => 8,
            Output::Seg => 12,
            _ => -1,
        }
    }

    /// `write`, with the labels a range or multirange over an enum prints its bounds
    /// from (the column's, by pg_enum OID); any other output ignores them.
    pub fn write_labeled(
        self,
        out: &mut String,
        d: &[u8],
        labels: &super::Labels,
    ) -> Result<(), &'static str> {
        match self {
            Output::Range(RangeSub::Enum, oid) => {
                super::range::range_text_labeled(out, d, RangeSub::Enum, oid, labels)
            }
            Output::Multirange(RangeSub::Enum, _) => {
                super::range::multirange_text_labeled(out, d, RangeSub::Enum, labels)
            }
            _ => self.write(out, d),
        }
    }

    /// The output function's text of one stored value.
    pub fn write(self, out: &mut String, d: &[u8]) -> Result<(), &'static str> {
        match self {
            Output::Point => geometric::point_text(out, d),
            Output::Line => geometric::line_text(out, d),
            Output::Lseg => geometric::lseg_text(out, d),
            Output::Box => geometric::box_text(out, d),
            Output::Path => geometric::path_text(out, d),
            Output::Polygon => geometric::polygon_text(out, d),
            Output::Circle => geometric::circle_text(out, d),
            Output::Tsvector => tsearch::tsvector_text(out, d),
            Output::Tsquery => tsearch::tsquery_text(out, d),
            Output::Range(sub, oid) => super::range::range_text_of(out, d, sub, oid),
            Output::Multirange(sub, _) => super::range::multirange_text(out, d, sub),
            Output::PgLsn => {
                let v = u64::from_le_bytes(fixed(d)?);
                let _ = write!(out, "{:X}/{:X}", v >> 32, v & 0xFFFF_FFFF);
                Ok(())
            }
            Output::Xid => {
                let _ = write!(out, "{}", u32::from_le_bytes(fixed(d)?));
                Ok(())
            }
            Output::Xid8 => {
                let _ = write!(out, "{}", u64::from_le_bytes(fixed(d)?));
                Ok(())
            }
            Output::Tid => tid_text(out, d),
            Output::Snapshot => snapshot::snapshot_text(out, d),
            Output::Int2Vector => array::vector_text(out, d, false),
            Output::OidVector => array::vector_text(out, d, true),
            Output::Jsonpath => jsonpath::jsonpath_text(out, d),
            Output::Hstore => extension::hstore_text(out, d),
            Output::Ltree => extension::ltree_text(out, d),
            Output::Lquery => extension::lquery_text(out, d),
            Output::Cube => extension::cube_text(out, d),
            Output::Seg => extension::seg_text(out, d),
            Output::Isn(kind) => extension::isn_text(out, d, kind),
            Output::Geometry => postgis::geometry_text(out, d),
            Output::Vector => pgvector::vector_text(out, d),
            Output::Halfvec => pgvector::halfvec_text(out, d),
            Output::Sparsevec => pgvector::sparsevec_text(out, d),
        }
    }
}

/// tidout (tid.c): `(%u,%u)` of the block number (ItemPointerGetBlockNumberNoCheck: the
/// BlockIdData's bi_hi << 16 | bi_lo) and the offset number, each field of the 6-byte
/// ItemPointerData a uint16 in the server's (little-endian) byte order, as
/// service.types.text.tid_text reads them.
pub fn tid_text(out: &mut String, d: &[u8]) -> Result<(), &'static str> {
    let [h0, h1, l0, l1, o0, o1] = fixed::<6>(d)?;
    let block =
        u32::from(u16::from_le_bytes([h0, h1])) << 16 | u32::from(u16::from_le_bytes([l0, l1]));
    let _ = write!(out, "({block},{})", u16::from_le_bytes([o0, o1]));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse() {
        assert_eq!(
            Output::parse("tstzrange"),
            Some(Output::Range(RangeSub::TimestampTz, 3910))
        );
        assert_eq!(
            Output::parse("nummultirange"),
            Some(Output::Multirange(RangeSub::Numeric, 4532))
        );
        assert_eq!(
            Output::parse("int8range"),
            Some(Output::Range(RangeSub::Int8, 3926))
        );
        // user-defined ones over a built-in range's subtype carry their own OID
        assert_eq!(
            Output::parse("int8range@16401"),
            Some(Output::Range(RangeSub::Int8, 16401))
        );
        assert_eq!(
            Output::parse("datemultirange@16402"),
            Some(Output::Multirange(RangeSub::Date, 16402))
        );
        assert_eq!(
            Output::parse("float8range@16403"),
            Some(Output::Range(RangeSub::Float8, 16403))
        );
        assert_eq!(Output::parse("float8range"), None); // no built-in one
        for bad in [
            "int8range@",
            "int8range@0",
            "int8range@x",
            "box@16401",
            "@16401",
        ] {
            assert_eq!(Output::parse(bad), None, "{bad}");
        }
        assert_eq!(Output::parse("polygon"), Some(Output::Polygon));
        assert_eq!(Output::parse("jsonpath"), Some(Output::Jsonpath));
        assert_eq!(Output::Jsonpath.attlen(), -1);
        assert_eq!(Output::parse("isbn13"), Some(Output::Isn(IsnKind::Isbn13)));
        assert_eq!(Output::Seg.attlen(), 12);
        assert_eq!(Output::parse("range"), None);
        assert_eq!(Output::parse("int4ranges"), None);
        assert_eq!(Output::Box.attlen(), 32);
        assert_eq!(Output::Range(RangeSub::Date, 3912).attlen(), -1);
        let mut s = String::new();
        Output::PgLsn
            .write(&mut s, &0x0000_0001_0016_B374u64.to_le_bytes())
            .unwrap();
        s.push(' ');
        Output::Xid8.write(&mut s, &u64::MAX.to_le_bytes()).unwrap();
        assert_eq!(s, "1/16B374 18446744073709551615");
        assert!(Output::Xid.write(&mut s, &[1, 2]).is_err());
    }

    /// tidout: block bi_hi << 16 | bi_lo, then the offset; 6 bytes or Python's.
    #[test]
    fn tid_prints_block_and_offset() {
        assert_eq!(Output::parse("tid"), Some(Output::Tid));
        assert_eq!(Output::Tid.attlen(), 6);
        let mut s = String::new();
        Output::Tid.write(&mut s, &[1, 0, 2, 0, 3, 0]).unwrap();
        assert_eq!(s, "(65538,3)");
        s.clear();
        Output::Tid.write(&mut s, &[0xff; 6]).unwrap();
        assert_eq!(s, "(4294967295,65535)");
        assert!(Output::Tid.write(&mut s, &[0; 8]).is_err());
        // user ranges over the new subtypes parse with their own OID
        assert_eq!(
            Output::parse("tidmultirange@16401"),
            Some(Output::Multirange(RangeSub::Tid, 16401))
        );
        assert_eq!(
            Output::parse("macaddr8range@16402"),
            Some(Output::Range(RangeSub::Mac8, 16402))
        );
        assert_eq!(
            Output::parse("pg_lsnrange@16403"),
            Some(Output::Range(RangeSub::PgLsn, 16403))
        );
        assert_eq!(
            Output::parse("xid8multirange@16404"),
            Some(Output::Multirange(RangeSub::Xid8, 16404))
        );
        assert_eq!(Output::parse("xidrange@16405"), None); // xid has no btree opclass
        assert_eq!(Output::parse("bytearange"), None); // no built-in one
    }
}
