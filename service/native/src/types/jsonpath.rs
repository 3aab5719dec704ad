//! jsonpath's output text (jsonpath.c: jsonPathToCstring, printJsonPathItem,
//! operationPriority), as the Python reference service.types.jsonpath prints it.
//!
//! Receives: the varlena payload: a uint32 header (version 1 in the low bits,
//! 0x8000_0000 for lax), then the flattened item tree. Each item starts at a 4-aligned
//! offset relative to the items' start: a type byte, padding to 4, an int32 offset of
//! the next item of its chain (followed only when positive), then a payload by type;
//! every offset in an item is relative to the item's own position. The type numbers are
//! JsonPathItemType, append-only on disk: 0..42 in PostgreSQL 15 and 16, 43..53 added
//! in 17 (.bigint() .. .timestamp_tz()), 54.. later (the string methods). Like the
//! Python reference, the writer reads the union of all of them for every server
//! version (a 15/16 datum never holds a 17 number, so one table reads all four), and
//! an unknown number (39, jpiSubscript, is never stored) is an error, never guessed.
//!
//! Hands on: appended to a String, the text jsonpath_out prints: `strict ` unless lax;
//! a binary operator in parentheses when its parent asks (operationPriority); a numeric
//! literal in parentheses when an accessor follows it; keys, variables, strings and
//! like_regex patterns quoted by escape_json.
//!
//! Errors: wherever Python raises DecodeError (a header, offset, length or item type it
//! refuses, a string that is not UTF-8, a damaged numeric) this is `Err(reason)`, and
//! `out` is as it was (the row falls back to Python). Also an error here, where the
//! Python recursion decides: argument nesting deeper than `MAX_DEPTH`, and an item tree
//! that visits more items than its datum has bytes (offsets that make a cycle or share
//! subtrees without end; a tree the server writes visits each item once). A chain of
//! accessors is walked in a loop, not by recursion, so a long valid path prints.
//!
//! Pure, no panics.

use super::{jsonb::escape_json, numeric, u32_at, undo_on_err};

const BAD: &str = "jsonpath datum Python decides";
const TOO_DEEP: &str = "jsonpath nesting Python decides";

/// The deepest argument nesting printed here; deeper is the Python path's.
pub const MAX_DEPTH: usize = 256;

const JSONPATH_LAX: u32 = 0x8000_0000;
const UINT32_MAX: u32 = u32::MAX;

// JsonPathItemType (jsonpath.h); the numbers are the on-disk format.
const NULL: u8 = 0;
const STRING: u8 = 1;
const NUMERIC: u8 = 2;
const BOOL: u8 = 3;
const AND: u8 = 4;
const OR: u8 = 5;
const NOT: u8 = 6;
const IS_UNKNOWN: u8 = 7;
const EQUAL: u8 = 8;
const NOT_EQUAL: u8 = 9;
const LESS: u8 = 10;
const GREATER: u8 = 11;
const LESS_OR_EQUAL: u8 = 12;
const GREATER_OR_EQUAL: u8 = 13;
const ADD: u8 = 14;
const SUB: u8 = 15;
const MUL: u8 = 16;
const DIV: u8 = 17;
const MOD: u8 = 18;
const PLUS: u8 = 19;
const MINUS: u8 = 20;
const ANY_ARRAY: u8 = 21;
const ANY_KEY: u8 = 22;
const INDEX_ARRAY: u8 = 23;
const ANY: u8 = 24;
const KEY: u8 = 25;
const CURRENT: u8 = 26;
const ROOT: u8 = 27;
const VARIABLE: u8 = 28;
const FILTER: u8 = 29;
const EXISTS: u8 = 30;
const TYPE: u8 = 31;
const SIZE: u8 = 32;
const ABS: u8 = 33;
const FLOOR: u8 = 34;
const CEILING: u8 = 35;
const DOUBLE: u8 = 36;
const DATETIME: u8 = 37;
const KEY_VALUE: u8 = 38;
// 39 is jpiSubscript: never stored, so unknown here as in Python.
const LAST: u8 = 40;
const STARTS_WITH: u8 = 41;
const LIKE_REGEX: u8 = 42;
// PostgreSQL 17.
const BIGINT: u8 = 43;
const BOOLEAN: u8 = 44;
const DATE: u8 = 45;
const DECIMAL: u8 = 46;
const INTEGER: u8 = 47;
const NUMBER: u8 = 48;
const STRING_FUNC: u8 = 49;
const TIME: u8 = 50;
const TIME_TZ: u8 = 51;
const TIMESTAMP: u8 = 52;
const TIMESTAMP_TZ: u8 = 53;
// Later releases: the string methods.
const REPLACE: u8 = 54;
const LOWER: u8 = 55;
const UPPER: u8 = 56;
const LTRIM: u8 = 57;
const RTRIM: u8 = 58;
const BTRIM: u8 = 59;
const INITCAP: u8 = 60;
const SPLIT_PART: u8 = 61;

const REGEX_FLAGS: [(u32, char); 5] = [
    (0x01, 'i'),
    (0x02, 's'),
    (0x04, 'm'),
    (0x08, 'x'),
    (0x10, 'q'),
];

/// How an item's payload is laid out and printed (the Python reference's sets).
#[derive(Clone, Copy)]
enum Shape {
    /// Two argument offsets, printed `left op right`.
    Binary(&'static str),
    /// `.name(a,b)`: two argument offsets, each 0 when absent.
    TwoArgMethod(&'static str),
    /// `.name(a)`: one argument offset, 0 when absent.
    OneArgMethod(&'static str),
    /// `.name()`: no payload.
    Method(&'static str),
    /// NOT, IS_UNKNOWN, EXISTS, PLUS, MINUS, FILTER: one argument offset.
    Unary,
    /// NULL, ROOT, CURRENT, ANY_ARRAY, ANY_KEY, LAST: no payload.
    Bare,
    /// STRING, KEY, VARIABLE, NUMERIC, BOOL, INDEX_ARRAY, ANY, LIKE_REGEX: read when
    /// printed.
    Payload,
}

fn shape(kind: u8) -> Option<Shape> {
    Some(match kind {
        AND => Shape::Binary("&&"),
        OR => Shape::Binary("||"),
        EQUAL => Shape::Binary("=="),
        NOT_EQUAL => Shape::Binary("!="),
        LESS => Shape::Binary("<"),
        GREATER => Shape::Binary(">"),
        LESS_OR_EQUAL => Shape::Binary("<="),
        GREATER_OR_EQUAL => Shape::Binary(">="),
        ADD => Shape::Binary("+"),
        SUB => Shape::Binary("-"),
        MUL => Shape::Binary("*"),
        DIV => Shape::Binary("/"),
        MOD => Shape::Binary("%"),
        STARTS_WITH => Shape::Binary("starts with"),
        DECIMAL => Shape::TwoArgMethod(".decimal("),
        REPLACE => Shape::TwoArgMethod(".replace("),
        SPLIT_PART => Shape::TwoArgMethod(".split_part("),
        DATETIME => Shape::OneArgMethod(".datetime("),
        TIME => Shape::OneArgMethod(".time("),
        TIME_TZ => Shape::OneArgMethod(".time_tz("),
        TIMESTAMP => Shape::OneArgMethod(".timestamp("),
        TIMESTAMP_TZ => Shape::OneArgMethod(".timestamp_tz("),
        LTRIM => Shape::OneArgMethod(".ltrim("),
        RTRIM => Shape::OneArgMethod(".rtrim("),
        BTRIM => Shape::OneArgMethod(".btrim("),
        TYPE => Shape::Method(".type()"),
        SIZE => Shape::Method(".size()"),
        ABS => Shape::Method(".abs()"),
        FLOOR => Shape::Method(".floor()"),
        CEILING => Shape::Method(".ceiling()"),
        DOUBLE => Shape::Method(".double()"),
        KEY_VALUE => Shape::Method(".keyvalue()"),
        BIGINT => Shape::Method(".bigint()"),
        BOOLEAN => Shape::Method(".boolean()"),
        DATE => Shape::Method(".date()"),
        INTEGER => Shape::Method(".integer()"),
        NUMBER => Shape::Method(".number()"),
        STRING_FUNC => Shape::Method(".string()"),
        LOWER => Shape::Method(".lower()"),
        UPPER => Shape::Method(".upper()"),
        INITCAP => Shape::Method(".initcap()"),
        NOT | IS_UNKNOWN | EXISTS | PLUS | MINUS | FILTER => Shape::Unary,
        NULL | ROOT | CURRENT | ANY_ARRAY | ANY_KEY | LAST => Shape::Bare,
        STRING | KEY | VARIABLE | NUMERIC | BOOL | INDEX_ARRAY | ANY | LIKE_REGEX => Shape::Payload,
        _ => return None,
    })
}

/// operationPriority.
fn priority(kind: u8) -> u8 {
    match kind {
        OR => 0,
        AND => 1,
        EQUAL | NOT_EQUAL | LESS | GREATER | LESS_OR_EQUAL | GREATER_OR_EQUAL | STARTS_WITH => 2,
        ADD | SUB => 3,
        MUL | DIV | MOD => 4,
        PLUS | MINUS => 5,
        _ => 6,
    }
}

fn i32_at(d: &[u8], at: usize) -> Result<i32, &'static str> {
    u32_at(d, at).map(|v| v as i32).ok_or(BAD)
}

/// One item read at `pos` (jspInitByBuffer): its type, next offset, payload start and
/// argument offsets, each read checked as the Python `_Item` reads them.
struct Item {
    kind: u8,
    shape: Shape,
    next: i32,
    payload: usize,
    args: [i32; 2],
}

impl Item {
    fn read(d: &[u8], pos: i64) -> Result<Item, &'static str> {
        if pos < 0 || pos >= d.len() as i64 {
            return Err(BAD);
        }
        let pos = pos as usize;
        let kind = d[pos];
        let at = (pos + 4) & !3;
        let next = i32_at(d, at)?;
        let payload = at + 4;
        let shape = shape(kind).ok_or(BAD)?;
        let args = match shape {
            Shape::Binary(_) | Shape::TwoArgMethod(_) => {
                [i32_at(d, payload)?, i32_at(d, payload + 4)?]
            }
            Shape::Unary | Shape::OneArgMethod(_) => [i32_at(d, payload)?, 0],
            Shape::Method(_) | Shape::Bare | Shape::Payload => [0, 0],
        };
        Ok(Item {
            kind,
            shape,
            next,
            payload,
            args,
        })
    }
}

struct Printer<'a> {
    d: &'a [u8],
    /// Items printed so far; a tree the server writes prints each item once, so more
    /// visits than the datum has bytes means offsets that loop or share without end.
    visits: usize,
}

impl Printer<'_> {
    /// A length-prefixed string at `at`, escape_json'd.
    fn string(&self, out: &mut String, at: usize) -> Result<(), &'static str> {
        let length = i32_at(self.d, at)?;
        if length < 0 {
            return Err(BAD);
        }
        let bytes = self.d.get(at + 4..at + 4 + length as usize).ok_or(BAD)?;
        escape_json(out, std::str::from_utf8(bytes).map_err(|_| BAD)?);
        Ok(())
    }

    /// A numeric varlena (4-byte header) at `at`: numeric_out's text.
    fn numeric(&self, at: usize) -> Result<String, &'static str> {
        let size = ((u32_at(self.d, at).ok_or(BAD)? >> 2) & 0x3FFF_FFFF) as usize;
        if size < 4 || at + size > self.d.len() {
            return Err(BAD);
        }
        let buf = &self.d[at + 4..at + size];
        if let Some(word) = numeric::special(buf) {
            return Ok(word.to_string());
        }
        let mut text = String::new();
        numeric::text(&mut text, buf).ok_or(BAD)?;
        Ok(text)
    }

    /// Whether an argument needs parentheses: its priority not above its parent's.
    fn arg_brackets(&self, pos: i64, offset: i32, parent: u8) -> Result<bool, &'static str> {
        let arg = Item::read(self.d, pos + offset as i64)?;
        Ok(priority(arg.kind) <= priority(parent))
    }

    /// printJsonPathItem: the item at `pos`, then its chain (each next item as an
    /// accessor: in_key and brackets set).
    fn item(
        &mut self,
        out: &mut String,
        mut pos: i64,
        mut in_key: bool,
        mut brackets: bool,
        depth: usize,
    ) -> Result<(), &'static str> {
        if depth > MAX_DEPTH {
            return Err(TOO_DEEP);
        }
        loop {
            self.visits += 1;
            if self.visits > self.d.len() {
                return Err(TOO_DEEP);
            }
            let v = Item::read(self.d, pos)?;
            let p = v.payload;
            let [a0, a1] = v.args;
            match (v.kind, v.shape) {
                (NULL, _) => out.push_str("null"),
                (STRING, _) => self.string(out, p)?,
                (NUMERIC, _) => {
                    let text = self.numeric(p)?;
                    if v.next > 0 {
                        out.push('(');
                        out.push_str(&text);
                        out.push(')');
                    } else {
                        out.push_str(&text);
                    }
                }
                (BOOL, _) => {
                    let b = *self.d.get(p).ok_or(BAD)?;
                    out.push_str(if b != 0 { "true" } else { "false" });
                }
                (_, Shape::Binary(op)) => {
                    if brackets {
                        out.push('(');
                    }
                    let left = self.arg_brackets(pos, a0, v.kind)?;
                    self.item(out, pos + a0 as i64, false, left, depth + 1)?;
                    out.push(' ');
                    out.push_str(op);
                    out.push(' ');
                    let right = self.arg_brackets(pos, a1, v.kind)?;
                    self.item(out, pos + a1 as i64, false, right, depth + 1)?;
                    if brackets {
                        out.push(')');
                    }
                }
                (NOT | IS_UNKNOWN | FILTER | EXISTS, _) => {
                    let (open, close) = match v.kind {
                        NOT => ("!(", ")"),
                        IS_UNKNOWN => ("(", ") is unknown"),
                        FILTER => ("?(", ")"),
                        _ => ("exists (", ")"),
                    };
                    out.push_str(open);
                    self.item(out, pos + a0 as i64, false, false, depth + 1)?;
                    out.push_str(close);
                }
                (PLUS | MINUS, _) => {
                    if brackets {
                        out.push('(');
                    }
                    out.push(if v.kind == PLUS { '+' } else { '-' });
                    let inner = self.arg_brackets(pos, a0, v.kind)?;
                    self.item(out, pos + a0 as i64, false, inner, depth + 1)?;
                    if brackets {
                        out.push(')');
                    }
                }
                (ANY_ARRAY, _) => out.push_str("[*]"),
                (ANY_KEY, _) => out.push_str(if in_key { ".*" } else { "*" }),
                (INDEX_ARRAY, _) => self.subscripts(out, pos, p, depth)?,
                (ANY, _) => self.any(out, p, in_key)?,
                (KEY, _) => {
                    if in_key {
                        out.push('.');
                    }
                    self.string(out, p)?;
                }
                (CURRENT, _) => out.push('@'),
                (ROOT, _) => out.push('$'),
                (VARIABLE, _) => {
                    out.push('$');
                    self.string(out, p)?;
                }
                (_, Shape::Method(name)) => out.push_str(name),
                (_, Shape::OneArgMethod(name)) => {
                    out.push_str(name);
                    if a0 != 0 {
                        self.item(out, pos + a0 as i64, false, false, depth + 1)?;
                    }
                    out.push(')');
                }
                (_, Shape::TwoArgMethod(name)) => {
                    out.push_str(name);
                    if a0 != 0 {
                        self.item(out, pos + a0 as i64, false, false, depth + 1)?;
                    }
                    if a1 != 0 {
                        out.push(',');
                        self.item(out, pos + a1 as i64, false, false, depth + 1)?;
                    }
                    out.push(')');
                }
                (LAST, _) => out.push_str("last"),
                (LIKE_REGEX, _) => self.like_regex(out, pos, p, brackets, depth)?,
                // shape() knows no other kind: Item::read refused it already.
                _ => return Err(BAD),
            }
            if v.next <= 0 {
                return Ok(());
            }
            pos += v.next as i64;
            in_key = true;
            brackets = true;
        }
    }

    /// `[a, b to c]`: int32 count, then (from, to) offsets per element (to 0: none).
    fn subscripts(
        &mut self,
        out: &mut String,
        pos: i64,
        p: usize,
        depth: usize,
    ) -> Result<(), &'static str> {
        let nelems = i32_at(self.d, p)?;
        out.push('[');
        for i in 0..nelems.max(0) as usize {
            let at = p + 4 + 8 * i;
            let from = i32_at(self.d, at)?;
            let to = i32_at(self.d, at + 4)?;
            if i > 0 {
                out.push(',');
            }
            self.item(out, pos + from as i64, false, false, depth + 1)?;
            if to != 0 {
                out.push_str(" to ");
                self.item(out, pos + to as i64, false, false, depth + 1)?;
            }
        }
        out.push(']');
        Ok(())
    }

    /// `.**`, with its level bounds (UINT32_MAX is `last`).
    fn any(&self, out: &mut String, p: usize, in_key: bool) -> Result<(), &'static str> {
        let first = u32_at(self.d, p).ok_or(BAD)?;
        let last = u32_at(self.d, p + 4).ok_or(BAD)?;
        if in_key {
            out.push('.');
        }
        let bound = |n: u32| {
            if n == UINT32_MAX {
                "last".to_string()
            } else {
                n.to_string()
            }
        };
        if first == 0 && last == UINT32_MAX {
            out.push_str("**");
        } else if first == last {
            out.push_str(&format!("**{{{}}}", bound(first)));
        } else {
            out.push_str(&format!("**{{{} to {}}}", bound(first), bound(last)));
        }
        Ok(())
    }

    /// `expr like_regex "pattern" flag "ism"`: uint32 flags, int32 expr offset, uint32
    /// pattern length, the pattern (cut at the datum's end, as the Python slice is).
    fn like_regex(
        &mut self,
        out: &mut String,
        pos: i64,
        p: usize,
        brackets: bool,
        depth: usize,
    ) -> Result<(), &'static str> {
        let flags = u32_at(self.d, p).ok_or(BAD)?;
        let expr = i32_at(self.d, p + 4)?;
        let patlen = u32_at(self.d, p + 8).ok_or(BAD)? as usize;
        let start = (p + 12).min(self.d.len());
        let end = start.saturating_add(patlen).min(self.d.len());
        let pattern = std::str::from_utf8(&self.d[start..end]).map_err(|_| BAD)?;
        if brackets {
            out.push('(');
        }
        let inner = self.arg_brackets(pos, expr, LIKE_REGEX)?;
        self.item(out, pos + expr as i64, false, inner, depth + 1)?;
        out.push_str(" like_regex ");
        escape_json(out, pattern);
        if flags != 0 {
            out.push_str(" flag \"");
            for (bit, ch) in REGEX_FLAGS {
                if flags & bit != 0 {
                    out.push(ch);
                }
            }
            out.push('"');
        }
        if brackets {
            out.push(')');
        }
        Ok(())
    }
}

/// jsonpath_out (jsonPathToCstring) of a stored jsonpath's payload.
pub fn jsonpath_text(out: &mut String, d: &[u8]) -> Result<(), &'static str> {
    if d.len() < 5 {
        return Err(BAD);
    }
    let header = u32_at(d, 0).ok_or(BAD)?;
    if header & !JSONPATH_LAX != 1 {
        return Err(BAD);
    }
    undo_on_err(out, |out| {
        if header & JSONPATH_LAX == 0 {
            out.push_str("strict ");
        }
        let mut printer = Printer {
            d: &d[4..],
            visits: 0,
        };
        printer.item(out, 0, false, true, 0)
    })
}

#[cfg(test)]
#[path = "jsonpath_tests.rs"]
mod tests;
