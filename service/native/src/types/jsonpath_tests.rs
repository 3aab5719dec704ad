//! Tests of types::jsonpath: datums the server stored (PostgreSQL 18, captured with
//! pageinspect's heap_page_items from a `jsonpath` column with STORAGE PLAIN, each
//! text the server's `::text` and the Python reference's jsonpath_text alike), then
//! damaged ones, which must be errors, never panics, and leave `out` as it was.

use super::*;

fn unhex(h: &str) -> Vec<u8> {
    (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
        .collect()
}

fn print(d: &[u8]) -> Result<String, &'static str> {
    let mut out = String::from("keep");
    match jsonpath_text(&mut out, d) {
        Ok(()) => Ok(out[4..].to_string()),
        Err(e) => {
            assert_eq!(out, "keep", "an error leaves out as it was");
            Err(e)
        }
    }
}

/// (payload hex, jsonpath_out's text): every item kind the parser writes, lax and
/// strict, each operator and its parentheses, filters with @ and $ variables,
/// like_regex with flags and escapes, .datetime("fmt"), numeric literals followed by
/// accessors, escaped keys and strings, subscripts with `last` and ranges, .** with
/// level bounds, and the PostgreSQL 17 methods.
const GOLDEN: &[(&str, &str)] = &[
    ("010000801b00000000000000", "$"),
    ("010000001b00000008000000190000000e00000001000000610019000c000000010000006200150000000000", "strict $.\"a\".\"b\"[*]"),
    ("010000801b00000008000000190000000e0000000100000061001d00000000000a00000005000000000000001000000088000000040000000000000010000000440000000b0000000000000010000000260000001a00000008000000190000000000000001000000620002000000000020000000008001000a0000000000000010000000260000001a000000080000001900000000000000010000006300020000000000200000000080020006000000000000000c000000080000000000000010000000260000001a000000080000001900000000000000010000006400010000000000010000007800", "$.\"a\"?(@.\"b\" > 1 && @.\"c\" < 2 || !(@.\"d\" == \"x\"))"),
    ("010000800f00000000000000100000006a0000000e0000000000000010000000260000001b0000000800000019000000000000000100000061001000000000000e0000001e000000020000000000000020000000008002001b0000000800000019000000000000000100000062001400000000000a0000001b000000080000001900000000000000010000006300", "(($.\"a\" + 2 * $.\"b\") - -$.\"c\")"),
    ("01000080100000000000000010000000440000000e0000000000000010000000260000001b000000080000001900000000000000010000006100020000000000200000000080020002000000000000002000000000800300", "(($.\"a\" + 2) * 3)"),
    ("010000800e00000000000000100000006400000011000000000000001000000044000000120000000000000010000000260000001b00000008000000190000000000000001000000610002000000000020000000008002000200000000000000200000000080030013000000000000000c0000001b000000080000001900000000000000010000006200", "(($.\"a\" % 2) / 3 + +$.\"b\")"),
    ("010000801b000000080000001d000000000000000c0000000400000000000000100000008800000005000000000000001000000044000000080000000000000010000000260000001a0000000800000019000000000000000100000061000200000000002000000000800100080000000000000010000000260000001a0000000800000019000000000000000100000062000200000000002000000000800200080000000000000010000000260000001a0000000800000019000000000000000100000063000200000000002000000000800300", "$?((@.\"a\" == 1 || @.\"b\" == 2) && @.\"c\" == 3)"),
    ("010000800400000000000000100000008800000004000000000000001000000044000000090000000000000010000000260000001b00000008000000190000000000000001000000610002000000000020000000008001000c0000000000000010000000260000001b00000008000000190000000000000001000000620002000000000020000000008002000d0000000000000010000000260000001b0000000800000019000000000000000100000063000200000000002000000000800300", "(($.\"a\" != 1 && $.\"b\" <= 2) && $.\"c\" >= 3)"),
    ("010000801b00000008000000190000000e0000000100000067001d00000000000a000000290000000000000010000000180000001a00000000000000010000000000000002000000616200", "$.\"g\"?(@ starts with \"ab\")"),
    ("010000801b000000080000001d000000000000000c0000002a000000000000001f0000001b000000060000005e612e2a5c64001a00000000", "$?(@ like_regex \"^a.*\\\\d\" flag \"ismxq\")"),
    ("010000801b000000080000001d000000000000000c0000002a00000000000000000000001800000003000000612262001a00000000000000", "$?(@ like_regex \"a\\\"b\")"),
    ("010000801b000000080000001d000000000000000c0000002a0000000000000001000000160000000100000078001a0000000000", "$?(@ like_regex \"x\" flag \"i\")"),
    ("010000801b0000000800000025000000000000000c000000010000000000000007000000484832343a4d4900", "$.datetime(\"HH24:MI\")"),
    ("010000801b00000008000000250000000000000000000000", "$.datetime()"),
    ("010000800200000012000000280000008080010088131f0000000000", "(1.5).type()"),
    ("0100008014000000000000000c0000000200000010000000200000000080b0042100000000000000", "(-(1200).abs())"),
    ("010000800200000000000000200000000080e803", "1000"),
    ("010000800200000000000000180000008081", "0.000"),
    ("010000801b0000000800000019000000000000001b0000006b65792077697468202271756f74652220616e64200a090120c3a900", "$.\"key with \\\"quote\\\" and \\n\\t\\u0001 é\""),
    ("010000801b00000008000000170000000000000003000000240000000000000034000000440000004c00000000000000020000000000000020000000008001000200000000000000200000000080020028000000000000000f000000000000001000000018000000280000000000000002000000000000002000000000800100", "$[1,2 to last,last - 1]"),
    ("010000801b000000080000001500000000000000", "$[*]"),
    ("010000801b000000080000001600000000000000", "$.*"),
    ("010000801b00000008000000190000000e0000000100000061001600060000001500000000000000", "$.\"a\".*[*]"),
    ("010000801b0000000800000018000000000000000200000005000000", "$.**{2 to 5}"),
    ("010000801b000000080000001800000000000000ffffffffffffffff", "$.**{last}"),
    ("010000801b00000008000000180000000000000001000000ffffffff", "$.**{1 to last}"),
    ("010000801b00000008000000180000000000000000000000ffffffff", "$.**"),
    ("010000801b0000000800000018000000000000000300000003000000", "$.**{3}"),
    ("010000801b000000080000001800000000000000ffffffff02000000", "$.**{last to 2}"),
    ("010000801b00000008000000190000000e00000001000000610018000e00000000000000ffffffff1900000000000000010000006200", "$.\"a\".**.\"b\""),
    ("010000801c0000001000000003000000766172001900000000000000010000006100", "$\"var\".\"a\""),
    ("010000801c000000000000000300000078207900", "$\"x y\""),
    ("010000801e000000000000000c0000001b00000008000000190000000e0000000100000061001d00000000000a000000080000000000000010000000180000001a000000000000001c00000000000000010000007800", "exists ($.\"a\"?(@ == $\"x\"))"),
    ("0100008007000000000000000c000000080000000000000010000000260000001b0000000800000019000000000000000100000061000200000000002000000000800100", "($.\"a\" == 1) is unknown"),
    ("010000801b00000008000000190000000e000000010000006100200006000000210000000800000022000000080000002300000008000000240000000800000026000000080000001f00000000000000", "$.\"a\".size().abs().floor().ceiling().double().keyvalue().type()"),
    ("010000800000000000000000", "null"),
    ("01000080030000000000000001", "true"),
    ("01000080030000000000000000", "false"),
    ("010000800100000000000000050000007374725c7800", "\"str\\\\x\""),
    ("010000801b00000008000000190000000e0000000100000061001d00000000000a00000005000000000000001000000030000000080000000000000010000000180000001a000000000000000000000000000000080000000000000010000000180000001a00000000000000030000000000000000", "$.\"a\"?(@ == null || @ == false)"),
    ("010000801b000000080000001d000000000000000c0000000a00000000000000100000002400000014000000000000000c0000001a0000000000000010000000000000001000000020000000020000000000000020000000008002000e000000000000001000000020000000020000000000000020000000008003001a000000080000001900000000000000010000007800", "$?(-@ < 2 * (3 + @.\"x\"))"),
    ("010000001b000000080000001d000000000000000c0000001e000000000000000c0000001a000000080000001900000000000000010000006100", "strict $?(exists (@.\"a\"))"),
    ("010000801b000000080000002b00000000000000", "$.bigint()"),
    ("010000801b000000080000002c00000000000000", "$.boolean()"),
    ("010000801b000000080000002d00000000000000", "$.date()"),
    ("010000801b000000080000002e00000000000000100000002000000002000000000000002000000000800a0002000000000000002000000000800200", "$.decimal(10,2)"),
    ("010000801b000000080000002e000000000000000000000000000000", "$.decimal()"),
    ("010000801b000000080000002e00000000000000100000000000000002000000000000002000000000800500", "$.decimal(5)"),
    ("010000801b000000080000002f00000000000000", "$.integer()"),
    ("010000801b000000080000003000000000000000", "$.number()"),
    ("010000801b000000080000003100000000000000", "$.string()"),
    ("010000801b0000000800000032000000000000000c00000002000000000000002000000000800300", "$.time(3)"),
    ("010000801b00000008000000320000000000000000000000", "$.time()"),
    ("010000801b0000000800000033000000000000000c00000002000000000000002000000000800300", "$.time_tz(3)"),
    ("010000801b00000008000000330000000000000000000000", "$.time_tz()"),
    ("010000801b0000000800000034000000000000000c00000002000000000000002000000000800200", "$.timestamp(2)"),
    ("010000801b00000008000000340000000000000000000000", "$.timestamp()"),
    ("010000801b0000000800000035000000000000000c00000002000000000000002000000000800600", "$.timestamp_tz(6)"),
    ("010000801b00000008000000350000000000000000000000", "$.timestamp_tz()"),
];

#[test]
fn server_datums_print_as_jsonpath_out() {
    for (hex, text) in GOLDEN {
        assert_eq!(print(&unhex(hex)).as_deref(), Ok(*text), "{hex}");
    }
}

#[test]
fn every_truncation_and_byte_change_is_text_or_error() {
    // No input panics (a cut into trailing padding may still print).
    for (hex, _) in GOLDEN {
        let d = unhex(hex);
        for cut in 0..d.len() {
            let _ = print(&d[..cut]);
        }
        for at in 0..d.len() {
            for b in [0u8, 1, 0x27, 0x7f, 0x80, 0xff] {
                let mut e = d.clone();
                e[at] = b;
                let _ = print(&e);
            }
        }
    }
}

/// An item of `kind` with `next` and payload words, 4-aligned (the on-disk layout).
fn item(kind: u8, next: i32, payload: &[i32]) -> Vec<u8> {
    let mut v = vec![kind, 0, 0, 0];
    v.extend_from_slice(&next.to_le_bytes());
    for w in payload {
        v.extend_from_slice(&w.to_le_bytes());
    }
    v
}

fn datum(lax: bool, items: &[u8]) -> Vec<u8> {
    let mut d = (1u32 | if lax { JSONPATH_LAX } else { 0 })
        .to_le_bytes()
        .to_vec();
    d.extend_from_slice(items);
    d
}

#[test]
fn header_errors() {
    assert!(print(&[]).is_err());
    assert!(print(&datum(true, &[])).is_err(), "shorter than 5 bytes");
    let root = item(ROOT, 0, &[]);
    assert_eq!(print(&datum(false, &root)).as_deref(), Ok("strict $"));
    let mut d = datum(true, &root);
    d[0] = 2; // version 2
    assert!(print(&d).is_err());
    d[0] = 0;
    assert!(print(&d).is_err());
}

#[test]
fn unknown_item_types_are_errors() {
    // 39 (jpiSubscript) is never stored; 62.. are not in the table.
    for kind in [39u8, 62, 100, 255] {
        assert!(
            print(&datum(true, &item(kind, 0, &[0, 0, 0]))).is_err(),
            "{kind}"
        );
    }
    // An unknown kind as an accessor, and as an argument.
    let mut chain = item(ROOT, 8, &[]);
    chain.extend(item(62, 0, &[]));
    assert!(print(&datum(true, &chain)).is_err());
    let mut not = item(NOT, 0, &[12]);
    not.extend(item(200, 0, &[]));
    assert!(print(&datum(true, &not)).is_err());
}

#[test]
fn offsets_outside_the_datum_are_errors() {
    assert!(print(&datum(true, &item(NOT, 0, &[4096]))).is_err());
    assert!(print(&datum(true, &item(NOT, 0, &[-8]))).is_err());
    assert!(print(&datum(true, &item(ADD, 0, &[16, 900]))).is_err());
    assert!(
        print(&datum(true, &item(ROOT, 64, &[]))).is_err(),
        "next past the end"
    );
    // The next word itself cut off.
    assert!(print(&datum(true, &[ROOT, 0, 0, 0, 0])).is_err());
    // A binary item without its second argument word.
    assert!(print(&datum(true, &item(ADD, 0, &[16]))).is_err());
}

#[test]
fn negative_next_ends_the_chain() {
    // Only a positive next offset is followed (as printJsonPathItem's jspGetNext).
    let d = datum(true, &item(ROOT, -4, &[]));
    assert_eq!(print(&d).as_deref(), Ok("$"));
}

#[test]
fn damaged_strings_are_errors() {
    let key = |len: i32, bytes: &[u8]| {
        let mut v = item(KEY, 0, &[len]);
        v.extend_from_slice(bytes);
        datum(true, &v)
    };
    assert_eq!(print(&key(2, b"ab\0")).as_deref(), Ok("\"ab\""));
    assert!(print(&key(-1, b"ab\0")).is_err());
    assert!(print(&key(9, b"ab\0")).is_err());
    assert!(print(&key(2, b"\xff\xfe\0")).is_err(), "not UTF-8");
    assert!(
        print(&datum(true, &item(STRING, 0, &[]))).is_err(),
        "no length word"
    );
    assert!(
        print(&datum(true, &[BOOL, 0, 0, 0, 0, 0, 0, 0])).is_err(),
        "no bool byte"
    );
}

#[test]
fn damaged_numerics_are_errors() {
    let num = |words: &[u8]| {
        let mut v = item(NUMERIC, 0, &[]);
        v.extend_from_slice(words);
        datum(true, &v)
    };
    // 0x20 = (8 << 2): a varlena of 8 bytes: short header 0x8000, digit 1000.
    assert_eq!(
        print(&num(&[0x20, 0, 0, 0, 0, 0x80, 0xe8, 0x03])).as_deref(),
        Ok("1000")
    );
    assert!(print(&num(&[0x0c, 0, 0, 0])).is_err(), "size below 4");
    assert!(
        print(&num(&[0x40, 0, 0, 0, 0, 0x80, 0xe8, 0x03])).is_err(),
        "overrun"
    );
    assert!(
        print(&num(&[0x20, 0, 0, 0, 0, 0x80, 0x10, 0x27])).is_err(),
        "digit 10000"
    );
    assert!(
        print(&num(&[0x18, 0, 0, 0, 0, 0xe0])).is_err(),
        "bad special"
    );
    assert_eq!(print(&num(&[0x18, 0, 0, 0, 0, 0xc0])).as_deref(), Ok("NaN"));
}

#[test]
fn cycles_and_endless_sharing_are_errors() {
    // A binary item whose arguments are itself: nesting without end.
    assert_eq!(print(&datum(true, &item(ADD, 0, &[0, 0]))), Err(TOO_DEEP));
    // Subscripts whose every element is the subscript item itself.
    let mut sub = item(INDEX_ARRAY, 0, &[64]);
    for _ in 0..64 {
        sub.extend_from_slice(&0i32.to_le_bytes());
        sub.extend_from_slice(&0i32.to_le_bytes());
    }
    assert!(print(&datum(true, &sub)).is_err());
    // Both arguments of each of 40 nested ANDs the same next item: 2^40 visits.
    let mut shared = Vec::new();
    for _ in 0..40 {
        shared.extend(item(AND, 0, &[16, 16]));
    }
    shared.extend(item(ROOT, 0, &[]));
    assert_eq!(print(&datum(true, &shared)), Err(TOO_DEEP));
}

#[test]
fn long_accessor_chains_print() {
    // `$` then 3000 `.*` accessors: the chain is a loop, not nesting.
    let mut items = item(ROOT, 8, &[]);
    for i in 0..3000 {
        items.extend(item(ANY_KEY, if i < 2999 { 8 } else { 0 }, &[]));
    }
    let text = print(&datum(true, &items)).unwrap();
    assert_eq!(text.len(), 1 + 2 * 3000);
    assert!(text.starts_with("$.*.*"));
}

#[test]
fn like_regex_pattern_is_cut_at_the_datum_end() {
    // patlen 100 with 3 bytes left: the Python slice reads what is there.
    let mut v = item(LIKE_REGEX, 0, &[0x11, 24, 100]);
    v.extend_from_slice(b"ab\0\0");
    v.extend(item(CURRENT, 0, &[]));
    let text = print(&datum(true, &v)).unwrap();
    assert!(text.starts_with("(@ like_regex \"ab\\u0000"), "{text}");
    assert!(text.ends_with(" flag \"iq\")"), "{text}");
}

#[test]
fn flags_without_known_bits_print_empty() {
    let mut v = item(LIKE_REGEX, 0, &[0x100, 20, 0]);
    v.extend(item(CURRENT, 0, &[]));
    assert_eq!(
        print(&datum(true, &v)).as_deref(),
        Ok("(@ like_regex \"\" flag \"\")")
    );
}

#[test]
fn later_string_methods_print() {
    // 54.. (replace, lower, ..., split_part): read as the Python table has them.
    let mut v = item(ROOT, 8, &[]);
    v.extend(item(LOWER, 8, &[]));
    v.extend(item(REPLACE, 0, &[0, 0]));
    assert_eq!(
        print(&datum(true, &v)).as_deref(),
        Ok("$.lower().replace()")
    );
}
