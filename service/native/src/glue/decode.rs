//! The PyO3 boundary of the heap parsers: `service._native.HeapDecoder`.
//!
//! Receives: from `service.decode.native_heap` (the glue), once, the constructors the
//! Python parsers use (service.decode.heap's RawTuple and HeapChange twins,
//! TruncateEvent, NewCidEvent, RelFileLocator), the ChangeKind members and DecodeError;
//! then per call an op and one `XLogRecord`.
//! Hands on: the list of events `service.decode.heap.decode_<op>(record)` returns, equal
//! field for field, or raises the same `DecodeError` (message and `lsn`). A spilled run's rows are read
//! back by `HeapRows.load` (glue::reorder), which builds its events with this decoder.
//! A panic never crosses the boundary: it becomes a DecodeError naming the record.
//! No `unsafe` here: the objects are built by `glue::slots`.

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple, PyType};
use pyo3::IntoPyObjectExt;

use crate::decode::heap::{self, Event, Input, Kind, Source, Tuple};
use crate::glue::slots::SlotClass;

#[pyclass(module = "service._native", name = "HeapDecoder")]
pub struct PyHeapDecoder {
    raw_tuple: SlotClass,
    heap_change: SlotClass,
    truncate_event: Py<PyAny>,
    new_cid_event: Py<PyAny>,
    locator: Py<PyAny>,
    /// ChangeKind members, indexed by their value.
    kinds: Vec<Py<PyAny>>,
    decode_error: Py<PyAny>,
}

/// The op names the glue passes (service.decode.heap's function names without
/// `decode_`).
type Parser = fn(&Input<'_>) -> heap::Result<Vec<Event>>;

fn parser(op: &str) -> Option<Parser> {
    Some(match op {
        "insert" => heap::insert,
        "update" => heap::update,
        "delete" => heap::delete,
        "confirm" => heap::confirm,
        "truncate" => heap::truncate,
        "multi_insert" => heap::multi_insert,
        "new_cid" => heap::new_cid,
        _ => return None,
    })
}

impl PyHeapDecoder {
    fn tuple<'py>(
        &self,
        py: Python<'py>,
        t: &Option<Tuple>,
        main: &[u8],
        block0: &[u8],
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let Some(t) = t else { return Ok(None) };
        let src = match t.source {
            Source::Main => main,
            Source::Block0 => block0,
        };
        let obj = self.raw_tuple_py(
            py,
            t.natts,
            t.infomask,
            t.infomask2,
            t.hoff,
            &src[t.data.clone()],
        )?;
        Ok(Some(obj))
    }

    /// A `RawTuple` of these header fields and tuple data.
    pub(crate) fn raw_tuple_py<'py>(
        &self,
        py: Python<'py>,
        natts: u16,
        infomask: u16,
        infomask2: u16,
        hoff: u8,
        data: &[u8],
    ) -> PyResult<Bound<'py, PyAny>> {
        self.raw_tuple.build(
            py,
            [
                natts.into_bound_py_any(py)?,
                infomask.into_bound_py_any(py)?,
                infomask2.into_bound_py_any(py)?,
                hoff.into_bound_py_any(py)?,
                PyBytes::new(py, data).into_any(),
            ],
        )
    }

    /// A `HeapChange` of these fields, its kind the ChangeKind member of `kind`.
    #[allow(clippy::too_many_arguments)] // the dataclass's fields, in order
    pub(crate) fn change_py<'py>(
        &self,
        py: Python<'py>,
        lsn: Bound<'py, PyAny>,
        xid: Bound<'py, PyAny>,
        kind: Kind,
        locator: Bound<'py, PyAny>,
        block: Bound<'py, PyAny>,
        offset: u16,
        new_tuple: Option<Bound<'py, PyAny>>,
        old_tuple: Option<Bound<'py, PyAny>>,
        old_is_key: bool,
        clear_toast_afterwards: bool,
        on_toast_relation: bool,
        origin: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.heap_change.build(
            py,
            [
                lsn,
                xid,
                self.kinds[kind as usize].bind(py).clone(),
                locator,
                block,
                offset.into_bound_py_any(py)?,
                new_tuple.into_bound_py_any(py)?,
                old_tuple.into_bound_py_any(py)?,
                old_is_key.into_bound_py_any(py)?,
                clear_toast_afterwards.into_bound_py_any(py)?,
                on_toast_relation.into_bound_py_any(py)?,
                origin,
            ],
        )
    }

    /// The DecodeError `message`, at `lsn`.
    pub(crate) fn decode_error(&self, py: Python<'_>, message: &str, lsn: u64) -> PyErr {
        self.decode_error_of(py, message, Some(lsn), None)
    }

    /// The DecodeError `message`, with the `lsn` and `xid` context that is known.
    pub(crate) fn decode_error_of(
        &self,
        py: Python<'_>,
        message: &str,
        lsn: Option<u64>,
        xid: Option<u32>,
    ) -> PyErr {
        let build = || -> PyResult<PyErr> {
            let kwargs = PyDict::new(py);
            if let Some(lsn) = lsn {
                kwargs.set_item("lsn", lsn)?;
            }
            if let Some(xid) = xid {
                kwargs.set_item("xid", xid)?;
            }
            let exc = self.decode_error.bind(py).call((message,), Some(&kwargs))?;
            Ok(PyErr::from_value(exc))
        };
        build().unwrap_or_else(|e| e)
    }

    fn decode_inner<'py>(
        &self,
        py: Python<'py>,
        op: &str,
        record: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let Some(parse) = parser(op) else {
            return Err(PyValueError::new_err(format!(
                "no native heap parser {op:?}"
            )));
        };
        let lsn = record.getattr("lsn")?;
        let main_obj = record.getattr("main_data")?;
        let main: &[u8] = main_obj.cast::<PyBytes>()?.as_bytes();
        let blocks_obj = record.getattr("blocks")?;
        let blocks = blocks_obj.cast::<PyTuple>()?;
        // _block0: block ids ascend, so block 0 can only be the first.
        let mut ref0 = None;
        if let Ok(first) = blocks.get_item(0) {
            if first.getattr("block_id")?.extract::<u32>()? == 0 {
                ref0 = Some(first);
            }
        }
        let data_obj = match &ref0 {
            Some(b) => Some(b.getattr("data")?),
            None => None,
        };
        let block0: Option<&[u8]> = match &data_obj {
            Some(d) => Some(d.cast::<PyBytes>()?.as_bytes()),
            None => None,
        };
        let input = Input {
            info: record.getattr("info")?.extract()?,
            main,
            block0,
        };
        let events = match parse(&input) {
            Ok(ev) => ev,
            Err(message) => {
                let kwargs = PyDict::new(py);
                kwargs.set_item("lsn", &lsn)?;
                let exc = self.decode_error.bind(py).call((message,), Some(&kwargs))?;
                return Err(PyErr::from_value(exc));
            }
        };
        let xid = record.getattr("xid")?;
        let origin = record.getattr("origin")?;
        let r0 = match &ref0 {
            Some(r) => Some((r.getattr("locator")?, r.getattr("block")?)),
            None => None,
        };
        self.events_py(
            py,
            PyList::empty(py),
            &events,
            &lsn,
            &xid,
            &origin,
            main,
            r0,
            block0.unwrap_or(&[]),
        )
    }

    /// The Python events of parsed `events`, as the Python parser builds them for a
    /// record logged at `lsn` by `xid` (with `origin`): `main` is its main data; `ref0`
    /// the locator and block number of its block reference 0, if it has one, and
    /// `block0` that reference's data; appended to `out`, which is returned.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn events_py<'py>(
        &self,
        py: Python<'py>,
        out: Bound<'py, PyList>,
        events: &[Event],
        lsn: &Bound<'py, PyAny>,
        xid: &Bound<'py, PyAny>,
        origin: &Bound<'py, PyAny>,
        main: &[u8],
        ref0: Option<(Bound<'py, PyAny>, Bound<'py, PyAny>)>,
        block0: &[u8],
    ) -> PyResult<Bound<'py, PyList>> {
        for ev in events {
            match ev {
                Event::Change {
                    kind,
                    offset,
                    new_tuple,
                    old_tuple,
                    old_is_key,
                    clear_toast_afterwards,
                    on_toast_relation,
                } => {
                    let Some((locator, block)) = &ref0 else {
                        return Err(PyValueError::new_err("heap change without block 0"));
                    };
                    let change = self.change_py(
                        py,
                        lsn.clone(),
                        xid.clone(),
                        *kind,
                        locator.clone(),
                        block.clone(),
                        *offset,
                        self.tuple(py, new_tuple, main, block0)?,
                        self.tuple(py, old_tuple, main, block0)?,
                        *old_is_key,
                        *clear_toast_afterwards,
                        *on_toast_relation,
                        origin.clone(),
                    )?;
                    out.append(change)?;
                }
                Event::Truncate {
                    db_oid,
                    relids,
                    cascade,
                    restart_seqs,
                } => {
                    let kw = PyDict::new(py);
                    kw.set_item("lsn", lsn)?;
                    kw.set_item("xid", xid)?;
                    kw.set_item("db_oid", *db_oid)?;
                    kw.set_item("relids", PyTuple::new(py, relids)?)?;
                    kw.set_item("cascade", *cascade)?;
                    kw.set_item("restart_seqs", *restart_seqs)?;
                    kw.set_item("origin", origin)?;
                    out.append(self.truncate_event.bind(py).call((), Some(&kw))?)?;
                }
                Event::NewCid {
                    locator,
                    block,
                    offset,
                    cmin,
                    cmax,
                    combocid,
                    top_xid,
                } => {
                    let kw = PyDict::new(py);
                    kw.set_item("lsn", lsn)?;
                    kw.set_item("xid", xid)?;
                    kw.set_item("locator", self.locator.bind(py).call1(*locator)?)?;
                    kw.set_item("block", *block)?;
                    kw.set_item("offset", *offset)?;
                    kw.set_item("cmin", *cmin)?;
                    kw.set_item("cmax", *cmax)?;
                    kw.set_item("combocid", *combocid)?;
                    kw.set_item("top_xid", *top_xid)?;
                    out.append(self.new_cid_event.bind(py).call((), Some(&kw))?)?;
                }
            }
        }
        Ok(out)
    }
}

#[pymethods]
impl PyHeapDecoder {
    #[new]
    #[pyo3(signature = (raw_tuple, heap_change, truncate_event, new_cid_event, locator, kinds, decode_error))]
    fn new(
        raw_tuple: &Bound<'_, PyType>,
        heap_change: &Bound<'_, PyType>,
        truncate_event: Py<PyAny>,
        new_cid_event: Py<PyAny>,
        locator: Py<PyAny>,
        kinds: Vec<Py<PyAny>>,
        decode_error: Py<PyAny>,
    ) -> PyResult<Self> {
        if kinds.len() != 6 {
            return Err(PyValueError::new_err("ChangeKind must have 6 members"));
        }
        Ok(PyHeapDecoder {
            raw_tuple: SlotClass::of_dataclass(raw_tuple, 5)?,
            heap_change: SlotClass::of_dataclass(heap_change, 12)?,
            truncate_event,
            new_cid_event,
            locator,
            kinds,
            decode_error,
        })
    }

    /// The events of one heap/heap2 record, as service.decode.heap.decode_<op>.
    fn decode<'py>(
        &self,
        py: Python<'py>,
        op: &str,
        record: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        match catch_unwind(AssertUnwindSafe(|| self.decode_inner(py, op, record))) {
            Ok(r) => r,
            Err(_) => {
                let kwargs = PyDict::new(py);
                kwargs.set_item("lsn", record.getattr("lsn")?)?;
                let exc = self.decode_error.bind(py).call(
                    (format!("internal error in the native heap decoder ({op})"),),
                    Some(&kwargs),
                )?;
                Err(PyErr::from_value(exc))
            }
        }
    }
}
