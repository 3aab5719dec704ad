//! The PyO3 boundary of the Kafka sink's produce loop: `service._native.DirectProducer`.
//!
//! Receives: from connectors.kafka.native_produce, the sink's confluent-kafka `Producer`
//! (pinned 2.16.1), the path of the librdkafka that package loaded into this process, its
//! version as confluent-kafka reports it, and the producer's `client.id`; then, per run
//! of records (connectors.kafka.sink `write_run`), the topic, the keys and values (lists
//! of `bytes` or None) and the run's headers.
//! Hands on: `produce`, which enqueues the run's records from `start` on the producer's
//! own librdkafka handle with `rd_kafka_produceva`, with the GIL released for the whole
//! run, and returns how far it got and librdkafka's error code where it stopped (0: all
//! enqueued). The sink produces the record it stopped at through confluent-kafka, which
//! raises that error as it always does (BufferError for a full queue, KafkaException
//! otherwise), then goes on from the next one.
//!
//! Why: through confluent-kafka each record costs a Python call with the GIL held,
//! converts the headers anew and allocates a per-message state; a snapshot reader's
//! thread waits for that GIL between its COPY rows. Enqueued here, a record is the same
//! librdkafka call confluent-kafka makes (`rd_kafka_producev` with RD_KAFKA_MSG_F_COPY,
//! the partition left to the configured partitioner, the current time, the headers in
//! order), on the same handle and so in the same Kafka transaction, without a delivery
//! callback (the sink sets none: confluent-kafka's delivery handler returns at once for
//! a message without its per-message state).
//!
//! The one `unsafe` part beside glue::slots: the handle is read from confluent-kafka's
//! `Handle` struct, whose first field after the object header is the `rd_kafka_t *`
//! (confluent_kafka.h). The Python switch builds this only for the pinned version; the
//! constructor also checks that the library's version matches and that the handle is a
//! producer named after `client.id`, so a layout that moved is refused, not used. The
//! handle is read again at every call: a closed producer (handle NULL) is refused.

use std::ffi::{c_char, c_int, c_void, CStr, CString};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

// rdkafka.h: rd_kafka_vtype_t, the message flags and the error this module names.
const VTYPE_TOPIC: c_int = 1;
const VTYPE_VALUE: c_int = 4;
const VTYPE_KEY: c_int = 5;
const VTYPE_MSGFLAGS: c_int = 7;
const VTYPE_HEADER: c_int = 9;
const MSG_F_COPY: c_int = 0x2;
const RD_KAFKA_PRODUCER: c_int = 0;
/// RD_KAFKA_RESP_ERR__STATE: what `produce` reports for a closed producer, so that
/// the sink's confluent-kafka call raises the closed producer's own error.
const ERR_STATE: c_int = -172;
/// The fewest records `produce` enqueues with the GIL released.
const DETACH_FROM: usize = 16;

#[repr(C)]
#[derive(Clone, Copy)]
struct Mem {
    ptr: *const c_void,
    size: usize,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct Header {
    name: *const c_char,
    val: *const c_void,
    size: isize,
}

/// rd_kafka_vu_t's union, padded to its 64 bytes.
#[repr(C)]
#[derive(Clone, Copy)]
union VuValue {
    cstr: *const c_char,
    i: c_int,
    mem: Mem,
    header: Header,
    _pad: [u8; 64],
}

/// rd_kafka_vu_t: one argument of rd_kafka_produceva.
#[repr(C)]
#[derive(Clone, Copy)]
struct Vu {
    vtype: c_int,
    u: VuValue,
}

// rd_kafka_vu_t's layout: an int tag, then the union of 64 bytes, 8-byte aligned.
const _: () = assert!(std::mem::size_of::<VuValue>() == 64);
const _: () = assert!(std::mem::size_of::<Vu>() == 72);
const _: () = assert!(std::mem::offset_of!(Vu, u) == 8);

type ProduceVa = unsafe extern "C" fn(*mut c_void, *const Vu, usize) -> *mut c_void;
type ErrorCode = unsafe extern "C" fn(*const c_void) -> c_int;
type ErrorDestroy = unsafe extern "C" fn(*mut c_void);
type HandleType = unsafe extern "C" fn(*const c_void) -> c_int;
type HandleName = unsafe extern "C" fn(*const c_void) -> *const c_char;
type Version = unsafe extern "C" fn() -> c_int;

#[pyclass(module = "service._native", name = "DirectProducer", frozen)]
pub struct PyDirectProducer {
    producer: Py<PyAny>,
    produceva: ProduceVa,
    error_code: ErrorCode,
    error_destroy: ErrorDestroy,
}

/// The run's records as raw (pointer, length) pairs, valid while the lists that own the
/// `bytes` are alive and unchanged (`produce` holds a reference to each object).
struct Records {
    keys: Vec<Mem>,
    values: Vec<Mem>,
}

// SAFETY: the pointers point into `bytes` objects `produce` keeps referenced for the
// whole call; `bytes` are immutable, so another thread cannot change what they hold.
unsafe impl Send for Records {}

fn symbol<T: Copy>(lib: *mut c_void, name: &CStr) -> PyResult<T> {
    // SAFETY: dlsym on a handle dlopen returned; the caller names the C type of the symbol.
    let found = unsafe { libc::dlsym(lib, name.as_ptr()) };
    if found.is_null() {
        return Err(PyValueError::new_err(format!(
            "librdkafka has no symbol {}",
            name.to_string_lossy()
        )));
    }
    debug_assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: a function pointer and a data pointer have one size on the platforms built.
    Ok(unsafe { std::mem::transmute_copy::<*mut c_void, T>(&found) })
}

/// The `rd_kafka_t *` in confluent-kafka's `Handle`, right after the object header.
fn handle_of(producer: &Bound<'_, PyAny>) -> *mut c_void {
    let base = producer.as_ptr().cast::<u8>();
    // SAFETY: `producer` is a live cimpl.Producer (checked by the Python switch), whose
    // struct begins with PyObject_HEAD then the handle pointer (module docstring).
    unsafe {
        base.add(std::mem::size_of::<ffi::PyObject>())
            .cast::<*mut c_void>()
            .read()
    }
}

fn mem_of(item: &Bound<'_, PyAny>, what: &str, i: usize) -> PyResult<Mem> {
    if item.is_none() {
        return Ok(Mem {
            ptr: std::ptr::null(),
            size: 0,
        });
    }
    let b = item
        .cast::<PyBytes>()
        .map_err(|_| PyTypeError::new_err(format!("record {i}'s {what} is not bytes")))?;
    let s = b.as_bytes();
    Ok(Mem {
        ptr: s.as_ptr().cast(),
        size: s.len(),
    })
}

#[pymethods]
impl PyDirectProducer {
    /// Bind to `producer`'s handle in the librdkafka loaded from `library`, after
    /// checking it is version `version` and a producer named after `client_id`.
    #[new]
    fn new(
        producer: Bound<'_, PyAny>,
        library: &str,
        version: i64,
        client_id: &str,
    ) -> PyResult<Self> {
        let path = CString::new(library).map_err(|e| PyValueError::new_err(e.to_string()))?;
        // SAFETY: RTLD_NOLOAD only finds a library already loaded; nothing is initialised.
        let lib = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
        if lib.is_null() {
            return Err(PyValueError::new_err(format!(
                "{library} is not loaded in this process"
            )));
        }
        let loaded: Version = symbol(lib, c"rd_kafka_version")?;
        // SAFETY: rd_kafka_version takes nothing and returns an int.
        let have = i64::from(unsafe { loaded() });
        if have != version {
            return Err(PyValueError::new_err(format!(
                "{library} is version {have:#x}, confluent-kafka reports {version:#x}"
            )));
        }
        let handle_type: HandleType = symbol(lib, c"rd_kafka_type")?;
        let handle_name: HandleName = symbol(lib, c"rd_kafka_name")?;
        let rk = handle_of(&producer);
        if rk.is_null() {
            return Err(PyValueError::new_err("the producer is closed"));
        }
        // SAFETY: `rk` is the producer's live handle (module docstring).
        let (kind, name) = unsafe {
            (
                handle_type(rk),
                CStr::from_ptr(handle_name(rk))
                    .to_string_lossy()
                    .into_owned(),
            )
        };
        if kind != RD_KAFKA_PRODUCER || !name.starts_with(&format!("{client_id}#producer-")) {
            return Err(PyValueError::new_err(format!(
                "the handle read is not this producer (type {kind}, name {name:?})"
            )));
        }
        Ok(Self {
            producer: producer.unbind(),
            produceva: symbol(lib, c"rd_kafka_produceva")?,
            error_code: symbol(lib, c"rd_kafka_error_code")?,
            error_destroy: symbol(lib, c"rd_kafka_error_destroy")?,
        })
    }

    /// Enqueue records `start..` of the run (module docstring): returns (the index of
    /// the first record not enqueued, or len(values); librdkafka's error code there, or 0).
    fn produce(
        &self,
        py: Python<'_>,
        topic: &str,
        keys: &Bound<'_, PyList>,
        values: &Bound<'_, PyList>,
        start: usize,
        headers: Vec<(String, Vec<u8>)>,
    ) -> PyResult<(usize, i32)> {
        let n = values.len();
        if keys.len() != n {
            return Err(PyValueError::new_err(format!(
                "{} keys for {n} values",
                keys.len()
            )));
        }
        let rk = handle_of(self.producer.bind(py));
        if rk.is_null() {
            return Ok((start, ERR_STATE));
        }
        let topic = CString::new(topic).map_err(|e| PyValueError::new_err(e.to_string()))?;
        let names = headers
            .iter()
            .map(|(name, _)| CString::new(name.as_str()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let mut owners = Vec::with_capacity(2 * n.saturating_sub(start));
        let mut records = Records {
            keys: Vec::with_capacity(n.saturating_sub(start)),
            values: Vec::with_capacity(n.saturating_sub(start)),
        };
        for i in start..n {
            let (key, value) = (keys.get_item(i)?, values.get_item(i)?);
            records.keys.push(mem_of(&key, "key", i)?);
            records.values.push(mem_of(&value, "value", i)?);
            owners.push(key);
            owners.push(value);
        }
        let mut fixed = vec![
            Vu {
                vtype: VTYPE_TOPIC,
                u: VuValue {
                    cstr: topic.as_ptr(),
                },
            },
            Vu {
                vtype: VTYPE_MSGFLAGS,
                u: VuValue { i: MSG_F_COPY },
            },
        ];
        for (name, (_, value)) in names.iter().zip(&headers) {
            fixed.push(Vu {
                vtype: VTYPE_HEADER,
                u: VuValue {
                    header: Header {
                        name: name.as_ptr(),
                        val: value.as_ptr().cast(),
                        size: value.len() as isize,
                    },
                },
            });
        }
        let call = Call {
            rk,
            fixed,
            produceva: self.produceva,
            error_code: self.error_code,
            error_destroy: self.error_destroy,
        };
        // A short run (a small transaction's few records) is enqueued with the GIL held:
        // releasing and taking it back again costs more than the enqueuing.
        let (done, code) = if records.values.len() < DETACH_FROM {
            call.run(&records)
        } else {
            py.detach(move || call.run(&records))
        };
        drop(owners);
        Ok((start + done, code))
    }
}

/// One `produce` call's arguments, moved into the GIL-free part.
struct Call {
    rk: *mut c_void,
    fixed: Vec<Vu>,
    produceva: ProduceVa,
    error_code: ErrorCode,
    error_destroy: ErrorDestroy,
}

// SAFETY: `rk` is thread-safe for produce (librdkafka); the arguments' pointers are held
// by `produce` (topic and header names, header values, the records' owners) for the call.
unsafe impl Send for Call {}

impl Call {
    /// Enqueue each record; stop at the first refusal with its error code.
    fn run(&self, records: &Records) -> (usize, i32) {
        let mut args = self.fixed.clone();
        let base = args.len();
        for (i, (key, value)) in records.keys.iter().zip(&records.values).enumerate() {
            args.truncate(base);
            if !value.ptr.is_null() {
                args.push(Vu {
                    vtype: VTYPE_VALUE,
                    u: VuValue { mem: *value },
                });
            }
            if !key.ptr.is_null() {
                args.push(Vu {
                    vtype: VTYPE_KEY,
                    u: VuValue { mem: *key },
                });
            }
            // SAFETY: `args` is a valid rd_kafka_vu_t array for the live handle `rk`.
            let err = unsafe { (self.produceva)(self.rk, args.as_ptr(), args.len()) };
            if !err.is_null() {
                // SAFETY: `err` is the rd_kafka_error_t produceva returned, owned here.
                let code = unsafe {
                    let code = (self.error_code)(err);
                    (self.error_destroy)(err);
                    code
                };
                return (i, code);
            }
        }
        (records.values.len(), 0)
    }
}
