//! Heap and Heap2 record parsers (DecodeInsert, DecodeUpdate, DecodeDelete,
//! DecodeSpecConfirm, DecodeTruncate, DecodeMultiInsert and the XLOG_HEAP2_NEW_CID part
//! of SnapBuildProcessNewCid's input in decode.c; the native twin of
//! service/decode_heap.py, check for check and message for message).
//!
//! Receives: one record's LSN, xid, xl_info, origin, main data and block 0 (the caller
//! looks it up as `_block0` does), of an op the caller chose.
//! Hands on: the events decode.c would queue, in record order, as plain Rust values:
//! `Change` (one per tuple; a multi-insert gives one per tuple, all with the record's
//! LSN), `Truncate`, `NewCid`. Tuples stay raw: `xl_heap_header` (t_infomask2,
//! t_infomask, t_hoff) and the bytes after it.
//! Errors: `DecodeError` (the message; the LSN is the record's): main data shorter than
//! its struct, a missing block 0, a tuple shorter than its header, multi-insert tuples
//! overrunning the block data, a prefix/suffix-compressed new tuple.
//! Pure: no I/O, no state. XLOG_HEAP_INPLACE stays with the Python reference until the
//! invalidation parser (decode_xact) has a twin here.

use std::ops::Range;

use crate::wal::{u16_at, u32_at};

const XLH_INSERT_LAST_IN_MULTI: u8 = 1 << 1;
const XLH_INSERT_IS_SPECULATIVE: u8 = 1 << 2;
const XLH_INSERT_CONTAINS_NEW_TUPLE: u8 = 1 << 3;
const XLH_INSERT_ON_TOAST_RELATION: u8 = 1 << 4;
const XLH_UPDATE_CONTAINS_OLD_TUPLE: u8 = 1 << 2;
const XLH_UPDATE_CONTAINS_OLD_KEY: u8 = 1 << 3;
const XLH_UPDATE_CONTAINS_NEW_TUPLE: u8 = 1 << 4;
const XLH_UPDATE_PREFIX_FROM_OLD: u8 = 1 << 5;
const XLH_UPDATE_SUFFIX_FROM_OLD: u8 = 1 << 6;
const XLH_DELETE_CONTAINS_OLD_TUPLE: u8 = 1 << 1;
const XLH_DELETE_CONTAINS_OLD_KEY: u8 = 1 << 2;
const XLH_DELETE_IS_SUPER: u8 = 1 << 3;
const XLH_TRUNCATE_CASCADE: u8 = 1 << 0;
const XLH_TRUNCATE_RESTART_SEQS: u8 = 1 << 1;
const XLOG_HEAP_INIT_PAGE: u8 = 0x80;

const SIZE_OF_HEAP_HEADER: usize = 5;
const SIZE_OF_HEAP_INSERT: usize = 3;
const SIZE_OF_HEAP_DELETE: usize = 8;
const SIZE_OF_HEAP_UPDATE: usize = 14;
const SIZE_OF_HEAP_TRUNCATE: usize = 12;
const SIZE_OF_HEAP_CONFIRM: usize = 2;
const SIZE_OF_HEAP_MULTI_INSERT: usize = 4;
const SIZE_OF_MULTI_INSERT_TUPLE: usize = 7;
const SIZE_OF_HEAP_NEW_CID: usize = 34;
const HEAP_NATTS_MASK: u16 = 0x07FF;

/// `ChangeKind` of service.events (its integer values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Insert = 0,
    Update = 1,
    Delete = 2,
    SpecInsert = 3,
    SpecConfirm = 4,
    SpecAbort = 5,
}

/// Which slice a tuple's bytes come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Main,
    Block0,
}

/// `RawTuple`: the header fields, and where its data (after xl_heap_header) lies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tuple {
    pub natts: u16,
    pub infomask: u16,
    pub infomask2: u16,
    pub hoff: u8,
    pub source: Source,
    pub data: Range<usize>,
}

/// The events of service.events that heap records produce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// `HeapChange`, at the record's LSN, xid and origin, on block 0's relation.
    Change {
        kind: Kind,
        offset: u16,
        new_tuple: Option<Tuple>,
        old_tuple: Option<Tuple>,
        old_is_key: bool,
        clear_toast_afterwards: bool,
        on_toast_relation: bool,
    },
    Truncate {
        db_oid: u32,
        relids: Vec<u32>,
        cascade: bool,
        restart_seqs: bool,
    },
    NewCid {
        locator: (u32, u32, u32),
        block: u32,
        offset: u16,
        cmin: u32,
        cmax: u32,
        combocid: u32,
        top_xid: u32,
    },
}

/// What the parsers read of a record.
pub struct Input<'a> {
    pub info: u8,
    pub main: &'a [u8],
    /// Block reference 0's data, when the record has one.
    pub block0: Option<&'a [u8]>,
}

pub type Result<T> = std::result::Result<T, String>;

fn short(main: &[u8], size: usize, what: &str) -> String {
    format!(
        "{what} record truncated: main data has {} bytes, needs {size}",
        main.len()
    )
}

fn block0<'a>(input: &Input<'a>, what: &str) -> Result<&'a [u8]> {
    input
        .block0
        .ok_or_else(|| format!("{what} record has no block reference 0"))
}

/// `xl_heap_header` + tuple bytes from `data[start..]` (DecodeXLogTuple).
fn tuple(data: &[u8], start: usize, source: Source, what: &str) -> Result<Tuple> {
    if data.len() < start + SIZE_OF_HEAP_HEADER {
        return Err(format!(
            "{what}: tuple shorter than xl_heap_header ({} bytes)",
            data.len() as i64 - start as i64
        ));
    }
    let infomask2 = u16_at(data, start);
    Ok(Tuple {
        natts: infomask2 & HEAP_NATTS_MASK,
        infomask: u16_at(data, start + 2),
        infomask2,
        hoff: data[start + 4],
        source,
        data: start + SIZE_OF_HEAP_HEADER..data.len(),
    })
}

fn change(kind: Kind, offset: u16) -> Event {
    Event::Change {
        kind,
        offset,
        new_tuple: None,
        old_tuple: None,
        old_is_key: false,
        clear_toast_afterwards: true,
        on_toast_relation: false,
    }
}

/// XLOG_HEAP_INSERT (decode_insert).
pub fn insert(input: &Input<'_>) -> Result<Vec<Event>> {
    let main = input.main;
    if main.len() < SIZE_OF_HEAP_INSERT {
        return Err(short(main, SIZE_OF_HEAP_INSERT, "heap insert"));
    }
    let offnum = u16_at(main, 0);
    let flags = main[2];
    if flags & XLH_INSERT_CONTAINS_NEW_TUPLE == 0 {
        return Ok(Vec::new());
    }
    let data = block0(input, "heap insert")?;
    let kind = if flags & XLH_INSERT_IS_SPECULATIVE != 0 {
        Kind::SpecInsert
    } else {
        Kind::Insert
    };
    if data.len() < SIZE_OF_HEAP_HEADER {
        return Err(format!(
            "heap insert: tuple shorter than xl_heap_header ({} bytes)",
            data.len()
        ));
    }
    let tup = tuple(data, 0, Source::Block0, "heap insert")?;
    Ok(vec![Event::Change {
        kind,
        offset: offnum,
        new_tuple: Some(tup),
        old_tuple: None,
        old_is_key: false,
        clear_toast_afterwards: true,
        on_toast_relation: flags & XLH_INSERT_ON_TOAST_RELATION != 0,
    }])
}

/// XLOG_HEAP_UPDATE and XLOG_HEAP_HOT_UPDATE (decode_update).
pub fn update(input: &Input<'_>) -> Result<Vec<Event>> {
    let main = input.main;
    if main.len() < SIZE_OF_HEAP_UPDATE {
        return Err(short(main, SIZE_OF_HEAP_UPDATE, "heap update"));
    }
    let flags = main[7];
    let new_offnum = u16_at(main, 12);
    let data = block0(input, "heap update")?;
    let mut new_tuple = None;
    if flags & XLH_UPDATE_CONTAINS_NEW_TUPLE != 0 {
        if flags & (XLH_UPDATE_PREFIX_FROM_OLD | XLH_UPDATE_SUFFIX_FROM_OLD) != 0 {
            return Err(format!(
                "heap update new tuple is prefix/suffix-compressed against the old page \
                 (flags 0x{flags:02X}); its bytes cannot be rebuilt without that page"
            ));
        }
        new_tuple = Some(tuple(data, 0, Source::Block0, "heap update new tuple")?);
    }
    let mut old_tuple = None;
    if flags & (XLH_UPDATE_CONTAINS_OLD_TUPLE | XLH_UPDATE_CONTAINS_OLD_KEY) != 0 {
        // caution, as in DecodeUpdate: the old tuple follows xl_heap_update unaligned
        old_tuple = Some(tuple(
            main,
            SIZE_OF_HEAP_UPDATE,
            Source::Main,
            "heap update old tuple",
        )?);
    }
    let old_is_key = old_tuple.is_some() && flags & XLH_UPDATE_CONTAINS_OLD_TUPLE == 0;
    Ok(vec![Event::Change {
        kind: Kind::Update,
        offset: new_offnum,
        new_tuple,
        old_tuple,
        old_is_key,
        clear_toast_afterwards: true,
        on_toast_relation: false,
    }])
}

/// XLOG_HEAP_DELETE (decode_delete; XLH_DELETE_IS_SUPER is a speculative abort).
pub fn delete(input: &Input<'_>) -> Result<Vec<Event>> {
    let main = input.main;
    if main.len() < SIZE_OF_HEAP_DELETE {
        return Err(short(main, SIZE_OF_HEAP_DELETE, "heap delete"));
    }
    let offnum = u16_at(main, 4);
    let flags = main[7];
    block0(input, "heap delete")?;
    let mut old_tuple = None;
    if flags & (XLH_DELETE_CONTAINS_OLD_TUPLE | XLH_DELETE_CONTAINS_OLD_KEY) != 0 {
        old_tuple = Some(tuple(
            main,
            SIZE_OF_HEAP_DELETE,
            Source::Main,
            "heap delete old tuple",
        )?);
    }
    let kind = if flags & XLH_DELETE_IS_SUPER != 0 {
        Kind::SpecAbort
    } else {
        Kind::Delete
    };
    let old_is_key = old_tuple.is_some() && flags & XLH_DELETE_CONTAINS_OLD_TUPLE == 0;
    Ok(vec![Event::Change {
        kind,
        offset: offnum,
        new_tuple: None,
        old_tuple,
        old_is_key,
        clear_toast_afterwards: true,
        on_toast_relation: false,
    }])
}

/// XLOG_HEAP_CONFIRM (decode_confirm).
pub fn confirm(input: &Input<'_>) -> Result<Vec<Event>> {
    let main = input.main;
    if main.len() < SIZE_OF_HEAP_CONFIRM {
        return Err(short(main, SIZE_OF_HEAP_CONFIRM, "heap confirm"));
    }
    block0(input, "heap confirm")?;
    Ok(vec![change(Kind::SpecConfirm, u16_at(main, 0))])
}

/// XLOG_HEAP_TRUNCATE (decode_truncate): relation OIDs, not relfilenodes.
pub fn truncate(input: &Input<'_>) -> Result<Vec<Event>> {
    let main = input.main;
    if main.len() < SIZE_OF_HEAP_TRUNCATE {
        return Err(short(main, SIZE_OF_HEAP_TRUNCATE, "heap truncate"));
    }
    let db_oid = u32_at(main, 0);
    let nrelids = u32_at(main, 4) as usize;
    let flags = main[8];
    let need = SIZE_OF_HEAP_TRUNCATE + 4 * nrelids;
    if main.len() < need {
        return Err(short(main, need, "heap truncate"));
    }
    let relids = (0..nrelids)
        .map(|i| u32_at(main, SIZE_OF_HEAP_TRUNCATE + 4 * i))
        .collect();
    Ok(vec![Event::Truncate {
        db_oid,
        relids,
        cascade: flags & XLH_TRUNCATE_CASCADE != 0,
        restart_seqs: flags & XLH_TRUNCATE_RESTART_SEQS != 0,
    }])
}

/// XLOG_HEAP2_MULTI_INSERT (decode_multi_insert): one change per tuple.
pub fn multi_insert(input: &Input<'_>) -> Result<Vec<Event>> {
    let main = input.main;
    if main.len() < SIZE_OF_HEAP_MULTI_INSERT {
        return Err(short(main, SIZE_OF_HEAP_MULTI_INSERT, "heap multi-insert"));
    }
    let flags = main[0];
    let ntuples = usize::from(u16_at(main, 2));
    if flags & XLH_INSERT_CONTAINS_NEW_TUPLE == 0 {
        return Ok(Vec::new());
    }
    let offsets: Vec<u16> = if input.info & XLOG_HEAP_INIT_PAGE != 0 {
        // heap_xlog_multi_insert: on a fresh page the offsets are implicit
        (1..=ntuples as u16).collect()
    } else {
        let need = SIZE_OF_HEAP_MULTI_INSERT + 2 * ntuples;
        if main.len() < need {
            return Err(short(main, need, "heap multi-insert"));
        }
        (0..ntuples)
            .map(|i| u16_at(main, SIZE_OF_HEAP_MULTI_INSERT + 2 * i))
            .collect()
    };
    let data = block0(input, "heap multi-insert")?;
    let size = data.len();
    let last_clears = flags & XLH_INSERT_LAST_IN_MULTI != 0;
    let mut out = Vec::with_capacity(ntuples);
    let mut pos = 0usize;
    for (i, &offset) in offsets.iter().enumerate() {
        pos = (pos + 1) & !1; // SHORTALIGN
        let body = pos + SIZE_OF_MULTI_INSERT_TUPLE;
        let overrun = || {
            format!("heap multi-insert tuple {i} of {ntuples} overruns block data ({size} bytes)")
        };
        if body > size {
            return Err(overrun());
        }
        let datalen = usize::from(u16_at(data, pos));
        let infomask2 = u16_at(data, pos + 2);
        let infomask = u16_at(data, pos + 4);
        let hoff = data[pos + 6];
        let end = body + datalen;
        if end > size {
            return Err(overrun());
        }
        out.push(Event::Change {
            kind: Kind::Insert,
            offset,
            new_tuple: Some(Tuple {
                natts: infomask2 & HEAP_NATTS_MASK,
                infomask,
                infomask2,
                hoff,
                source: Source::Block0,
                data: body..end,
            }),
            old_tuple: None,
            old_is_key: false,
            // only the last tuple of the last record of one heap_multi_insert() call
            clear_toast_afterwards: last_clears && i + 1 == ntuples,
            on_toast_relation: false,
        });
        pos = end;
    }
    Ok(out)
}

/// XLOG_HEAP2_NEW_CID (decode_new_cid).
pub fn new_cid(input: &Input<'_>) -> Result<Vec<Event>> {
    let main = input.main;
    if main.len() < SIZE_OF_HEAP_NEW_CID {
        return Err(short(main, SIZE_OF_HEAP_NEW_CID, "heap2 new_cid"));
    }
    let f = |i: usize| u32_at(main, 4 * i);
    Ok(vec![Event::NewCid {
        top_xid: f(0),
        cmin: f(1),
        cmax: f(2),
        combocid: f(3),
        locator: (f(4), f(5), f(6)),
        block: (u32::from(u16_at(main, 28)) << 16) | u32::from(u16_at(main, 30)),
        offset: u16_at(main, 32),
    }])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_with_tuple() {
        let main = [7u8, 0, XLH_INSERT_CONTAINS_NEW_TUPLE];
        let data = [3u8, 0, 0x02, 0, 24, b'x', b'y'];
        let ev = insert(&Input {
            info: 0,
            main: &main,
            block0: Some(&data),
        })
        .unwrap();
        match &ev[..] {
            [Event::Change {
                kind: Kind::Insert,
                offset: 7,
                new_tuple: Some(t),
                ..
            }] => {
                assert_eq!((t.natts, t.infomask, t.hoff), (3, 2, 24));
                assert_eq!(t.data, 5..7);
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn short_main_data_names_the_sizes() {
        let err = update(&Input {
            info: 0,
            main: &[0; 3],
            block0: None,
        })
        .unwrap_err();
        assert_eq!(
            err,
            "heap update record truncated: main data has 3 bytes, needs 14"
        );
    }

    #[test]
    fn multi_insert_overrun_is_an_error() {
        let main = [XLH_INSERT_CONTAINS_NEW_TUPLE, 0, 2, 0, 1, 0, 2, 0];
        let data = [50u8, 0, 1, 0, 0, 0, 24];
        let err = multi_insert(&Input {
            info: 0,
            main: &main,
            block0: Some(&data),
        })
        .unwrap_err();
        assert!(err.starts_with("heap multi-insert tuple 0 of 2 overruns"));
    }
}
