//! The built-in types whose Debezium value is their output text, named once for both
//! plugins: the Avro plugin writes the text as a string (`Kind::Output`), the text
//! plugin quotes it (`TextKind::Output`).
//!
//! Receives: the name service.output.native_text / connectors.avro.native_rows pass for
//! the type, then per value its stored form (a fixed-length image, or a varlena's
//! payload). Hands on: `Output`, its stored length (`attlen`) and its output text
//! (`write`): the geometric types (rows::geometric), tsvector and tsquery
//! (rows::tsearch), the built-in ranges and multiranges (rows::range).
//! Errors: each writer's `Err(reason)` (the row falls back to Python). Pure, no panics.

use super::{geometric, range::RangeSub, tsearch};

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
    Range(RangeSub),
    Multirange(RangeSub),
}

const SUBS: [(&str, RangeSub); 6] = [
    ("int4", RangeSub::Int4),
    ("int8", RangeSub::Int8),
    ("num", RangeSub::Numeric),
    ("date", RangeSub::Date),
    ("ts", RangeSub::Timestamp),
    ("tstz", RangeSub::TimestampTz),
];

impl Output {
    /// The type's name (`int4range`, `tstzmultirange`, `box`, ...).
    pub fn parse(name: &str) -> Option<Output> {
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
            _ => {
                for (prefix, sub) in SUBS {
                    match name.strip_prefix(prefix) {
                        Some("range") => return Some(Output::Range(sub)),
                        Some("multirange") => return Some(Output::Multirange(sub)),
                        _ => {}
                    }
                }
                return None;
            }
        })
    }

    /// The stored form's attlen.
    pub fn attlen(self) -> i16 {
        match self {
            Output::Point => 16,
            Output::Line | Output::Circle => 24,
            Output::Lseg | Output::Box => 32,
            _ => -1,
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
            Output::Range(sub) => super::range::range_text(out, d, sub),
            Output::Multirange(sub) => super::range::multirange_text(out, d, sub),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse() {
        assert_eq!(
            Output::parse("tstzrange"),
            Some(Output::Range(RangeSub::TimestampTz))
        );
        assert_eq!(
            Output::parse("nummultirange"),
            Some(Output::Multirange(RangeSub::Numeric))
        );
        assert_eq!(
            Output::parse("int8range"),
            Some(Output::Range(RangeSub::Int8))
        );
        assert_eq!(Output::parse("polygon"), Some(Output::Polygon));
        assert_eq!(Output::parse("range"), None);
        assert_eq!(Output::parse("int4ranges"), None);
        assert_eq!(Output::Box.attlen(), 32);
        assert_eq!(Output::Range(RangeSub::Date).attlen(), -1);
    }
}
