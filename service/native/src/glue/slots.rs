//! Instances of a slotted Python dataclass built from Rust without running Python code:
//! what the native boundary uses for the objects it makes once per row (`RawTuple`,
//! `HeapChange`), whose dataclass `__init__` (`object.__setattr__` per field of a
//! frozen class) costs more than the parse that fills them.
//!
//! Receives: once, a class and the names of all its fields in order
//! (`dataclasses.fields`), each of which must be one of the class's own `__slots__`
//! (a writable object member, `Py_T_OBJECT_EX`), and nothing else of its layout may
//! need setting (no `__dict__`, no items). Checked when the builder is made: anything
//! else is a `TypeError` there, never a bad object later.
//! Hands on: per `build`, an ordinary instance of that exact class, allocated by the
//! class's own allocator (`PyType_GenericAlloc`: zeroed, reference-counted, tracked by
//! the cyclic collector like any instance) with each field's value stored in its slot:
//! the state the dataclass `__init__` leaves, so equality, hashing, `repr`,
//! `dataclasses.replace` and pickling see no difference.
//!
//! This is the one `unsafe` part of the boundary: the slot offsets are read from the
//! member descriptors (CPython's `PyMemberDescrObject`, whose layout is part of its
//! non-limited C API; the extension is built for one interpreter, not abi3), and each
//! value is written at its offset, as CPython's own `PyMember_SetOne` does.

use std::ffi::CStr;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyType;

pub(crate) struct SlotClass {
    ty: Py<PyType>,
    offsets: Vec<ffi::Py_ssize_t>,
}

impl SlotClass {
    /// The builder of a dataclass's instances, its fields as `dataclasses.fields` lists
    /// them; a TypeError unless it has the `n` fields its caller's `build` calls give.
    pub(crate) fn of_dataclass(cls: &Bound<'_, PyType>, n: usize) -> PyResult<Self> {
        let fields = cls
            .py()
            .import("dataclasses")?
            .getattr("fields")?
            .call1((cls,))?;
        let mut names = Vec::new();
        for f in fields.try_iter()? {
            names.push(f?.getattr("name")?.extract::<String>()?);
        }
        let slots = SlotClass::new(cls, &names)?;
        if names.len() != n {
            return Err(PyTypeError::new_err(format!(
                "{cls} has {} fields, not the {n} the native core fills",
                names.len()
            )));
        }
        Ok(slots)
    }

    /// The builder of `cls` instances whose fields are `names`, in the order `build`
    /// takes their values.
    pub(crate) fn new(cls: &Bound<'_, PyType>, names: &[String]) -> PyResult<Self> {
        let tp = cls.as_type_ptr();
        // SAFETY: `tp` is a live type object (held by `cls`); only plain fields read.
        let (basicsize, itemsize, dictoffset) =
            unsafe { ((*tp).tp_basicsize, (*tp).tp_itemsize, (*tp).tp_dictoffset) };
        if itemsize != 0 || dictoffset != 0 {
            return Err(PyTypeError::new_err(format!(
                "{cls}: not a slotted class without __dict__"
            )));
        }
        let slots: Vec<String> = cls.getattr("__slots__")?.extract()?;
        if slots.len() != names.len() || slots.iter().any(|s| !names.contains(s)) {
            return Err(PyTypeError::new_err(format!(
                "{cls}: the fields {names:?} are not its __slots__ {slots:?}"
            )));
        }
        let mut offsets = Vec::with_capacity(names.len());
        for name in names {
            let descr = cls.getattr(name.as_str())?;
            let d = descr.as_ptr();
            // SAFETY: PyMemberDescr_Type is a static type object of the interpreter.
            let is_member =
                unsafe { ffi::Py_TYPE(d) == std::ptr::addr_of_mut!(ffi::PyMemberDescr_Type) };
            if !is_member {
                return Err(PyTypeError::new_err(format!(
                    "{cls}.{name} is not a slot member"
                )));
            }
            // SAFETY: `d` is a PyMemberDescrObject (checked above), kept alive by `descr`;
            // its d_member points at the PyMemberDef of the owning type, alive with it.
            let (owner, def) = unsafe {
                let m = d.cast::<ffi::PyMemberDescrObject>();
                (
                    (*m).d_common.d_type,
                    *(*m).d_member.cast::<ffi::PyMemberDef>(),
                )
            };
            // SAFETY: a member's name is a NUL-terminated C string (or null).
            let same_name = !def.name.is_null()
                && unsafe { CStr::from_ptr(def.name) }.to_bytes() == name.as_bytes();
            let fits = def.offset >= std::mem::size_of::<ffi::PyObject>() as ffi::Py_ssize_t
                && def.offset + std::mem::size_of::<*mut ffi::PyObject>() as ffi::Py_ssize_t
                    <= basicsize;
            if owner != tp
                || !same_name
                || def.type_code != ffi::Py_T_OBJECT_EX
                || def.flags & ffi::Py_READONLY != 0
                || !fits
            {
                return Err(PyTypeError::new_err(format!(
                    "{cls}.{name} is not a writable object slot of {cls}"
                )));
            }
            offsets.push(def.offset);
        }
        Ok(SlotClass {
            ty: cls.clone().unbind(),
            offsets,
        })
    }

    /// A new instance with `values` in its fields (in the order given to `new`).
    pub(crate) fn build<'py, const N: usize>(
        &self,
        py: Python<'py>,
        values: [Bound<'py, PyAny>; N],
    ) -> PyResult<Bound<'py, PyAny>> {
        if N != self.offsets.len() {
            return Err(PyValueError::new_err(format!(
                "{} takes {} fields, not {N}",
                self.ty.bind(py),
                self.offsets.len()
            )));
        }
        let tp = self.ty.bind(py).as_type_ptr();
        // SAFETY: allocates an instance of a live type (zeroed slots, refcount 1).
        let obj = unsafe { ffi::PyType_GenericAlloc(tp, 0) };
        if obj.is_null() {
            return Err(PyErr::fetch(py));
        }
        for (offset, value) in self.offsets.iter().zip(values) {
            // SAFETY: `offset` is a checked slot of this type within its basicsize, and
            // NULL in a fresh instance; the slot takes over the reference `into_ptr`
            // gives up, as PyMember_SetOne stores a new reference.
            unsafe {
                *obj.cast::<u8>()
                    .offset(*offset)
                    .cast::<*mut ffi::PyObject>() = value.into_ptr();
            }
        }
        // SAFETY: `obj` is a new, owned, fully initialised reference.
        Ok(unsafe { Bound::from_owned_ptr(py, obj) })
    }
}
