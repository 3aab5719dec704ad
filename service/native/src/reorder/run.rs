//! The rows of a run as plain data, and their spill dump.
//!
//! Mirrors (PostgreSQL): the ReorderBufferChange / HeapTuple of each row of a run (a
//! plain insert, an UPDATE with its new tuple and, when logged, its old tuple or key,
//! or a DELETE logging only its old tuple or key: what `glue::reorder::HeapRows` holds), and the part of ReorderBufferSerializeChange /
//! ReorderBufferRestoreChange that writes such changes to a spill file and reads them
//! back. Python reference: `service.reorder.spill` (`_encode_heap` / `_decode_heap`,
//! one HeapChange per record); here all rows of one entry make one record.
//!
//! `dump` lays a window of rows out as bytes, little-endian:
//!
//! ```text
//! u8  version (DUMP_VERSION)
//! u32 xid
//! u32 row count (n >= 1)
//! n x { u64 lsn, u32 block, u16 offset, u16 natts, u16 infomask, u16 infomask2,
//!       u8 hoff, u8 flags, u32 tuple data length,
//!       u16 old natts, u16 old infomask, u16 old infomask2, u8 old hoff,
//!       u32 old tuple data length }
//! the rows' tuple data, concatenated in row order (a row's old tuple after its own)
//! ```
//!
//! `flags`: bit 0 the row's clear_toast_afterwards, bit 1 set for a TOAST chunk insert
//! (a row of the run's toast relation, which ReorderBufferToastAppendChunk collects at
//! replay; version 1 had no chunk rows and only bit 0), bit 2 for an UPDATE's row (its
//! tuple the new one), bit 3 for a DELETE's (its tuple the old one), bit 4 for an old
//! tuple that is only the replica identity key (old_is_key), bit 5 for an UPDATE's row
//! that also holds the old tuple (whose fields then follow; all zero otherwise; version
//! 2 had only inserts and bits 0 and 1). The tuple data length counts both tuples. The relations (locators) are not in it: the spill
//! record carries them beside the dump.
//! `load` takes such bytes back, checking everything: the version, the row count
//! against the bytes present, each row (no flag bit but those two, `natts` equal to
//! `infomask2 & HEAP_NATTS_MASK` as the decoder sets it, LSNs in WAL order), and that the
//! data lengths add up to exactly the bytes after the rows: a short, damaged or
//! trailing input is a `LoadError`, never a panic (and no allocation larger than the
//! input). Pure: no Python, no I/O.

/// The dump layout's version byte.
pub const DUMP_VERSION: u8 = 3;

const HEAD: usize = 1 + 4 + 4;
/// Bytes per row in the row table.
pub const ROW_BYTES: usize = 8 + 4 + 2 + 2 + 2 + 2 + 1 + 1 + 4 + OLD_BYTES;
/// Of those, the old tuple's fields.
const OLD_BYTES: usize = 2 + 2 + 2 + 1 + 4;
const HEAP_NATTS_MASK: u16 = 0x07FF;
const FLAG_CLEAR_TOAST: u8 = 0x01;
const FLAG_CHUNK: u8 = 0x02;
const FLAG_UPDATE: u8 = 0x04;
const FLAG_DELETE: u8 = 0x08;
const FLAG_OLD_KEY: u8 = 0x10;
const FLAG_OLD: u8 = 0x20;

/// What a row of a run is: the change kind its HeapChange has, and which of its tuples
/// the row holds (an insert's and an update's new one, and an update's old one when it
/// logged it; a delete's old one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowKind {
    Insert,
    /// `old`: the old tuple (or key) the UPDATE logged too, kept after the new one.
    Update {
        old: Option<OldTuple>,
    },
    /// `old_is_key`: the old tuple holds only the replica identity key's columns.
    Delete {
        old_is_key: bool,
    },
}

/// The old tuple an UPDATE logged (a key change, REPLICA IDENTITY FULL): its header
/// fields and the length of its data, which follows the new tuple's in the row's data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OldTuple {
    pub natts: u16,
    pub infomask: u16,
    pub infomask2: u16,
    pub hoff: u8,
    /// Only the replica identity key's columns (old_is_key).
    pub is_key: bool,
    pub len: usize,
}

const NO_OLD: OldTuple = OldTuple {
    natts: 0,
    infomask: 0,
    infomask2: 0,
    hoff: 0,
    is_key: false,
    len: 0,
};

impl RowKind {
    fn flags(self) -> u8 {
        match self {
            RowKind::Insert => 0,
            RowKind::Update { old: None } => FLAG_UPDATE,
            RowKind::Update { old: Some(o) } => {
                FLAG_UPDATE | FLAG_OLD | (u8::from(o.is_key) * FLAG_OLD_KEY)
            }
            RowKind::Delete { old_is_key } => FLAG_DELETE | (u8::from(old_is_key) * FLAG_OLD_KEY),
        }
    }

    /// The old tuple an update row holds, if any.
    pub fn old(self) -> Option<OldTuple> {
        match self {
            RowKind::Update { old } => old,
            _ => None,
        }
    }

    /// The kind the flags byte of a dumped row names (an update's old tuple as `old`,
    /// read from its fields), None for a combination `dump` never writes (both ops, a
    /// key or an old tuple where it cannot be, a chunk that is not an insert).
    fn of_flags(flag: u8, old: OldTuple) -> Option<RowKind> {
        let chunk = flag & FLAG_CHUNK != 0;
        let key = flag & FLAG_OLD_KEY != 0;
        let has_old = flag & FLAG_OLD != 0;
        match (flag & FLAG_UPDATE != 0, flag & FLAG_DELETE != 0) {
            (false, false) if !key && !has_old => Some(RowKind::Insert),
            (true, false) if !chunk && has_old => Some(RowKind::Update {
                old: Some(OldTuple { is_key: key, ..old }),
            }),
            (true, false) if !chunk && !key => Some(RowKind::Update { old: None }),
            // a delete's chunk row is a bare delete (no old tuple, so no key either)
            (false, true) if !(has_old || (chunk && key)) => {
                Some(RowKind::Delete { old_is_key: key })
            }
            _ => None,
        }
    }
}

/// One row: the fields of its HeapChange and RawTuple that vary per row, and where its
/// tuple data ends in the run's buffer (it starts where the previous row's ends).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    pub lsn: u64,
    pub end: usize,
    pub block: u32,
    pub offset: u16,
    pub natts: u16,
    pub infomask: u16,
    pub infomask2: u16,
    pub hoff: u8,
    pub clear_toast_afterwards: bool,
    pub kind: RowKind,
}

/// The dump of `rows` of transaction `xid`, whose tuple data lies in `data` from
/// `start` (where the first row's data starts) to the last row's `end`; `chunk[k]` says
/// whether row `k` is a TOAST chunk insert (empty: none is).
///
/// Panics if the rows do not fit `data` as described, or if there are more than
/// u32::MAX rows or a row's data is longer than u32::MAX bytes (a run's rows never
/// are: a WAL record is at most 1 GB): the caller's guard turns that into an error.
pub fn dump(xid: u32, rows: &[Row], chunk: &[bool], data: &[u8], start: usize) -> Vec<u8> {
    let end = rows.last().map_or(start, |r| r.end);
    let body = &data[start..end];
    let mut out = Vec::with_capacity(HEAD + rows.len() * ROW_BYTES + body.len());
    out.push(DUMP_VERSION);
    out.extend_from_slice(&xid.to_le_bytes());
    let n = u32::try_from(rows.len()).expect("an insert run has fewer than 2^32 rows");
    out.extend_from_slice(&n.to_le_bytes());
    let mut prev = start;
    for (k, r) in rows.iter().enumerate() {
        let len = u32::try_from(r.end - prev).expect("a tuple is shorter than 4 GB");
        prev = r.end;
        out.extend_from_slice(&r.lsn.to_le_bytes());
        out.extend_from_slice(&r.block.to_le_bytes());
        out.extend_from_slice(&r.offset.to_le_bytes());
        out.extend_from_slice(&r.natts.to_le_bytes());
        out.extend_from_slice(&r.infomask.to_le_bytes());
        out.extend_from_slice(&r.infomask2.to_le_bytes());
        out.push(r.hoff);
        let is_chunk = chunk.get(k).copied().unwrap_or(false);
        out.push(
            u8::from(r.clear_toast_afterwards) * FLAG_CLEAR_TOAST
                + u8::from(is_chunk) * FLAG_CHUNK
                + r.kind.flags(),
        );
        out.extend_from_slice(&len.to_le_bytes());
        let o = r.kind.old().unwrap_or(NO_OLD);
        out.extend_from_slice(&o.natts.to_le_bytes());
        out.extend_from_slice(&o.infomask.to_le_bytes());
        out.extend_from_slice(&o.infomask2.to_le_bytes());
        out.push(o.hoff);
        let old_len = u32::try_from(o.len).expect("a tuple is shorter than 4 GB");
        out.extend_from_slice(&old_len.to_le_bytes());
    }
    out.extend_from_slice(body);
    out
}

/// What `load` gives back: the rows (their `end`s relative to `data`), which of them are
/// TOAST chunk inserts (`chunk`: empty when none is), and their data.
#[derive(Debug, PartialEq, Eq)]
pub struct Loaded {
    pub xid: u32,
    pub rows: Vec<Row>,
    pub chunk: Vec<bool>,
    pub data: Vec<u8>,
}

/// Why a dump was refused, and the LSN it concerns once the rows are read (the first
/// row's, or the row at fault).
#[derive(Debug, PartialEq, Eq)]
pub struct LoadError {
    pub message: String,
    pub lsn: Option<u64>,
}

fn refuse<T>(message: String, lsn: Option<u64>) -> Result<T, LoadError> {
    Err(LoadError { message, lsn })
}

/// A little-endian reader over a slice that has already been checked long enough.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        out.copy_from_slice(&self.buf[self.pos..self.pos + N]);
        self.pos += N;
        out
    }
    fn u8(&mut self) -> u8 {
        self.take::<1>()[0]
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.take())
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }
}

/// The rows `dump` wrote into `input`, or why `input` is not such a dump.
pub fn load(input: &[u8]) -> Result<Loaded, LoadError> {
    if input.len() < HEAD {
        return refuse(
            format!(
                "insert run dump of {} bytes is shorter than its {HEAD}-byte header",
                input.len()
            ),
            None,
        );
    }
    let mut c = Cursor { buf: input, pos: 0 };
    let version = c.u8();
    if version != DUMP_VERSION {
        return refuse(
            format!("insert run dump has version {version}, expected {DUMP_VERSION}"),
            None,
        );
    }
    let xid = c.u32();
    let n = c.u32();
    if n == 0 {
        return refuse("insert run dump holds no rows".to_string(), None);
    }
    let table = u64::from(n) * ROW_BYTES as u64;
    let rest = (input.len() - HEAD) as u64;
    if table > rest {
        return refuse(
            format!(
                "insert run dump is too short for its {n} rows: {rest} bytes after the header, \
                 the row table alone needs {table}"
            ),
            None,
        );
    }
    let n = n as usize; // table <= rest: n fits
    let data_at = HEAD + n * ROW_BYTES;
    let data_len = input.len() - data_at;
    let mut rows = Vec::with_capacity(n);
    let mut chunk = Vec::with_capacity(n);
    let mut end: usize = 0;
    let mut last_lsn = 0u64;
    for k in 0..n {
        let lsn = c.u64();
        let block = c.u32();
        let offset = c.u16();
        let natts = c.u16();
        let infomask = c.u16();
        let infomask2 = c.u16();
        let hoff = c.u8();
        let flag = c.u8();
        let len = c.u32() as usize;
        let old = OldTuple {
            natts: c.u16(),
            infomask: c.u16(),
            infomask2: c.u16(),
            hoff: c.u8(),
            is_key: false,
            len: c.u32() as usize,
        };
        let known =
            FLAG_CLEAR_TOAST | FLAG_CHUNK | FLAG_UPDATE | FLAG_DELETE | FLAG_OLD_KEY | FLAG_OLD;
        let kind = match RowKind::of_flags(flag, old) {
            Some(kind) if flag & !known == 0 => kind,
            _ => {
                return refuse(
                    format!("insert run dump row {k} has flags byte {flag:#04x}"),
                    Some(lsn),
                )
            }
        };
        match kind.old() {
            Some(o) if o.natts != o.infomask2 & HEAP_NATTS_MASK || o.len > len => {
                return refuse(
                    format!(
                        "insert run dump row {k} has an old tuple of natts {} (infomask2 \
                         {:#06x}) and {} of its {len} data bytes",
                        o.natts, o.infomask2, o.len
                    ),
                    Some(lsn),
                );
            }
            None if old != NO_OLD => {
                return refuse(
                    format!("insert run dump row {k} has old tuple fields but no old tuple"),
                    Some(lsn),
                );
            }
            _ => {}
        }
        let is_chunk = flag & FLAG_CHUNK != 0;
        if is_chunk && matches!(kind, RowKind::Delete { .. }) && (len != 0 || natts != 0) {
            return refuse(
                format!(
                    "insert run dump row {k} has flags byte {flag:#04x} (a bare delete) \
                     with a tuple of natts {natts} and {len} data bytes"
                ),
                Some(lsn),
            );
        }
        chunk.push(is_chunk);
        if natts != infomask2 & HEAP_NATTS_MASK {
            return refuse(
                format!("insert run dump row {k} has natts {natts} but infomask2 {infomask2:#06x}"),
                Some(lsn),
            );
        }
        if k > 0 && lsn < last_lsn {
            return refuse(
                format!("insert run dump row {k} precedes row {} in the WAL", k - 1),
                Some(lsn),
            );
        }
        last_lsn = lsn;
        end = match end.checked_add(len) {
            Some(e) if e <= data_len => e,
            _ => {
                return refuse(
                    format!(
                        "insert run dump is short: row {k}'s tuple data ends past the \
                         {data_len} data bytes"
                    ),
                    Some(lsn),
                )
            }
        };
        rows.push(Row {
            lsn,
            end,
            block,
            offset,
            natts,
            infomask,
            infomask2,
            hoff,
            clear_toast_afterwards: flag & FLAG_CLEAR_TOAST != 0,
            kind,
        });
    }
    if end != data_len {
        return refuse(
            format!(
                "insert run dump has {} trailing bytes after its {n} rows' data",
                data_len - end
            ),
            rows.first().map(|r| r.lsn),
        );
    }
    if !chunk.contains(&true) {
        chunk = Vec::new();
    }
    Ok(Loaded {
        xid,
        rows,
        chunk,
        data: input[data_at..].to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> (Vec<Row>, Vec<u8>) {
        let data: Vec<u8> = (0u8..=200).collect();
        let mut rows = Vec::new();
        let mut end = 0;
        for (k, len) in [10usize, 0, 57, 3].into_iter().enumerate() {
            end += len;
            rows.push(Row {
                lsn: 0x1000 + 0x40 * (k as u64 / 2),
                end,
                block: 7 + k as u32,
                offset: 1 + k as u16,
                natts: 3,
                infomask: 0x0802,
                infomask2: 0x2003,
                hoff: 24,
                clear_toast_afterwards: k != 1,
                kind: RowKind::Insert,
            });
        }
        (rows, data)
    }

    #[test]
    fn round_trip_of_every_window() {
        let (rows, data) = sample();
        for lo in 0..rows.len() {
            for hi in lo + 1..=rows.len() {
                let start = if lo == 0 { 0 } else { rows[lo - 1].end };
                let bytes = dump(42, &rows[lo..hi], &[], &data, start);
                let got = load(&bytes).unwrap();
                assert_eq!(got.xid, 42);
                assert!(got.chunk.is_empty());
                assert_eq!(got.data, &data[start..rows[hi - 1].end]);
                assert_eq!(got.rows.len(), hi - lo);
                for (g, r) in got.rows.iter().zip(&rows[lo..hi]) {
                    assert_eq!(
                        Row {
                            end: r.end - start,
                            ..*r
                        },
                        *g
                    );
                }
            }
        }
    }

    /// Chunk rows keep their flag, beside clear_toast_afterwards, in every window.
    #[test]
    fn chunk_rows_round_trip() {
        let (rows, data) = sample();
        let chunk = [false, true, true, false];
        for lo in 0..rows.len() {
            for hi in lo + 1..=rows.len() {
                let start = if lo == 0 { 0 } else { rows[lo - 1].end };
                let got = load(&dump(7, &rows[lo..hi], &chunk[lo..hi], &data, start)).unwrap();
                let want: Vec<bool> = chunk[lo..hi].to_vec();
                if want.contains(&true) {
                    assert_eq!(got.chunk, want);
                } else {
                    assert!(got.chunk.is_empty());
                }
                for (g, r) in got.rows.iter().zip(&rows[lo..hi]) {
                    assert_eq!(g.clear_toast_afterwards, r.clear_toast_afterwards);
                }
            }
        }
    }

    /// A delete run's bare deletes (chunk rows without a tuple) keep their flag and
    /// kind, between deletes with their keys, in every window.
    #[test]
    fn bare_delete_rows_round_trip() {
        let (mut rows, data) = sample();
        let chunk = [false, true, false, true];
        for (k, r) in rows.iter_mut().enumerate() {
            r.kind = RowKind::Delete {
                old_is_key: !chunk[k],
            };
        }
        // rows 1 and 3 hold no tuple: row 1's length is 0 already, row 3's becomes 0
        rows[1] = Row {
            natts: 0,
            infomask: 0,
            infomask2: 0,
            hoff: 0,
            ..rows[1]
        };
        rows[3] = Row {
            end: rows[2].end,
            natts: 0,
            infomask: 0,
            infomask2: 0,
            hoff: 0,
            ..rows[3]
        };
        for lo in 0..rows.len() {
            for hi in lo + 1..=rows.len() {
                let start = if lo == 0 { 0 } else { rows[lo - 1].end };
                let got = load(&dump(7, &rows[lo..hi], &chunk[lo..hi], &data, start)).unwrap();
                if chunk[lo..hi].contains(&true) {
                    assert_eq!(got.chunk, chunk[lo..hi].to_vec());
                }
                for (g, r) in got.rows.iter().zip(&rows[lo..hi]) {
                    assert_eq!(
                        Row {
                            end: r.end - start,
                            ..*r
                        },
                        *g
                    );
                }
            }
        }
        // a bare delete that holds data is refused
        let bytes = dump(7, &rows[..3], &chunk[..3], &data, 0);
        let mut bad = rows.clone();
        bad[1].end += 1;
        bad[2].end += 1;
        let err = load(&dump(7, &bad[..3], &chunk[..3], &data, 0)).unwrap_err();
        assert!(err.message.contains("(a bare delete)"), "{}", err.message);
        assert!(load(&bytes).is_ok());
    }

    /// Update and delete rows keep their kind (a delete its old_is_key, an update its
    /// old tuple's fields and whether it is a key) in every window, beside
    /// clear_toast_afterwards.
    #[test]
    fn row_kinds_round_trip() {
        let (mut rows, data) = sample();
        let old = OldTuple {
            natts: 2,
            infomask: 0x0900,
            infomask2: 0x0002,
            hoff: 24,
            is_key: true,
            len: 40,
        };
        let kinds = [
            RowKind::Update { old: None },
            RowKind::Delete { old_is_key: true },
            RowKind::Update { old: Some(old) }, // row 2 has 57 data bytes
            RowKind::Insert,
        ];
        for (r, kind) in rows.iter_mut().zip(kinds) {
            r.kind = kind;
        }
        for lo in 0..rows.len() {
            for hi in lo + 1..=rows.len() {
                let start = if lo == 0 { 0 } else { rows[lo - 1].end };
                let got = load(&dump(9, &rows[lo..hi], &[], &data, start)).unwrap();
                for (g, r) in got.rows.iter().zip(&rows[lo..hi]) {
                    assert_eq!(
                        (g.kind, g.clear_toast_afterwards),
                        (r.kind, r.clear_toast_afterwards)
                    );
                }
            }
        }
    }

    /// An update's old tuple is refused when its natts disagree with its infomask2 or
    /// it is longer than the row's data.
    #[test]
    fn a_damaged_old_tuple_is_refused() {
        let (mut rows, data) = sample();
        let old = OldTuple {
            natts: 2,
            infomask: 0,
            infomask2: 0x0002,
            hoff: 24,
            is_key: false,
            len: 10,
        };
        rows[0].kind = RowKind::Update { old: Some(old) };
        let bytes = dump(1, &rows, &[], &data, 0);
        assert_eq!(load(&bytes).unwrap().rows[0].kind, rows[0].kind);
        let with = |at: usize, v: &[u8]| {
            let mut b = bytes.clone();
            b[at..at + v.len()].copy_from_slice(v);
            load(&b).unwrap_err().message
        };
        assert!(with(HEAD + 26, &3u16.to_le_bytes()).contains("old tuple of natts 3"));
        assert!(with(HEAD + 33, &11u32.to_le_bytes()).contains("11 of its 10 data bytes"));
    }

    #[test]
    fn every_truncation_and_extension_is_refused() {
        let (rows, data) = sample();
        let bytes = dump(42, &rows, &[false, true, true, false], &data, 0);
        for cut in 0..bytes.len() {
            assert!(load(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        let err = load(&longer).unwrap_err();
        assert!(err.message.contains("1 trailing bytes"), "{}", err.message);
        assert_eq!(err.lsn, Some(0x1000));
    }

    #[test]
    fn damaged_fields_are_refused() {
        let (rows, data) = sample();
        let bytes = dump(42, &rows, &[], &data, 0);
        let with = |at: usize, v: &[u8]| {
            let mut b = bytes.clone();
            b[at..at + v.len()].copy_from_slice(v);
            load(&b).unwrap_err().message
        };
        assert!(with(0, &[1]).contains("version 1"));
        assert!(with(0, &[2]).contains("version 2"));
        assert!(with(5, &0u32.to_le_bytes()).contains("no rows"));
        // One row fewer: the last row's table entry is read as data, and is left over.
        assert!(with(5, &3u32.to_le_bytes()).contains("trailing bytes"));
        // One row more: its table entry is taken from the data, which is then too
        // short for the rows' lengths.
        assert!(with(5, &5u32.to_le_bytes()).contains("row 2's tuple data ends past"));
        assert!(with(5, &u32::MAX.to_le_bytes()).contains("too short"));
        assert!(with(HEAD + 21, &[0x40]).contains("flags byte 0x40"));
        // Both ops, a key without a delete or an old tuple, an update's chunk, a delete's
        // chunk (a bare delete) with a tuple or a key, an old tuple without an update or
        // with a delete.
        for bad in [0x0c, 0x10, 0x14, 0x06, 0x0a, 0x1a, 0x20, 0x28, 0x26] {
            assert!(with(HEAD + 21, &[bad]).contains("flags byte"), "{bad:#04x}");
        }
        assert!(with(HEAD + 14, &4u16.to_le_bytes()).contains("natts 4"));
        assert!(with(HEAD + ROW_BYTES, &0u64.to_le_bytes()).contains("precedes row 0"));
        assert!(with(HEAD + 22, &u32::MAX.to_le_bytes()).contains("ends past"));
        assert!(with(HEAD + 22, &9u32.to_le_bytes()).contains("1 trailing bytes"));
        // Old tuple fields on a row without one.
        assert!(with(HEAD + 26, &[1]).contains("old tuple fields but no old tuple"));
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        // A small deterministic generator (no dependency): every prefix of many inputs.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..2000 {
            let mut buf = Vec::new();
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 200) as usize;
            for _ in 0..len {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                buf.push(x as u8);
            }
            if !buf.is_empty() {
                buf[0] = DUMP_VERSION;
            }
            let _ = load(&buf);
        }
    }
}
