//! Transaction snapshots (xid8funcs.c): txid_snapshot and pg_snapshot, which share one
//! stored layout and one output function, pg_snapshot_out.
//!
//! Receives: the varlena payload: int32 nxip, then FullTransactionId (uint64) xmin, xmax
//! and nxip xips (no padding: xmin at payload offset 4), little-endian. Hands on: the
//! text `xmin:xmax:xip,xip,...` (service.types.snapshot_types.snapshot_text; Debezium
//! has no mapping for these types, so it is the published string too).
//! Errors: a payload the Python reference rejects (shorter than 20 bytes, a negative
//! nxip, a length that is not 20 + 8 nxip) is `Err(reason)`: the row falls back and
//! Python raises its DecodeError. Pure, no panics.

use std::fmt::Write;

const BAD: &str = "snapshot Python decides";

/// pg_snapshot_out of one stored value, appended to `out`.
pub fn snapshot_text(out: &mut String, d: &[u8]) -> Result<(), &'static str> {
    let nxip = i32::from_le_bytes(d.get(..4).ok_or(BAD)?.try_into().map_err(|_| BAD)?);
    if d.len() < 20 || nxip < 0 || d.len() != 20 + 8 * nxip as usize {
        return Err(BAD);
    }
    let u64_at = |at: usize| u64::from_le_bytes(d[at..at + 8].try_into().unwrap_or([0; 8]));
    let _ = write!(out, "{}:{}:", u64_at(4), u64_at(12));
    for i in 0..nxip as usize {
        if i != 0 {
            out.push(',');
        }
        let _ = write!(out, "{}", u64_at(20 + 8 * i));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(xmin: u64, xmax: u64, xips: &[u64]) -> Vec<u8> {
        let mut d = (xips.len() as i32).to_le_bytes().to_vec();
        for v in [xmin, xmax].iter().chain(xips) {
            d.extend_from_slice(&v.to_le_bytes());
        }
        d
    }

    /// `xmin:xmax:` then the in-progress xids; damaged lengths and counts are Err.
    #[test]
    fn prints_as_pg_snapshot_out() {
        let mut out = String::new();
        snapshot_text(&mut out, &stored(10, 20, &[14, 15])).unwrap();
        assert_eq!(out, "10:20:14,15");
        out.clear();
        snapshot_text(&mut out, &stored(100, 100, &[])).unwrap();
        assert_eq!(out, "100:100:");
        out.clear();
        snapshot_text(&mut out, &stored(u64::MAX, 1, &[u64::MAX])).unwrap();
        assert_eq!(out, "18446744073709551615:1:18446744073709551615");
        let good = stored(1, 2, &[3]);
        for cut in 0..good.len() {
            assert!(
                snapshot_text(&mut String::new(), &good[..cut]).is_err(),
                "{cut}"
            );
        }
        let mut bad = good.clone();
        bad[..4].copy_from_slice(&(-1i32).to_le_bytes());
        assert!(snapshot_text(&mut String::new(), &bad).is_err());
        bad[..4].copy_from_slice(&i32::MAX.to_le_bytes());
        assert!(snapshot_text(&mut String::new(), &bad).is_err());
    }
}
