//! tablesnap::copy's unit tests: the COPY split, and the rewrites it owns (numeric,
//! arrays, fixed widths, jsonb).

use super::*;
use crate::tablesnap::put_field;

fn stream(rows: &[Vec<Option<&[u8]>>]) -> Vec<u8> {
    let mut out = SIGNATURE.to_vec();
    out.extend_from_slice(&0i32.to_be_bytes());
    out.extend_from_slice(&0i32.to_be_bytes());
    for row in rows {
        out.extend_from_slice(&(row.len() as i16).to_be_bytes());
        for f in row {
            put_field(&mut out, *f);
        }
    }
    out.extend_from_slice(&(-1i16).to_be_bytes());
    out
}

/// A plan of one array column `name` (a varlena) of `elem`s, with `labels`.
fn array_plan(name: &str, labels: Labels, elem: Elem) -> Plan {
    let col = crate::output::plan::Column {
        name: name.into(),
        attlen: -1,
        align: 4,
        dropped: false,
        has_missing: false,
        missing: None,
        kind: Some(Kind::Array),
        optional: true,
        read: true,
        labels,
        elem: Some(elem),
        composite: None,
        special_dropped: Default::default(),
        placeholder: None,
        names: None,
    };
    Plan {
        columns: vec![col],
        key: vec![],
    }
}

/// Rows split into their fields, NULLs and empty fields kept apart.
#[test]
fn parses_rows_and_nulls() {
    let data = stream(&[vec![Some(b"ab"), None], vec![Some(b""), Some(b"xyz")]]);
    let c = parse(&data, 2).unwrap();
    assert_eq!(c.len(), 2);
    let f = |r: usize, i: usize| c.field(&data, r, i).map(|(o, n)| &data[o..o + n]);
    assert_eq!(f(0, 0), Some(&b"ab"[..]));
    assert_eq!(f(0, 1), None);
    assert_eq!(f(1, 0), Some(&b""[..]));
    assert_eq!(f(1, 1), Some(&b"xyz"[..]));
}

/// A parsed chunk keeps one word per field, no spare capacity: what a chunk held in the
/// snapshot's read-ahead costs beside its stream (an (offset, length) pair per field
/// made 4 readers' peak RSS 222 MB on the wide table, 193 MB with this).
#[test]
fn a_chunk_keeps_one_word_per_field() {
    let rows: Vec<Vec<Option<&[u8]>>> = (0..1000)
        .map(|_| vec![Some(&b"abc"[..]), None, Some(&b"de"[..])])
        .collect();
    let data = stream(&rows);
    let c = parse(&data, 3).unwrap();
    assert_eq!(c.len(), 1000);
    assert_eq!(c.starts.len(), 3000);
    assert_eq!(c.starts.capacity(), 3000);
    assert_eq!(std::mem::size_of_val(&c.starts[0]), 8);
    let row: Vec<_> = c.row(&data, 999).collect();
    assert_eq!(row[1], None);
    assert_eq!(row[2].map(|(o, n)| &data[o..o + n]), Some(&b"de"[..]));
}

/// Every truncation of a valid stream, a row of the wrong width and a bad length are
/// errors, never a panic or a short result.
#[test]
fn damaged_streams_are_errors() {
    let data = stream(&[vec![Some(b"ab"), None], vec![Some(b"c"), Some(b"d")]]);
    for n in 0..data.len() {
        assert!(parse(&data[..n], 2).is_err(), "truncated at {n}");
    }
    assert!(parse(&data, 3).is_err());
    let mut bad = data.clone();
    bad[19..23].copy_from_slice(&(-7i32).to_be_bytes());
    assert!(parse(&bad, 2).is_err());
    let mut extra = data.clone();
    extra.push(0);
    assert_eq!(
        parse(&extra, 2).unwrap_err().0,
        "COPY data after its trailer"
    );
}

/// numeric_send's 12.50 (ndigits 2, weight 0, sign +, dscale 2: digits 12, 5000)
/// becomes the long stored form; NaN keeps only its header.
#[test]
fn numeric_to_stored() {
    let send = [0, 2, 0, 0, 0, 0, 0, 2, 0, 12, 0x13, 0x88];
    assert_eq!(numeric(&send).unwrap(), vec![2, 0, 0, 0, 12, 0, 0x88, 0x13]);
    let nan = [0, 0, 0, 0, 0xC0, 0, 0, 0];
    assert_eq!(numeric(&nan).unwrap(), vec![0, 0xC0]);
    assert!(numeric(&send[..10]).is_err());
}

/// An int4[] with a NULL and a text[] become the ArrayType types::array reads back:
/// the same elements, dimensions and lower bounds.
#[test]
fn arrays_to_stored() {
    let labels = super::Labels::default();
    let int4 = super::Elem {
        kind: Kind::Int4,
        oid: 23,
        attlen: 4,
        align: 4,
    };
    let mut send = Vec::new();
    for v in [1i32, 0, 23, 3, 5, 4] {
        send.extend_from_slice(&v.to_be_bytes());
    }
    send.extend_from_slice(&7i32.to_be_bytes());
    send.extend_from_slice(&(-1i32).to_be_bytes());
    send.extend_from_slice(&4i32.to_be_bytes());
    send.extend_from_slice(&(-9i32).to_be_bytes());
    let st = array(&send[..send.len() - 8], &int4, &labels, None);
    assert!(st.is_err(), "one element short");
    let st = array(&send, &int4, &labels, None).unwrap();
    let a = crate::types::array::elements(&st, 23, 4, 4).unwrap();
    assert_eq!((a.dims, a.lbounds), (vec![3], vec![5]));
    let seven = 7i32.to_le_bytes();
    let nine = (-9i32).to_le_bytes();
    assert_eq!(a.items, vec![Some(&seven[..]), None, Some(&nine[..])]);
    let text = super::Elem {
        kind: Kind::Text,
        oid: 25,
        attlen: -1,
        align: 4,
    };
    let mut send = Vec::new();
    for v in [1i32, 0, 25, 2, 1] {
        send.extend_from_slice(&v.to_be_bytes());
    }
    for item in [&b"ab"[..], b""] {
        send.extend_from_slice(&(item.len() as i32).to_be_bytes());
        send.extend_from_slice(item);
    }
    let st = array(&send, &text, &labels, None).unwrap();
    let a = crate::types::array::elements(&st, 25, -1, 4).unwrap();
    assert_eq!(a.items, vec![Some(&b"ab"[..]), Some(&b""[..])]);
}

/// A jsonb[] column: its copy plan reads text elements under the jsonb OID, and each
/// element's send value (version 1, the text) becomes that text; a bad version is Bad.
#[test]
fn jsonb_arrays_to_text_elements() {
    let labels = super::Labels::default();
    let jsonb = super::Elem {
        kind: Kind::Jsonb,
        oid: 3802,
        attlen: -1,
        align: 4,
    };
    let mut send = Vec::new();
    for v in [1i32, 0, 3802, 2, 1] {
        send.extend_from_slice(&v.to_be_bytes());
    }
    for item in [&b"\x01{\"a\": 1}"[..], b"\x01[]"] {
        send.extend_from_slice(&(item.len() as i32).to_be_bytes());
        send.extend_from_slice(item);
    }
    let st = array(&send, &jsonb, &labels, None).unwrap();
    let a = crate::types::array::elements(&st, 3802, -1, 4).unwrap();
    assert_eq!(a.items, vec![Some(&b"{\"a\": 1}"[..]), Some(&b"[]"[..])]);
    let at = send.len() - 3;
    send[at] = 2;
    assert!(matches!(
        array(&send, &jsonb, &labels, None),
        Err(Rewrite::Bad(_))
    ));
    let copy = copy_plan(&array_plan("jb", labels.clone(), jsonb)).unwrap();
    let e = copy.columns[0].elem.unwrap();
    assert_eq!((e.kind, e.oid), (Kind::Text, 3802));
}

/// An array of a type selected as its text (jsonpath[], ltree[]: `::text[]`) is planned
/// as a text array, and its send value (text elements, NULLs kept) becomes the
/// ArrayType of text types::array reads; an element of another width is still checked.
#[test]
fn text_read_arrays_are_text_arrays() {
    use crate::types::outtext::Output;
    for (out, oid, align) in [(Output::Jsonpath, 4072, 4), (Output::Cube, 16_400, 8)] {
        let elem = Elem {
            kind: Kind::Output(out),
            oid,
            attlen: -1,
            align,
        };
        let copy = copy_plan(&array_plan("a", Labels::default(), elem)).unwrap();
        let e = copy.columns[0].elem.unwrap();
        assert_eq!((e.kind, e.oid, e.attlen, e.align), (Kind::Text, 25, -1, 4));
        // array_send of text[] {'$.a', NULL, '$[*]'}: ndim 1, flags 1, text, 3 from 1
        let mut send = Vec::new();
        for word in [1i32, 1, 25, 3, 1] {
            send.extend_from_slice(&word.to_be_bytes());
        }
        for item in [Some(&b"$.a"[..]), None, Some(&b"$[*]"[..])] {
            match item {
                None => send.extend_from_slice(&(-1i32).to_be_bytes()),
                Some(b) => {
                    send.extend_from_slice(&(b.len() as i32).to_be_bytes());
                    send.extend_from_slice(b);
                }
            }
        }
        let st = array(&send, &e, &Labels::default(), None).unwrap();
        let a = crate::types::array::elements(&st, 25, -1, 4).unwrap();
        assert_eq!(a.items, vec![Some(&b"$.a"[..]), None, Some(&b"$[*]"[..])]);
    }
}

/// Fixed-width values swap to little-endian; wrong widths are errors.
#[test]
fn fixed_widths() {
    assert_eq!(
        stored(Kind::Int4, &[0, 0, 1, 2]).unwrap().as_ref(),
        &[2, 1, 0, 0]
    );
    assert!(stored(Kind::Int8, &[0; 4]).is_err());
    assert!(stored(Kind::Uuid, &[0; 15]).is_err());
    assert_eq!(
        stored(
            Kind::Interval,
            &[0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3]
        )
        .unwrap()
        .as_ref(),
        &[1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0]
    );
    assert_eq!(stored(Kind::Jsonb, b"\x01{}").unwrap().as_ref(), b"{}");
    assert!(stored(Kind::Jsonb, b"\x02{}").is_err());
    assert!(matches!(
        stored(Kind::Geometry { geodetic: false }, b""),
        Err(Rewrite::Bad(_))
    ));
    // selected as `::text`: the field is the value, a string
    let ltree = Kind::Output(crate::types::outtext::Output::Ltree);
    assert_eq!(stored(ltree, b"a.b").unwrap().as_ref(), b"a.b");
    assert_eq!(copy_kind(ltree), Some(Kind::Text));
    assert!(!element_rewrites(ltree)); // ltree[] is selected as `::text[]`
                                       // jsonpath too: its `::text` is jsonpath_out's (jsonpath_send is a version byte and
                                       // the text, not the stored item tree)
    let jsonpath = Kind::Output(crate::types::outtext::Output::Jsonpath);
    assert_eq!(stored(jsonpath, b"$.a").unwrap().as_ref(), b"$.a");
    assert_eq!(copy_kind(jsonpath), Some(Kind::Text));
    assert!(!element_rewrites(jsonpath)); // jsonpath[] is selected as `::text[]`
    let hstore_text = Kind::Output(crate::types::outtext::Output::Hstore);
    assert_eq!(copy_kind(hstore_text), None);
}

/// int2vector and oidvector: array_recv's input of int2 / oid elements, stored as the
/// ArrayType types::array::vector_text prints as int2vectorout / oidvectorout do.
#[test]
fn vectors_to_stored() {
    use crate::types::outtext::Output;
    fn send(elemtype: i32, items: &[&[u8]]) -> Vec<u8> {
        let mut d = Vec::new();
        for v in [1i32, 0, elemtype, items.len() as i32, 0] {
            d.extend_from_slice(&v.to_be_bytes());
        }
        for item in items {
            d.extend_from_slice(&(item.len() as i32).to_be_bytes());
            d.extend_from_slice(item);
        }
        d
    }
    let int2 = Kind::Output(Output::Int2Vector);
    assert_eq!(copy_kind(int2), Some(int2));
    let d = send(
        21,
        &[
            &1i16.to_be_bytes(),
            &(-2i16).to_be_bytes(),
            &3i16.to_be_bytes(),
        ],
    );
    let st = stored(int2, &d).unwrap();
    let mut t = String::new();
    crate::types::array::vector_text(&mut t, &st, false).unwrap();
    assert_eq!(t, "1 -2 3");
    let oids = Kind::Output(Output::OidVector);
    let d = send(26, &[&23u32.to_be_bytes(), &4_000_000_000u32.to_be_bytes()]);
    let st = stored(oids, &d).unwrap();
    let mut t = String::new();
    crate::types::array::vector_text(&mut t, &st, true).unwrap();
    assert_eq!(t, "23 4000000000");
    // an element of the wrong width is Bad, as the Python reference's check
    let d = send(21, &[&1i32.to_be_bytes()]);
    assert!(matches!(stored(int2, &d), Err(Rewrite::Bad(_))));
    assert!(!element_rewrites(int2));
}

/// The reg* types and aclitem are selected as their text (`::text`, `::text[]`): a column
/// of one is encoded as the text field it is, an array of reg* as a text array.
#[test]
fn reg_and_aclitem_are_read_as_text() {
    use crate::types::regproc::Reg;
    for kind in [Kind::Reg(Reg::Class), Kind::AclItem { pg15: true }] {
        assert_eq!(copy_kind(kind), Some(Kind::Text));
        assert_eq!(stored(kind, b"pg_class").unwrap().as_ref(), b"pg_class");
    }
    let elem = Elem {
        kind: Kind::Reg(Reg::Type),
        oid: 2206,
        attlen: 4,
        align: 4,
    };
    let copy = copy_plan(&array_plan("a", Labels::default(), elem)).unwrap();
    let e = copy.columns[0].elem.unwrap();
    assert_eq!((e.kind, e.oid, e.attlen, e.align), (Kind::Text, 25, -1, 4));
}

/// A plan column `name` of `kind` (nullable), a varlena or fixed as `attlen` says.
fn column(name: &str, kind: Kind, attlen: i16) -> crate::output::plan::Column {
    crate::output::plan::Column {
        name: name.into(),
        attlen,
        align: if attlen > 0 { attlen as usize } else { 4 },
        dropped: false,
        has_missing: false,
        missing: None,
        kind: Some(kind),
        optional: true,
        read: true,
        labels: Labels::new(),
        elem: None,
        composite: None,
        special_dropped: Default::default(),
        placeholder: None,
        names: None,
    }
}

/// `encode_into` appends what `encode` returns (the Value record, then the Key record),
/// row after row with one scratch, the swapped and numeric fields rewritten in it, the
/// borrowed ones (text, bool, jsonb's text) taken in place; a fallback leaves the buffer
/// as it was.
#[test]
fn encode_into_appends_what_encode_returns() {
    let plan = Plan {
        columns: vec![
            column("id", Kind::Int8, 8),
            column("n", Kind::Int4, 4),
            column("amount", Kind::VarDecimal, -1),
            column("note", Kind::Text, -1),
            column("paid", Kind::Bool, 1),
            column("doc", Kind::Jsonb, -1),
            column("at", Kind::TimestampTz, 8),
        ],
        key: vec![0],
    };
    let copy = CopyPlan {
        plan: &plan,
        copy: copy_plan(&plan).unwrap(),
        fields: (0..7).map(Some).collect(),
    };
    // numeric 12.5: ndigits 2, weight 0, sign +, dscale 1, digits 12 5000
    let amount = [0, 2, 0, 0, 0, 0, 0, 1, 0, 12, 0x13, 0x88];
    let (id7, n, at, id8) = (
        7i64.to_be_bytes(),
        (-3i32).to_be_bytes(),
        5i64.to_be_bytes(),
        8i64.to_be_bytes(),
    );
    let rows = [
        vec![
            Some(&id7[..]),
            Some(&n[..]),
            Some(&amount[..]),
            Some(&b"a note"[..]),
            Some(&[1u8][..]),
            Some(&b"\x01{\"k\": 1}"[..]),
            Some(&at[..]),
        ],
        vec![Some(&id8[..]), None, None, Some(&b""[..]), None, None, None],
    ];
    let data = stream(&rows);
    let chunk = parse(&data, 7).unwrap();
    let mut scratch = RowScratch::default();
    let mut out = b"before".to_vec();
    for row in 0..2 {
        let Outcome::Encoded { value, key } = copy.encode(&data, &chunk, row, true).unwrap() else {
            panic!("row {row} fell back");
        };
        let start = out.len();
        let value_end = copy
            .encode_into(&data, &chunk, row, true, &mut scratch, &mut out)
            .unwrap()
            .unwrap();
        assert_eq!(
            &out[start..value_end],
            value.as_slice(),
            "row {row}'s Value record"
        );
        assert_eq!(&out[value_end..], key.as_slice(), "row {row}'s Key record");
        out.truncate(start);
        out.extend_from_slice(b"|");
    }
    // the Value record holds the rewritten fields: int8 7 as a zigzag long
    let Outcome::Encoded { value, .. } = copy.encode(&data, &chunk, 0, false).unwrap() else {
        panic!("row 0 fell back");
    };
    assert_eq!(&value[..2], &[0x02, 14], "id 7 in the [null, long] union");
    assert!(value.windows(6).any(|w| w == b"a note"));
    // a field the plan cannot rewrite: a fallback, and `out` unchanged
    let bad_plan = Plan {
        columns: vec![column("t", Kind::Int4, 4)],
        key: vec![],
    };
    let bad = CopyPlan {
        plan: &bad_plan,
        copy: copy_plan(&bad_plan).unwrap(),
        fields: vec![Some(0)],
    };
    let short = stream(&[vec![Some(&[0u8, 1][..])]]);
    let short_chunk = parse(&short, 1).unwrap();
    let before = out.clone();
    assert!(bad
        .encode_into(&short, &short_chunk, 0, false, &mut scratch, &mut out)
        .is_err());
    out.truncate(before.len()); // an error leaves the caller to cut (glue::tablesnap)
    assert_eq!(out, before);
}
