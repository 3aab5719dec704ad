//! The PyO3 boundary: the extension module `service._native`.
//!
//! Receives: from `service.wal.native` (the glue), a reader's arguments and the Python
//! callables that build its results: the `XLogRecord`, `BlockRef` and `RelFileLocator`
//! constructors and the `service.errors` classes by name. The glue owns those names, so
//! this side never imports a Python module that the package-layout work may move.
//! Hands on: per `records()` / `walk_headers()` call, one walk over every record the fed
//! bytes hold, answered with the count and the error instance that ended it (or None);
//! `take(n)` then hands the records over as Python objects in slices. The glue yields
//! them, then raises the error. Armed with runs, a run's inserts cross as one
//! `HeapRows` (glue::reorder): no Python object per row until one is read.
//!
//! Guarantees:
//! - The walk runs with the GIL released (`Python::detach`); only building the result
//!   objects holds it.
//! - A Rust error becomes an instance of the `service.errors` class its kind names, with
//!   the Python reader's message and `lsn`.
//! - A panic never crosses the boundary: it is caught (`catch_unwind`) and becomes a
//!   `WalError` at the reader's position; the reader is then poisoned and repeats that
//!   error on every later call, since its state may be half-updated.
//! - No `unsafe` here: PyO3's safe API suffices.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple, PyType};
use pyo3::IntoPyObjectExt;

use crate::decode::heap::{self, Event, Input, Kind};
use crate::glue::decode::PyHeapDecoder;
use crate::glue::reorder::RowsBuilder;
use crate::glue::slots::SlotClass;
use crate::wal::reader::{WalReader, Walked};
use crate::wal::record::{Block, Body, Header};
use crate::wal::{ErrorKind, WalError};

/// The Python side's constructors and error classes, handed over once per reader.
struct Factory {
    record: SlotClass,
    block: SlotClass,
    locator: Py<PyAny>,
    /// class name (ErrorKind::class_name) -> class
    errors: Py<PyDict>,
}

/// What `predecode_heap` armed: the heap parsers' boundary and the constructor of
/// `service.decode.events.PredecodedRecord`.
struct Predecode {
    heap: Py<PyHeapDecoder>,
    make: Py<PyAny>,
    /// By rmid: the rmgr has no rm_decode (btree, sequences, ...), so a record of it is
    /// handed on with no events and no body (the driver only registers its xid).
    bare: [bool; 256],
    /// Set by `predecode_heap(..., make_run)`: consecutive plain inserts (`Run`) are
    /// handed on as one `InsertRun`, built by this from its fields' tuple.
    make_run: Option<Py<PyAny>>,
    /// No run holds a record logged before this LSN: such records come one by one, so
    /// a consumer that starts decoding here (skipping what lies before) never gets a
    /// run that straddles it.
    runs_from: u64,
    /// By (rmgr XLOG / Heap2 / Heap, op >> 4): record types xlog_decode, heap_decode
    /// and heap2_decode do nothing with (XLOG FPI, FPI_FOR_HINT, NOOP, ...; Heap LOCK;
    /// Heap2 PRUNE .. VISIBLE, LOCK_UPDATED, REWRITE: the decoder's IRRELEVANT ones,
    /// given by Python). Inside a run they are only counted, as the index inserts are:
    /// the Heap LOCK that precedes each UPDATE moving its row to another page, the
    /// pruning between updates, and the hint-bit page images a server with data
    /// checksums logs (PostgreSQL 18's default) no longer cut runs.
    inert: [[bool; 16]; 3],
}

const RM_XLOG_ID: u8 = 0;
const RM_HEAP2_ID: u8 = 9;
const RM_HEAP_ID: u8 = 10;

/// The `inert` table of an rmgr, and the op of an xl_info byte in it (XLOG's op is the
/// high nibble, Heap's and Heap2's the three bits under XLOG_HEAP_INIT_PAGE); None for
/// any other rmgr.
fn inert_slot(rmid: u8, info: u8) -> Option<(usize, usize)> {
    match rmid {
        RM_XLOG_ID => Some((0, usize::from(info >> 4))),
        RM_HEAP2_ID => Some((1, usize::from((info & 0x70) >> 4))),
        RM_HEAP_ID => Some((2, usize::from((info & 0x70) >> 4))),
        _ => None,
    }
}

impl Predecode {
    /// Whether the record (rmid, info) is one `inert` names.
    fn inert(&self, rmid: u8, info: u8) -> bool {
        inert_slot(rmid, info).is_some_and(|(t, op)| self.inert[t][op])
    }
}

/// Consecutive Heap INSERT / Heap2 MULTI_INSERT records of one transaction into one
/// relation, with no top-level xid (block 252), no origin (block 253), and only
/// plain inserts into a table that is not a toast relation (or, as a run of their own
/// kind, consecutive Heap UPDATE / HOT_UPDATE records that all log an old tuple or key
/// besides the new tuple, or all do not, or
/// Heap DELETE records logging only an old tuple or key, of one transaction and
/// relation, under the same conditions); after the first record of an insert or update
/// run, the plain single inserts of that transaction into one toast relation
/// (XLH_INSERT_ON_TOAST_RELATION: the TOAST chunks DecodeInsert queues as changes of
/// their own, which ReorderBufferToastAppendChunk collects at replay for the next
/// main-table change); after the first record of an update or delete run, the DELETEs
/// of that transaction that logged no old tuple, all of one other relation of the same
/// database, its chunks' if it has any (a toast relation's chunk deletes: bare deletes,
/// flagged as chunks are); and between and after them the records of rmgrs without
/// rm_decode (the index inserts) of that xid or of none, with no top-level xid: the
/// records the decoding driver can take as one (`Decoding.process_run`), since every
/// gate it passes them through (ReorderBufferProcessXid, SnapBuildProcessChange, the
/// database and origin filters) gives the same answer for each of them.
/// Its inserts' rows, chunks included, stay in Rust (`glue::reorder`) until the run
/// is handed on.
struct Run<'py> {
    /// The change kind of every row of the run's relation (INSERT, UPDATE or DELETE).
    kind: Kind,
    /// Whether every UPDATE of the run logged its old tuple or key too (none did if not).
    old: bool,
    xid: u32,
    locator: (u32, u32, u32),
    /// The RelFileLocator object of `locator` (the reader's cached one).
    locator_obj: Bound<'py, PyAny>,
    first_lsn: u64,
    lsn: u64,
    end_lsn: u64,
    records: usize,
    /// The toast relation of the run's TOAST chunk rows and its RelFileLocator object,
    /// from its first chunk on (None while it has none): every chunk of a run is in it.
    toast: Option<((u32, u32, u32), Bound<'py, PyAny>)>,
    rows: RowsBuilder,
}

impl<'py> Run<'py> {
    /// `make_run((first_lsn, lsn, end_lsn, xid, records, heap_rows))`, the rows a
    /// `HeapRows` whose HeapChanges `decoder` builds.
    fn into_py(
        self,
        py: Python<'py>,
        make_run: &Py<PyAny>,
        decoder: &Py<PyHeapDecoder>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let rows = self.rows.finish(
            py,
            self.xid,
            self.locator_obj.unbind(),
            self.toast.map(|(_, obj)| obj.unbind()),
            decoder.clone_ref(py),
        )?;
        let fields = (
            self.first_lsn,
            self.lsn,
            self.end_lsn,
            self.xid,
            self.records,
            rows,
        )
            .into_pyobject(py)?;
        make_run.bind(py).call1((fields,))
    }
}

/// What a parsed record may be in a `Run`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Part {
    /// Rows of the run's relation, of one change kind: plain inserts into a table that
    /// is not a toast relation (which always carry a new tuple, and never an old one),
    /// an UPDATE with its new tuple (and, when the bool says so, its old tuple or key:
    /// a key change, REPLICA IDENTITY FULL), or a DELETE logging only its old tuple or
    /// key. It may start a run or extend one of the same kind and bool.
    Main(Kind, bool),
    /// One plain insert on a toast relation (a TOAST chunk, as DecodeInsert sees
    /// XLH_INSERT_ON_TOAST_RELATION): it may only extend an insert or update run, and
    /// only with the chunks of one toast relation.
    Chunk,
    /// One DELETE that logged no old tuple (DecodeDelete's change without
    /// XLH_DELETE_CONTAINS_OLD): the TOAST chunks toast_delete removes after each
    /// deleted row that had a value out of line, or a row of a table without a replica
    /// identity. It may only extend a run of deletes that logged their old tuple or key,
    /// or of updates (toast_tuple_cleanup deletes the chunks of the values an UPDATE
    /// replaces, after their new chunks), and only with the bare deletes of one other
    /// relation of the run's database (the run's `toast`, whose rows are flagged as its
    /// chunks are): the record cannot tell a toast relation's from a table's, so the
    /// replay asks.
    Bare,
}

/// The `Part` a parsed record may be in a run, None if it may be in none.
fn runnable(events: &[Event]) -> Option<Part> {
    let plain = |e: &Event, toast: bool| {
        matches!(
            e,
            Event::Change {
                kind: Kind::Insert,
                on_toast_relation,
                new_tuple: Some(_),
                old_tuple: None,
                old_is_key: false,
                ..
            } if *on_toast_relation == toast
        )
    };
    match events {
        [] => None,
        [one] if plain(one, true) => Some(Part::Chunk),
        [Event::Change {
            kind: Kind::Update,
            new_tuple: Some(_),
            old_tuple,
            on_toast_relation: false,
            ..
        }] => Some(Part::Main(Kind::Update, old_tuple.is_some())),
        [Event::Change {
            kind: Kind::Delete,
            new_tuple: None,
            old_tuple: Some(_),
            on_toast_relation: false,
            ..
        }] => Some(Part::Main(Kind::Delete, false)),
        [Event::Change {
            kind: Kind::Delete,
            new_tuple: None,
            old_tuple: None,
            on_toast_relation: false,
            ..
        }] => Some(Part::Bare),
        _ if events.iter().all(|e| plain(e, false)) => Some(Part::Main(Kind::Insert, false)),
        _ => None,
    }
}

type HeapParser = fn(&Input<'_>) -> heap::Result<Vec<Event>>;

/// The parser of a record the reader decodes itself once armed: the heap records of
/// every table change (rmgr Heap: INSERT, DELETE, UPDATE, HOT_UPDATE; Heap2:
/// MULTI_INSERT), which heap_decode and heap2_decode decode in every version.
fn predecoded_parser(rmid: u8, info: u8) -> Option<HeapParser> {
    const OPMASK: u8 = 0x70;
    match (rmid, info & OPMASK) {
        (RM_HEAP_ID, 0x00) => Some(heap::insert),
        (RM_HEAP_ID, 0x10) => Some(heap::delete),
        (RM_HEAP_ID, 0x20 | 0x40) => Some(heap::update),
        (RM_HEAP2_ID, 0x50) => Some(heap::multi_insert),
        _ => None,
    }
}

/// The native twin of `service.wal.reader.XLogReader`, driven by `service.wal.native`.
#[pyclass(module = "service._native", name = "WalReader")]
struct PyWalReader {
    core: WalReader,
    factory: Factory,
    /// RelFileLocator objects by their WAL fields, capped like the Python decoder's.
    locators: HashMap<(u32, u32, u32), Py<PyAny>>,
    /// Set after a caught panic: the error every later call raises.
    poisoned: Option<WalError>,
    /// The last walk's records not yet handed over (`take`), from `cursor` on; their
    /// bytes stay valid until the next walk or a feed that restarts the buffer.
    pending: Vec<Walked>,
    cursor: usize,
    pending_headers: bool,
    /// Test hook: the next walk panics inside the guarded region (`_arm_panic_probe`),
    /// so the tests can see a panic arrive as a typed error and poison the reader.
    panic_probe: bool,
    /// Set by `predecode_heap`: table-change heap records are handed on decoded.
    predecode: Option<Predecode>,
    /// Set by `watch_relations`: relations (spc, db, rel) whose records are always
    /// handed on whole, as `XLogRecord`s with their blocks and page images, even when
    /// armed: the historic pg_class (`service.schema.pgclass`) rebuilds its pages from
    /// them, and a catalog's heap records carry their tuples only in the block data.
    watched: Vec<(u32, u32, u32)>,
}

const LOCATOR_CACHE: usize = 4096;

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

fn internal_error(payload: &(dyn std::any::Any + Send), lsn: u64) -> WalError {
    WalError {
        kind: ErrorKind::Wal,
        message: format!(
            "internal error in the native WAL reader: {}",
            panic_message(payload)
        ),
        lsn,
    }
}

impl Factory {
    /// The `service.errors` instance for a Rust error: its class by kind, its message
    /// and `lsn=` as keyword, as the Python reader raises it.
    fn error<'py>(&self, py: Python<'py>, err: &WalError) -> PyResult<Bound<'py, PyAny>> {
        let errors = self.errors.bind(py);
        let cls = errors.get_item(err.kind.class_name())?.ok_or_else(|| {
            PyValueError::new_err(format!("no error class {}", err.kind.class_name()))
        })?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("lsn", err.lsn)?;
        cls.call((err.message.as_str(),), Some(&kwargs))
    }

    fn raise(&self, py: Python<'_>, err: &WalError) -> PyErr {
        match self.error(py, err) {
            Ok(inst) => PyErr::from_value(inst),
            Err(e) => e,
        }
    }
}

impl PyWalReader {
    fn error_instance<'py>(&self, py: Python<'py>, err: &WalError) -> PyResult<Bound<'py, PyAny>> {
        self.factory.error(py, err)
    }

    fn raise(&self, py: Python<'_>, err: &WalError) -> PyErr {
        self.factory.raise(py, err)
    }

    /// One `XLogRecord` (or header tuple) per pending record, for the next `n` of them;
    /// once armed, `PredecodedRecord`s and (with `make_run`) `InsertRun`s among them. A
    /// run still open at the n-th record goes on with the records after it that join
    /// it (a run is one object however many rows it holds), so that runs are not cut
    /// where the slices are; the record that ends it is left for the next call.
    fn build<'py>(&mut self, py: Python<'py>, n: usize) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        let headers_only = self.pending_headers;
        let start = self.cursor;
        let limit = self.pending.len().min(start.saturating_add(n));
        let batch = &self.pending[start..];
        // Records of `batch` handed on (in an item, or counted in a run) so far.
        let mut taken = 0usize;
        // Where an error leaves the cursor (as before runs could pass the n-th record).
        self.cursor = limit;
        let make_run = self
            .predecode
            .as_ref()
            .and_then(|pd| pd.make_run.as_ref().map(|m| (m, &pd.heap)));
        let runs_from = self.predecode.as_ref().map_or(0, |pd| pd.runs_from);
        let mut run: Option<Run<'py>> = None;
        for w in batch {
            // Past the n-th record only a record that joins the open run is taken.
            let past = start + taken >= limit;
            if past && run.is_none() {
                break;
            }
            taken += 1;
            let h = &w.header;
            if headers_only {
                list.append((h.lsn, h.total_len, h.rmid, h.info, h.xid))?;
                continue;
            }
            let Some(body) = &w.body else {
                return Err(PyValueError::new_err("walked record without a body"));
            };
            let bytes = self.core.record_bytes(w);
            if let Some(pd) = &self.predecode {
                let rmgr_bare = pd.bare[usize::from(h.rmid)];
                // (a record of a bare rmgr is never one the historic catalog reads)
                let watched = !rmgr_bare
                    && !self.watched.is_empty()
                    && body
                        .blocks
                        .iter()
                        .any(|b| self.watched.contains(&b.locator));
                // The index insert after each heap insert (an rmgr without rm_decode), or a
                // Heap, Heap2 or XLOG record the decoder does nothing with (pgbench's row
                // locks between its updates): the driver only registers its xid. It joins
                // the run of its xid (or of none); else it comes bare, its block
                // references and data never built. A watched relation's comes whole.
                if rmgr_bare || (!watched && pd.inert(h.rmid, h.info)) {
                    if let Some(r) = &mut run {
                        if body.toplevel_xid.is_none() && (h.xid == r.xid || h.xid == 0) {
                            r.lsn = h.lsn;
                            r.end_lsn = h.end_lsn;
                            r.records += 1;
                            continue;
                        }
                    }
                    if past {
                        taken -= 1;
                        break;
                    }
                    flush(py, &mut run, make_run, &list)?;
                    list.append(predecoded_record(py, pd, h, body, PyList::empty(py))?)?;
                    continue;
                }
                if let Some(parse) = predecoded_parser(h.rmid, h.info).filter(|_| !watched) {
                    if let Some((events, b0)) = parse_heap(parse, h, body, bytes) {
                        let part = if make_run.is_some()
                            && h.lsn >= runs_from
                            && body.toplevel_xid.is_none()
                            && body.origin.is_none()
                        {
                            b0.and_then(|b| runnable(&events).map(|p| (p, b)))
                        } else {
                            None
                        };
                        // Whether this record extends the run being gathered; if not,
                        // that run is handed on before anything of this record.
                        let extends = part.is_some_and(|(p, b)| {
                            run.as_ref().is_some_and(|r| {
                                r.xid == h.xid
                                    && match p {
                                        Part::Main(kind, old) => {
                                            r.locator == b.locator && r.kind == kind && r.old == old
                                        }
                                        // TOAST chunks join an insert or update run
                                        // (the new values of its next rows).
                                        Part::Chunk => {
                                            matches!(r.kind, Kind::Insert | Kind::Update)
                                                && r.toast
                                                    .as_ref()
                                                    .is_none_or(|(t, _)| *t == b.locator)
                                        }
                                        // Bare deletes join a delete or update run (the
                                        // chunks of the values its next rows delete or
                                        // replace), all of one other relation in the
                                        // run's database, its chunks' if it has any.
                                        Part::Bare => {
                                            matches!(r.kind, Kind::Delete | Kind::Update)
                                                && b.locator != r.locator
                                                && b.locator.1 == r.locator.1
                                                && r.toast
                                                    .as_ref()
                                                    .is_none_or(|(t, _)| *t == b.locator)
                                        }
                                    }
                            })
                        });
                        if !extends {
                            if past {
                                taken -= 1;
                                break;
                            }
                            flush(py, &mut run, make_run, &list)?;
                        }
                        // A chunk or bare delete never starts a run: the run's
                        // relation is a main table's, named by its first row.
                        let part = part.filter(|(p, _)| extends || matches!(p, Part::Main(..)));
                        if let Some((p, b)) = part {
                            let r = match &mut run {
                                Some(r) => r,
                                None => run.insert(Run {
                                    kind: match p {
                                        Part::Main(kind, _) => kind,
                                        Part::Chunk => Kind::Insert,
                                        Part::Bare => Kind::Delete,
                                    },
                                    old: matches!(p, Part::Main(_, true)),
                                    xid: h.xid,
                                    locator: b.locator,
                                    locator_obj: locator(
                                        &mut self.locators,
                                        &self.factory,
                                        py,
                                        b.locator,
                                    )?,
                                    first_lsn: h.lsn,
                                    lsn: h.lsn,
                                    end_lsn: h.end_lsn,
                                    records: 0,
                                    toast: None,
                                    rows: RowsBuilder::default(),
                                }),
                            };
                            if matches!(p, Part::Chunk | Part::Bare) && r.toast.is_none() {
                                let obj =
                                    locator(&mut self.locators, &self.factory, py, b.locator)?;
                                r.toast = Some((b.locator, obj));
                            }
                            r.rows
                                .push_record(
                                    h.lsn,
                                    b.block,
                                    &events,
                                    &bytes[body.main_data.clone()],
                                    &bytes[b.data.clone()],
                                )
                                .map_err(PyValueError::new_err)?;
                            r.lsn = h.lsn;
                            r.end_lsn = h.end_lsn;
                            r.records += 1;
                            continue;
                        }
                        let made = heap_events(
                            py,
                            &mut self.locators,
                            &self.factory,
                            pd,
                            h,
                            body,
                            bytes,
                            &events,
                            b0,
                        )?;
                        if let Some(evs) = made {
                            list.append(predecoded_record(py, pd, h, body, evs)?)?;
                            continue;
                        }
                    }
                }
            }
            if past {
                taken -= 1;
                break;
            }
            flush(py, &mut run, make_run, &list)?;
            let mut blocks = Vec::with_capacity(body.blocks.len());
            for b in &body.blocks {
                let loc = locator(&mut self.locators, &self.factory, py, b.locator)?;
                let image = b.page(bytes).map(|page| PyBytes::new(py, &page));
                let block = self.factory.block.build(
                    py,
                    [
                        b.block_id.into_bound_py_any(py)?,
                        loc,
                        b.fork.into_bound_py_any(py)?,
                        b.block.into_bound_py_any(py)?,
                        b.flags.into_bound_py_any(py)?,
                        PyBytes::new(py, &bytes[b.data.clone()]).into_any(),
                        image.into_bound_py_any(py)?,
                        b.apply_image.into_bound_py_any(py)?,
                        b.image_len.into_bound_py_any(py)?,
                        b.hole_offset.into_bound_py_any(py)?,
                        b.hole_length.into_bound_py_any(py)?,
                        b.bimg_info.into_bound_py_any(py)?,
                    ],
                )?;
                blocks.push(block);
            }
            let rec = self.factory.record.build(
                py,
                [
                    h.lsn.into_bound_py_any(py)?,
                    h.end_lsn.into_bound_py_any(py)?,
                    h.total_len.into_bound_py_any(py)?,
                    h.xid.into_bound_py_any(py)?,
                    h.prev.into_bound_py_any(py)?,
                    h.info.into_bound_py_any(py)?,
                    h.rmid.into_bound_py_any(py)?,
                    h.crc.into_bound_py_any(py)?,
                    PyBytes::new(py, &bytes[body.main_data.clone()]).into_any(),
                    PyTuple::new(py, blocks)?.into_any(),
                    body.toplevel_xid.into_bound_py_any(py)?,
                    body.origin.into_bound_py_any(py)?,
                ],
            )?;
            list.append(rec)?;
        }
        self.cursor = start + taken;
        flush(py, &mut run, make_run, &list)?;
        Ok(list)
    }

    fn walk<'py>(
        &mut self,
        py: Python<'py>,
        headers_only: bool,
    ) -> PyResult<(usize, Option<Bound<'py, PyAny>>)> {
        self.pending.clear();
        self.cursor = 0;
        self.pending_headers = headers_only;
        if let Some(err) = &self.poisoned {
            return Ok((0, Some(self.error_instance(py, err)?)));
        }
        let lsn = self.core.next_lsn();
        let core = &mut self.core;
        let probe = std::mem::take(&mut self.panic_probe);
        // The walk touches no Python object, so it runs without the GIL.
        let walked = py.detach(|| {
            catch_unwind(AssertUnwindSafe(|| {
                if probe {
                    panic!("panic probe");
                }
                core.walk(headers_only)
            }))
        });
        let (batch, err) = match walked {
            Ok(r) => r,
            Err(payload) => {
                let err = internal_error(payload.as_ref(), lsn);
                self.poisoned = Some(err.clone());
                return Ok((0, Some(self.error_instance(py, &err)?)));
            }
        };
        let err = match err {
            Some(e) => Some(self.error_instance(py, &e)?),
            None => None,
        };
        let count = batch.len();
        self.pending = batch;
        Ok((count, err))
    }
}

/// Hand on the run being gathered, if any, as one `InsertRun`.
fn flush<'py>(
    py: Python<'py>,
    run: &mut Option<Run<'py>>,
    make_run: Option<(&Py<PyAny>, &Py<PyHeapDecoder>)>,
    list: &Bound<'py, PyList>,
) -> PyResult<()> {
    if let (Some(r), Some((make, decoder))) = (run.take(), make_run) {
        list.append(r.into_py(py, make, decoder)?)?;
    }
    Ok(())
}

/// The parse of a table-change heap record: its events, and its block reference 0 if
/// it has one. None when the parse fails (or panics): the caller then hands on the
/// whole `XLogRecord`, and the Python decoder raises the parser's `DecodeError` itself.
fn parse_heap<'b>(
    parse: HeapParser,
    h: &Header,
    body: &'b Body,
    bytes: &[u8],
) -> Option<(Vec<Event>, Option<&'b Block>)> {
    // _block0: block ids ascend, so block 0 can only be the first.
    let b0 = body.blocks.first().filter(|b| b.block_id == 0);
    let input = Input {
        info: h.info,
        main: &bytes[body.main_data.clone()],
        block0: b0.map(|b| &bytes[b.data.clone()]),
    };
    match catch_unwind(AssertUnwindSafe(|| parse(&input))) {
        Ok(Ok(events)) if !catalog_write(&events) => Some((events, b0)),
        Ok(_) | Err(_) => None,
    }
}

/// Whether a parsed INSERT, UPDATE or MULTI_INSERT wrote a tuple not logged for logical
/// decoding (no XLH_*_CONTAINS_NEW_TUPLE: a catalog's, logged for redo only). Such a
/// record is handed on whole: the historic pg_class (`service.schema.pgclass`) reads
/// its tuple off the block data, which a `PredecodedRecord` does not carry.
fn catalog_write(events: &[Event]) -> bool {
    matches!(
        events,
        [] | [Event::Change {
            kind: Kind::Update,
            new_tuple: None,
            ..
        }]
    )
}

/// The Python events of a parsed table-change heap record, built by the Python
/// parser's constructors; None when a change has no block 0 (the caller then hands on
/// the whole `XLogRecord`).
#[allow(clippy::too_many_arguments)]
fn heap_events<'py>(
    py: Python<'py>,
    locators: &mut HashMap<(u32, u32, u32), Py<PyAny>>,
    factory: &Factory,
    pd: &Predecode,
    h: &Header,
    body: &Body,
    bytes: &[u8],
    events: &[Event],
    b0: Option<&Block>,
) -> PyResult<Option<Bound<'py, PyList>>> {
    let ref0 = match b0 {
        Some(b) => Some((
            locator(locators, factory, py, b.locator)?,
            b.block.into_pyobject(py)?.into_any(),
        )),
        None if events.iter().any(|e| matches!(e, Event::Change { .. })) => return Ok(None),
        None => None,
    };
    let lsn = h.lsn.into_pyobject(py)?.into_any();
    let xid = h.xid.into_pyobject(py)?.into_any();
    let origin = body.origin.into_pyobject(py)?;
    let decoder = pd.heap.borrow(py);
    let events = decoder.events_py(
        py,
        PyList::empty(py),
        events,
        &lsn,
        &xid,
        &origin,
        &bytes[body.main_data.clone()],
        ref0,
        b0.map_or(&[][..], |b| &bytes[b.data.clone()]),
    )?;
    Ok(Some(events))
}

/// `make(lsn, end_lsn, total_len, xid, info, rmid, toplevel_xid, origin, events)`: the
/// `PredecodedRecord` of a record with these header fields and events.
fn predecoded_record<'py>(
    py: Python<'py>,
    pd: &Predecode,
    h: &Header,
    body: &Body,
    events: Bound<'py, PyList>,
) -> PyResult<Bound<'py, PyAny>> {
    let fields = (
        h.lsn,
        h.end_lsn,
        h.total_len,
        h.xid,
        h.info,
        h.rmid,
        body.toplevel_xid,
        body.origin,
        events,
    )
        .into_pyobject(py)?;
    pd.make.bind(py).call1((fields,))
}

fn locator<'py>(
    cache: &mut HashMap<(u32, u32, u32), Py<PyAny>>,
    factory: &Factory,
    py: Python<'py>,
    key: (u32, u32, u32),
) -> PyResult<Bound<'py, PyAny>> {
    if let Some(loc) = cache.get(&key) {
        return Ok(loc.bind(py).clone());
    }
    let loc = factory.locator.bind(py).call1(key)?;
    if cache.len() < LOCATOR_CACHE {
        cache.insert(key, loc.clone().unbind());
    }
    Ok(loc)
}

#[pymethods]
impl PyWalReader {
    #[new]
    #[pyo3(signature = (start_lsn, segment_size, prev_lsn, verify_crc, make_record, make_block, make_locator, errors))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        start_lsn: u64,
        segment_size: u64,
        prev_lsn: Option<u64>,
        verify_crc: bool,
        make_record: &Bound<'_, PyType>,
        make_block: &Bound<'_, PyType>,
        make_locator: Py<PyAny>,
        errors: Py<PyDict>,
    ) -> PyResult<Self> {
        let factory = Factory {
            record: SlotClass::of_dataclass(make_record, 12)?,
            block: SlotClass::of_dataclass(make_block, 12)?,
            locator: make_locator,
            errors,
        };
        let core = WalReader::new(start_lsn, segment_size, prev_lsn, verify_crc)
            .map_err(|e| factory.raise(py, &e))?;
        Ok(PyWalReader {
            core,
            factory,
            locators: HashMap::new(),
            poisoned: None,
            pending: Vec::new(),
            cursor: 0,
            pending_headers: false,
            panic_probe: false,
            predecode: None,
            watched: Vec::new(),
        })
    }

    /// Append raw WAL bytes that start at `at_lsn` (XLogReader.feed).
    fn feed(&mut self, py: Python<'_>, data: &[u8], at_lsn: u64) -> PyResult<()> {
        if let Some(err) = &self.poisoned {
            return Err(self.raise(py, err));
        }
        if self.core.fed_end() != Some(at_lsn) {
            // A restarted buffer: the pending records' offsets point into the old one.
            self.pending.clear();
            self.cursor = 0;
        }
        let core = &mut self.core;
        match catch_unwind(AssertUnwindSafe(|| core.feed(data, at_lsn))) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(self.raise(py, &e)),
            Err(payload) => {
                let err = internal_error(payload.as_ref(), self.core.next_lsn());
                self.poisoned = Some(err.clone());
                Err(self.raise(py, &err))
            }
        }
    }

    /// Walk every complete record available (GIL released): (how many records the walk
    /// found, the error instance that ended it or None). `take` hands them over.
    fn records<'py>(&mut self, py: Python<'py>) -> PyResult<(usize, Option<Bound<'py, PyAny>>)> {
        self.walk(py, false)
    }

    /// As `records`, for (lsn, tot_len, rmid, info, xid) tuples and no body decode.
    fn walk_headers<'py>(
        &mut self,
        py: Python<'py>,
    ) -> PyResult<(usize, Option<Bound<'py, PyAny>>)> {
        self.walk(py, true)
    }

    /// The next `n` records of the last walk as Python objects (XLogRecord, or header
    /// tuples after `walk_headers`). Handing them over in slices keeps a 16 MB chunk
    /// from turning into one list of 100k+ live objects (memory, and the cyclic GC
    /// rescanning them), which the Python reader's one-at-a-time generator never has.
    fn take<'py>(&mut self, py: Python<'py>, n: usize) -> PyResult<Bound<'py, PyList>> {
        if let Some(err) = &self.poisoned {
            return Err(self.raise(py, err));
        }
        let lsn = self.core.next_lsn();
        match catch_unwind(AssertUnwindSafe(|| self.build(py, n))) {
            Ok(list) => list,
            Err(payload) => {
                let err = internal_error(payload.as_ref(), lsn);
                self.poisoned = Some(err.clone());
                self.pending.clear();
                Err(self.raise(py, &err))
            }
        }
    }

    /// From now on, hand on each table-change heap record (`predecoded_parser`) as
    /// `make((lsn, end_lsn, total_len, xid, info, rmid, toplevel_xid, origin, events))`
    /// (one tuple: `tuple.__new__` of the NamedTuple class, no Python frame per record),
    /// its events parsed here by `decoder`'s parsers, instead of as an `XLogRecord`;
    /// and each record of an rmgr in `bare_rmids` (those without rm_decode) the same
    /// way with no events. With `make_run`, each `Run` of consecutive plain inserts (and
    /// the TOAST chunk inserts among them) is handed on as one
    /// `make_run((first_lsn, lsn, end_lsn, xid, records, rows))` instead of a record
    /// per insert, `rows` its inserts as one `HeapRows`; no run holds a record logged
    /// before `runs_from` (those come one by one).
    /// `inert_ops`: (rmid, op) of the XLOG, Heap and Heap2 record types the decoder does
    /// nothing with (op: xl_info under the rmgr's op mask, 0xF0 or 0x70), which may sit
    /// inside a run (counted in its `records`); any other rmid is a ValueError.
    #[pyo3(signature = (decoder, make, bare_rmids, make_run=None, runs_from=0, inert_ops=Vec::new()))]
    fn predecode_heap(
        &mut self,
        decoder: Py<PyHeapDecoder>,
        make: Py<PyAny>,
        bare_rmids: Vec<u8>,
        make_run: Option<Py<PyAny>>,
        runs_from: u64,
        inert_ops: Vec<(u8, u8)>,
    ) -> PyResult<()> {
        let mut bare = [false; 256];
        for rmid in bare_rmids {
            bare[usize::from(rmid)] = true;
        }
        let mut inert = [[false; 16]; 3];
        for (rmid, op) in inert_ops {
            let Some((t, op)) = inert_slot(rmid, op) else {
                return Err(PyValueError::new_err(format!(
                    "inert op of rmgr {rmid}: only XLOG (0), Heap (10) and Heap2 (9) ops may be"
                )));
            };
            inert[t][op] = true;
        }
        self.predecode = Some(Predecode {
            heap: decoder,
            make,
            bare,
            make_run,
            runs_from,
            inert,
        });
        Ok(())
    }

    /// Hand on every record with a block of one of `locators` (spc, db, rel) whole, as
    /// an `XLogRecord`, from the next `records()` call on (replacing the last set).
    fn watch_relations(&mut self, locators: Vec<(u32, u32, u32)>) {
        self.watched = locators;
    }

    /// Test hook: make the next walk panic where a bug would (see `panic_probe`).
    fn _arm_panic_probe(&mut self) {
        self.panic_probe = true;
    }

    /// Back to just after the n-th record (1-based) of the last batch.
    fn rewind(&mut self, n: usize) {
        self.core.rewind(n);
    }

    #[getter]
    fn end_of_wal(&self) -> bool {
        self.core.end_of_wal()
    }

    #[getter]
    fn next_lsn(&self) -> u64 {
        self.core.next_lsn()
    }

    #[getter]
    fn last_lsn(&self) -> Option<u64> {
        self.core.last_lsn()
    }

    #[getter]
    fn buffered_bytes(&self) -> usize {
        self.core.buffered_bytes()
    }

    /// The page magic of the stream (None before any page header).
    #[getter]
    fn page_magic(&self) -> Option<u16> {
        self.core.format().map(|f| f.page_magic)
    }
}

#[pymodule]
#[pyo3(name = "_native")]
fn native_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyWalReader>()?;
    m.add_class::<crate::glue::decode::PyHeapDecoder>()?;
    m.add_class::<crate::glue::reorder::PyHeapRows>()?;
    m.add_class::<crate::glue::avro::PyRowPlan>()?;
    m.add_class::<crate::glue::tablesnap::PyCopyChunk>()?;
    m.add_class::<crate::glue::tablesnap::PyCopyRecords>()?;
    m.add_class::<crate::glue::text::PyTextPlan>()?;
    m.add_class::<crate::glue::names::PyNameCache>()?;
    m.add_class::<crate::glue::kafka::PyDirectProducer>()?;
    m.add_function(wrap_pyfunction!(crate::glue::avro::envelope, m)?)?;
    m.add_function(wrap_pyfunction!(crate::glue::avro::avro_long, m)?)?;
    m.add_function(wrap_pyfunction!(crate::glue::avro::avro_string, m)?)?;
    m.add_function(wrap_pyfunction!(crate::glue::avro::transaction_value, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
