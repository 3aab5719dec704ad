//! The rows of an insert run kept in Rust: `service._native.HeapRows`.
//!
//! Mirrors (PostgreSQL): the ReorderBufferChange / HeapTuple of each plain insert that
//! DecodeInsert and DecodeMultiInsert queue for one transaction and relation (the rows
//! of a run, `py::Run`): per row its LSN, its ctid (block, offset), its xl_heap_header
//! (t_infomask2, t_infomask, t_hoff) and the tuple bytes after it, and
//! `clear_toast_afterwards`; and, among them, the TOAST chunk inserts DecodeInsert
//! queues as changes of their own (XLH_INSERT_ON_TOAST_RELATION: each a change the
//! size ReorderBufferChangeSize gives any insert, which ReorderBufferToastAppendChunk
//! collects at replay for the next main-table row, in an insert or update run); and,
//! among a delete or update run's rows, the DELETEs that logged no old tuple (bare
//! deletes: DecodeDelete's change with no tuple, ReorderBufferChangeSize's bare size),
//! all of one other relation, flagged as chunks are: a toast relation's chunk deletes,
//! which ReorderBufferProcessTXN does not decode (`mains` gives a delete run without
//! them, `toast_replay` passes over them), or a table's without a replica identity.
//! Python reference: the `HeapChange`s
//! (with their `RawTuple`s) that `PyHeapDecoder::events_py` builds for those records
//! (service.decode.events).
//!
//! Receives: from the armed reader's walk (`py::PyWalReader::build`), per record of a
//! run, its LSN, block 0's block number and the parsed events of a runnable record
//! (no origin; plain inserts, with no old tuple, either into the run's relation or one
//! chunk insert into its toast relation; or one UPDATE logging only its new tuple, or
//! one DELETE logging only its old tuple or key, or one logging none (bare):
//! DecodeUpdate's and DecodeDelete's change, each row holding the one tuple its change
//! carries, a bare delete none);
//! each tuple's data bytes are copied out of the record into one buffer of the run.
//! Then, at the run's end, its xid, the RelFileLocator objects of its relation and of
//! its toast relation if it has chunks (the reader's cached ones, as in its
//! HeapChanges) and the heap decoder whose classes build them.
//! Hands on: one frozen `HeapRows` per run (shared, by `Arc`, with every `slice` of it,
//! each a window [lo, hi) of the rows). `change(i)` / `changes()` build the very
//! `HeapChange` objects `events_py` builds for those rows, only when asked; the
//! encoders (`glue::avro::encode_rows`, `glue::text::rows_lines`) read the tuples in place
//! (`tuples`), with no Python object per row. When the reorder buffer spills a window,
//! `dump` lays its rows out as bytes (`reorder::run`: one spill record for all of them) and
//! `HeapRows.load` (`load_rows` here) makes an equal HeapRows of them again,
//! with the locator objects and decoder it is handed; it refuses any input that is not
//! such a dump with the decoder's DecodeError. A window holding TOAST chunk rows
//! (`chunks` > 0) is not read by the encoders (`tuples` refuses it): the replay collects
//! its chunks (`toast_replay`); its dump keeps which rows are chunks, and its load
//! takes the toast relation's locator for them.
//!
//! A panic never crosses the boundary: it becomes the heap decoder's DecodeError at the
//! window's first LSN (in `load_rows`, with the xid). No `unsafe` here: the objects are
//! built by `glue::slots`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use pyo3::exceptions::{PyIndexError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use pyo3::IntoPyObjectExt;

use crate::decode::heap::{self, Event, Kind, Source};
use crate::glue::decode::PyHeapDecoder;
use crate::reorder::run::{self, OldTuple, Row, RowKind};
use crate::reorder::toast::{self, ToastHash};
use crate::types::deform::Tuple;

/// The rows of a run while the walk gathers them.
#[derive(Default)]
pub(crate) struct RowsBuilder {
    rows: Vec<Row>,
    data: Vec<u8>,
    /// Per row, whether it is a TOAST chunk insert; empty while no row is one (then
    /// every row is a main-table row).
    chunk: Vec<bool>,
}

impl RowsBuilder {
    /// Append the rows of one runnable record logged at `lsn`, whose block reference 0
    /// is block `block` with data `block0`, and whose main data is `main`: its plain
    /// inserts (new tuple, no old one), or its one UPDATE (its new tuple, and its old
    /// tuple or key after it when it logged one), or its one DELETE that logs only an
    /// old tuple (or key). Any other event is an error (the caller only passes runnable
    /// ones).
    pub(crate) fn push_record(
        &mut self,
        lsn: u64,
        block: u32,
        events: &[Event],
        main: &[u8],
        block0: &[u8],
    ) -> Result<(), &'static str> {
        // A tuple's bytes, from whichever part of the record holds them.
        let bytes_of = |t: &heap::Tuple, what: &'static str| {
            match t.source {
                Source::Main => main,
                Source::Block0 => block0,
            }
            .get(t.data.clone())
            .ok_or(what)
        };
        for ev in events {
            // `chunk`: a TOAST chunk insert, or a DELETE that logged no old tuple (a bare
            // delete, which only a delete or update run takes: a chunk row, no tuple)
            let (kind, offset, t, clear_toast_afterwards, chunk) = match ev {
                Event::Change {
                    kind: Kind::Insert,
                    offset,
                    new_tuple: Some(t),
                    old_tuple: None,
                    old_is_key: false,
                    clear_toast_afterwards,
                    on_toast_relation,
                } => (
                    RowKind::Insert,
                    offset,
                    Some(t),
                    clear_toast_afterwards,
                    *on_toast_relation,
                ),
                Event::Change {
                    kind: Kind::Update,
                    offset,
                    new_tuple: Some(t),
                    old_tuple,
                    old_is_key,
                    clear_toast_afterwards,
                    on_toast_relation: false,
                } => {
                    // its old tuple or key, when it logged one, after the new tuple
                    let old = old_tuple.as_ref().map(|o| OldTuple {
                        natts: o.natts,
                        infomask: o.infomask,
                        infomask2: o.infomask2,
                        hoff: o.hoff,
                        is_key: *old_is_key,
                        len: o.data.len(),
                    });
                    (
                        RowKind::Update { old },
                        offset,
                        Some(t),
                        clear_toast_afterwards,
                        false,
                    )
                }
                Event::Change {
                    kind: Kind::Delete,
                    offset,
                    new_tuple: None,
                    old_tuple: Some(t),
                    old_is_key,
                    clear_toast_afterwards,
                    on_toast_relation: false,
                } => (
                    RowKind::Delete {
                        old_is_key: *old_is_key,
                    },
                    offset,
                    Some(t),
                    clear_toast_afterwards,
                    false,
                ),
                Event::Change {
                    kind: Kind::Delete,
                    offset,
                    new_tuple: None,
                    old_tuple: None,
                    old_is_key: false,
                    clear_toast_afterwards,
                    on_toast_relation: false,
                } => (
                    RowKind::Delete { old_is_key: false },
                    offset,
                    None,
                    clear_toast_afterwards,
                    true,
                ),
                _ => return Err("a run row that is not a plain insert, update or delete"),
            };
            if chunk && self.chunk.is_empty() {
                self.chunk = vec![false; self.rows.len()];
            }
            if !self.chunk.is_empty() {
                self.chunk.push(chunk);
            }
            let header = t.map_or((0, 0, 0, 0), |t| (t.natts, t.infomask, t.infomask2, t.hoff));
            if let Some(t) = t {
                let bytes = bytes_of(t, "an insert run row's tuple lies outside its record")?;
                self.data.extend_from_slice(bytes);
            }
            if let Event::Change {
                old_tuple: Some(o),
                kind: Kind::Update,
                ..
            } = ev
            {
                let old = bytes_of(o, "an update run row's old tuple lies outside its record")?;
                self.data.extend_from_slice(old);
            }
            self.rows.push(Row {
                lsn,
                end: self.data.len(),
                block,
                offset: *offset,
                natts: header.0,
                infomask: header.1,
                infomask2: header.2,
                hoff: header.3,
                clear_toast_afterwards: *clear_toast_afterwards,
                kind,
            });
        }
        Ok(())
    }

    /// The `HeapRows` of all gathered rows, of transaction `xid` into `locator`, its
    /// chunk rows (if any) into `toast`.
    pub(crate) fn finish<'py>(
        self,
        py: Python<'py>,
        xid: u32,
        locator: Py<PyAny>,
        toast: Option<Py<PyAny>>,
        decoder: Py<PyHeapDecoder>,
    ) -> PyResult<Bound<'py, PyHeapRows>> {
        let chunks = Chunks::of(self.chunk, toast).map_err(|()| {
            PyValueError::new_err("an insert run with chunk rows and no toast relation")
        })?;
        let shared = Shared {
            rows: self.rows,
            data: self.data,
            xid,
            locator,
            chunks,
            decoder,
        };
        Bound::new(py, PyHeapRows::whole(shared))
    }
}

/// `HeapRows.load`: the HeapRows of a `HeapRows.dump()` (`reorder::run::load`) of
/// transaction `xid`, into `locator`, its TOAST chunk rows (if any) into `toast`, built
/// by `decoder`; any input that is not such a dump, or one with chunk rows and no
/// `toast` (or a panic), is the decoder's DecodeError with the xid and what LSN is known.
fn load_rows(
    decoder: &Bound<'_, PyHeapDecoder>,
    data: &[u8],
    xid: u32,
    locator: Py<PyAny>,
    toast: Option<Py<PyAny>>,
) -> PyResult<PyHeapRows> {
    let py = decoder.py();
    let refuse = |message: &str, lsn: Option<u64>| {
        decoder
            .borrow()
            .decode_error_of(py, message, lsn, Some(xid))
    };
    let loaded = match catch_unwind(|| run::load(data)) {
        Ok(Ok(loaded)) => loaded,
        Ok(Err(e)) => return Err(refuse(&e.message, e.lsn)),
        Err(_) => return Err(refuse("internal error loading native heap rows", None)),
    };
    let lsn = loaded.rows.first().map(|r| r.lsn);
    if loaded.xid != xid {
        return Err(refuse(
            &format!(
                "insert run dump of xid {} read back for xid {xid}",
                loaded.xid
            ),
            lsn,
        ));
    }
    let chunks = Chunks::of(loaded.chunk, toast).map_err(|()| {
        refuse(
            "insert run dump with TOAST chunk rows read back without its toast relation",
            lsn,
        )
    })?;
    Ok(PyHeapRows::whole(Shared {
        rows: loaded.rows,
        data: loaded.data,
        xid,
        locator,
        chunks,
        decoder: decoder.clone().unbind(),
    }))
}

/// The TOAST chunk rows of a run that has any.
struct Chunks {
    /// The RelFileLocator object of the toast relation every chunk row is in.
    toast: Py<PyAny>,
    /// Per row of the run (as long as `Shared::rows`), whether it is a chunk.
    chunk: Vec<bool>,
}

impl Chunks {
    /// The chunk rows of a run whose rows `chunk` flags (empty: none is a chunk), into
    /// `toast`: None without chunk rows; Err when there are some and no `toast`.
    fn of(chunk: Vec<bool>, toast: Option<Py<PyAny>>) -> Result<Option<Chunks>, ()> {
        match (chunk.is_empty(), toast) {
            (true, _) => Ok(None),
            (false, Some(toast)) => Ok(Some(Chunks { toast, chunk })),
            (false, None) => Err(()),
        }
    }
}

/// What every window of one run shares.
struct Shared {
    rows: Vec<Row>,
    data: Vec<u8>,
    xid: u32,
    locator: Py<PyAny>,
    /// None when no row of the run is a TOAST chunk.
    chunks: Option<Chunks>,
    decoder: Py<PyHeapDecoder>,
}

impl Shared {
    /// Where row `k`'s tuple data starts in `data`.
    fn start(&self, k: usize) -> usize {
        match k.checked_sub(1) {
            Some(prev) => self.rows[prev].end,
            None => 0,
        }
    }

    /// Row `k`'s tuple's data (an insert's or update's new tuple, a delete's old one).
    fn tuple_of(&self, k: usize) -> &[u8] {
        let old = self.rows[k].kind.old().map_or(0, |o| o.len);
        &self.data[self.start(k)..self.rows[k].end - old]
    }

    /// Row `k`'s old tuple (an update's that logged one) and its data.
    fn old_of(&self, k: usize) -> Option<(OldTuple, &[u8])> {
        let o = self.rows[k].kind.old()?;
        let end = self.rows[k].end;
        Some((o, &self.data[end - o.len..end]))
    }

    /// How many of rows [lo, hi) hold an old tuple too.
    fn olds_in(&self, lo: usize, hi: usize) -> usize {
        self.rows[lo..hi]
            .iter()
            .filter(|r| r.kind.old().is_some())
            .count()
    }

    /// Whether row `k` is a TOAST chunk insert.
    fn is_chunk(&self, k: usize) -> bool {
        self.chunks.as_ref().is_some_and(|c| c.chunk[k])
    }

    /// Whether row `k` is a bare delete (a chunk row that is a DELETE: no tuple).
    fn is_bare(&self, k: usize) -> bool {
        self.is_chunk(k) && matches!(self.rows[k].kind, RowKind::Delete { .. })
    }

    /// How many of rows [lo, hi) are bare deletes.
    fn bares_in(&self, lo: usize, hi: usize) -> usize {
        (lo..hi).filter(|&k| self.is_bare(k)).count()
    }

    /// How many of rows [lo, hi) are chunk rows (TOAST chunk inserts, bare deletes).
    fn chunks_in(&self, lo: usize, hi: usize) -> usize {
        self.chunks
            .as_ref()
            .map_or(0, |c| c.chunk[lo..hi].iter().filter(|&&b| b).count())
    }
}

#[pyclass(module = "service._native", name = "HeapRows", frozen)]
pub struct PyHeapRows {
    shared: Arc<Shared>,
    lo: usize,
    hi: usize,
}

impl PyHeapRows {
    /// The window of all of `shared`'s rows.
    fn whole(shared: Shared) -> Self {
        let hi = shared.rows.len();
        PyHeapRows {
            shared: Arc::new(shared),
            lo: 0,
            hi,
        }
    }

    /// The window's rows as the encoders read them: (tuple, LSN), in order. Only for a
    /// window without TOAST chunk rows (`chunks` 0: the replay hands no other to an
    /// encoder) and without old tuples (`olds` 0: an UPDATE that logged its old tuple
    /// is converted row by row); any other is the decoder's DecodeError at its first
    /// LSN, since its chunks are not main-table rows and its old tuples would be lost.
    pub(crate) fn tuples(
        &self,
        py: Python<'_>,
    ) -> PyResult<impl Iterator<Item = (Tuple<'_>, u64)> + '_> {
        let s = &*self.shared;
        let why = if s.chunks_in(self.lo, self.hi) > 0 {
            Some("an insert run window with TOAST chunk rows read as main-table rows")
        } else if s.olds_in(self.lo, self.hi) > 0 {
            Some("an update run window with old tuples read as new tuples alone")
        } else {
            None
        };
        if let Some(why) = why {
            let lsn = s.rows.get(self.lo).map_or(0, |r| r.lsn);
            return Err(s.decoder.borrow(py).decode_error(py, why, lsn));
        }
        Ok((self.lo..self.hi).map(move |k| {
            let r = &s.rows[k];
            let tuple = Tuple {
                natts: usize::from(r.natts),
                infomask: r.infomask,
                hoff: usize::from(r.hoff),
                data: s.tuple_of(k),
            };
            (tuple, r.lsn)
        }))
    }

    /// The window's rows as the update-pair encoder reads them: (new tuple, old tuple,
    /// whether the old one is only the key, LSN), in order. Only for a window whose
    /// every row holds an UPDATE's old tuple (`olds` == len: a run of such updates);
    /// any other is the decoder's DecodeError at its first LSN.
    pub(crate) fn pairs(
        &self,
        py: Python<'_>,
    ) -> PyResult<impl Iterator<Item = (Tuple<'_>, Tuple<'_>, bool, u64)> + '_> {
        let s = &*self.shared;
        if s.olds_in(self.lo, self.hi) != self.len() {
            let lsn = s.rows.get(self.lo).map_or(0, |r| r.lsn);
            return Err(s.decoder.borrow(py).decode_error(
                py,
                "a run window with rows that hold no old tuple read as update pairs",
                lsn,
            ));
        }
        Ok((self.lo..self.hi).filter_map(move |k| {
            let r = &s.rows[k];
            let (o, old) = s.old_of(k)?;
            let new = Tuple {
                natts: usize::from(r.natts),
                infomask: r.infomask,
                hoff: usize::from(r.hoff),
                data: s.tuple_of(k),
            };
            let old_tuple = Tuple {
                natts: usize::from(o.natts),
                infomask: o.infomask,
                hoff: usize::from(o.hoff),
                data: old,
            };
            Some((new, old_tuple, o.is_key, r.lsn))
        }))
    }

    fn len(&self) -> usize {
        self.hi - self.lo
    }

    /// `f()`, a panic in it turned into the DecodeError at the window's first LSN.
    fn guarded<T>(&self, py: Python<'_>, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
        match catch_unwind(AssertUnwindSafe(f)) {
            Ok(r) => r,
            Err(_) => {
                let s = &*self.shared;
                let lsn = s.rows.get(self.lo).map_or(0, |r| r.lsn);
                Err(s.decoder.borrow(py).decode_error(
                    py,
                    "internal error in the native heap rows",
                    lsn,
                ))
            }
        }
    }

    /// A window-relative index `i` as an absolute row, if 0 <= i < len.
    fn row_index(&self, i: isize) -> Option<usize> {
        usize::try_from(i)
            .ok()
            .filter(|&i| i < self.len())
            .map(|i| self.lo + i)
    }

    /// A window-relative bound (0 <= i <= len), else the ValueError naming `what`.
    fn bound(&self, i: isize, what: &str) -> PyResult<usize> {
        usize::try_from(i)
            .ok()
            .filter(|&i| i <= self.len())
            .ok_or_else(|| {
                PyValueError::new_err(format!("HeapRows {what} {i} outside [0, {}]", self.len()))
            })
    }

    fn lsn_at(&self, k: Option<usize>) -> PyResult<u64> {
        k.map(|k| self.shared.rows[k].lsn)
            .ok_or_else(|| PyValueError::new_err("an empty HeapRows has no LSN"))
    }
}

/// Builds the window's HeapChanges, sharing the objects consecutive rows share (the
/// xid always; the LSN and block within a record), as `events_py` shares them.
struct Materializer<'a, 'py> {
    py: Python<'py>,
    rows: &'a PyHeapRows,
    decoder: PyRef<'py, PyHeapDecoder>,
    xid: Bound<'py, PyAny>,
    locator: Bound<'py, PyAny>,
    none: Bound<'py, PyAny>,
    lsn: Option<(u64, Bound<'py, PyAny>)>,
    block: Option<(u32, Bound<'py, PyAny>)>,
}

impl<'a, 'py> Materializer<'a, 'py> {
    fn new(py: Python<'py>, rows: &'a PyHeapRows) -> PyResult<Self> {
        let s = &*rows.shared;
        Ok(Materializer {
            py,
            rows,
            decoder: s.decoder.bind(py).borrow(),
            xid: s.xid.into_bound_py_any(py)?,
            locator: s.locator.bind(py).clone(),
            none: py.None().into_bound(py),
            lsn: None,
            block: None,
        })
    }

    /// The HeapChange of absolute row `k`.
    fn change(&mut self, k: usize) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        let s = &*self.rows.shared;
        let r = s.rows[k];
        let lsn = match &self.lsn {
            Some((v, obj)) if *v == r.lsn => obj.clone(),
            _ => {
                let obj = r.lsn.into_bound_py_any(py)?;
                self.lsn = Some((r.lsn, obj.clone()));
                obj
            }
        };
        let block = match &self.block {
            Some((v, obj)) if *v == r.block => obj.clone(),
            _ => {
                let obj = r.block.into_bound_py_any(py)?;
                self.block = Some((r.block, obj.clone()));
                obj
            }
        };
        let chunk = s.is_chunk(k);
        let locator = match (&s.chunks, chunk) {
            (Some(c), true) => c.toast.bind(py).clone(),
            _ => self.locator.clone(),
        };
        if s.is_bare(k) {
            // DecodeDelete's change without an old tuple: no tuple at all
            return self.decoder.change_py(
                py,
                lsn,
                self.xid.clone(),
                Kind::Delete,
                locator,
                block,
                r.offset,
                None,
                None,
                false,
                r.clear_toast_afterwards,
                false,
                self.none.clone(),
            );
        }
        let tuple = self.decoder.raw_tuple_py(
            py,
            r.natts,
            r.infomask,
            r.infomask2,
            r.hoff,
            s.tuple_of(k),
        )?;
        let old = match s.old_of(k) {
            Some((o, data)) => Some(self.decoder.raw_tuple_py(
                py,
                o.natts,
                o.infomask,
                o.infomask2,
                o.hoff,
                data,
            )?),
            None => None,
        };
        // The row's tuple is an insert's or update's new one, a delete's old one.
        let (kind, new, old, old_is_key) = match r.kind {
            RowKind::Insert => (Kind::Insert, Some(tuple), None, false),
            RowKind::Update { old: o } => {
                (Kind::Update, Some(tuple), old, o.is_some_and(|o| o.is_key))
            }
            RowKind::Delete { old_is_key } => (Kind::Delete, None, Some(tuple), old_is_key),
        };
        self.decoder.change_py(
            py,
            lsn,
            self.xid.clone(),
            kind,
            locator,
            block,
            r.offset,
            new,
            old,
            old_is_key,
            r.clear_toast_afterwards,
            chunk,
            self.none.clone(),
        )
    }
}

#[pymethods]
impl PyHeapRows {
    /// The `HeapRows` `HeapRows.dump()` gave `data` for, of transaction `xid` into the
    /// relation `locator` (the object its HeapChanges are to hold), its events built by
    /// `decoder`: equal rows, the same `changes()`. Anything else (damaged, short,
    /// trailing, another version, another xid) is the decoder's DecodeError, with the
    /// xid and, once the rows are read, an LSN.
    #[staticmethod]
    #[pyo3(signature = (decoder, data, xid, locator, toast=None))]
    fn load(
        decoder: &Bound<'_, PyHeapDecoder>,
        data: &[u8],
        xid: u32,
        locator: Py<PyAny>,
        toast: Option<Py<PyAny>>,
    ) -> PyResult<PyHeapRows> {
        load_rows(decoder, data, xid, locator, toast)
    }

    /// The RelFileLocator of the run's toast relation (the object its chunk rows'
    /// HeapChanges hold), or None for a run without chunk rows.
    #[getter]
    fn toast_locator<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyAny>> {
        self.shared
            .chunks
            .as_ref()
            .map(|c| c.toast.bind(py).clone())
    }

    fn __len__(&self) -> usize {
        self.len()
    }

    /// The change kind of the rows (`service.decode.events.ChangeKind`'s order: 0
    /// INSERT, 1 UPDATE, 2 DELETE): a run's main rows are all of one kind, that of its
    /// first row that is not a chunk row (of a window of chunk rows only, its first
    /// row's: a chunk insert's INSERT, a bare delete's DELETE). An empty window is a
    /// ValueError.
    #[getter]
    fn kind(&self) -> PyResult<u8> {
        let s = &*self.shared;
        let first = (self.lo..self.hi)
            .find(|&k| !s.is_chunk(k))
            .or((self.lo < self.hi).then_some(self.lo));
        let r = first
            .map(|k| &s.rows[k])
            .ok_or_else(|| PyValueError::new_err("an empty HeapRows has no kind"))?;
        Ok(match r.kind {
            RowKind::Insert => Kind::Insert as u8,
            RowKind::Update { .. } => Kind::Update as u8,
            RowKind::Delete { .. } => Kind::Delete as u8,
        })
    }

    /// `(kind, first_lsn, last_lsn, xid, locator, len, data_bytes, chunks, olds, bares)`
    /// in one call: what `InsertRows` keeps of a window (each as its own getter gives
    /// it), so that a run costs one call to wrap, not ten. An empty window is a
    /// ValueError.
    #[getter]
    #[allow(clippy::type_complexity)]
    fn head<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(
        u8,
        u64,
        u64,
        u32,
        Bound<'py, PyAny>,
        usize,
        usize,
        usize,
        usize,
        usize,
    )> {
        Ok((
            self.kind()?,
            self.first_lsn()?,
            self.last_lsn()?,
            self.shared.xid,
            self.locator(py),
            self.len(),
            self.data_bytes(),
            self.chunks(),
            self.olds(),
            self.bares(),
        ))
    }

    /// How many rows of the window are bare deletes (chunk rows of a delete or update
    /// run: deletes that logged no old tuple, so hold none).
    #[getter]
    fn bares(&self) -> usize {
        self.shared.bares_in(self.lo, self.hi)
    }

    /// The transaction that logged the rows.
    #[getter]
    fn xid(&self) -> u32 {
        self.shared.xid
    }

    /// The RelFileLocator of the rows' relation (the object their HeapChanges hold).
    #[getter]
    fn locator<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        self.shared.locator.bind(py).clone()
    }

    /// The first row's LSN (a ValueError for an empty window).
    #[getter]
    fn first_lsn(&self) -> PyResult<u64> {
        self.lsn_at((self.lo < self.hi).then_some(self.lo))
    }

    /// The last row's LSN (a ValueError for an empty window).
    #[getter]
    fn last_lsn(&self) -> PyResult<u64> {
        self.lsn_at((self.lo < self.hi).then(|| self.hi - 1))
    }

    /// How many rows of the window are chunk rows: TOAST chunk inserts (changes on the
    /// toast relation, `on_toast_relation`, counted and sized as any insert; in an
    /// insert or update run) and bare deletes (`bares`: no tuple; in a delete or update
    /// run), all of the run's `toast_locator`.
    #[getter]
    fn chunks(&self) -> usize {
        self.shared.chunks_in(self.lo, self.hi)
    }

    /// The window's rows that are not chunk rows, in order, as a HeapRows of their own
    /// (their data copied) with no chunk rows, or None when every row is one: what the
    /// replay hands on of a delete run whose bare deletes are a toast relation's chunk
    /// deletes, which ReorderBufferProcessTXN does not decode.
    fn mains<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyHeapRows>>> {
        let s = &*self.shared;
        let kept: Vec<usize> = (self.lo..self.hi).filter(|&k| !s.is_chunk(k)).collect();
        if kept.is_empty() {
            return Ok(None);
        }
        let mut data = Vec::new();
        let mut rows = Vec::with_capacity(kept.len());
        for k in kept {
            data.extend_from_slice(&s.data[s.start(k)..s.rows[k].end]);
            rows.push(Row {
                end: data.len(),
                ..s.rows[k]
            });
        }
        let shared = Shared {
            rows,
            data,
            xid: s.xid,
            locator: s.locator.clone_ref(py),
            chunks: None,
            decoder: s.decoder.clone_ref(py),
        };
        Bound::new(py, PyHeapRows::whole(shared)).map(Some)
    }

    /// Whether the window's last row is a main-table row with clear_toast_afterwards
    /// (so that no chunk of it is still held after it: ReorderBufferToastReset).
    #[getter]
    fn ends_reset(&self) -> bool {
        let s = &*self.shared;
        self.hi > self.lo && !s.is_chunk(self.hi - 1) && s.rows[self.hi - 1].clear_toast_afterwards
    }

    /// The window's main-table rows as the replay hands them on, each
    /// `(HeapChange, toast)`: `toast` the dict chunk_id -> chunk data of the chunks held
    /// when it comes (ReorderBufferToastAppendChunk of every chunk row before it since
    /// the last reset; ReorderBufferToastReset after each row with
    /// clear_toast_afterwards), or None when none is held; `held` is what the replay
    /// held before the window, (chunk_id, last chunk_seq, data so far) per value, in
    /// the order they came. Answered as `(rows, error, reset, held, lens)`: a chunk that
    /// `toast_chunk` or the sequence check refuses ends `rows` there, with `error` the
    /// same DecodeError (message, LSN, xid) as the Python replay raises after handing
    /// on the rows before it, else `error` is None; `reset` whether any row reset the
    /// chunks (so `held` as given went with it); `held` the values still held after
    /// the window, as `held` is given; `lens` the tuple data length of each chunk row
    /// of the window still held (after its last reset), for their accounting. A bare
    /// delete (an update run's: the chunks of a value it replaced) is passed over, as
    /// the replay passes over a toast relation's delete: it holds nothing.
    #[pyo3(signature = (held=Vec::new()))]
    #[allow(clippy::type_complexity)]
    fn toast_replay<'py>(
        &self,
        py: Python<'py>,
        held: Vec<(u32, i32, Vec<u8>)>,
    ) -> PyResult<(
        Bound<'py, PyList>,
        Option<PyErr>,
        bool,
        Vec<(u32, i32, Bound<'py, PyBytes>)>,
        Vec<usize>,
    )> {
        self.guarded(py, || {
            let s = &*self.shared;
            let mut m = Materializer::new(py, self)?;
            let out = PyList::empty(py);
            let mut hash = ToastHash::default();
            for (id, seq, data) in held {
                hash.seed(id, seq, data);
            }
            let mut held = hash;
            let mut reset = false;
            let mut lens: Vec<usize> = Vec::new();
            let refuse = |message: &str, k: usize| {
                s.decoder
                    .borrow(py)
                    .decode_error_of(py, message, Some(s.rows[k].lsn), Some(s.xid))
            };
            for k in self.lo..self.hi {
                let r = &s.rows[k];
                if s.is_bare(k) {
                    // a replaced value's chunks deleted: not decoded, nothing held
                    continue;
                }
                if s.is_chunk(k) {
                    let appended = toast::chunk(r.natts, r.infomask, r.hoff, s.tuple_of(k))
                        .map_err(str::to_string)
                        .and_then(|(id, seq, data)| held.append(id, seq, data));
                    if let Err(e) = appended {
                        return Ok((out, Some(refuse(&e, k)), reset, Vec::new(), Vec::new()));
                    }
                    lens.push(s.tuple_of(k).len());
                    continue;
                }
                let change = m.change(k)?;
                if held.is_empty() {
                    out.append((change, py.None()))?;
                    continue;
                }
                let mapping = PyDict::new(py);
                for (id, data) in held.values() {
                    mapping.set_item(id, PyBytes::new(py, data))?;
                }
                out.append((change, mapping))?;
                if r.clear_toast_afterwards {
                    held.reset();
                    lens.clear();
                    reset = true;
                }
            }
            let rest = held
                .entries()
                .map(|(id, seq, data)| (id, seq, PyBytes::new(py, data)))
                .collect();
            Ok((out, None, reset, rest, lens))
        })
    }

    /// How many rows of the window hold an old tuple too (an UPDATE that logged it).
    #[getter]
    fn olds(&self) -> usize {
        self.shared.olds_in(self.lo, self.hi)
    }

    /// The window's tuple data, in bytes: the sum over its rows of the data of the
    /// tuples each holds (an old tuple's too).
    #[getter]
    fn data_bytes(&self) -> usize {
        if self.lo == self.hi {
            return 0;
        }
        let s = &*self.shared;
        s.rows[self.hi - 1].end - s.start(self.lo)
    }

    /// Row `i` of the window as its HeapChange (an IndexError outside [0, len)).
    fn change<'py>(&self, py: Python<'py>, i: isize) -> PyResult<Bound<'py, PyAny>> {
        let Some(k) = self.row_index(i) else {
            return Err(PyIndexError::new_err("HeapRows index out of range"));
        };
        self.guarded(py, || Materializer::new(py, self)?.change(k))
    }

    /// Every row of the window as its HeapChange, in order.
    fn changes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.guarded(py, || {
            let mut m = Materializer::new(py, self)?;
            let out = PyList::empty(py);
            for k in self.lo..self.hi {
                out.append(m.change(k)?)?;
            }
            Ok(out)
        })
    }

    /// The window's rows as bytes (`reorder::run::dump`: its xid, then per row its LSN,
    /// ctid, tuple header fields, clear_toast_afterwards and whether it is a TOAST chunk
    /// row, and its data length, then the data), which `HeapRows.load` takes back; the
    /// locators (`locator`, `toast_locator`) are not in it.
    fn dump<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        if self.lo == self.hi {
            return Err(PyValueError::new_err("an empty HeapRows has no dump"));
        }
        self.guarded(py, || {
            let s = &*self.shared;
            let chunk = s
                .chunks
                .as_ref()
                .map_or(&[][..], |c| &c.chunk[self.lo..self.hi]);
            let bytes = run::dump(
                s.xid,
                &s.rows[self.lo..self.hi],
                chunk,
                &s.data,
                s.start(self.lo),
            );
            Ok(PyBytes::new(py, &bytes))
        })
    }

    /// Each row's LSN, in order.
    fn lsns(&self) -> Vec<u64> {
        self.shared.rows[self.lo..self.hi]
            .iter()
            .map(|r| r.lsn)
            .collect()
    }

    /// Rows [i, j) of this window, sharing its buffers (a ValueError unless
    /// 0 <= i <= j <= len).
    fn slice(&self, i: isize, j: isize) -> PyResult<PyHeapRows> {
        let (i, j) = (self.bound(i, "start")?, self.bound(j, "stop")?);
        if i > j {
            return Err(PyValueError::new_err(format!(
                "HeapRows slice start {i} after its stop {j}"
            )));
        }
        Ok(PyHeapRows {
            shared: Arc::clone(&self.shared),
            lo: self.lo + i,
            hi: self.lo + j,
        })
    }

    /// How far from row `at` the rows fill `room`: `(end, added)`, where each row adds
    /// `base + len(its tuples' data)` to `added` (and `old_base` more when it holds an
    /// old tuple too, `old_base` less when it is a bare delete, which holds no tuple:
    /// the callers pass the size of one tuple's overhead) and each row taken counts
    /// `overhead` more, and the rows stop
    /// after the first one that brings `added + (end - at) * overhead` to `room` or
    /// past it (or at the window's end). Exactly the Python loop the stub documents,
    /// without its overflow.
    #[pyo3(signature = (at, room, base, overhead, old_base=0))]
    fn fill(
        &self,
        py: Python<'_>,
        at: isize,
        room: i64,
        base: i64,
        overhead: i64,
        old_base: i64,
    ) -> PyResult<(usize, i128)> {
        let at = self.bound(at, "position")?;
        self.guarded(py, || {
            let s = &*self.shared;
            let (room, base, overhead) = (i128::from(room), i128::from(base), i128::from(overhead));
            let old_base = i128::from(old_base);
            let mut end = at;
            let mut added: i128 = 0;
            while end < self.len() {
                let k = self.lo + end;
                // a bare delete is a change with no tuple: `old_base` less than a row
                let old = if s.rows[k].kind.old().is_some() {
                    old_base
                } else if s.is_bare(k) {
                    -old_base
                } else {
                    0
                };
                added += base + old + (s.rows[k].end - s.start(k)) as i128;
                end += 1;
                if added + (end - at) as i128 * overhead >= room {
                    break;
                }
            }
            Ok((end, added))
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "HeapRows(xid={} x{} of {})",
            self.shared.xid,
            self.len(),
            self.shared.rows.len()
        )
    }
}
