//! Avro binary primitives (the Avro 1.11 specification, "Binary Encoding"), as
//! fastavro's `_write` writes them: `int`/`long` as zig-zag varints, `float`/`double`
//! as little-endian IEEE 754, `string`/`bytes` as a long length then the bytes, a union
//! as the long branch index then the branch's encoding, a record as its fields in order.
//!
//! Also the decimal text of a long (`decimal`), which string fields hold (an LSN).
//!
//! Pure, infallible: callers check ranges (an `int` must fit in 32 bits) before writing.

/// A `long` (or `int`): zig-zag, then base-128 varint, low group first.
pub fn long(out: &mut Vec<u8>, n: i64) {
    let mut z = ((n << 1) ^ (n >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// `bytes` (and `string`, whose bytes are UTF-8): the length as a long, then the bytes.
pub fn bytes(out: &mut Vec<u8>, b: &[u8]) {
    long(out, b.len() as i64);
    out.extend_from_slice(b);
}

/// The null branch of a `["null", T]` union.
pub const NULL_BRANCH: u8 = 0x00;
/// The second branch (index 1, zig-zag 2) of a union: T of `["null", T]`.
pub const SECOND_BRANCH: u8 = 0x02;

/// `v` in decimal ASCII, as `v.to_string()` writes it, in `buf` without allocating: the
/// LSN text inside a `string` field, once per event.
pub fn decimal(v: i64, buf: &mut [u8; 20]) -> &[u8] {
    let mut n = v.unsigned_abs();
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        at -= 1;
        buf[at] = b'-';
    }
    &buf[at..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zigzag_matches_the_specification_table() {
        for (n, want) in [
            (0i64, vec![0x00u8]),
            (-1, vec![0x01]),
            (1, vec![0x02]),
            (-2, vec![0x03]),
            (2, vec![0x04]),
            (-64, vec![0x7f]),
            (64, vec![0x80, 0x01]),
            (
                i64::MAX,
                vec![0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
            ),
            (
                i64::MIN,
                vec![0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
            ),
        ] {
            let mut out = Vec::new();
            long(&mut out, n);
            assert_eq!(out, want, "{n}");
        }
    }

    #[test]
    fn bytes_carry_their_length() {
        let mut out = Vec::new();
        bytes(&mut out, b"abc");
        assert_eq!(out, b"\x06abc");
    }

    #[test]
    fn decimal_writes_what_to_string_writes() {
        let mut buf = [0u8; 20];
        for v in [
            0,
            7,
            10,
            99,
            100,
            1 << 32,
            0x1_6F00_0028,
            i64::MAX,
            -1,
            -10,
            i64::MIN,
        ] {
            assert_eq!(decimal(v, &mut buf), v.to_string().as_bytes(), "{v}");
        }
    }
}
