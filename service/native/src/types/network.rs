//! Network types' output text: inet and cidr (network.c inet_out / cidr_out through
//! pg_inet_net_ntop), macaddr and macaddr8 (mac.c, mac8.c).
//!
//! Receives: an inet/cidr varlena payload (inet_struct: family, then the netmask bits,
//! then 4 or 16 address bytes; family 2 is PGSQL_AF_INET, 3 PGSQL_AF_INET6), or
//! macaddr's 6 and macaddr8's 8 stored bytes.
//! Hands on: appended to a String, the output function's text, as
//! service.types.network prints it: IPv4 as four octets, IPv6 with the first longest run
//! (of at least two) zero words as `::` and the embedded IPv4 tail of the ::a.b.c.d and
//! ::ffff:a.b.c.d forms; `/bits` unless the mask is full, always for cidr; MAC addresses
//! as lowercase colon-separated hex.
//! Errors: a family, size or mask Python rejects is `Err(reason)` (the row falls back).
//! Pure, no panics.

use std::fmt::Write;

const PGSQL_AF_INET: u8 = 2;
const PGSQL_AF_INET6: u8 = 3;
const BAD: &str = "network address Python decides";

/// inet_net_ntop_ipv6 without the mask (service.types.network._ipv6_text).
fn ipv6(out: &mut String, addr: &[u8; 16]) {
    let words: [u16; 8] =
        std::array::from_fn(|i| u16::from_be_bytes([addr[2 * i], addr[2 * i + 1]]));
    // The first longest run of zero words, if it has at least two.
    let (mut best, mut best_len, mut cur, mut cur_len) = (None::<usize>, 0, None::<usize>, 0);
    // A sentinel word closes a trailing run.
    for (i, &w) in words.iter().chain(std::iter::once(&1)).enumerate() {
        if w == 0 {
            if cur.is_none() {
                cur = Some(i);
                cur_len = 1;
            } else {
                cur_len += 1;
            }
        } else if let Some(c) = cur {
            if best.is_none() || cur_len > best_len {
                best = Some(c);
                best_len = cur_len;
            }
            cur = None;
        }
    }
    if best_len < 2 {
        best = None;
    }
    let in_run = |i: usize| best.is_some_and(|b| b <= i && i < b + best_len);
    for i in 0..8 {
        if in_run(i) {
            if best == Some(i) {
                out.push(':');
            }
            continue;
        }
        if i > 0 {
            out.push(':');
        }
        if i == 6
            && best == Some(0)
            && (best_len == 6
                || (best_len == 7 && words[7] != 1)
                || (best_len == 5 && words[5] == 0xFFFF))
        {
            let _ = write!(out, "{}.{}.{}.{}", addr[12], addr[13], addr[14], addr[15]);
            return;
        }
        let _ = write!(out, "{:x}", words[i]);
    }
    if best.is_some_and(|b| b + best_len == 8) {
        out.push(':');
    }
}

/// inet_out (`is_cidr` false) or cidr_out.
pub fn inet_text(out: &mut String, d: &[u8], is_cidr: bool) -> Result<(), &'static str> {
    let (&family, rest) = d.split_first().ok_or(BAD)?;
    let (&bits, addr) = rest.split_first().ok_or(BAD)?;
    let full = match family {
        PGSQL_AF_INET => {
            let a: &[u8; 4] = addr.try_into().map_err(|_| BAD)?;
            let _ = write!(out, "{}.{}.{}.{}", a[0], a[1], a[2], a[3]);
            32
        }
        PGSQL_AF_INET6 => {
            let a: &[u8; 16] = addr.try_into().map_err(|_| BAD)?;
            ipv6(out, a);
            128
        }
        _ => return Err(BAD),
    };
    if bits > full {
        return Err(BAD);
    }
    if bits != full || is_cidr {
        let _ = write!(out, "/{bits}");
    }
    Ok(())
}

/// macaddr_out / macaddr8_out.
pub fn mac_text(out: &mut String, d: &[u8]) -> Result<(), &'static str> {
    if !matches!(d.len(), 6 | 8) {
        return Err(BAD);
    }
    for (i, b) in d.iter().enumerate() {
        if i > 0 {
            out.push(':');
        }
        let _ = write!(out, "{b:02x}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v6(words: [u16; 8], bits: u8) -> Vec<u8> {
        let mut v = vec![PGSQL_AF_INET6, bits];
        for w in words {
            v.extend_from_slice(&w.to_be_bytes());
        }
        v
    }

    fn inet(d: &[u8], cidr: bool) -> String {
        let mut s = String::new();
        inet_text(&mut s, d, cidr).unwrap();
        s
    }

    #[test]
    fn addresses_print_as_inet_out() {
        // as `SELECT '…'::inet` prints them
        assert_eq!(inet(&[2, 32, 192, 168, 0, 1], false), "192.168.0.1");
        assert_eq!(inet(&[2, 24, 10, 0, 0, 0], true), "10.0.0.0/24");
        assert_eq!(inet(&[2, 32, 10, 0, 0, 0], true), "10.0.0.0/32");
        assert_eq!(inet(&v6([0; 8], 128), false), "::");
        assert_eq!(inet(&v6([0, 0, 0, 0, 0, 0, 0, 1], 128), false), "::1");
        assert_eq!(
            inet(&v6([0x2001, 0xdb8, 0, 0, 1, 0, 0, 1], 64), false),
            "2001:db8::1:0:0:1/64"
        );
        assert_eq!(
            inet(&v6([0, 0, 0, 0, 0, 0xffff, 0x0102, 0x0304], 128), false),
            "::ffff:1.2.3.4"
        );
        assert_eq!(
            inet(&v6([0, 0, 0, 0, 0, 0, 0x0102, 0x0304], 128), false),
            "::1.2.3.4"
        );
        assert_eq!(
            inet(&v6([1, 0, 2, 0, 3, 0, 4, 0], 128), false),
            "1:0:2:0:3:0:4:0"
        );
        assert_eq!(inet(&v6([1, 0, 0, 0, 0, 0, 0, 0], 128), false), "1::");
        let mut s = String::new();
        mac_text(&mut s, &[8, 0, 0x2b, 1, 2, 3]).unwrap();
        assert_eq!(s, "08:00:2b:01:02:03");
    }

    #[test]
    fn damage_is_an_error() {
        for bad in [
            &[][..],
            &[2],
            &[2, 33, 1, 2, 3, 4],
            &[2, 8, 1, 2, 3],
            &[4, 8, 1, 2, 3, 4],
        ] {
            assert!(
                inet_text(&mut String::new(), bad, false).is_err(),
                "{bad:?}"
            );
        }
        assert!(mac_text(&mut String::new(), &[0; 7]).is_err());
    }
}
