//! The PyO3 boundary of the row encoder: `service._native.RowPlan` and `envelope`.
//!
//! Receives: from connectors.avro.native_rows, once per table definition, the plan's
//! columns as tuples `(name, attlen, align, dropped, has_missing, kind, scale,
//! precision, optional)` (kind "" for a column outside the Value record), the key's
//! column indexes, the qualified table name and the SchemaMismatchError and DecodeError
//! classes, for each enum column (by index) its labels by pg_enum OID, and for each
//! array column (by index) its element `(kind, scale, precision, type OID, typlen,
//! typalign)`, for each column added with a default (by index) its attmissingval as the
//! stored datum, the catalog name cache (`NameCache`, glue::names) when a column is a
//! reg* type, aclitem or an array of one, or a composite (or an array of composites)
//! with a reg* or aclitem field, nested too, and for each composite column (or array of
//! composites, by index) its type OID and fields (`CompositeSpec`: an enum field with
//! its labels, an array field with its element, a composite field with its own spec;
//! a reg* or aclitem field prints from the name cache, `named_composite`); then per row the RawTuple's fields and the change's LSN, or per run of rows
//! of one table and op (`encode_events`) the RawTuples, their LSNs and the Envelope's
//! per-transaction parts.
//! Hands on: `encode` returns `(value_record, key_record | None)` as bytes, or a `str`
//! naming why the row is the Python path's (the typed fallback signal); a bad tuple
//! raises SchemaMismatchError / DecodeError with the message, `lsn`, `relation` and
//! `field` the Python deformer gives. `envelope` concatenates a change event's Envelope
//! value in the Confluent wire format from its parts (connectors.avro.native_rows
//! documents them). `encode_events` does both for each row of a run, returning the
//! ready key and value bytes of the rows up to the first fallback, and its reason;
//! `encode_rows` is the same for the rows of a `HeapRows` (glue::reorder), read in place.
//!
//! The GIL is released around a row only when its tuple is large (`DETACH_AT` bytes, half
//! a heap page: in practice a row with an inline-compressed value): a small row costs
//! about a microsecond, and taking the GIL back can wait for another Python thread's
//! switch interval (the sink's delivery callbacks), so per-row release would cost more
//! than it overlaps; a large row is mostly decompression, worth running beside them.
//! `encode_events` keeps that rule per row: it reads each RawTuple's fields and builds
//! each `bytes` under the GIL, so only a large row's encoding runs without it.
//! A panic never crosses the boundary: it becomes a DecodeError naming the table.

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::glue::names::PyNameCache;
use crate::glue::reorder::PyHeapRows;
use crate::glue::tablesnap::{
    copy_plan, encode_copy_rows, prepare_copy_rows, PyCopyChunk, PyCopyRecords, Stop,
};
use std::collections::HashMap;
use std::sync::Arc;

use crate::output::kind::{Kind, TextKind};
use crate::output::plan::{Column, Composite, Elem, Labels, Plan, TextElem};

use crate::output::avro::binary as avro;
use crate::types::deform::{RowError, Toast, Tuple};
use crate::types::regproc::Names;

const DETACH_AT: usize = 4096;

type ColumnSpec = (String, i16, usize, bool, bool, String, u32, u32, bool);
/// An array column's element: (kind, scale, precision, type OID, typlen, typalign).
type ElemSpec = (String, u32, u32, u32, i16, usize);
/// A composite type's OID and fields, as connectors.avro.native_rows / service.output.
/// native_text's `composite_spec` passes them.
#[derive(FromPyObject)]
pub struct CompositeSpec(u32, Vec<FieldSpec>);

/// One field of a composite: (name, attlen, align, dropped, text kind ("" when dropped),
/// an enum field's labels by pg_enum OID, an array field's element `(text kind, type OID,
/// typlen, typalign)`, a composite field's (or a composite array element's) own spec).
#[derive(FromPyObject)]
pub struct FieldSpec(
    String,
    i16,
    usize,
    bool,
    String,
    Option<Labels>,
    Option<(String, u32, i16, usize)>,
    Option<CompositeSpec>,
);

/// The `Composite` of a column's spec (output::text::composite_text prints it). A field
/// whose kind needs more than its bytes (an enum's labels, an array's element, a nested
/// composite's fields) without it is a ValueError.
pub fn composite(
    column: &str,
    CompositeSpec(oid, fields): CompositeSpec,
) -> PyResult<Arc<Composite>> {
    let mut columns = Vec::with_capacity(fields.len());
    let mut kinds = Vec::with_capacity(fields.len());
    let mut elems = Vec::with_capacity(fields.len());
    for FieldSpec(name, attlen, align, dropped, kind, labels, elem, nested) in fields {
        check_align(&name, align)?;
        let bad =
            |what: &str| PyValueError::new_err(format!("column {column}: field {name} {what}"));
        let k = if dropped {
            None
        } else {
            let k = TextKind::parse(&kind)
                .filter(|k| k.attlen() == attlen)
                .ok_or_else(|| bad(&format!("has a bad kind {kind:?} ({attlen})")))?;
            Some(k)
        };
        let e = match (k, elem) {
            (Some(TextKind::Array), Some((ekind, eoid, eattlen, ealign))) => {
                check_align(&name, ealign)?;
                let ek = TextKind::parse(&ekind)
                    .filter(|e| *e != TextKind::Array && e.attlen() == eattlen)
                    .ok_or_else(|| bad(&format!("has a bad element kind {ekind:?}")))?;
                Some(TextElem {
                    kind: ek,
                    oid: eoid,
                    attlen: eattlen,
                    align: ealign,
                })
            }
            (Some(TextKind::Array), None) => return Err(bad("is an array without its element")),
            _ => None,
        };
        let elem_kind = e.map(|e| e.kind);
        let needs = |want: TextKind| k == Some(want) || elem_kind == Some(want);
        if needs(TextKind::Enum) && labels.is_none() {
            return Err(bad("is an enum without its labels"));
        }
        let nested = match nested {
            Some(spec) => Some(composite(column, spec)?),
            None if needs(TextKind::Composite) => {
                return Err(bad("is a composite without its fields"))
            }
            None => None,
        };
        kinds.push(k);
        elems.push(e);
        columns.push(Column {
            name,
            attlen,
            align,
            dropped,
            has_missing: false,
            missing: None,
            kind: None,
            optional: true,
            read: !dropped,
            labels: labels.unwrap_or_default(),
            elem: None,
            composite: nested,
            special_dropped: Default::default(),
            placeholder: None,
            names: None,
        });
    }
    Ok(Arc::new(Composite {
        oid,
        layout: Plan {
            columns,
            key: vec![],
        },
        kinds,
        elems,
    }))
}

/// Does a field of `c` (or of a composite nested in it) print a catalog name (a reg*
/// or aclitem field)?
fn has_named(c: &Composite) -> bool {
    c.kinds.iter().flatten().any(|k| k.named())
        || c.layout
            .columns
            .iter()
            .any(|f| f.composite.as_deref().is_some_and(has_named))
}

/// `c` with the catalog names on each field that prints one, nested composites' too, so
/// record_out prints a reg* or aclitem field from the resolver's cache (a name not in
/// it yet is the row's fallback, as in a column).
fn with_names(c: &Composite, names: &Arc<Names>) -> Arc<Composite> {
    let mut layout = c.layout.clone();
    for (field, kind) in layout.columns.iter_mut().zip(&c.kinds) {
        if kind.is_some_and(|k| k.named()) {
            field.names = Some(Arc::clone(names));
        }
        if let Some(inner) = field.composite.as_deref().filter(|i| has_named(i)) {
            field.composite = Some(with_names(inner, names));
        }
    }
    Arc::new(Composite {
        oid: c.oid,
        layout,
        kinds: c.kinds.clone(),
        elems: c.elems.clone(),
    })
}

/// The `Composite` of a composite column's (or an array of composites') spec, both
/// plugins': `composite`, with the plan's catalog names on each reg* or aclitem field,
/// nested ones too (`with_names`); such a field without `names` is a ValueError.
pub fn named_composite(
    column: &str,
    spec: CompositeSpec,
    names: Option<&Arc<Names>>,
) -> PyResult<Arc<Composite>> {
    let c = composite(column, spec)?;
    match (names, has_named(&c)) {
        (Some(n), true) => Ok(with_names(&c, n)),
        (None, true) => Err(PyValueError::new_err(format!(
            "column {column}: its fields need the catalog names (names=)"
        ))),
        (_, false) => Ok(c),
    }
}

/// A column's attmissingval as the plan keeps it (plan::Column::missing); one given for
/// a column without atthasmissing is a ValueError (the glue compiled the plan wrong).
pub fn missing_datum(
    column: &str,
    has_missing: bool,
    datum: Option<Vec<u8>>,
) -> PyResult<Option<Arc<[u8]>>> {
    match datum {
        Some(_) if !has_missing => Err(PyValueError::new_err(format!(
            "column {column}: attmissingval without atthasmissing"
        ))),
        d => Ok(d.map(Arc::from)),
    }
}

/// The `source` parts as the glue passes them: (head, sequence_head, mid, tail,
/// block_head); see `SourceParts`.
type SourceTuple = (Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>, Option<Vec<u8>>);

#[pyclass(module = "service._native", name = "RowPlan", frozen)]
pub struct PyRowPlan {
    plan: Plan,
    errors: RowErrors,
}

#[pymethods]
impl PyRowPlan {
    #[new]
    #[pyo3(signature = (columns, key, relation, mismatch_error, decode_error, labels=None, elements=None, composites=None, missing=None, names=None, placeholders=None))]
    #[allow(clippy::too_many_arguments)] // the plan's parts, as the glue compiles them
    fn new(
        columns: Vec<ColumnSpec>,
        key: Vec<usize>,
        relation: String,
        mismatch_error: Py<PyAny>,
        decode_error: Py<PyAny>,
        labels: Option<HashMap<usize, Labels>>,
        elements: Option<HashMap<usize, ElemSpec>>,
        composites: Option<HashMap<usize, CompositeSpec>>,
        missing: Option<HashMap<usize, Vec<u8>>>,
        names: Option<&Bound<'_, PyNameCache>>,
        placeholders: Option<HashMap<usize, Vec<u8>>>,
    ) -> PyResult<Self> {
        let names = names.map(|n| Arc::clone(&n.get().names));
        let mut placeholders = placeholders.unwrap_or_default();
        let mut labels = labels.unwrap_or_default();
        let mut elements = elements.unwrap_or_default();
        let mut composites = composites.unwrap_or_default();
        let mut missing = missing.unwrap_or_default();
        let mut cols = Vec::with_capacity(columns.len());
        for (name, attlen, align, dropped, has_missing, kind, scale, precision, optional) in columns
        {
            check_align(&name, align)?;
            let kind = if kind.is_empty() {
                None
            } else {
                let k = Kind::parse(&kind, scale, precision).ok_or_else(|| {
                    PyValueError::new_err(format!("column {name}: unknown kind {kind:?}"))
                })?;
                if k.attlen() != attlen {
                    return Err(PyValueError::new_err(format!(
                        "column {name}: kind {kind} needs attlen {}, not {attlen}",
                        k.attlen()
                    )));
                }
                Some(k)
            };
            let elem = match elements.remove(&cols.len()) {
                Some((ekind, scale, precision, oid, eattlen, ealign)) => {
                    check_align(&name, ealign)?;
                    let k = Kind::parse(&ekind, scale, precision)
                        .filter(|k| *k != Kind::Array && k.attlen() == eattlen)
                        .ok_or_else(|| {
                            PyValueError::new_err(format!(
                                "column {name}: bad element kind {ekind:?} ({eattlen})"
                            ))
                        })?;
                    Some(Elem {
                        kind: k,
                        oid,
                        attlen: eattlen,
                        align: ealign,
                    })
                }
                None => None,
            };
            // a composite's reg* or aclitem fields print the cache's names too
            let composite = match composites.remove(&cols.len()) {
                Some(spec) => Some(named_composite(&name, spec, names.as_ref())?),
                None => None,
            };
            let datum = missing_datum(&name, has_missing, missing.remove(&cols.len()))?;
            // reg* and aclitem (or an array of them) print catalog names: the cache
            let named = kind.is_some_and(Kind::named) || elem.is_some_and(|e| e.kind.named());
            if named && names.is_none() {
                return Err(PyValueError::new_err(format!(
                    "column {name}: its values need the catalog names (names=)"
                )));
            }
            // an unchanged TOAST value's field, for a live varlena column of the record
            let placeholder = placeholders
                .remove(&cols.len())
                .filter(|_| kind.is_some() && attlen == -1 && !dropped)
                .map(Arc::from);
            cols.push(Column {
                name,
                attlen,
                align,
                dropped,
                has_missing,
                missing: datum,
                placeholder,
                read: kind.is_some(),
                labels: labels.remove(&cols.len()).unwrap_or_default(),
                elem,
                composite,
                special_dropped: Default::default(),
                names: if named { names.clone() } else { None },
                kind,
                optional,
            });
        }
        if let Some(&bad) = key.iter().find(|&&k| k >= cols.len()) {
            return Err(PyValueError::new_err(format!(
                "key column index {bad} out of range"
            )));
        }
        Ok(PyRowPlan {
            plan: Plan { columns: cols, key },
            errors: RowErrors {
                relation,
                mismatch_error,
                decode_error,
            },
        })
    }

    /// The columns whose NaN/±Infinity an encode since the last call wrote as null
    /// (`Plan::take_dropped`): the caller warns `numeric_special_value_dropped` for each.
    fn take_dropped(&self) -> Vec<String> {
        self.plan.take_dropped()
    }

    /// `(value, key | None)`, or the fallback reason; see the module docstring. `toast`,
    /// when given, maps the change's TOAST chunk ids to their reassembled chunk data
    /// (`ReplayChange.toast`): the tuple's external TOAST pointers are read from it.
    #[pyo3(signature = (natts, infomask, hoff, data, lsn, want_key, toast=None))]
    #[allow(clippy::too_many_arguments)] // the RawTuple's fields, flat: no attribute lookups
    fn encode<'py>(
        &self,
        py: Python<'py>,
        natts: usize,
        infomask: u16,
        hoff: usize,
        data: &Bound<'py, PyBytes>,
        lsn: u64,
        want_key: bool,
        toast: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let tuple = Tuple {
            natts,
            infomask,
            hoff,
            data: data.as_bytes(),
        };
        // The chunks' bytes objects, held here while the map borrows them.
        let held = match toast {
            Some(mapping) => toast_chunks(mapping)?,
            None => None,
        };
        let map = held.as_ref().map(chunk_map);
        let toast_map = map.as_ref();
        let mut records = Vec::with_capacity(tuple.data.len() + 16);
        match self.encode_one(py, &tuple, want_key, lsn, toast_map, &mut records)? {
            Ok(value_end) => {
                let (value, key) = records.split_at(value_end);
                let v = PyBytes::new(py, value);
                let k = if want_key {
                    Some(PyBytes::new(py, key))
                } else {
                    None
                };
                Ok((v, k).into_pyobject(py)?.into_any())
            }
            Err(why) => Ok(why.into_pyobject(py)?.into_any()),
        }
    }

    /// The change events of a run of rows of one table and op, in order, as `encode`
    /// and `envelope` give them one by one: row i (`tuples[i]`, a RawTuple, logged at
    /// `lsns[i]`) gets the orders `total + i`, `order + i`; the value is the row's
    /// record behind `value_header` (in `before` for op "d", else `after`), the key
    /// `key_header` + its key record (None without `key_header`). Stops before the first
    /// row that is the Python path's: returns `(keys, values, reason)`, `reason` None
    /// when every row was encoded, else why row `len(values)` falls back. A bad tuple
    /// raises as `encode` does, with its LSN. `toasts`, when given, holds each row's
    /// TOAST chunk mapping as `encode` takes it (None: the row has none).
    #[pyo3(signature = (tuples, lsns, value_header, key_header, parts, total, order, op, ts_ns, toasts=None))]
    #[allow(clippy::too_many_arguments)]
    #[allow(clippy::type_complexity)]
    fn encode_events<'py>(
        &self,
        py: Python<'py>,
        tuples: &Bound<'py, PyList>,
        lsns: Vec<i64>,
        value_header: &[u8],
        key_header: Option<&[u8]>,
        parts: SourceTuple,
        total: i64,
        order: i64,
        op: &str,
        ts_ns: i64,
        toasts: Option<&Bound<'py, PyList>>,
    ) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyList>, Option<&'static str>)> {
        if lsns.len() != tuples.len() {
            return Err(PyValueError::new_err(format!(
                "{} tuples but {} LSNs",
                tuples.len(),
                lsns.len()
            )));
        }
        if let Some(t) = toasts {
            if t.len() != tuples.len() {
                return Err(PyValueError::new_err(format!(
                    "{} tuples but {} TOAST mappings",
                    tuples.len(),
                    t.len()
                )));
            }
        }
        let names = intern_names(py);
        let rows = tuples.iter().zip(lsns).enumerate().map(|(i, (raw, lsn))| {
            let fields = raw_fields(&raw, &names)?;
            let chunks = match toasts {
                Some(t) => toast_chunks(&t.get_item(i)?)?,
                None => None,
            };
            Ok((Toasted { fields, chunks }, lsn as u64))
        });
        let events = Events {
            value_header,
            key_header,
            source: SourceParts::of(&parts),
            total,
            order,
            op,
            ts_ns,
        };
        self.events_of(py, rows, &events)
    }

    /// `encode_events` of the rows of a `HeapRows` window (their tuples and LSNs),
    /// read in place: the same `(keys, values, reason)`.
    #[pyo3(signature = (rows, value_header, key_header, parts, total, order, op, ts_ns))]
    #[allow(clippy::too_many_arguments)]
    #[allow(clippy::type_complexity)]
    fn encode_rows<'py>(
        &self,
        py: Python<'py>,
        rows: &Bound<'py, PyHeapRows>,
        value_header: &[u8],
        key_header: Option<&[u8]>,
        parts: SourceTuple,
        total: i64,
        order: i64,
        op: &str,
        ts_ns: i64,
    ) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyList>, Option<&'static str>)> {
        let events = Events {
            value_header,
            key_header,
            source: SourceParts::of(&parts),
            total,
            order,
            op,
            ts_ns,
        };
        self.events_of(py, rows.get().tuples(py)?.map(Ok), &events)
    }

    /// The UPDATE events of the rows of a `HeapRows` window whose every row holds its
    /// old tuple too (a run of REPLICA IDENTITY FULL updates, or of key changes), read in
    /// place: what `NativeRows._encode_update` writes for each, the same
    /// `(keys, values, reason)` as `encode_rows` with op "u". Each row's new and old
    /// tuples are encoded; `before` is the old row's record, or null when the old tuple
    /// is only the key. The rows stop, with the reason, at the first one whose new or
    /// old tuple the encoder leaves to Python, or whose Key record differs between the
    /// two (the key changed: Python writes a DELETE and a CREATE); and before the first
    /// row when a Key record is wanted and `key_exact` is false (its key types do not
    /// compare by their bytes).
    #[pyo3(signature = (rows, value_header, key_header, parts, total, order, ts_ns, key_exact))]
    #[allow(clippy::too_many_arguments)]
    #[allow(clippy::type_complexity)]
    fn encode_update_rows<'py>(
        &self,
        py: Python<'py>,
        rows: &Bound<'py, PyHeapRows>,
        value_header: &[u8],
        key_header: Option<&[u8]>,
        parts: SourceTuple,
        total: i64,
        order: i64,
        ts_ns: i64,
        key_exact: bool,
    ) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyList>, Option<&'static str>)> {
        let mut w = Written::new(py);
        let want_key = key_header.is_some();
        if want_key && !key_exact {
            return Ok(w.stopped(Some("update key compared in Python")));
        }
        let source = SourceParts::of(&parts);
        // the new and the old row's records (Value, then Key): two buffers for the run
        let (mut news, mut olds) = (Vec::new(), Vec::new());
        for (i, (new, old, old_is_key, lsn)) in rows.get().pairs(py)?.enumerate() {
            news.clear();
            let value_end = match self.encode_one(py, &new, want_key, lsn, None, &mut news)? {
                Ok(end) => end,
                Err(why) => return Ok(w.stopped(Some(why))),
            };
            olds.clear();
            let old_end = match self.encode_one(py, &old, want_key, lsn, None, &mut olds)? {
                Ok(end) => end,
                Err(why) => return Ok(w.stopped(Some(why))),
            };
            let ((record, key), (old_record, old_key)) =
                (news.split_at(value_end), olds.split_at(old_end));
            if old_key != key {
                return Ok(w.stopped(Some("update changes the key")));
            }
            let before = (!old_is_key).then_some(old_record);
            let n = i as i64;
            let envelope = |out: &mut Vec<u8>| {
                write_envelope(
                    out,
                    before,
                    Some(record),
                    &source,
                    lsn as i64,
                    total + n,
                    order + n,
                    "u",
                    ts_ns,
                )
            };
            w.push(py, value_header, envelope, key_header, key)?;
        }
        Ok(w.stopped(None))
    }

    /// Why rows whose plan column c is field `fields[c]` (-1: none) of a COPY row of
    /// `ncols` fields cannot be encoded natively (a column kind without a native send
    /// form: the table is the Python path's), or None when they can.
    fn copy_fallback(&self, fields: Vec<i64>, ncols: usize) -> PyResult<Option<String>> {
        Ok(copy_plan(&self.plan, &fields, ncols)?.err())
    }

    /// The Value and Key records of the chunk's rows from the first on, encoded with the
    /// GIL released, up to the first row the encoder stops at (a fallback or a malformed
    /// field: no error is raised here, `encode_copy` meets it again at publication), for
    /// `encode_copy(..., prepared=...)`: what a snapshot reader's thread does for a chunk
    /// before the worker publishes it. `fields` as `encode_copy`'s; a table without a
    /// native COPY plan gives no records.
    fn prepare_copy(
        &self,
        py: Python<'_>,
        chunk: &Bound<'_, PyCopyChunk>,
        fields: Vec<i64>,
        want_key: bool,
    ) -> PyResult<PyCopyRecords> {
        let c = chunk.get();
        let plan = match copy_plan(&self.plan, &fields, c.ncols_of())? {
            Ok(plan) => plan,
            Err(_) => return Ok(PyCopyRecords::empty(want_key)),
        };
        Ok(prepare_copy_rows(py, c, &plan, want_key))
    }

    /// The snapshot's events of rows `rows[start:]` of a `CopyChunk` (glue::tablesnap), each a
    /// read (op `op`, "r") of this table at `lsn` without a transaction block: plan column
    /// c is field `fields[c]` of a row (-1: always NULL); `parts` are the `source` parts
    /// of the first row of `rows`, of the rows between, and of the last one (the
    /// snapshot markers differ). The same `(keys, values, reason)` as `encode_events`:
    /// `reason` None when every row was encoded, else why row `rows[start +
    /// len(values)]` is the Python path's (a whole table's reason when no row was
    /// encoded because a column has no native send form). A malformed field raises
    /// DecodeError naming the column, with `lsn`. `prepared`: `prepare_copy`'s records
    /// of this chunk with these `fields` (made by this plan: the caller's contract), used
    /// for every row it holds instead of encoding it again.
    #[pyo3(signature = (chunk, fields, rows, start, value_header, key_header, parts, op, lsn, ts_ns, prepared=None))]
    #[allow(clippy::too_many_arguments)]
    #[allow(clippy::type_complexity)]
    fn encode_copy<'py>(
        &self,
        py: Python<'py>,
        chunk: &Bound<'py, PyCopyChunk>,
        fields: Vec<i64>,
        rows: Vec<usize>,
        start: usize,
        value_header: &[u8],
        key_header: Option<&[u8]>,
        parts: (SourceTuple, SourceTuple, SourceTuple),
        op: &str,
        lsn: u64,
        ts_ns: i64,
        prepared: Option<PyRef<'py, PyCopyRecords>>,
    ) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyList>, Option<String>)> {
        let mut w = Written::new(py);
        let c = chunk.get();
        let plan = match copy_plan(&self.plan, &fields, c.ncols_of()) {
            Ok(Ok(plan)) => plan,
            Ok(Err(reason)) => return Ok(w.stopped(Some(reason))),
            Err(e) => return Err(e),
        };
        let todo = rows.get(start..).unwrap_or(&[]);
        let want_key = key_header.is_some();
        let pre = prepared.as_deref().filter(|p| p.want_key == want_key);
        let held = pre.map_or(0, PyCopyRecords::len_of);
        // The rows encoded ahead are each taken once, by index: `rows` only rises.
        let reused = todo.iter().take_while(|&&r| r < held).count();
        let encoded = encode_copy_rows(py, c, &plan, &todo[reused..], want_key);
        let (fresh, stop) = self
            .errors
            .check(py, encoded.map(Ok), "COPY row encoder", lsn)?;
        let records = todo[..reused]
            .iter()
            .filter_map(|&r| pre.map(|p| p.record(r)))
            .chain((0..fresh.len_of()).map(|i| fresh.record(i)));
        let sources = [
            SourceParts::of(&parts.0),
            SourceParts::of(&parts.1),
            SourceParts::of(&parts.2),
        ];
        let last = rows.len().saturating_sub(1);
        for (n, (record, key)) in records.enumerate() {
            let at = start + n;
            let source = if at == 0 {
                &sources[0]
            } else if at == last {
                &sources[2]
            } else {
                &sources[1]
            };
            let envelope = |out: &mut Vec<u8>| {
                write_envelope(out, None, Some(record), source, lsn as i64, 0, 0, op, ts_ns)
            };
            w.push(py, value_header, envelope, key_header, key)?;
        }
        match stop {
            Stop::Done => Ok(w.stopped(None)),
            Stop::Fallback(why) => Ok(w.stopped(Some(why.to_string()))),
            Stop::Error(e) => self
                .errors
                .check(py, Ok(Err::<(), _>(e)), "COPY row encoder", lsn)
                .map(|()| w.stopped(None)),
        }
    }
}

/// A row of a run as the run encoders read it: something that lends its tuple.
pub(crate) trait AsTuple {
    fn as_tuple(&self) -> Tuple<'_>;

    /// The row's TOAST chunks by chunk id, when it has any (`encode_events`' toasts).
    fn toast(&self) -> Option<Toast<'_>> {
        None
    }
}

/// A TOAST mapping's chunks: (chunk id, its reassembled bytes).
type Chunks<'py> = Vec<(u32, Bound<'py, PyBytes>)>;

/// A RawTuple's fields with the chunks of its TOAST mapping, held while a map borrows
/// them.
pub(crate) struct Toasted<'py> {
    fields: (usize, u16, usize, Bound<'py, PyBytes>),
    chunks: Option<Chunks<'py>>,
}

impl AsTuple for Toasted<'_> {
    fn as_tuple(&self) -> Tuple<'_> {
        self.fields.as_tuple()
    }

    fn toast(&self) -> Option<Toast<'_>> {
        self.chunks.as_ref().map(chunk_map)
    }
}

/// The held chunks as the map the deform resolves TOAST pointers from.
fn chunk_map<'a>(chunks: &'a Chunks<'_>) -> Toast<'a> {
    chunks.iter().map(|(id, b)| (*id, b.as_bytes())).collect()
}

/// A TOAST mapping (chunk id -> its reassembled bytes, `ReplayChange.toast`) as the
/// held chunks; None for None.
fn toast_chunks<'py>(mapping: &Bound<'py, PyAny>) -> PyResult<Option<Chunks<'py>>> {
    if mapping.is_none() {
        return Ok(None);
    }
    let mut held = Vec::new();
    for item in mapping.call_method0("items")?.try_iter()? {
        let (id, chunk): (u32, Bound<'py, PyBytes>) = item?.extract()?;
        held.push((id, chunk));
    }
    Ok(Some(held))
}

impl AsTuple for Tuple<'_> {
    fn as_tuple(&self) -> Tuple<'_> {
        Tuple { ..*self }
    }
}

/// A RawTuple's fields as `raw_fields` reads them: its data stays the `bytes` object.
impl AsTuple for (usize, u16, usize, Bound<'_, PyBytes>) {
    fn as_tuple(&self) -> Tuple<'_> {
        Tuple {
            natts: self.0,
            infomask: self.1,
            hoff: self.2,
            data: self.3.as_bytes(),
        }
    }
}

/// What `encode_events` puts around each row's records: everything but the rows.
struct Events<'a> {
    value_header: &'a [u8],
    key_header: Option<&'a [u8]>,
    source: SourceParts<'a>,
    total: i64,
    order: i64,
    op: &'a str,
    ts_ns: i64,
}

impl PyRowPlan {
    /// The loop of `encode_events` / `encode_rows` over `rows`, each (tuple, LSN) in
    /// order, read one at a time (an error reading row i is raised only after the rows
    /// before it were encoded, and never if one of them falls back).
    #[allow(clippy::type_complexity)]
    fn events_of<'py, T: AsTuple>(
        &self,
        py: Python<'py>,
        rows: impl Iterator<Item = PyResult<(T, u64)>>,
        ev: &Events<'_>,
    ) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyList>, Option<&'static str>)> {
        let deleting = ev.op == "d";
        let want_key = ev.key_header.is_some();
        let mut w = Written::new(py);
        // each row's Value record, then its Key record: one buffer for the run
        let mut records = Vec::new();
        for (i, row) in rows.enumerate() {
            let (raw, lsn) = row?;
            let tuple = raw.as_tuple();
            let toast = raw.toast();
            records.clear();
            let value_end =
                match self.encode_one(py, &tuple, want_key, lsn, toast.as_ref(), &mut records)? {
                    Ok(end) => end,
                    Err(why) => return Ok(w.stopped(Some(why))),
                };
            let (record, key) = records.split_at(value_end);
            let (before, after) = if deleting {
                (Some(record), None)
            } else {
                (None, Some(record))
            };
            let n = i as i64;
            let envelope = |out: &mut Vec<u8>| {
                write_envelope(
                    out,
                    before,
                    after,
                    &ev.source,
                    lsn as i64,
                    ev.total + n,
                    ev.order + n,
                    ev.op,
                    ev.ts_ns,
                )
            };
            w.push(py, ev.value_header, envelope, ev.key_header, key)?;
        }
        Ok(w.stopped(None))
    }
}

/// The `(keys, values)` lists a run's events go into, with one envelope buffer and one
/// key buffer for the whole run, cleared per event: each event's bytes are copied into
/// its PyBytes, so after the first events none allocates or grows them.
struct Written<'py> {
    keys: Bound<'py, PyList>,
    values: Bound<'py, PyList>,
    out: Vec<u8>,
    k: Vec<u8>,
}

impl<'py> Written<'py> {
    fn new(py: Python<'py>) -> Self {
        Written {
            keys: PyList::empty(py),
            values: PyList::empty(py),
            out: Vec::new(),
            k: Vec::new(),
        }
    }

    /// One event: `value_header` and the Envelope `envelope` writes behind it as its
    /// value, and the Key record `key` behind `key_header` as its key (None when no
    /// Key record is wanted).
    fn push(
        &mut self,
        py: Python<'py>,
        value_header: &[u8],
        envelope: impl FnOnce(&mut Vec<u8>),
        key_header: Option<&[u8]>,
        key: &[u8],
    ) -> PyResult<()> {
        self.out.clear();
        self.out.extend_from_slice(value_header);
        envelope(&mut self.out);
        self.values.append(PyBytes::new(py, &self.out))?;
        match key_header {
            Some(h) => {
                self.k.clear();
                self.k.extend_from_slice(h);
                self.k.extend_from_slice(key);
                self.keys.append(PyBytes::new(py, &self.k))
            }
            None => self.keys.append(py.None()),
        }
    }

    /// `(keys, values, reason)`: the events so far, and why the run stopped there.
    fn stopped<R>(self, reason: R) -> (Bound<'py, PyList>, Bound<'py, PyList>, R) {
        (self.keys, self.values, reason)
    }
}

/// A column's alignment in bytes must be 1, 2, 4 or 8 (attalign c, s, i, d).
pub(crate) fn check_align(name: &str, align: usize) -> PyResult<()> {
    if [1, 2, 4, 8].contains(&align) {
        Ok(())
    } else {
        Err(PyValueError::new_err(format!(
            "column {name}: alignment {align}"
        )))
    }
}

/// The typed errors a plan raises (SchemaMismatchError, DecodeError) and the table they
/// name: a plan's result, panics included, as the Python deformer would raise it.
pub(crate) struct RowErrors {
    pub(crate) relation: String,
    pub(crate) mismatch_error: Py<PyAny>,
    pub(crate) decode_error: Py<PyAny>,
}

impl RowErrors {
    /// `result` of a plan's call (inside catch_unwind) for the row at `lsn`: its value,
    /// or its RowError as the typed error with `lsn`, `relation` and `field`; a panic is
    /// the DecodeError "internal error in the native {what}".
    pub(crate) fn check<T>(
        &self,
        py: Python<'_>,
        result: std::thread::Result<Result<T, RowError>>,
        what: &str,
        lsn: u64,
    ) -> PyResult<T> {
        let (class, message, field) = match result {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(RowError::Mismatch { message, field })) => {
                (&self.mismatch_error, message, field)
            }
            Ok(Err(RowError::Decode { message, field })) => (&self.decode_error, message, field),
            Err(_) => (
                &self.decode_error,
                format!("internal error in the native {what}"),
                None,
            ),
        };
        let build = || -> PyResult<PyErr> {
            let kwargs = PyDict::new(py);
            kwargs.set_item("lsn", lsn)?;
            kwargs.set_item("relation", &self.relation)?;
            if let Some(f) = field {
                kwargs.set_item("field", f)?;
            }
            let exc = class.bind(py).call((message,), Some(&kwargs))?;
            Ok(PyErr::from_value(exc))
        };
        Err(build().unwrap_or_else(|e| e))
    }
}

/// A RawTuple's (natts, infomask, hoff, data), read through the `intern_names`.
pub(crate) fn raw_fields<'py>(
    raw: &Bound<'py, PyAny>,
    names: &[Bound<'py, pyo3::types::PyString>; 4],
) -> PyResult<(usize, u16, usize, Bound<'py, PyBytes>)> {
    let data = raw.getattr(&names[3])?.cast_into::<PyBytes>()?;
    Ok((
        raw.getattr(&names[0])?.extract()?,
        raw.getattr(&names[1])?.extract()?,
        raw.getattr(&names[2])?.extract()?,
        data,
    ))
}

/// The RawTuple attribute names `encode_events` reads, interned once.
pub(crate) fn intern_names(py: Python<'_>) -> [Bound<'_, pyo3::types::PyString>; 4] {
    [
        pyo3::intern!(py, "natts").clone(),
        pyo3::intern!(py, "infomask").clone(),
        pyo3::intern!(py, "hoff").clone(),
        pyo3::intern!(py, "data").clone(),
    ]
}

impl PyRowPlan {
    /// The Value (and with `want_key` the Key) record of one tuple appended to `out`
    /// (`Plan::encode_toasted_into`): Ok(where the Value record ends, the Key record
    /// after it), or Err(the fallback's reason); a panic turned into the DecodeError
    /// naming the table.
    fn encode_one<'a>(
        &self,
        py: Python<'_>,
        t: &Tuple<'a>,
        want_key: bool,
        lsn: u64,
        toast: Option<&Toast<'a>>,
        out: &mut Vec<u8>,
    ) -> PyResult<Result<usize, &'static str>> {
        let plan = &self.plan;
        let detach = t.data.len() >= DETACH_AT;
        let mut run = || {
            catch_unwind(AssertUnwindSafe(|| {
                plan.encode_toasted_into(t, want_key, toast, out)
            }))
        };
        let result = if detach { py.detach(run) } else { run() };
        self.errors.check(py, result, "row encoder", lsn)
    }
}

/// The `source` record and transaction block around a change's two varying fields: the
/// parts connectors.avro.native_rows builds once per transaction and table.
struct SourceParts<'a> {
    head: &'a [u8],
    sequence_head: &'a [u8],
    mid: &'a [u8],
    tail: &'a [u8],
    block_head: Option<&'a [u8]>,
}

impl<'a> SourceParts<'a> {
    /// The parts as `encode_events` takes them.
    fn of(parts: &'a SourceTuple) -> Self {
        SourceParts {
            head: &parts.0,
            sequence_head: &parts.1,
            mid: &parts.2,
            tail: &parts.3,
            block_head: parts.4.as_deref(),
        }
    }
}

/// Append one change event's Envelope value (after its wire header) to `out`.
#[allow(clippy::too_many_arguments)]
fn write_envelope(
    out: &mut Vec<u8>,
    before: Option<&[u8]>,
    after: Option<&[u8]>,
    parts: &SourceParts<'_>,
    lsn: i64,
    total: i64,
    order: i64,
    op: &str,
    ts_ns: i64,
) {
    let mut digits = [0u8; 20];
    let lsn_text = avro::decimal(lsn, &mut digits);
    for rec in [before, after] {
        match rec {
            None => out.push(avro::NULL_BRANCH),
            Some(r) => {
                out.push(avro::SECOND_BRANCH);
                out.extend_from_slice(r);
            }
        }
    }
    out.extend_from_slice(parts.head);
    // sequence: ["null", "string"], the JSON array text ending in this LSN
    out.push(avro::SECOND_BRANCH);
    let seq_len = parts.sequence_head.len() + lsn_text.len() + 2;
    avro::long(out, seq_len as i64);
    out.extend_from_slice(parts.sequence_head);
    out.extend_from_slice(lsn_text);
    out.extend_from_slice(b"\"]");
    out.extend_from_slice(parts.mid);
    out.push(avro::SECOND_BRANCH);
    avro::long(out, lsn);
    out.extend_from_slice(parts.tail);
    match parts.block_head {
        None => out.push(avro::NULL_BRANCH),
        Some(h) => {
            out.push(avro::SECOND_BRANCH);
            avro::long(out, (h.len() + lsn_text.len()) as i64);
            out.extend_from_slice(h);
            out.extend_from_slice(lsn_text);
            avro::long(out, total);
            avro::long(out, order);
        }
    }
    avro::bytes(out, op.as_bytes());
    for v in [ts_ns.div_euclid(1_000_000), ts_ns.div_euclid(1000), ts_ns] {
        out.push(avro::SECOND_BRANCH);
        avro::long(out, v);
    }
}

/// One change event's Envelope value, wire format included (see native_rows).
#[pyfunction]
#[pyo3(signature = (header, before, after, source_head, sequence_head, lsn, source_mid, source_tail, block_head, total, order, op, ts_ns))]
#[allow(clippy::too_many_arguments)]
pub fn envelope<'py>(
    py: Python<'py>,
    header: &[u8],
    before: Option<&[u8]>,
    after: Option<&[u8]>,
    source_head: &[u8],
    sequence_head: &[u8],
    lsn: i64,
    source_mid: &[u8],
    source_tail: &[u8],
    block_head: Option<&[u8]>,
    total: i64,
    order: i64,
    op: &str,
    ts_ns: i64,
) -> Bound<'py, PyBytes> {
    let mut out = Vec::with_capacity(
        header.len()
            + before.map_or(0, <[u8]>::len)
            + after.map_or(0, <[u8]>::len)
            + source_head.len()
            + source_mid.len()
            + 96,
    );
    out.extend_from_slice(header);
    let parts = SourceParts {
        head: source_head,
        sequence_head,
        mid: source_mid,
        tail: source_tail,
        block_head,
    };
    write_envelope(
        &mut out, before, after, &parts, lsn, total, order, op, ts_ns,
    );
    PyBytes::new(py, &out)
}

/// An Avro `long` (zig-zag varint), as fastavro writes it: the per-transaction parts of
/// the `source` record (connectors.avro.native_rows) are built from these.
#[pyfunction]
pub fn avro_long(py: Python<'_>, n: i64) -> Bound<'_, PyBytes> {
    let mut out = Vec::with_capacity(10);
    avro::long(&mut out, n);
    PyBytes::new(py, &out)
}

/// An Avro `string`: its UTF-8 length as a long, then the bytes.
#[pyfunction]
pub fn avro_string<'py>(py: Python<'py>, s: &str) -> Bound<'py, PyBytes> {
    let mut out = Vec::with_capacity(s.len() + 2);
    avro::bytes(&mut out, s.as_bytes());
    PyBytes::new(py, &out)
}

/// A TransactionMetadataValue record (schemas/transaction_value.avsc) behind `header`:
/// status, id, event_count (`["null", "long"]`), data_collections (`["null", array of
/// ["null", collection]]`, every item the record branch; written as fastavro writes an
/// array: one block of all items, then the zero block), ts_ms.
#[pyfunction]
#[pyo3(signature = (header, status, id, event_count, collections, ts_ms))]
pub fn transaction_value<'py>(
    py: Python<'py>,
    header: &[u8],
    status: &str,
    id: &str,
    event_count: Option<i64>,
    collections: Option<Vec<(String, i64)>>,
    ts_ms: i64,
) -> Bound<'py, PyBytes> {
    let mut out = Vec::with_capacity(header.len() + status.len() + id.len() + 32);
    out.extend_from_slice(header);
    avro::bytes(&mut out, status.as_bytes());
    avro::bytes(&mut out, id.as_bytes());
    match event_count {
        None => out.push(avro::NULL_BRANCH),
        Some(n) => {
            out.push(avro::SECOND_BRANCH);
            avro::long(&mut out, n);
        }
    }
    match collections {
        None => out.push(avro::NULL_BRANCH),
        Some(items) => {
            out.push(avro::SECOND_BRANCH);
            if !items.is_empty() {
                avro::long(&mut out, items.len() as i64);
                for (name, n) in &items {
                    out.push(avro::SECOND_BRANCH);
                    avro::bytes(&mut out, name.as_bytes());
                    avro::long(&mut out, *n);
                }
            }
            out.push(0); // the end of the array's blocks
        }
    }
    avro::long(&mut out, ts_ms);
    PyBytes::new(py, &out)
}
