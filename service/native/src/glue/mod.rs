//! The PyO3 boundary, one glue module per pipeline stage: each is the only place that
//! stage's Rust is called from Python, and it is called from that stage's one Python
//! switch (service.impl names them), so the folders tell which path a row takes:
//!
//! | Rust glue | Python switch | stage |
//! |---|---|---|
//! | `wal` | service.wal.native | the WAL walk (xlogreader) |
//! | `decode` | service.decode.native_heap | heap records to events |
//! | `reorder` | service.decode.native_heap (runs) | runs of inserts, spilled as one |
//! | `avro` | connectors.avro.native_rows | the avro plugin's rows and envelope |
//! | `text` | service.output.native_text | test_decoding's lines |
//! | `tablesnap` | connectors.postgres.copy_binary | the snapshot's binary COPY rows |
//! | `kafka` | connectors.kafka.native_produce | the sink's runs of records into librdkafka |
//!
//! `slots` and `names` are helpers the glue shares: slotted result classes, and the
//! catalog name cache the plans print reg* and aclitem from (`NameCache`, filled by
//! connectors.postgres.catalog_types `CatalogNames`). `wal` also registers the
//! extension module `service._native`.

pub mod avro;
pub mod decode;
pub mod kafka;
pub mod names;
pub mod reorder;
pub mod slots;
pub mod tablesnap;
pub mod text;
pub mod wal;
