//! Text search types' output text: tsvector and tsquery (tsvector.c tsvectorout,
//! tsquery.c tsqueryout and its infix()).
//!
//! Receives: the varlena payload without its header.
//! - tsvector: int32 size, then `size` WordEntry words (uint32, lowest bit first:
//!   haspos:1, len:11, pos:20), then the lexemes, `pos` counting from the end of the
//!   words. An entry with positions has, at the next even offset after its lexeme, a
//!   uint16 npos and npos uint16 WordEntryPos (weight in the top 2 bits, 3 = A .. 0 = D;
//!   the position in the low 14).
//! - tsquery: int32 size, then `size` 12-byte QueryItems in prefix (Polish) order, then
//!   the operand strings. An operand (type 1): weight bits (8 A, 4 B, 2 C, 1 D) at 1,
//!   the prefix flag at 2, a uint32 {length:12, offset:20} at 8. An operator (type 2):
//!   oper at 1 (1 NOT, 2 AND, 3 OR, 4 PHRASE), the int16 phrase distance at 2. A binary
//!   operator's right subtree follows it, then its left one.
//!
//! Hands on: appended to a String, the output function's text, as the Python reference
//! service.types.tsearch (tsvector_text, tsquery_text) prints it: `'lexeme'` with `'`
//! and `\` doubled; a tsvector's entries separated by a space, each with `:` and its
//! positions and weight letters (none for D) when it has any; a tsquery in infix form
//! with priorities NOT > PHRASE > AND > OR, `( .. )` around a lower priority operator
//! and around a phrase on the right of a phrase, `!`, ` & `, ` | `, ` <-> `, ` <N> `,
//! and an operand's `:` with `*` (prefix) and its weight letters.
//!
//! Errors: whatever the Python reference rejects (a size, offset or item it refuses,
//! a lexeme that is not UTF-8, items left over after the tree) is `Err(reason)`, and so
//! is a tsquery tree deeper than `MAX_DEPTH` operators (Python decides: its recursion
//! has a limit of its own); `out` is then as it was.
//!
//! Pure, no panics.

use std::fmt::Write;

use super::{u32_at, undo_on_err};

const BAD: &str = "text search datum Python decides";
const TOO_DEEP: &str = "tsquery nesting Python decides";

/// The deepest tsquery operator nesting printed here; deeper is the Python path's.
pub const MAX_DEPTH: usize = 256;

const QI_VAL: u8 = 1;
const QI_OPR: u8 = 2;
const OP_NOT: u8 = 1;
const OP_AND: u8 = 2;
const OP_OR: u8 = 3;
const OP_PHRASE: u8 = 4;
const ITEM: usize = 12;

fn u16_at(d: &[u8], at: usize) -> Option<u16> {
    let bytes = d.get(at..at.checked_add(2)?)?;
    Some(u16::from_le_bytes(bytes.try_into().ok()?))
}

/// The int32 count at 0 and where the `width`-byte array it counts ends; Err if the
/// count is negative or the array overruns `d`.
fn counted(d: &[u8], width: usize) -> Result<(usize, usize), &'static str> {
    let size = u32_at(d, 0).ok_or(BAD)? as i32;
    let size = usize::try_from(size).map_err(|_| BAD)?;
    let end = size
        .checked_mul(width)
        .and_then(|n| n.checked_add(4))
        .ok_or(BAD)?;
    if end > d.len() {
        return Err(BAD);
    }
    Ok((size, end))
}

/// The lexeme `d[start..start + len]` quoted: `'` and `\` doubled.
fn quote(out: &mut String, d: &[u8], start: usize, len: usize) -> Result<(), &'static str> {
    let bytes = d
        .get(start..start.checked_add(len).ok_or(BAD)?)
        .ok_or(BAD)?;
    let text = std::str::from_utf8(bytes).map_err(|_| BAD)?;
    out.push('\'');
    for ch in text.chars() {
        match ch {
            '\'' => out.push_str("''"),
            '\\' => out.push_str("\\\\"),
            _ => out.push(ch),
        }
    }
    out.push('\'');
    Ok(())
}

/// tsvectorout.
pub fn tsvector_text(out: &mut String, d: &[u8]) -> Result<(), &'static str> {
    let (size, strbase) = counted(d, 4)?;
    undo_on_err(out, |out| {
        for i in 0..size {
            if i > 0 {
                out.push(' ');
            }
            let word = u32_at(d, 4 + 4 * i).ok_or(BAD)?;
            entry(out, d, strbase, word)?;
        }
        Ok(())
    })
}

/// One tsvector entry: its quoted lexeme, then its positions if it has any.
fn entry(out: &mut String, d: &[u8], strbase: usize, word: u32) -> Result<(), &'static str> {
    let haspos = word & 1 != 0;
    let len = ((word >> 1) & 0x7FF) as usize;
    let pos = (word >> 12) as usize;
    quote(out, d, strbase + pos, len)?;
    if haspos {
        // SHORTALIGN of the lexeme's end
        positions(out, d, strbase + ((pos + len + 1) & !1))?;
    }
    Ok(())
}

/// The uint16 npos at `at` and the positions after it: `:1A,2,..` (nothing if none).
fn positions(out: &mut String, d: &[u8], at: usize) -> Result<(), &'static str> {
    let npos = u16_at(d, at).ok_or(BAD)? as usize;
    for j in 0..npos {
        let wep = u16_at(d, at + 2 + 2 * j).ok_or(BAD)?;
        out.push(if j == 0 { ':' } else { ',' });
        let _ = write!(out, "{}", wep & 0x3FFF);
        match wep >> 14 {
            3 => out.push('A'),
            2 => out.push('B'),
            1 => out.push('C'),
            _ => {}
        }
    }
    Ok(())
}

/// tsqueryout.
pub fn tsquery_text(out: &mut String, d: &[u8]) -> Result<(), &'static str> {
    let (size, opbase) = counted(d, ITEM)?;
    if size == 0 {
        return Ok(());
    }
    let mut walk = Infix {
        d,
        size,
        opbase,
        cur: 0,
    };
    undo_on_err(out, |out| {
        walk.render(out, 0, false, 0)?;
        if walk.cur != size {
            return Err(BAD);
        }
        Ok(())
    })
}

/// tsearch_op_priority.
fn priority(oper: u8) -> Option<u8> {
    match oper {
        OP_NOT => Some(4),
        OP_PHRASE => Some(3),
        OP_AND => Some(2),
        OP_OR => Some(1),
        _ => None,
    }
}

/// infix(): walks the Polish-order items from `cur`.
struct Infix<'a> {
    d: &'a [u8],
    size: usize,
    opbase: usize,
    cur: usize,
}

impl Infix<'_> {
    /// The subtree at `cur` under an operator of priority `parent` (0: the root).
    fn render(
        &mut self,
        out: &mut String,
        parent: u8,
        right_phrase: bool,
        depth: usize,
    ) -> Result<(), &'static str> {
        if self.cur >= self.size {
            return Err(BAD);
        }
        let at = 4 + ITEM * self.cur;
        let item: &[u8; ITEM] = self
            .d
            .get(at..at + ITEM)
            .and_then(|s| s.try_into().ok())
            .ok_or(BAD)?;
        self.cur += 1;
        match item[0] {
            QI_VAL => self.operand(out, item),
            QI_OPR => self.operator(out, item, parent, right_phrase, depth),
            _ => Err(BAD),
        }
    }

    fn operator(
        &mut self,
        out: &mut String,
        item: &[u8; ITEM],
        parent: u8,
        right_phrase: bool,
        depth: usize,
    ) -> Result<(), &'static str> {
        let oper = item[1];
        let prio = priority(oper).ok_or(BAD)?;
        if depth >= MAX_DEPTH {
            return Err(TOO_DEEP);
        }
        if oper == OP_NOT {
            let paren = prio < parent;
            out.push_str(if paren { "( !" } else { "!" });
            self.render(out, prio, false, depth + 1)?;
            if paren {
                out.push_str(" )");
            }
            return Ok(());
        }
        let distance = i16::from_le_bytes([item[2], item[3]]);
        // The right subtree comes first in the items but prints last.
        let mut right = String::new();
        self.render(&mut right, prio, oper == OP_PHRASE, depth + 1)?;
        let paren = prio < parent || (oper == OP_PHRASE && right_phrase);
        if paren {
            out.push_str("( ");
        }
        self.render(out, prio, false, depth + 1)?;
        match oper {
            OP_AND => out.push_str(" & "),
            OP_OR => out.push_str(" | "),
            _ if distance == 1 => out.push_str(" <-> "),
            _ => {
                let _ = write!(out, " <{distance}> ");
            }
        }
        out.push_str(&right);
        if paren {
            out.push_str(" )");
        }
        Ok(())
    }

    /// An operand: its quoted string, then `:`, `*` if a prefix, its weight letters.
    fn operand(&self, out: &mut String, item: &[u8; ITEM]) -> Result<(), &'static str> {
        let (weight, prefix) = (item[1], item[2]);
        let bits = u32::from_le_bytes([item[8], item[9], item[10], item[11]]);
        let (len, offset) = ((bits & 0xFFF) as usize, (bits >> 12) as usize);
        quote(out, self.d, self.opbase + offset, len)?;
        if weight != 0 || prefix != 0 {
            out.push(':');
            if prefix != 0 {
                out.push('*');
            }
            for (bit, letter) in [(8, 'A'), (4, 'B'), (2, 'C'), (1, 'D')] {
                if weight & bit != 0 {
                    out.push(letter);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_of(kind: &str, d: &[u8], out: &mut String) -> Result<(), &'static str> {
        match kind {
            "tsvector" => tsvector_text(out, d),
            "tsquery" => tsquery_text(out, d),
            _ => panic!("no type {kind}"),
        }
    }

    fn text(kind: &str, d: &[u8]) -> Result<String, &'static str> {
        let mut out = String::new();
        text_of(kind, d, &mut out).map(|()| out)
    }

    fn unhex(h: &str) -> Vec<u8> {
        (0..h.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
            .collect()
    }

    /// A QI_VAL item: weight bits, prefix flag, the string's length and offset.
    fn operand(weight: u8, prefix: u8, len: u32, offset: u32) -> Vec<u8> {
        let mut v = vec![QI_VAL, weight, prefix, 0, 0, 0, 0, 0];
        v.extend_from_slice(&(len | (offset << 12)).to_le_bytes());
        v
    }

    /// A QI_OPR item.
    fn operator(oper: u8, distance: i16) -> Vec<u8> {
        let mut v = vec![QI_OPR, oper];
        v.extend_from_slice(&distance.to_le_bytes());
        v.extend_from_slice(&[0; 8]);
        v
    }

    /// A stored tsquery of `items` and then `strings`.
    fn query(items: &[Vec<u8>], strings: &[u8]) -> Vec<u8> {
        let mut v = (items.len() as i32).to_le_bytes().to_vec();
        items.iter().for_each(|i| v.extend_from_slice(i));
        v.extend_from_slice(strings);
        v
    }

    /// `n` NOTs over the operand 'a'.
    fn nots(n: usize) -> Vec<u8> {
        let mut items = vec![operator(OP_NOT, 0); n];
        items.push(operand(0, 0, 1, 0));
        query(&items, b"a\0")
    }

    /// PostgreSQL 15: (type, the literal or SQL expression inserted, the stored payload
    /// from pageinspect's t_data (SET STORAGE PLAIN: a 4-byte header), `v::text`).
    const SERVER: &[(&str, &str, &str, &str)] = &[
        ("tsvector", "", "00000000", ""),
        ("tsvector", "a b c", "03000000020000000210000002200000616263", "'a' 'b' 'c'"),
        ("tsvector", "'it''s' 'back\\\\slash' 'with space' 'a:1A,2B,3C,4D'", "040000001a00000014d000000870010014b00100613a31412c32422c33432c34446261636b5c736c6173686974277377697468207370616365", "'a:1A,2B,3C,4D' 'back\\\\slash' 'it''s' 'with space'"),
        ("tsvector", "to_tsvector('english', 'The quick brown foxes jumped over the lazy dogs quick')", "060000000b00000007a000000720010009a00100092002000ba0020062726f776e0001000300646f670001000900666f7800010004006a756d70010005006c617a6901000800717569636b00020002000a00", "'brown':3 'dog':9 'fox':4 'jump':5 'lazi':8 'quick':2,10"),
        ("tsvector", "a:1,3 b:2A c:16383", "03000000030000000380000003e0000061000200010003006200010002c063000100ff3f", "'a':1,3 'b':2A 'c':16383"),
        ("tsvector", "café:1 naïve 日本語:2B", "030000000b0000000ca0000013000100636166c3a900010001006e61c3af7665e697a5e69cace8aa9e0001000280", "'café':1 'naïve' '日本語':2B"),
        ("tsvector", "ab:1 abc:2 abcd", "03000000050000000760000008e00000616201000100616263000100020061626364", "'ab':1 'abc':2 'abcd'"),
        ("tsvector", "x:1A,1B,2C,2D", "01000000030000007800020001c00240", "'x':1A,2C"),
        ("tsvector", "'''' '\\\\' ' ' 'a''b\\\\c d':5", "040000000200000002100000022000000f30000020275c6127625c63206401000500", "' ' '''' '\\\\' 'a''b\\\\c d':5"),
        ("tsvector", "setweight(to_tsvector('simple', 'one two three two one'), 'B')", "03000000070000000ba00000074001006f6e65000200018005807468726565000100038074776f00020002800480", "'one':1B,5B 'three':3B 'two':2B,4B"),
        ("tsquery", "a & b", "030000000202000002000000000000000100000006efbe8e0120000001000000bcbeb7170100000061006200", "'a' & 'b'"),
        ("tsquery", "a | b", "030000000203000002000000000000000100000006efbe8e0120000001000000bcbeb7170100000061006200", "'a' | 'b'"),
        ("tsquery", "!a", "0200000002010000010000000000000001000000bcbeb717010000006100", "!'a'"),
        ("tsquery", "a <-> b", "030000000204010002000000000000000100000006efbe8e0120000001000000bcbeb7170100000061006200", "'a' <-> 'b'"),
        ("tsquery", "a <2> b", "030000000204020002000000000000000100000006efbe8e0120000001000000bcbeb7170100000061006200", "'a' <2> 'b'"),
        ("tsquery", "a:*", "0100000001000100bcbeb717010000006100", "'a':*"),
        ("tsquery", "a:AB", "01000000010c0000bcbeb717010000006100", "'a':AB"),
        ("tsquery", "a:*A", "0100000001080100bcbeb717010000006100", "'a':*A"),
        ("tsquery", "!(a & b)", "040000000201000001000000000000000202000002000000000000000100000006efbe8e0120000001000000bcbeb7170100000061006200", "!( 'a' & 'b' )"),
        ("tsquery", "(a | b) & c", "050000000202000002000000000000000100000090dfb9f9014000000203000002000000000000000100000006efbe8e0120000001000000bcbeb71701000000610062006300", "( 'a' | 'b' ) & 'c'"),
        ("tsquery", "a & (b | c)", "050000000202000004000000000000000203000002000000000000000100000090dfb9f9014000000100000006efbe8e0120000001000000bcbeb71701000000610062006300", "'a' & ( 'b' | 'c' )"),
        ("tsquery", "a <-> (b <-> c)", "050000000204010004000000000000000204010002000000000000000100000090dfb9f9014000000100000006efbe8e0120000001000000bcbeb71701000000610062006300", "'a' <-> ( 'b' <-> 'c' )"),
        ("tsquery", "(a <-> b) <-> c", "050000000204010002000000000000000100000090dfb9f9014000000204010002000000000000000100000006efbe8e0120000001000000bcbeb71701000000610062006300", "'a' <-> 'b' <-> 'c'"),
        ("tsquery", "!a <-> b", "040000000204010002000000000000000100000006efbe8e0120000002010000010000000000000001000000bcbeb7170100000061006200", "!'a' <-> 'b'"),
        ("tsquery", "a <0> b", "030000000204000002000000000000000100000006efbe8e0120000001000000bcbeb7170100000061006200", "'a' <0> 'b'"),
        ("tsquery", "'it''s' & 'back\\\\slash' & 'with space'", "0500000002020000020000000000000001000000c49d2db40a000100020200000200000000000000010000003d249eb00a5000000100000062f6d4ec0400000069742773006261636b5c736c617368007769746820737061636500", "'it''s' & 'back\\\\slash' & 'with space'"),
        ("tsquery", "", "00000000", ""),
        ("tsquery", "!!a", "0300000002010000010000000000000002010000010000000000000001000000bcbeb717010000006100", "!!'a'"),
        ("tsquery", "a & !b | c", "060000000203000002000000000000000100000090dfb9f9014000000202000003000000000000000201000001000000000000000100000006efbe8e0120000001000000bcbeb71701000000610062006300", "'a' & !'b' | 'c'"),
        ("tsquery", "a:D", "0100000001010000bcbeb717010000006100", "'a':D"),
        ("tsquery", "a:ABCD*", "01000000010f0100bcbeb717010000006100", "'a':*ABCD"),
        ("tsquery", "!(a <-> b)", "040000000201000001000000000000000204010002000000000000000100000006efbe8e0120000001000000bcbeb7170100000061006200", "!( 'a' <-> 'b' )"),
        ("tsquery", "a <-> !b", "040000000204010003000000000000000201000001000000000000000100000006efbe8e0120000001000000bcbeb7170100000061006200", "'a' <-> !'b'"),
        ("tsquery", "(a & b) <-> c", "050000000204010002000000000000000100000090dfb9f9014000000202000002000000000000000100000006efbe8e0120000001000000bcbeb71701000000610062006300", "( 'a' & 'b' ) <-> 'c'"),
        ("tsquery", "a:*B & b", "030000000202000002000000000000000100000006efbe8e0120000001040100bcbeb7170100000061006200", "'a':*B & 'b'"),
        ("tsquery", "a <16384> b", "030000000204004002000000000000000100000006efbe8e0120000001000000bcbeb7170100000061006200", "'a' <16384> 'b'"),
        ("tsquery", "(a | b) <3> (c & d)", "0700000002040300040000000000000002020000020000000000000001000000334add67016000000100000090dfb9f9014000000203000002000000000000000100000006efbe8e0120000001000000bcbeb717010000006100620063006400", "( 'a' | 'b' ) <3> ( 'c' & 'd' )"),
        ("tsquery", "café & 日本語:*", "03000000020200000200000000000000010001008194c00b0960000001000000aca3c5be05000000636166c3a900e697a5e69cace8aa9e00", "'café' & '日本語':*"),
        ("tsquery", "to_tsquery('english', 'The & quick & !foxes')", "0400000002020000030000000000000002010000010000000000000001000000530f6e6603000000010000009bc2c10705400000666f7800717569636b00", "'quick' & !'fox'"),
        ("tsquery", "phraseto_tsquery('english', 'the quick brown fox')", "0500000002040100020000000000000001000000530f6e6603c0000002040100020000000000000001000000efcb32d605600000010000009bc2c10705000000717569636b0062726f776e00666f7800", "'quick' <-> 'brown' <-> 'fox'"),
        ("tsquery", "websearch_to_tsquery('english', '\"quick fox\" or -dog')", "06000000020300000300000000000000020100000100000000000000010000009284853703a0000002040100020000000000000001000000530f6e6603600000010000009bc2c10705000000717569636b00666f7800646f6700", "'quick' <-> 'fox' | !'dog'"),
        ("tsquery", "a | b & c | d", "0700000002030000020000000000000001000000334add67016000000203000004000000000000000202000002000000000000000100000090dfb9f9014000000100000006efbe8e0120000001000000bcbeb717010000006100620063006400", "'a' | 'b' & 'c' | 'd'"),
        ("tsquery", "(a | b) <-> (c | d)", "0700000002040100040000000000000002030000020000000000000001000000334add67016000000100000090dfb9f9014000000203000002000000000000000100000006efbe8e0120000001000000bcbeb717010000006100620063006400", "( 'a' | 'b' ) <-> ( 'c' | 'd' )"),
    ];

    /// service.types.tsearch on random stored forms (and random single-byte damage of
    /// them): (type, stored payload, its text or None where it raises).
    const PYTHON: &[(&str, &str, Option<&str>)] = &[
        ("tsvector", "00000000", Some("")),
        ("tsvector", "00000000", Some("")),
        ("tsvector", "01000000030000002d000300baebf53be7bf", Some("'-':11194A,15349,16359B")),
        ("tsvector", "030000000a00000004500000087000006320792d79612d61625f7a", Some("'c y-y' 'a-' 'ab_z'")),
        ("tsvector", "010000000c0000005c7a2d22c3a9", Some("'\\\\z-\"é'")),
        ("tsvector", "0500000003000000096000000920010005e001000e4002005c00010027335c222d200300b8a02ffe51325f5c7a5c0300ca241be56a162d5c01003196207a635fe697a5", Some("'\\\\':13095 '\\\\\"- ':8376B,15919A,12881 '_\\\\z\\\\':9418,9499A,5738 '-\\\\':5681B ' zc_日'")),
        ("tsvector", "03000000080000000840000008800000205f5f2d7a27632d6363792d", Some("' __-' 'z''c-' 'ccy-'")),
        ("tsvector", "050000000500000006a0000004d0000009f0000004800100632d0300d83a66c202efe697a579785c62792d000100f3c76378", Some("'c-':15064,614A,12034A '日' 'yx' '\\\\by-':2035A 'cx'")),
        ("tsquery", "01000000010f000000000000020000007a6100", Some("'za':ABCD")),
        ("tsquery", "0a000000020300000300000000000000020100000100000000000000010c00000000000003000000020100000100000000000000020300000400000000000000020300000200000000000000010f01000000000004400000010100000000000005900000020100000100000000000000010f00000000000002f000002d7822006279796200272d5c5c61002d2700", Some("!( !'-''':ABCD | '''-\\\\\\\\a':D | 'byyb':*ABCD ) | !'-x\"':AB")),
        ("tsquery", "06000000020100000100000000000000020401000400000000000000020200000200000000000000010f00000000000003000000010f01000000000001400000010800000000000001600000275c2d0020002700", Some("!( '''':A <-> ( ' ':*ABCD & '''\\\\-':ABCD ) )")),
        ("tsquery", "05000000020407000200000000000000010801000000000001000000020300000200000000000000010f0000000000000120000001000000000000000140000022002d007a00", Some("( 'z' | '-':ABCD ) <7> '\"':*A")),
        ("tsquery", "01000000010101000000000002000000206100", Some("' a':*D")),
        ("tsquery", "010000000100000000000000020000005c2d00", Some("'\\\\-'")),
        ("tsquery", "0b000000020300000200000000000000010100000000000002000000020300000200000000000000010c00000000000002300000020300000400000000000000020300000200000000000000010500000000000001600000010100000000000006800000020200000200000000000000010f01000000000005f000000105010000000000025001007878007a200063002022e697a55f0063c3a92d5c002d7800", Some("'-x':*BD & 'cé-\\\\':*ABCD | ' \"日_':D | 'c':BD | 'z ':AB | 'xx':D")),
        ("tsquery", "01000000010f000000000000060000002d2220e697a500", Some("'-\" 日':ABCD")),
        ("tsquery", "09000000020200000500000000000000020100000100000000000000020407000200000000000000010100000000000001000000010001000000000007200000020200000300000000000000020100000100000000000000010c00000000000004a00000010100000000000003f00000200063e697a55c2d5f00c3a9786100e697a500", Some("'日':D & !'éxa':AB & !( 'c日\\\\-_':* <7> ' ':D )")),
        ("tsquery", "08000000020200000600000000000000020401000200000000000000010000000000000002000000020200000200000000000000010000000000000002300000010001000000000004600000020100000100000000000000010100000000000003b00000227800622d006179275f007ac3a900", Some("!'zé':D & ( 'ay''_':* & 'b-' ) <-> '\"x'")),
        ("tsvector", "02000000020000000f10000020e697a562637a2d0200079d9f31", Some("' ' '日bcz-':7431B,12703")),
        ("tsvector", "040000000700000002a0000002b0330002c0000078c3a9000200c75cde95202261", None),
        ("tsvector", "0400000005000000038000001320010004400200616202006ce2c2595c000300131d63d0d3f37a20e697a5e697a55f0003004422957aa9d9785f", Some("'ab':8812A,6594C '\\\\':7443,4195A,13267A 'z 日日_':8772,14997C,6569A 'x_'")),
        ("tsvector", "030000000700000005c000000320010062225cae0300afb6f73827da5f2d0100afac22000200ca38ccf2", Some("'b\"\\\\':13999B,14583,6695A '_-':11439B '\"':14538,13004A")),
        ("tsquery", "01000000010c000000fa0000040000007ac3a96300", Some("'zéc':AB")),
        ("tsquery", "06000000021500000100000000000000020200000200000000000000010001000000000001000000020400000200000000000000010100000000000004200000010101000000000006700000270078227a22005f61e697a52d00", None),
        ("tsquery", "010000000100000000e9000004000000205f786300", Some("' _xc'")),
        ("tsquery", "05000000020200000200000000000000010000000000000005000000020402000200000000000000010f00000000000007600000010800000000000001e000005f5c5f5c620020c3a910a92222007900", None),
    ];

    #[test]
    fn prints_as_the_server() {
        for (kind, value, stored, expected) in SERVER {
            assert_eq!(
                text(kind, &unhex(stored)).as_deref(),
                Ok(*expected),
                "{kind} {value}"
            );
        }
    }

    #[test]
    fn a_long_lexeme_prints_as_the_server() {
        // repeat('x', 300)::tsvector: one entry, no positions, len 300 at pos 0.
        let mut d = 1i32.to_le_bytes().to_vec();
        d.extend_from_slice(&(300u32 << 1).to_le_bytes());
        d.extend_from_slice(&[b'x'; 300]);
        assert_eq!(text("tsvector", &d), Ok(format!("'{}'", "x".repeat(300))));
    }

    #[test]
    fn prints_as_the_python_reference() {
        for (kind, stored, expected) in PYTHON {
            let got = text(kind, &unhex(stored));
            match expected {
                Some(t) => assert_eq!(got.as_deref(), Ok(*t), "{kind} {stored}"),
                None => assert!(got.is_err(), "{kind} {stored}: {got:?}"),
            }
        }
    }

    #[test]
    fn tsvector_quirks_as_python() {
        // haspos with npos 0: no colon
        let d = [
            &1i32.to_le_bytes()[..],
            &(1u32 | 1 << 1).to_le_bytes(),
            b"a\0\0\0",
        ]
        .concat();
        assert_eq!(text("tsvector", &d).as_deref(), Ok("'a'"));
        // its npos past the end; a lexeme that is not UTF-8; a negative size
        assert!(text("tsvector", &d[..d.len() - 1]).is_err());
        let d = [&1i32.to_le_bytes()[..], &(1u32 << 1).to_le_bytes(), b"\xff"].concat();
        assert!(text("tsvector", &d).is_err());
        assert!(text("tsvector", &(-1i32).to_le_bytes()).is_err());
        assert!(text("tsvector", &[0, 0, 0]).is_err());
    }

    #[test]
    fn tsquery_quirks_as_python() {
        // weight bits beyond A..D: a colon without letters
        let q = query(&[operand(0x10, 0, 1, 0)], b"a\0");
        assert_eq!(text("tsquery", &q).as_deref(), Ok("'a':"));
        // a negative phrase distance prints as it is stored
        let q = query(
            &[
                operator(OP_PHRASE, -3),
                operand(0, 0, 1, 2),
                operand(0, 0, 1, 0),
            ],
            b"a\0b\0",
        );
        assert_eq!(text("tsquery", &q).as_deref(), Ok("'a' <-3> 'b'"));
        // items left over; an operator without its operand; unknown item type / oper
        let q = query(&[operand(0, 0, 1, 0), operand(0, 0, 1, 0)], b"a\0");
        assert!(text("tsquery", &q).is_err());
        assert!(text("tsquery", &query(&[operator(OP_AND, 0)], b"")).is_err());
        let mut bad = operand(0, 0, 1, 0);
        bad[0] = 3;
        assert!(text("tsquery", &query(&[bad], b"a\0")).is_err());
        let q = query(&[operator(5, 0), operand(0, 0, 1, 0)], b"a\0");
        assert!(text("tsquery", &q).is_err());
        // an operand string past the end
        assert!(text("tsquery", &query(&[operand(0, 0, 2, 0)], b"a")).is_err());
        assert!(text("tsquery", &(-1i32).to_le_bytes()).is_err());
        assert!(text("tsquery", &2i32.to_le_bytes()).is_err());
    }

    #[test]
    fn deep_trees_fall_back() {
        let deepest = text("tsquery", &nots(MAX_DEPTH)).unwrap();
        assert_eq!(deepest, format!("{}'a'", "!".repeat(MAX_DEPTH)));
        // Python prints these too (up to its recursion limit): a deliberate fallback.
        let mut out = String::from("kept");
        assert_eq!(tsquery_text(&mut out, &nots(MAX_DEPTH + 1)), Err(TOO_DEEP));
        assert_eq!(out, "kept");
        // ...and no stack overflow however deep the items say they go.
        assert_eq!(text("tsquery", &nots(200_000)), Err(TOO_DEEP));
        let mut items = vec![operator(OP_AND, 0); 100_000];
        items.extend(vec![operand(0, 0, 1, 0); 100_001]);
        assert_eq!(text("tsquery", &query(&items, b"a\0")), Err(TOO_DEEP));
    }

    #[test]
    fn appends_to_what_out_holds() {
        let mut out = String::from("q=");
        tsquery_text(&mut out, &nots(1)).unwrap();
        tsvector_text(&mut out, &0i32.to_le_bytes()).unwrap();
        assert_eq!(out, "q=!'a'");
    }

    /// Every truncation and single-byte mutation of `d`: Ok or Err, never a panic, and
    /// on Err `out` keeps what it held.
    fn damage(kind: &str, d: &[u8]) {
        let check = |v: &[u8]| {
            let mut out = String::from("kept");
            match text_of(kind, v, &mut out) {
                Ok(()) => assert!(out.starts_with("kept")),
                Err(_) => assert_eq!(out, "kept"),
            }
        };
        for n in 0..d.len() {
            check(&d[..n]);
        }
        let mut v = d.to_vec();
        for i in 0..d.len() {
            let b = d[i];
            for m in [
                0,
                1,
                2,
                0x7f,
                0x80,
                0xff,
                b ^ 1,
                b ^ 0x10,
                b ^ 0x80,
                b.wrapping_add(1),
            ] {
                v[i] = m;
                check(&v);
            }
            v[i] = b;
        }
    }

    #[test]
    fn damage_never_panics() {
        for (kind, _, stored, _) in SERVER {
            damage(kind, &unhex(stored));
        }
        for (kind, stored, _) in PYTHON {
            damage(kind, &unhex(stored));
        }
        damage("tsquery", &nots(MAX_DEPTH));
    }
}
