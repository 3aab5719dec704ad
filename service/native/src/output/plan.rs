//! The per-table plan both plugins and the snapshot's COPY path compile once per table
//! definition: its attributes (dropped ones included), how each live one is published
//! (`Kind`) and what the value needs besides its bytes (an enum's labels, an array's
//! element type, a composite's fields), and the key columns.
//!
//! Receives: what connectors.avro.native_rows (and service.output.native_text, for its
//! layout) compile from service.schema.tabledef.ColumnDef. Hands on: `Plan::deform`,
//! the tuple's datums per attribute (crate::types::deform), which the avro encoder
//! (output::avro), the text printer (output::text) and the COPY rewriter
//! (tablesnap::copy) consume. Pure.

use crate::types::deform::{self, Attribute, Deformed, RowError, Toast, Tuple};
pub use crate::types::regproc::Names;
pub use crate::types::Labels;

use super::kind::{Kind, TextKind};

/// One attribute of the table definition, dropped ones included.
#[derive(Clone, Debug)]
pub struct Column {
    pub name: String,
    pub attlen: i16,
    /// 1, 2, 4 or 8 (attalign c, s, i, d).
    pub align: usize,
    pub dropped: bool,
    pub has_missing: bool,
    /// With `has_missing`: attmissingval as its stored datum (getmissingattr's value for
    /// a tuple written before the column), when the decoder resolved one; None: a row
    /// lacking the attribute is the Python path's.
    pub missing: Option<std::sync::Arc<[u8]>>,
    /// The field's encoding when the column is in the Value record (live, not
    /// excluded by a column filter); None: deformed past, never written.
    pub kind: Option<Kind>,
    /// The field is the `["null", T]` union (the column is nullable).
    pub optional: bool,
    /// Someone reads the value (deform decompresses it): a live column of the Value
    /// record, or one the text plan prints (output::text).
    pub read: bool,
    /// An enum column's (or enum array's) labels by pg_enum OID; empty otherwise.
    pub labels: Labels,
    /// An array column's element type; None otherwise.
    pub elem: Option<Elem>,
    /// A composite column's fields; None otherwise.
    pub composite: Option<std::sync::Arc<Composite>>,
    /// The catalog names a reg* or aclitem column (or an array of one) prints its
    /// values with (types::regproc, filled by the Python resolver); None otherwise.
    pub names: Option<std::sync::Arc<Names>>,
    /// Set when the avro encoder wrote null for a NaN/±Infinity this nullable decimal
    /// column held (the Python path's `numeric_special_value_dropped`); shared by the
    /// plan's clones and threads, cleared by `Plan::take_dropped`.
    pub special_dropped: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// The field as the avro plugin writes an unchanged TOAST value of this column
    /// (its chunks not in the change): Debezium's placeholder, union branch included
    /// (connectors.avro.schema.unchanged_toast_datum, encoded by the plan's compiler);
    /// None: such a row is the Python path's (a type without a placeholder, which it
    /// warns about, or any column of the text plan).
    pub placeholder: Option<std::sync::Arc<[u8]>>,
}

/// An array's element type: its encoding and stored form (pg_type's typlen, typalign).
#[derive(Clone, Copy, Debug)]
pub struct Elem {
    pub kind: Kind,
    pub oid: u32,
    pub attlen: i16,
    pub align: usize,
}

/// An array's element type as the text writers print it: its output function and stored
/// form (typlen, typalign); an array column's of the text plan, or an array field's of a
/// composite.
#[derive(Clone, Copy, Debug)]
pub struct TextElem {
    pub kind: TextKind,
    pub oid: u32,
    pub attlen: i16,
    pub align: usize,
}

/// A composite type's fields: their layout (a `Plan` of the type's attributes, dropped
/// ones included; an enum field's column carries its labels, a composite field's its
/// own `Composite`) and how each live one prints (None: dropped), with an array field's
/// element (`elems[i]`, None for any other field).
#[derive(Debug)]
pub struct Composite {
    pub oid: u32,
    pub layout: Plan,
    pub kinds: Vec<Option<TextKind>>,
    pub elems: Vec<Option<TextElem>>,
}

#[derive(Clone, Debug)]
pub struct Plan {
    pub columns: Vec<Column>,
    /// Indexes into `columns` of the Key record's fields, in key order.
    pub key: Vec<usize>,
}

impl Attribute for Column {
    fn name(&self) -> &str {
        &self.name
    }
    fn attlen(&self) -> i16 {
        self.attlen
    }
    fn align(&self) -> usize {
        self.align
    }
    fn dropped(&self) -> bool {
        self.dropped
    }
    fn has_missing(&self) -> bool {
        self.has_missing
    }
    fn missing(&self) -> Option<&[u8]> {
        self.missing.as_deref()
    }
    fn read(&self) -> bool {
        self.read
    }
    fn placeholder(&self) -> bool {
        self.placeholder.is_some()
    }
}

impl Plan {
    /// The columns whose NaN/±Infinity the avro encoder dropped to null since the last
    /// call (the caller warns, as the Python path does when it drops one).
    pub fn take_dropped(&self) -> Vec<String> {
        use std::sync::atomic::Ordering;
        self.columns
            .iter()
            .filter(|c| c.special_dropped.swap(false, Ordering::Relaxed))
            .map(|c| c.name.clone())
            .collect()
    }

    /// heap_deform_tuple of `t` over the plan's attributes (crate::types::deform).
    pub fn deform<'a>(
        &self,
        t: &Tuple<'a>,
        toast: Option<&Toast<'a>>,
    ) -> Result<Deformed<'a>, RowError> {
        deform::deform(&self.columns, t, toast)
    }
}
