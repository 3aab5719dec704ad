//! The PyO3 boundary of the snapshot's COPY rows: `service._native.CopyChunk`, and the
//! loop of `RowPlan.encode_copy` (glue::avro) over them.
//!
//! Receives: from connectors.tablesnap.chunks, the bytes of one whole
//! `COPY ... TO STDOUT (FORMAT binary)` stream (a snapshot chunk) and its row width;
//! from connectors.avro.native_rows (through `RowPlan.encode_copy`), the rows of a chunk
//! to publish, where each plan column sits in a row, and the Envelope's parts.
//! Hands on: `CopyChunk`, the stream split into rows (tablesnap::copy::parse), whose fields
//! Python reads only where it must (a chunk's cut, its key bounds, a row the Python path
//! encodes: `row`, `field`, `sizes`); `encode_copy_rows`, each row's Value and Key
//! records (tablesnap::copy::CopyPlan), or the first row's fallback reason or typed error.
//!
//! The GIL: a chunk is split, and its rows are encoded, with the GIL released (one
//! release per chunk, not per row): a reader thread parsing the next chunk, or the
//! worker's sink, runs meanwhile. Only building the result's `bytes` holds it.
//! A malformed stream is a ValueError with the parser's message (connectors.postgres.
//! copy_binary raises it as DecodeError with the table); a panic never crosses.

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::exceptions::{PyIndexError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use crate::output::plan::Plan;
use crate::tablesnap::copy::{self, Chunk, CopyPlan, RowScratch};
use crate::types::deform::RowError;

#[pyclass(module = "service._native", name = "CopyChunk", frozen)]
pub struct PyCopyChunk {
    /// The stream, kept whole: every field is an (offset, length) into it.
    data: Py<PyBytes>,
    chunk: Chunk,
}

#[pymethods]
impl PyCopyChunk {
    /// Split `data`, a whole COPY BINARY stream of rows of `ncols` fields.
    #[new]
    fn new(py: Python<'_>, data: Bound<'_, PyBytes>, ncols: usize) -> PyResult<Self> {
        let bytes = data.as_bytes();
        let parsed = py.detach(|| catch_unwind(AssertUnwindSafe(|| copy::parse(bytes, ncols))));
        match parsed {
            Ok(Ok(chunk)) => Ok(PyCopyChunk {
                data: data.unbind(),
                chunk,
            }),
            Ok(Err(e)) => Err(PyValueError::new_err(e.0)),
            Err(_) => Err(PyValueError::new_err(
                "internal error in the native COPY parser",
            )),
        }
    }

    fn __len__(&self) -> usize {
        self.chunk.len()
    }

    /// The number of fields of a row.
    #[getter]
    fn ncols(&self) -> usize {
        self.chunk.ncols
    }

    /// The stream's size in bytes.
    #[getter]
    fn nbytes(&self, py: Python<'_>) -> usize {
        self.data.bind(py).as_bytes().len()
    }

    /// The first `n` fields of row `i` (all with `n` None): bytes, or None for NULL.
    #[pyo3(signature = (i, n=None))]
    fn row<'py>(
        &self,
        py: Python<'py>,
        i: usize,
        n: Option<usize>,
    ) -> PyResult<Bound<'py, PyList>> {
        self.check_row(i)?;
        let data = self.data.bind(py).as_bytes();
        let n = n.unwrap_or(self.chunk.ncols).min(self.chunk.ncols);
        let out = PyList::empty(py);
        for f in self.chunk.row(data, i).take(n) {
            match f {
                None => out.append(py.None())?,
                Some((off, len)) => out.append(PyBytes::new(py, &data[off..off + len]))?,
            }
        }
        Ok(out)
    }

    /// Field `j` of row `i`.
    fn field<'py>(
        &self,
        py: Python<'py>,
        i: usize,
        j: usize,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        self.check_row(i)?;
        if j >= self.chunk.ncols {
            return Err(PyIndexError::new_err(format!(
                "field {j} of a row of {}",
                self.chunk.ncols
            )));
        }
        let data = self.data.bind(py).as_bytes();
        let f = self.chunk.field(data, i, j);
        Ok(f.map(|(off, len)| PyBytes::new(py, &data[off..off + len])))
    }

    /// Per row, the bytes of its non-NULL fields (what a chunk's byte budget counts).
    fn sizes(&self, py: Python<'_>) -> Vec<usize> {
        let data = self.data.bind(py).as_bytes();
        (0..self.chunk.len())
            .map(|r| self.chunk.row(data, r).flatten().map(|(_, n)| n).sum())
            .collect()
    }
}

impl PyCopyChunk {
    /// The number of fields of a row (the `ncols` getter, for Rust callers).
    pub fn ncols_of(&self) -> usize {
        self.chunk.ncols
    }

    fn check_row(&self, i: usize) -> PyResult<()> {
        if i >= self.chunk.len() {
            return Err(PyIndexError::new_err(format!(
                "row {i} of a chunk of {}",
                self.chunk.len()
            )));
        }
        Ok(())
    }
}

/// The records of a chunk's first rows, encoded ahead of their publication
/// (`RowPlan.prepare_copy`, on a snapshot reader's thread): row r's (value, key) records
/// for every r below `len()`, made with one table plan. The rows after are those the
/// encoder stopped at (a fallback or a malformed field, which `encode_copy` meets again
/// and reports at publication) or did not reach. Only the Envelope, which holds the
/// publication's markers, LSN and clock, is left to `encode_copy`.
///
/// The records sit end to end in one buffer (a chunk's worth, held until publication):
/// one allocation that goes back to the system when freed, where a pair of small ones
/// per row would stay in the reader thread's malloc arena.
#[pyclass(module = "service._native", name = "CopyRecords", frozen)]
pub struct PyCopyRecords {
    data: Vec<u8>,
    /// per row, where its Value record ends and where its Key record (after it) ends
    ends: Vec<(usize, usize)>,
    pub want_key: bool,
}

#[pymethods]
impl PyCopyRecords {
    fn __len__(&self) -> usize {
        self.ends.len()
    }
}

impl PyCopyRecords {
    /// No record (a table without a native COPY plan).
    pub fn empty(want_key: bool) -> Self {
        PyCopyRecords {
            data: Vec::new(),
            ends: Vec::new(),
            want_key,
        }
    }

    /// The number of rows held (`len()`, for Rust callers).
    pub fn len_of(&self) -> usize {
        self.ends.len()
    }

    /// Row `i`'s (Value record, Key record); `i` below `len_of()`.
    pub fn record(&self, i: usize) -> (&[u8], &[u8]) {
        let start = if i == 0 { 0 } else { self.ends[i - 1].1 };
        let (value_end, key_end) = self.ends[i];
        (&self.data[start..value_end], &self.data[value_end..key_end])
    }
}

/// `RowPlan.prepare_copy`'s work: every row of the chunk from the first, encoded with the
/// GIL released into one `PyCopyRecords`, up to the first row the encoder stops at (a
/// fallback or an error, which publication's `encode_copy` meets again and reports) or a
/// panic (the same).
pub fn prepare_copy_rows(
    py: Python<'_>,
    chunk: &PyCopyChunk,
    plan: &CopyPlan<'_>,
    want_key: bool,
) -> PyCopyRecords {
    let data = chunk.data.bind(py).as_bytes();
    let c = &chunk.chunk;
    let work = || {
        let mut out = PyCopyRecords {
            data: Vec::with_capacity(data.len()),
            ends: Vec::with_capacity(c.len()),
            want_key,
        };
        let _ = catch_unwind(AssertUnwindSafe(|| {
            let mut scratch = RowScratch::default();
            for r in 0..c.len() {
                match plan.encode_into(data, c, r, want_key, &mut scratch, &mut out.data) {
                    Ok(Ok(value_end)) => out.ends.push((value_end, out.data.len())),
                    Ok(Err(_)) | Err(_) => break,
                }
            }
        }));
        // a panic may have left a row half written: only whole rows count
        let whole = out.ends.last().map_or(0, |e| e.1);
        out.data.truncate(whole);
        out
    };
    py.detach(work)
}

/// What `encode_copy_rows` made of the rows it was given, in order: each encoded row's
/// (value, key) records, then, if it stopped early, why.
pub enum Stop {
    Done,
    Fallback(&'static str),
    Error(RowError),
}

/// The `CopyPlan` of `plan` for rows whose plan column `c` is field `fields[c]` (-1: none)
/// of a row of `ncols` fields; Err(reason) when the table is the Python path's.
pub fn copy_plan<'p>(
    plan: &'p Plan,
    fields: &[i64],
    ncols: usize,
) -> PyResult<Result<CopyPlan<'p>, String>> {
    if fields.len() != plan.columns.len() {
        return Err(PyValueError::new_err(format!(
            "{} field positions for {} columns",
            fields.len(),
            plan.columns.len()
        )));
    }
    let mut at = Vec::with_capacity(fields.len());
    for &f in fields {
        if f >= ncols as i64 {
            return Err(PyValueError::new_err(format!(
                "field position {f} in rows of {ncols}"
            )));
        }
        at.push(usize::try_from(f).ok());
    }
    Ok(copy::copy_plan(plan).map(|c| CopyPlan {
        plan,
        copy: c,
        fields: at,
    }))
}

/// The records of rows `rows` of the chunk, in order and end to end as `PyCopyRecords`
/// holds them, encoded with the GIL released until the first fallback or error
/// (`Stop`); a panic is the Err of catch_unwind.
pub fn encode_copy_rows(
    py: Python<'_>,
    chunk: &PyCopyChunk,
    plan: &CopyPlan<'_>,
    rows: &[usize],
    want_key: bool,
) -> std::thread::Result<(PyCopyRecords, Stop)> {
    let data = chunk.data.bind(py).as_bytes();
    let c = &chunk.chunk;
    let work = || {
        catch_unwind(AssertUnwindSafe(|| {
            let mut out = PyCopyRecords::empty(want_key);
            let mut scratch = RowScratch::default();
            for &r in rows {
                if r >= c.len() {
                    return (
                        out,
                        Stop::Error(RowError::Decode {
                            message: format!("row {r} of a chunk of {}", c.len()),
                            field: None,
                        }),
                    );
                }
                match plan.encode_into(data, c, r, want_key, &mut scratch, &mut out.data) {
                    Ok(Ok(value_end)) => out.ends.push((value_end, out.data.len())),
                    Ok(Err(why)) => return (out, Stop::Fallback(why)),
                    Err(e) => {
                        let whole = out.ends.last().map_or(0, |e| e.1);
                        out.data.truncate(whole); // the row the error cut short
                        return (out, Stop::Error(e));
                    }
                }
            }
            (out, Stop::Done)
        }))
    };
    if rows.len() > 8 {
        py.detach(work)
    } else {
        work()
    }
}
