//! Rust-side tests of the walk: hand-built WAL (a tiny writer laid out as
//! CopyXLogRecordToWAL does), the typed errors, and a deterministic mutation loop that
//! must never panic. The differential tests against the Python reference live in
//! tests/service/wal/test_native_reader.py; these keep `cargo test` meaningful alone.

use super::reader::WalReader;
use super::{ErrorKind, WalError};

const BLCK: u64 = 8192;
const SEG: u64 = 64 * 1024;
const BASE: u64 = 0x100_0000;

/// Append-only WAL writer: long header on segment starts, contrecords, xl_prev, CRC.
struct Writer {
    buf: Vec<u8>,
    prev: u64,
    lsns: Vec<u64>,
}

impl Writer {
    fn new() -> Self {
        Writer {
            buf: Vec::new(),
            prev: 0,
            lsns: Vec::new(),
        }
    }

    fn pos(&self) -> u64 {
        BASE + self.buf.len() as u64
    }

    fn page_header(&mut self, rem_len: u32) {
        let pos = self.pos();
        let mut info: u16 = if rem_len > 0 { 1 } else { 0 };
        if pos % SEG == 0 {
            info |= 2;
        }
        self.buf.extend_from_slice(&0xD110u16.to_le_bytes());
        self.buf.extend_from_slice(&info.to_le_bytes());
        self.buf.extend_from_slice(&1u32.to_le_bytes());
        self.buf.extend_from_slice(&pos.to_le_bytes());
        self.buf.extend_from_slice(&rem_len.to_le_bytes());
        self.buf.extend_from_slice(&[0; 4]);
        if pos % SEG == 0 {
            self.buf.extend_from_slice(&7u64.to_le_bytes());
            self.buf.extend_from_slice(&(SEG as u32).to_le_bytes());
            self.buf.extend_from_slice(&(BLCK as u32).to_le_bytes());
        }
    }

    fn add(&mut self, rmid: u8, xid: u32, body: &[u8]) -> u64 {
        let tot = 24 + body.len() as u32;
        let mut hdr = Vec::new();
        hdr.extend_from_slice(&tot.to_le_bytes());
        hdr.extend_from_slice(&xid.to_le_bytes());
        hdr.extend_from_slice(&self.prev.to_le_bytes());
        hdr.extend_from_slice(&[0, rmid, 0, 0]);
        let crc = crc32c::crc32c_append(crc32c::crc32c(body), &hdr);
        hdr.extend_from_slice(&crc.to_le_bytes());
        hdr.extend_from_slice(body);
        if self.pos() % BLCK == 0 {
            self.page_header(0);
        }
        let lsn = self.pos();
        let mut written = 0;
        while written < hdr.len() {
            if self.pos() % BLCK == 0 {
                self.page_header((hdr.len() - written) as u32);
            }
            let space = (BLCK - self.pos() % BLCK) as usize;
            let take = space.min(hdr.len() - written);
            self.buf.extend_from_slice(&hdr[written..written + take]);
            written += take;
        }
        while self.buf.len() % 8 != 0 {
            self.buf.push(0);
        }
        self.prev = lsn;
        self.lsns.push(lsn);
        lsn
    }

    fn data(&self) -> Vec<u8> {
        let mut out = self.buf.clone();
        let pad = (BLCK as usize - out.len() % BLCK as usize) % BLCK as usize;
        out.resize(out.len() + pad, 0);
        out
    }
}

/// A block reference with data and its own relation, then short main data.
fn one_block_body(blk: u32, data: &[u8], main: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8, 0x20];
    b.extend_from_slice(&(data.len() as u16).to_le_bytes());
    for v in [1663u32, 5, 16384, blk] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b.extend_from_slice(&[255, main.len() as u8]);
    b.extend_from_slice(data);
    b.extend_from_slice(main);
    b
}

fn stream(n: u32) -> Writer {
    let mut w = Writer::new();
    for i in 0..n {
        let main = vec![b'm'; (i % 200) as usize];
        if i % 17 == 5 {
            w.add(
                1,
                i,
                &[255, 200]
                    .iter()
                    .copied()
                    .chain([b'x'; 200])
                    .collect::<Vec<_>>(),
            );
            // a record larger than a page
            let mut big = vec![254u8];
            big.extend_from_slice(&20000u32.to_le_bytes());
            big.extend(std::iter::repeat_n(b'b', 20000));
            w.add(10, i, &big);
        } else {
            w.add(10, i, &one_block_body(i, b"tuple-data", &main));
        }
    }
    w
}

fn read_all(data: &[u8], start: u64) -> (Vec<u64>, Option<WalError>, bool) {
    let mut r = WalReader::new(start, SEG, None, true).unwrap();
    r.feed(data, BASE).unwrap();
    let (recs, err) = r.walk(false);
    (
        recs.iter().map(|w| w.header.lsn).collect(),
        err,
        r.end_of_wal(),
    )
}

#[test]
fn reads_every_record_across_pages_and_segments() {
    let w = stream(600);
    assert!(w.pos() > BASE + SEG, "the stream crosses a segment");
    let (lsns, err, eow) = read_all(&w.data(), BASE);
    assert_eq!(err, None);
    assert_eq!(lsns, w.lsns);
    assert!(eow, "zeros after the last record are the end of WAL");
}

#[test]
fn chunked_feeding_gives_the_same_records() {
    let w = stream(300);
    let data = w.data();
    for chunk in [1usize, 7, 24, 1000, 8192, 9001] {
        let mut r = WalReader::new(BASE, SEG, None, true).unwrap();
        let mut got = Vec::new();
        for (k, part) in data.chunks(chunk).enumerate() {
            r.feed(part, BASE + (k * chunk) as u64).unwrap();
            let (recs, err) = r.walk(false);
            assert_eq!(err, None, "chunk size {chunk}");
            got.extend(recs.iter().map(|x| x.header.lsn));
        }
        assert_eq!(got, w.lsns, "chunk size {chunk}");
    }
}

#[test]
fn a_bad_crc_is_corruption_at_the_record() {
    let w = stream(20);
    let mut data = w.data();
    let victim = w.lsns[7];
    data[(victim - BASE) as usize + 30] ^= 1;
    let (lsns, err, _) = read_all(&data, BASE);
    assert_eq!(lsns, w.lsns[..7].to_vec());
    let err = err.unwrap();
    assert_eq!(err.kind, ErrorKind::Corruption);
    assert_eq!(err.lsn, victim);
    assert_eq!(err.message, "incorrect resource manager data checksum");
}

#[test]
fn an_unknown_magic_is_unsupported_at_the_page() {
    let w = stream(200);
    let mut data = w.data();
    data[BLCK as usize] = 0x06;
    let (_, err, _) = read_all(&data, BASE);
    let err = err.unwrap();
    assert_eq!(err.kind, ErrorKind::Unsupported);
    assert_eq!(err.lsn, BASE + BLCK);
}

/// A stream of three small records, then one of `size` bytes that crosses pages; the
/// result has everything from the `nth` continuation page of that record on zeroed (the
/// zero-filled tail of a pre-allocated or recycled segment). Returns the data, the LSNs
/// of the small records, the big record's LSN and the zeroed page's LSN.
fn zeroed_under_record(size: usize, nth: u64) -> (Vec<u8>, Vec<u64>, u64, u64) {
    let mut w = Writer::new();
    for i in 0..3 {
        w.add(10, i, &one_block_body(i, b"tuple", b"main"));
    }
    let before = w.lsns.clone();
    let mut big = vec![254u8];
    big.extend_from_slice(&(size as u32).to_le_bytes());
    big.extend(std::iter::repeat_n(b'b', size));
    let lsn = w.add(1, 9, &big);
    let zero = (lsn & !(BLCK - 1)) + nth * BLCK;
    let mut data = w.data();
    data.resize(data.len() + 2 * BLCK as usize, 0);
    let off = (zero - BASE) as usize;
    data[off..].fill(0);
    (data, before, lsn, zero)
}

#[test]
fn a_zeroed_continuation_page_is_the_end_of_wal() {
    for (size, nth) in [(9000, 1), (30000, 2)] {
        let (data, before, lsn, _) = zeroed_under_record(size, nth);
        let mut r = WalReader::new(BASE, SEG, None, true).unwrap();
        r.feed(&data, BASE).unwrap();
        let (recs, err) = r.walk(false);
        assert_eq!(
            err, None,
            "a zero page is not an unsupported version 0x0000"
        );
        let got: Vec<u64> = recs.iter().map(|w| w.header.lsn).collect();
        assert_eq!(got, before);
        assert!(r.end_of_wal());
        assert_eq!(
            r.next_lsn(),
            lsn,
            "the position stays at the incomplete record"
        );
        let (again, err) = r.walk(false);
        assert!(again.is_empty() && err.is_none());
    }
}

#[test]
fn a_zeroed_continuation_page_ends_the_wal_before_the_record_is_all_fed() {
    let (data, before, lsn, zero) = zeroed_under_record(60000, 2);
    let mut r = WalReader::new(BASE, SEG, None, true).unwrap();
    r.feed(&data[..(zero - BASE) as usize + 24], BASE).unwrap();
    let (recs, err) = r.walk(true);
    assert_eq!(err, None);
    assert_eq!(recs.len(), before.len());
    assert!(r.end_of_wal());
    assert_eq!(r.next_lsn(), lsn);
}

#[test]
fn a_damaged_magic_before_a_zeroed_page_is_still_unsupported() {
    let (mut data, _, lsn, zero) = zeroed_under_record(30000, 2);
    let page = (lsn & !(BLCK - 1)) + BLCK;
    assert!(page < zero);
    data[(page - BASE) as usize] = 0xFF;
    let (_, err, eow) = read_all(&data, BASE);
    let err = err.unwrap();
    assert_eq!(err.kind, ErrorKind::Unsupported);
    assert_eq!(err.lsn, page);
    assert!(!eow);
}

#[test]
fn a_zero_magic_on_a_nonzero_page_is_unsupported() {
    let (mut data, _, lsn, _) = zeroed_under_record(9000, 3);
    let page = (lsn & !(BLCK - 1)) + BLCK;
    let off = (page - BASE) as usize;
    data[off] = 0;
    data[off + 1] = 0;
    let (_, err, eow) = read_all(&data, BASE);
    let err = err.unwrap();
    assert_eq!(err.kind, ErrorKind::Unsupported);
    assert_eq!(err.lsn, page);
    assert!(!eow);
}

#[test]
fn rewind_resumes_after_the_given_record() {
    let w = stream(50);
    let mut r = WalReader::new(BASE, SEG, None, true).unwrap();
    r.feed(&w.data(), BASE).unwrap();
    let (first, _) = r.walk(true);
    assert_eq!(first.len(), w.lsns.len());
    r.rewind(10);
    assert_eq!(r.next_lsn(), first[9].header.end_lsn);
    let (rest, err) = r.walk(false);
    assert_eq!(err, None);
    let lsns: Vec<u64> = rest.iter().map(|x| x.header.lsn).collect();
    assert_eq!(lsns, w.lsns[10..].to_vec());
}

/// A deterministic xorshift, so the loop is the same on every run.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[test]
fn mutated_wal_never_panics_and_errors_name_an_lsn() {
    let w = stream(80);
    let clean = w.data();
    let (good, _, _) = read_all(&clean, BASE);
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..3000 {
        let mut data = clean.clone();
        for _ in 0..(1 + next(&mut s) % 3) {
            let i = (next(&mut s) % data.len() as u64) as usize;
            data[i] = next(&mut s) as u8;
        }
        let cut = (next(&mut s) % (data.len() as u64 + 1)) as usize;
        if next(&mut s) % 4 == 0 {
            data.truncate(cut);
        }
        let (lsns, err, _) = read_all(&data, BASE);
        // Never a record that is not one of the undamaged ones, in order.
        assert_eq!(lsns, good[..lsns.len()].to_vec());
        if let Some(e) = err {
            assert!(e.lsn >= BASE);
        }
    }
}
