//! How a column's value leaves pgcdc: `Kind`, the Avro encoding the avro plugin writes
//! (as connectors.avro.schema maps the type), and `TextKind`, how the text plugin
//! prints it (as service.output.text does, through the output function).
//!
//! Receives: the names connectors.avro.native_rows and service.output.native_text pass
//! per column (`Kind::parse`, `TextKind::parse`). Hands on: the kinds and the stored
//! length each expects (`attlen`), which a plan checks when it is compiled. Pure.

use crate::types::outtext::Output;
use crate::types::regproc::Reg;

/// The Avro encoding of one column, as connectors.avro.schema maps its type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Bool,
    Int2,
    Int4,
    Int8,
    Oid,
    Float4,
    Float8,
    /// text, varchar, bpchar, json: the stored UTF-8 as an Avro string.
    Text,
    /// name: the bytes before the first NUL of NameData.
    Name,
    Bytea,
    Uuid,
    Date,
    Time,
    Timestamp,
    TimestampTz,
    /// numeric(precision, scale) in decimal.handling.mode=precise.
    Decimal {
        scale: u32,
        precision: u32,
    },
    /// unconstrained numeric: VariableScaleDecimal {scale int, value bytes}.
    VarDecimal,
    /// interval: MicroDuration (a long of µs, months of 30.4375 days).
    Interval,
    /// timetz: ZonedTime (the time in UTC as text).
    TimeTz,
    /// money in decimal.handling.mode=precise: Decimal(64, 2) of the cents.
    Money,
    /// "char": charout's text.
    Char,
    /// inet and cidr: the output function's text (`cidr` prints the mask always).
    Inet {
        cidr: bool,
    },
    /// macaddr and macaddr8: the output text.
    Mac,
    Mac8,
    /// bit(n > 1) and varbit: io.debezium.data.Bits (BitSet.toByteArray).
    Bits,
    /// bit(1): a boolean.
    Bit1,
    /// jsonb: jsonb_out's text (io.debezium.data.Json).
    Jsonb,
    /// xml: xml_out's text (io.debezium.data.Xml).
    Xml,
    /// An enum: the label of the stored pg_enum OID (io.debezium.data.Enum), from the
    /// column's `labels`.
    Enum,
    /// An array: an Avro array of `["null", T]` items, T the column's `elem` kind.
    Array,
    /// numeric in decimal.handling.mode=string: numeric_out's text.
    NumericText,
    /// numeric in decimal.handling.mode=double: the value as the nearest double.
    NumericDouble,
    /// money in decimal.handling.mode=string: cash_out's text.
    MoneyText,
    /// money in decimal.handling.mode=double.
    MoneyDouble,
    /// A type published as its output text (geometric but point, tsvector, tsquery,
    /// the built-in ranges and multiranges): a string.
    Output(Output),
    /// point: io.debezium.data.geometry.Point {x, y, wkb (a 2D WKB point), srid null}.
    Point,
    /// A composite: record_out's text (the column's `composite`), a string.
    Composite,
    /// hstore in hstore.handling.mode=json: io.debezium.data.Json, its pairs in
    /// java.util.HashMap order as Jackson writes them.
    HstoreJson,
    /// hstore in hstore.handling.mode=map: an Avro map of `["null", string]`.
    HstoreMap,
    /// PostGIS geometry / geography: io.debezium.data.geometry.Geometry / Geography
    /// {wkb: the EWKB, srid} (types::postgis); `geodetic` for geography (the same
    /// record; the snapshot's stored form carries the flag, tablesnap::extension).
    Geometry {
        geodetic: bool,
    },
    /// pgvector vector: io.debezium.data.DoubleVector, an array of double.
    DoubleVector,
    /// pgvector halfvec: io.debezium.data.FloatVector, an array of float.
    FloatVector,
    /// pgvector sparsevec: io.debezium.data.SparseDoubleVector {dimensions, vector: an
    /// array of MapEntry {key, value}}.
    SparseVector,
    /// A reg* type (regclass, regproc, ...): the text its output function prints for
    /// the stored OID, a string, from the column's `names` (types::regproc).
    Reg(Reg),
    /// aclitem: aclitemout's text, a string, its roles from the column's `names`;
    /// `pg15`: the 12-byte form of PostgreSQL 15 (AclMode uint32), else 16 bytes.
    AclItem {
        pg15: bool,
    },
}

impl Kind {
    /// The name connectors.avro.native_rows passes for it.
    pub fn parse(name: &str, scale: u32, precision: u32) -> Option<Kind> {
        Some(match name {
            "bool" => Kind::Bool,
            "int2" => Kind::Int2,
            "int4" => Kind::Int4,
            "int8" => Kind::Int8,
            "oid" => Kind::Oid,
            "float4" => Kind::Float4,
            "float8" => Kind::Float8,
            "text" => Kind::Text,
            "name" => Kind::Name,
            "bytea" => Kind::Bytea,
            "uuid" => Kind::Uuid,
            "date" => Kind::Date,
            "time" => Kind::Time,
            "timestamp" => Kind::Timestamp,
            "timestamptz" => Kind::TimestampTz,
            "decimal" => Kind::Decimal { scale, precision },
            "variable_decimal" => Kind::VarDecimal,
            "interval" => Kind::Interval,
            "timetz" => Kind::TimeTz,
            "money" => Kind::Money,
            "char" => Kind::Char,
            "inet" => Kind::Inet { cidr: false },
            "cidr" => Kind::Inet { cidr: true },
            "macaddr" => Kind::Mac,
            "macaddr8" => Kind::Mac8,
            "bits" => Kind::Bits,
            "bit1" => Kind::Bit1,
            "jsonb" => Kind::Jsonb,
            "xml" => Kind::Xml,
            "enum" => Kind::Enum,
            "array" => Kind::Array,
            "numeric_text" => Kind::NumericText,
            "numeric_double" => Kind::NumericDouble,
            "money_text" => Kind::MoneyText,
            "money_double" => Kind::MoneyDouble,
            "point_record" => Kind::Point,
            "composite" => Kind::Composite,
            "hstore_json" => Kind::HstoreJson,
            "hstore_map" => Kind::HstoreMap,
            "geometry_record" => Kind::Geometry { geodetic: false },
            "geography_record" => Kind::Geometry { geodetic: true },
            "double_vector" => Kind::DoubleVector,
            "float_vector" => Kind::FloatVector,
            "sparse_vector" => Kind::SparseVector,
            "aclitem" => Kind::AclItem { pg15: false },
            "aclitem_pg15" => Kind::AclItem { pg15: true },
            _ => match Reg::parse(name) {
                Some(reg) => Kind::Reg(reg),
                None => Kind::Output(Output::parse(name)?),
            },
        })
    }

    /// Does the value's text need the catalog's names (the column's `names`)?
    pub fn named(self) -> bool {
        matches!(self, Kind::Reg(_) | Kind::AclItem { .. })
    }

    /// The attlen the kind's stored form has (what the plan checks at compile time).
    pub fn attlen(self) -> i16 {
        match self {
            Kind::Bool | Kind::Char => 1,
            Kind::Int2 => 2,
            Kind::Int4 | Kind::Oid | Kind::Float4 | Kind::Date | Kind::Enum | Kind::Reg(_) => 4,
            Kind::Int8
            | Kind::Float8
            | Kind::Time
            | Kind::Timestamp
            | Kind::TimestampTz
            | Kind::Money
            | Kind::MoneyText
            | Kind::MoneyDouble
            | Kind::Mac8 => 8,
            Kind::TimeTz | Kind::AclItem { pg15: true } => 12,
            Kind::Uuid | Kind::Interval | Kind::Point | Kind::AclItem { pg15: false } => 16,
            Kind::Output(o) => o.attlen(),
            Kind::Name => 64,
            Kind::Mac => 6,
            Kind::Text
            | Kind::Bytea
            | Kind::Decimal { .. }
            | Kind::VarDecimal
            | Kind::Inet { .. }
            | Kind::Bits
            | Kind::Bit1
            | Kind::Jsonb
            | Kind::Xml
            | Kind::Array
            | Kind::NumericText
            | Kind::NumericDouble
            | Kind::Composite
            | Kind::HstoreJson
            | Kind::HstoreMap
            | Kind::Geometry { .. }
            | Kind::DoubleVector
            | Kind::FloatVector
            | Kind::SparseVector => -1,
        }
    }
}

/// How a printed column's value is written (its output function, then print_literal).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextKind {
    Bool,
    Int2,
    Int4,
    Int8,
    Oid,
    Float4,
    Float8,
    /// text, varchar, bpchar, json: the stored UTF-8, quoted.
    Text,
    /// name: the bytes before the first NUL of NameData, quoted.
    Name,
    Bytea,
    Uuid,
    Numeric,
    Date,
    Time,
    Timestamp,
    TimestampTz,
    Interval,
    TimeTz,
    Money,
    /// "char": charout, quoted.
    Char,
    Inet,
    Cidr,
    Mac,
    Mac8,
    /// bit and varbit: `B'0101'`.
    Bits,
    Jsonb,
    Xml,
    /// An enum: its label (the column's `labels`), quoted.
    Enum,
    /// An array: array_out of its elements' texts (the printed column's `elem`), quoted.
    Array,
    /// A type printed as its output text (types::outtext), quoted.
    Output(Output),
    /// A composite: record_out of its fields (the column's `composite`), quoted.
    Composite,
    /// A reg* type: its output function's text (regproc.c), from the column's `names`
    /// (types::regproc), quoted.
    Reg(Reg),
    /// aclitem: aclitemout's text, its roles from the column's `names`, quoted; `pg15`:
    /// the 12-byte form of PostgreSQL 15, else 16 bytes (as `Kind::AclItem`).
    AclItem {
        pg15: bool,
    },
}

impl TextKind {
    /// The name service.output.native_text passes for it.
    pub fn parse(name: &str) -> Option<TextKind> {
        Some(match name {
            "bool" => TextKind::Bool,
            "int2" => TextKind::Int2,
            "int4" => TextKind::Int4,
            "int8" => TextKind::Int8,
            "oid" => TextKind::Oid,
            "float4" => TextKind::Float4,
            "float8" => TextKind::Float8,
            "text" => TextKind::Text,
            "name" => TextKind::Name,
            "bytea" => TextKind::Bytea,
            "uuid" => TextKind::Uuid,
            "numeric" => TextKind::Numeric,
            "date" => TextKind::Date,
            "time" => TextKind::Time,
            "timestamp" => TextKind::Timestamp,
            "timestamptz" => TextKind::TimestampTz,
            "interval" => TextKind::Interval,
            "timetz" => TextKind::TimeTz,
            "money" => TextKind::Money,
            "char" => TextKind::Char,
            "inet" => TextKind::Inet,
            "cidr" => TextKind::Cidr,
            "macaddr" => TextKind::Mac,
            "macaddr8" => TextKind::Mac8,
            "bits" => TextKind::Bits,
            "jsonb" => TextKind::Jsonb,
            "xml" => TextKind::Xml,
            "enum" => TextKind::Enum,
            "array" => TextKind::Array,
            "composite" => TextKind::Composite,
            "aclitem" => TextKind::AclItem { pg15: false },
            "aclitem_pg15" => TextKind::AclItem { pg15: true },
            _ => match Reg::parse(name) {
                Some(reg) => TextKind::Reg(reg),
                None => TextKind::Output(Output::parse(name)?),
            },
        })
    }

    /// Does the value's text need the catalog's names (the column's `names`)?
    pub fn named(self) -> bool {
        matches!(self, TextKind::Reg(_) | TextKind::AclItem { .. })
    }

    /// The attlen of the kind's stored form (checked when the plan is compiled).
    pub fn attlen(self) -> i16 {
        match self {
            TextKind::Bool | TextKind::Char => 1,
            TextKind::Int2 => 2,
            TextKind::Int4
            | TextKind::Oid
            | TextKind::Float4
            | TextKind::Date
            | TextKind::Enum
            | TextKind::Reg(_) => 4,
            TextKind::Mac => 6,
            TextKind::Int8
            | TextKind::Float8
            | TextKind::Time
            | TextKind::Timestamp
            | TextKind::TimestampTz
            | TextKind::Money
            | TextKind::Mac8 => 8,
            TextKind::TimeTz | TextKind::AclItem { pg15: true } => 12,
            TextKind::Uuid | TextKind::Interval | TextKind::AclItem { pg15: false } => 16,
            TextKind::Output(o) => o.attlen(),
            TextKind::Name => 64,
            TextKind::Text
            | TextKind::Bytea
            | TextKind::Numeric
            | TextKind::Inet
            | TextKind::Cidr
            | TextKind::Bits
            | TextKind::Jsonb
            | TextKind::Xml
            | TextKind::Array
            | TextKind::Composite => -1,
        }
    }
}
