//! The PyO3 boundary of the text writer: `service._native.TextPlan`.
//!
//! Receives: from service.output.native_text, once per table definition, its columns
//! as tuples `(name, attlen, align, dropped, has_missing, head, kind)` (head and kind ""
//! for a column that does not print: dropped, or left out of the relation; a domain's
//! kind `domain:<its base type's kind>`, printed quoted whatever the kind), the
//! qualified table name and the SchemaMismatchError and DecodeError classes, and for
//! each enum column (by index) its labels by pg_enum OID, and for each array column (by
//! index) its element `(kind, type OID, typlen, typalign)`, for each composite column
//! its type OID and fields (glue::avro::CompositeSpec), for each column added with a
//! default its attmissingval as the stored datum (glue::avro::missing_datum), and the
//! catalog name cache (`NameCache`, glue::names) when a column is a reg* type or
//! aclitem, an array of one, or a composite with such a field, nested too (a plan
//! without it is a ValueError); then per
//! run of rows of one table and op (`lines`) the RawTuples, their LSNs, where to start
//! in them (past a row the Python path wrote), the line's prefix (`table s.t: INSERT:`)
//! and whether NULLs are skipped (a DELETE's old key); or (`rows_lines`) the same for
//! the rows of a `HeapRows` (glue::reorder), read in place.
//! Hands on: `(lines, reason)`: the test_decoding line of each row from `start` up to the first one
//! that is the Python path's (output::text), and why that one falls back (None when all
//! were written). A bad tuple raises SchemaMismatchError / DecodeError with the LSN,
//! relation and field the Python deformer gives; a panic becomes a DecodeError naming
//! the table, never crossing the boundary. Rows are small and each line is built as a
//! Python str under the GIL, so the GIL is held throughout (see glue::avro on why a short
//! row is not worth releasing it for).

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};

use crate::glue::avro::{
    check_align, intern_names, missing_datum, named_composite, raw_fields, AsTuple, CompositeSpec,
    RowErrors,
};
use crate::glue::names::PyNameCache;
use crate::glue::reorder::PyHeapRows;
use crate::output::kind::TextKind;
use crate::output::text::{Printed, TextElem, TextPlan};
use std::collections::HashMap;
use std::sync::Arc;

use crate::output::plan::{Column, Labels, Plan};

type TextSpec = (String, i16, usize, bool, bool, String, String);
/// An array column's element: (kind, type OID, typlen, typalign in bytes).
type ElemSpec = (String, u32, i16, usize);

#[pyclass(module = "service._native", name = "TextPlan", frozen)]
pub struct PyTextPlan {
    plan: TextPlan,
    errors: RowErrors,
}

#[pymethods]
impl PyTextPlan {
    #[new]
    #[pyo3(signature = (columns, relation, mismatch_error, decode_error, labels=None, elements=None, composites=None, missing=None, names=None))]
    #[allow(clippy::too_many_arguments)] // the plan's parts, as the glue compiles them
    fn new(
        columns: Vec<TextSpec>,
        relation: String,
        mismatch_error: Py<PyAny>,
        decode_error: Py<PyAny>,
        labels: Option<HashMap<usize, Labels>>,
        elements: Option<HashMap<usize, ElemSpec>>,
        composites: Option<HashMap<usize, CompositeSpec>>,
        missing: Option<HashMap<usize, Vec<u8>>>,
        names: Option<&Bound<'_, PyNameCache>>,
    ) -> PyResult<Self> {
        let names = names.map(|n| Arc::clone(&n.get().names));
        let mut labels = labels.unwrap_or_default();
        let mut elements = elements.unwrap_or_default();
        let mut composites = composites.unwrap_or_default();
        let mut missing = missing.unwrap_or_default();
        let mut layout = Vec::with_capacity(columns.len());
        let mut printed = Vec::with_capacity(columns.len());
        for (name, attlen, align, dropped, has_missing, head, kind) in columns {
            check_align(&name, align)?;
            let shown = if kind.is_empty() || dropped {
                None
            } else {
                // a domain's column: its base type's kind, quoted (Printed::quoted)
                let (quoted, kind) = match kind.strip_prefix("domain:") {
                    Some(base) => (true, base.to_string()),
                    None => (false, kind),
                };
                let k = TextKind::parse(&kind).ok_or_else(|| {
                    PyValueError::new_err(format!("column {name}: unknown kind {kind:?}"))
                })?;
                if k.attlen() != attlen {
                    return Err(PyValueError::new_err(format!(
                        "column {name}: kind {kind} needs attlen {}, not {attlen}",
                        k.attlen()
                    )));
                }
                let elem = match elements.remove(&layout.len()) {
                    Some((ekind, oid, eattlen, ealign)) if k == TextKind::Array => {
                        check_align(&name, ealign)?;
                        let ek = TextKind::parse(&ekind)
                            .filter(|e| *e != TextKind::Array && e.attlen() == eattlen)
                            .ok_or_else(|| {
                                PyValueError::new_err(format!(
                                    "column {name}: bad element kind {ekind:?} ({eattlen})"
                                ))
                            })?;
                        Some(TextElem {
                            kind: ek,
                            oid,
                            attlen: eattlen,
                            align: ealign,
                        })
                    }
                    Some(_) | None if k == TextKind::Array => {
                        return Err(PyValueError::new_err(format!(
                            "column {name}: an array needs its element"
                        )))
                    }
                    _ => None,
                };
                Some(Printed {
                    head,
                    kind: k,
                    elem,
                    quoted,
                })
            };
            let composite = match composites.remove(&layout.len()) {
                Some(spec) => Some(named_composite(&name, spec, names.as_ref())?),
                None => None,
            };
            let datum = missing_datum(&name, has_missing, missing.remove(&layout.len()))?;
            // reg* and aclitem (or an array of them) print catalog names: the cache
            let named = shown
                .as_ref()
                .is_some_and(|p| p.kind.named() || p.elem.is_some_and(|e| e.kind.named()));
            if named && names.is_none() {
                return Err(PyValueError::new_err(format!(
                    "column {name}: its values need the catalog names (names=)"
                )));
            }
            layout.push(Column {
                name,
                attlen,
                align,
                dropped,
                has_missing,
                missing: datum,
                kind: None,
                optional: true,
                read: shown.is_some(),
                labels: labels.remove(&layout.len()).unwrap_or_default(),
                elem: None,
                composite,
                special_dropped: Default::default(),
                placeholder: None,
                names: if named { names.clone() } else { None },
            });
            printed.push(shown);
        }
        Ok(PyTextPlan {
            plan: TextPlan {
                layout: Plan {
                    columns: layout,
                    key: vec![],
                },
                printed,
            },
            errors: RowErrors {
                relation,
                mismatch_error,
                decode_error,
            },
        })
    }

    /// `(lines, reason)` of a run of rows; see the module docstring.
    #[pyo3(signature = (tuples, lsns, start, prefix, skip_nulls))]
    fn lines<'py>(
        &self,
        py: Python<'py>,
        tuples: &Bound<'py, PyList>,
        lsns: &Bound<'py, PyList>,
        start: usize,
        prefix: &str,
        skip_nulls: bool,
    ) -> PyResult<(Bound<'py, PyList>, Option<&'static str>)> {
        if lsns.len() != tuples.len() {
            return Err(PyValueError::new_err(format!(
                "{} tuples but {} LSNs",
                tuples.len(),
                lsns.len()
            )));
        }
        let names = intern_names(py);
        let rows = (start..tuples.len()).map(|k| {
            let raw = tuples.get_item(k)?;
            let lsn: u64 = lsns.get_item(k)?.extract()?;
            Ok((raw_fields(&raw, &names)?, lsn))
        });
        self.lines_of(py, rows, prefix, skip_nulls)
    }

    /// `lines` of the rows of a `HeapRows` window (their tuples and LSNs), read in
    /// place, from row `start` of the window: the same `(lines, reason)`.
    #[pyo3(signature = (rows, start, prefix, skip_nulls))]
    fn rows_lines<'py>(
        &self,
        py: Python<'py>,
        rows: &Bound<'py, PyHeapRows>,
        start: usize,
        prefix: &str,
        skip_nulls: bool,
    ) -> PyResult<(Bound<'py, PyList>, Option<&'static str>)> {
        let rows = rows.get().tuples(py)?.skip(start).map(Ok);
        self.lines_of(py, rows, prefix, skip_nulls)
    }
}

impl PyTextPlan {
    /// The loop of `lines` / `rows_lines` over `rows`, each (tuple, LSN) in order, read
    /// one at a time: the line of each up to the first that falls back.
    fn lines_of<'py, T: AsTuple>(
        &self,
        py: Python<'py>,
        rows: impl Iterator<Item = PyResult<(T, u64)>>,
        prefix: &str,
        skip_nulls: bool,
    ) -> PyResult<(Bound<'py, PyList>, Option<&'static str>)> {
        let out = PyList::empty(py);
        let mut line = String::with_capacity(256);
        for row in rows {
            let (raw, lsn) = row?;
            let tuple = raw.as_tuple();
            line.clear();
            line.push_str(prefix);
            let plan = &self.plan;
            let result = catch_unwind(AssertUnwindSafe(|| {
                plan.tuple(&mut line, &tuple, skip_nulls)
            }));
            match self.errors.check(py, result, "text writer", lsn)? {
                None => out.append(PyString::new(py, &line))?,
                Some(why) => return Ok((out, Some(why))),
            }
        }
        Ok((out, None))
    }
}
