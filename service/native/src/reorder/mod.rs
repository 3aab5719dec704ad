//! The reorder buffer's native half (service.reorder in Python): a run of one
//! transaction's plain inserts kept as plain data, so that it is queued, spilled and
//! replayed as one change (`run`), the tuples staying bytes until the plugin encodes
//! them. The buffer itself (ordering, memory accounting, spill files) is the Python
//! stage's. Pure: no Python, no I/O.

pub mod run;
pub mod toast;
