//! The send → stored rewrite of tsquery (tsquery.c tsqueryrecv), as the Python
//! reference service.types.tsearch.tsquery_send_to_stored builds it, check for check.
//!
//! Receives: one non-NULL COPY BINARY field of a tsquery column (tsquerysend: int32 item
//! count, then per item in prefix order its int8 type and, for an operand (QI_VAL), its
//! uint8 weight, uint8 prefix flag and NUL-terminated text; for an operator (QI_OPR),
//! its int8 oper and, for OP_PHRASE, an int16 distance). Hands on: the stored tsquery
//! types::tsearch reads: int32 size, `size` 12-byte QueryItems in the sent order (an
//! operand: type, weight, prefix as 0/1, a pad byte, valcrc, {length:12, offset:20}; an
//! operator: type, oper, int16 distance, uint32 left, four zero bytes), then the operand
//! strings with their NULs in item order. valcrc is INIT/COMP/FIN_LEGACY_CRC32 (pg_crc.h:
//! pg_crc32_table, the reflected CRC-32 table, run with the unreflected shift); `left`
//! is findoprnd's, the offset of a binary operator's left subtree (1 for NOT), computed
//! here from the subtree sizes, from the last item back, without recursion.
//!
//! Errors: `Rewrite::Bad` where tsqueryrecv or the reference refuse: an unknown item
//! type or operator, a weight above 0xF, an operand longer than MAXSTRLEN or past
//! MAXSTRPOS, a value ending inside an item, trailing bytes, and a tree that is not
//! exactly the items (an operator without its operands, extra nodes). Nothing panics on
//! any input. Pure.

use super::copy::Rewrite;

const QI_VAL: u8 = 1;
const QI_OPR: u8 = 2;
const OP_NOT: u8 = 1;
const OP_PHRASE: u8 = 4;
const MAXSTRLEN: usize = (1 << 11) - 1;
const MAXSTRPOS: usize = (1 << 20) - 1;

/// pg_crc32_table (pg_crc.c): the CRC-32 table of the reflected polynomial 0xEDB88320.
const fn crc_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xEDB8_8320
            } else {
                c >> 1
            };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
}

const CRC_TABLE: [u32; 256] = crc_table();

/// INIT_LEGACY_CRC32, COMP_LEGACY_CRC32, FIN_LEGACY_CRC32 of `data`.
pub fn legacy_crc32(data: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in data {
        crc = CRC_TABLE[(((crc >> 24) as u8) ^ b) as usize] ^ (crc << 8);
    }
    crc ^ 0xFFFF_FFFF
}

/// One parsed item: an operand (weight, prefix, text) or an operator (oper, distance).
enum Item<'a> {
    Operand(u8, u8, &'a [u8]),
    Operator(u8, i16),
}

fn bad(m: impl Into<String>) -> Rewrite {
    Rewrite::Bad(m.into())
}

/// tsqueryrecv's input as the stored tsquery (module docstring).
pub fn tsquery(d: &[u8]) -> Result<Vec<u8>, Rewrite> {
    let size = match d {
        [a, b, c, e, ..] => i32::from_be_bytes([*a, *b, *c, *e]),
        _ => return Err(bad("tsquery send value is too short")),
    };
    // Every item takes at least two bytes.
    let size = usize::try_from(size)
        .ok()
        .filter(|&n| n <= d.len() / 2)
        .ok_or_else(|| bad(format!("tsquery send value says {size} items")))?;
    let short = || bad("tsquery send value ends inside an item");
    let mut off = 4;
    let mut items = Vec::with_capacity(size);
    for _ in 0..size {
        let (kind, arg) = match d.get(off..off + 2) {
            Some([k, a]) => (*k, *a),
            _ => return Err(short()),
        };
        off += 2;
        match kind {
            QI_VAL => {
                let prefix = *d.get(off).ok_or_else(short)?;
                let rest = d.get(off + 1..).ok_or_else(short)?;
                let len = rest
                    .iter()
                    .position(|&b| b == 0)
                    .ok_or_else(|| bad("tsquery send value ends inside an operand"))?;
                if arg > 0xF {
                    return Err(bad("invalid tsquery: invalid weight bitmap"));
                }
                items.push(Item::Operand(arg, prefix, &rest[..len]));
                off += 1 + len + 1;
            }
            QI_OPR => {
                if !(OP_NOT..=OP_PHRASE).contains(&arg) {
                    return Err(bad(format!(
                        "invalid tsquery: unrecognized operator type {arg}"
                    )));
                }
                let mut distance = 0;
                if arg == OP_PHRASE {
                    let b = d.get(off..off + 2).ok_or_else(short)?;
                    distance = i16::from_be_bytes([b[0], b[1]]);
                    off += 2;
                }
                items.push(Item::Operator(arg, distance));
            }
            k => return Err(bad(format!("unrecognized tsquery node type: {k}"))),
        }
    }
    if off != d.len() {
        return Err(bad(format!(
            "tsquery send value has {} trailing bytes",
            d.len() - off
        )));
    }
    let lefts = lefts(&items)?;
    let mut out = Vec::with_capacity(4 + 12 * size + d.len());
    out.extend_from_slice(&(size as i32).to_le_bytes());
    let mut strings = Vec::new();
    for (item, left) in items.iter().zip(lefts) {
        match *item {
            Item::Operator(oper, distance) => {
                out.extend_from_slice(&[QI_OPR, oper]);
                out.extend_from_slice(&distance.to_le_bytes());
                out.extend_from_slice(&left.to_le_bytes());
                out.extend_from_slice(&[0; 4]);
            }
            Item::Operand(weight, prefix, text) => {
                if text.len() > MAXSTRLEN || strings.len() > MAXSTRPOS {
                    return Err(bad("invalid tsquery: operand too long"));
                }
                out.extend_from_slice(&[QI_VAL, weight, u8::from(prefix != 0), 0]);
                out.extend_from_slice(&legacy_crc32(text).to_le_bytes());
                let bits = text.len() as u32 | ((strings.len() as u32) << 12);
                out.extend_from_slice(&bits.to_le_bytes());
                strings.extend_from_slice(text);
                strings.push(0);
            }
        }
    }
    out.extend(strings);
    Ok(out)
}

/// findoprnd's `left` of each item (0 for an operand), from the subtree sizes computed
/// from the end (every item of a prefix expression roots the subtree starting at it);
/// Bad unless the tree is exactly the items.
fn lefts(items: &[Item<'_>]) -> Result<Vec<u32>, Rewrite> {
    let size = items.len();
    let mut sizes = vec![0usize; size];
    let mut lefts = vec![0u32; size];
    let missing = || bad("malformed tsquery: operand not found");
    for i in (0..size).rev() {
        let oper = match items[i] {
            Item::Operand(..) => {
                sizes[i] = 1;
                continue;
            }
            Item::Operator(oper, _) => oper,
        };
        let right = *sizes.get(i + 1).ok_or_else(missing)?;
        if oper == OP_NOT {
            lefts[i] = 1;
            sizes[i] = 1 + right;
            continue;
        }
        let left = 1 + right;
        let left_size = *sizes.get(i + left).ok_or_else(missing)?;
        lefts[i] = left as u32;
        sizes[i] = left + left_size;
    }
    if size > 0 && sizes[0] != size {
        return Err(bad("malformed tsquery: extra nodes"));
    }
    Ok(lefts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::tsearch::tsquery_text;

    fn val(text: &[u8], weight: u8, prefix: u8) -> Vec<u8> {
        let mut out = vec![QI_VAL, weight, prefix];
        out.extend_from_slice(text);
        out.push(0);
        out
    }

    fn op(oper: u8, distance: Option<i16>) -> Vec<u8> {
        let mut out = vec![QI_OPR, oper];
        if let Some(d) = distance {
            out.extend_from_slice(&d.to_be_bytes());
        }
        out
    }

    fn send(items: &[Vec<u8>]) -> Vec<u8> {
        let mut out = (items.len() as i32).to_be_bytes().to_vec();
        for i in items {
            out.extend_from_slice(i);
        }
        out
    }

    /// `'a' & !( 'b' | 'c':* ) <-> 'd':AB` as tsquerysend sends it becomes the stored
    /// tsquery a PG15 heap held for it (items, valcrc and left byte for byte; operand
    /// strings in item order, as tsqueryrecv lays them out), which tsqueryout's writer
    /// prints back.
    #[test]
    fn tsquery_to_stored() {
        let d = send(&[
            op(2, None),
            op(4, Some(1)),
            val(b"d", 0xC, 0),
            op(1, None),
            op(3, None),
            val(b"c", 0, 1),
            val(b"b", 0, 0),
            val(b"a", 0, 0),
        ]);
        let st = tsquery(&d).unwrap();
        // the heap's items (pageinspect on PG15), but the operand offsets, which follow
        // tsquery_in's text order there (a b c d) and the item order here (d c b a)
        let heap = "080000000202000007000000000000000204010002000000000000000\
                    10c0000334add67016000000201000001000000000000000203000002000000000000000\
                    100010090dfb9f9014000000100000006efbe8e0120000001000000bcbeb71701000000";
        let mut want: Vec<u8> = (0..heap.len() / 2)
            .map(|i| u8::from_str_radix(&heap[2 * i..2 * i + 2], 16).unwrap())
            .collect();
        for (item, offset) in [(2usize, 0u32), (5, 2), (6, 4), (7, 6)] {
            let at = 4 + 12 * item + 8;
            let bits = u32::from_le_bytes(want[at..at + 4].try_into().unwrap()) & 0xFFF;
            want[at..at + 4].copy_from_slice(&(bits | offset << 12).to_le_bytes());
        }
        want.extend_from_slice(b"d\0c\0b\0a\0");
        assert_eq!(st, want);
        let mut s = String::new();
        tsquery_text(&mut s, &st).unwrap();
        assert_eq!(s, "'a' & !( 'b' | 'c':* ) <-> 'd':AB");
        let empty = tsquery(&0i32.to_be_bytes()).unwrap();
        s.clear();
        tsquery_text(&mut s, &empty).unwrap();
        assert_eq!(s, "");
        assert_eq!(legacy_crc32(b"a"), 0x17b7_bebc);
    }

    /// Truncations, trailing bytes, unknown types and operators, a weight above 0xF, an
    /// operator without its operands and an operand too many are Bad.
    #[test]
    fn damaged_tsqueries() {
        let d = send(&[op(2, None), val(b"x", 0, 0), val(b"yy", 1, 0)]);
        assert!(tsquery(&d).is_ok());
        for n in 0..d.len() {
            assert!(matches!(tsquery(&d[..n]), Err(Rewrite::Bad(_))), "{n}");
        }
        let mut long = d.clone();
        long.push(0);
        assert!(matches!(tsquery(&long), Err(Rewrite::Bad(_))));
        let bad_cases = [
            send(&[vec![3, 0]]),
            send(&[op(5, None), val(b"x", 0, 0)]),
            send(&[val(b"x", 0x10, 0)]),
            send(&[op(2, None), val(b"x", 0, 0)]),
            send(&[op(1, None)]),
            send(&[val(b"x", 0, 0), val(b"y", 0, 0)]),
        ];
        for case in &bad_cases {
            assert!(matches!(tsquery(case), Err(Rewrite::Bad(_))));
        }
        let deep: Vec<Vec<u8>> = (0..5000)
            .map(|_| op(1, None))
            .chain([val(b"z", 0, 0)])
            .collect();
        assert!(tsquery(&send(&deep)).is_ok(), "deep NOTs need no recursion");
    }
}
