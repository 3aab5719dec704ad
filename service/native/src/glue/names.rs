//! The PyO3 boundary of the catalog name cache: `service._native.NameCache`, the
//! native image of connectors.postgres.catalog_types `CatalogNames`' cache
//! (types::regproc::Names).
//!
//! Receives: from `CatalogNames`, each (kind, OID, text) its resolver resolved, kind a
//! reg* output function (`regclassout`, ...) or `role` (the text then being what
//! aclitemout prints for the role: service.types.acl.role_text), and `clear()` whenever
//! its own cache is cleared. Hands on: the cache a `RowPlan` or `TextPlan` is compiled
//! with (connectors.avro.native_rows and service.output.native_text pass it for reg* and
//! aclitem columns and arrays of them), shared by
//! reference, so a name put after the plan was compiled is seen by its next row. An
//! unknown kind is a ValueError. `get` and `len` are for tests.

use std::sync::Arc;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::types::regproc::{Named, Names};

#[pyclass(module = "service._native", name = "NameCache", frozen)]
pub struct PyNameCache {
    pub names: Arc<Names>,
}

fn named(kind: &str) -> PyResult<Named> {
    Named::parse(kind)
        .ok_or_else(|| PyValueError::new_err(format!("no catalog name of kind {kind:?}")))
}

#[pymethods]
impl PyNameCache {
    #[new]
    fn new() -> Self {
        PyNameCache {
            names: Arc::default(),
        }
    }

    /// Keep `text` as what (kind, oid) prints.
    fn put(&self, kind: &str, oid: u32, text: String) -> PyResult<()> {
        self.names.put(named(kind)?, oid, text);
        Ok(())
    }

    /// Forget every name (the Python resolver's cache was cleared).
    fn clear(&self) {
        self.names.clear();
    }

    fn get(&self, kind: &str, oid: u32) -> PyResult<Option<String>> {
        Ok(self.names.get(named(kind)?, oid))
    }

    fn __len__(&self) -> usize {
        self.names.len()
    }
}
