//! Deform and encode against hand-built tuples, the layouts heap_form_tuple writes.

use super::*;
use crate::types::deform::HEAP_HASNULL;

fn col(name: &str, attlen: i16, align: usize, kind: Option<Kind>, optional: bool) -> Column {
    Column {
        name: name.into(),
        attlen,
        align,
        dropped: false,
        has_missing: false,
        missing: None,
        kind,
        optional,
        read: kind.is_some(),
        labels: Default::default(),
        elem: None,
        composite: None,
        special_dropped: Default::default(),
        placeholder: None,
        names: None,
    }
}

/// A tuple's `data` (from t_bits on) with t_hoff = 24 and no nulls: one pad byte, then
/// `body` (which starts at offset 24 of the tuple).
fn tuple_data(body: &[u8]) -> Vec<u8> {
    let mut d = vec![0u8];
    d.extend_from_slice(body);
    d
}

fn encoded(plan: &Plan, t: &Tuple<'_>) -> (Vec<u8>, Vec<u8>) {
    match plan.encode(t, true).unwrap() {
        Outcome::Encoded { value, key } => (value, key),
        other => panic!("expected an encoding, got {other:?}"),
    }
}

#[test]
fn int_text_and_alignment() {
    // int4 id, text note (short header), int8 big (aligned to 8)
    let plan = Plan {
        columns: vec![
            col("id", 4, 4, Some(Kind::Int4), false),
            col("note", -1, 4, Some(Kind::Text), true),
            col("big", 8, 8, Some(Kind::Int8), true),
        ],
        key: vec![0],
    };
    let mut body = Vec::new();
    body.extend_from_slice(&7i32.to_le_bytes()); // offset 24..28
    body.push((3 << 1) | 1); // short varlena "hi" at 28..31
    body.extend_from_slice(b"hi");
    body.push(0); // pad to 32
    body.extend_from_slice(&(-1i64).to_le_bytes());
    let data = tuple_data(&body);
    let t = Tuple {
        natts: 3,
        infomask: 0,
        hoff: 24,
        data: &data,
    };
    let (value, key) = encoded(&plan, &t);
    assert_eq!(value, vec![0x0e, 0x02, 0x04, b'h', b'i', 0x02, 0x01]);
    assert_eq!(key, vec![0x0e]);
}

#[test]
fn nulls_zero_required_fields_and_natts_short_is_null() {
    let plan = Plan {
        columns: vec![
            col("a", 4, 4, Some(Kind::Int4), false),
            col("b", -1, 4, Some(Kind::Text), true),
            col("c", 8, 8, Some(Kind::Float8), true),
        ],
        key: vec![0],
    };
    // natts 2, both null: bitmap 0b00, t_hoff 24
    let data = vec![0u8];
    let t = Tuple {
        natts: 2,
        infomask: HEAP_HASNULL,
        hoff: 24,
        data: &data,
    };
    let (value, key) = encoded(&plan, &t);
    assert_eq!(value, vec![0x00, 0x00, 0x00]); // zero int, null, absent column null
    assert_eq!(key, vec![0x00]);
}

#[test]
fn missing_default_and_external_toast_fall_back() {
    let mut plan = Plan {
        columns: vec![col("a", 4, 4, Some(Kind::Int4), false)],
        key: vec![],
    };
    plan.columns[0].has_missing = true;
    let data = vec![0u8];
    let t = Tuple {
        natts: 0,
        infomask: 0,
        hoff: 24,
        data: &data,
    };
    assert_eq!(
        plan.encode(&t, false).unwrap(),
        Outcome::Fallback("attribute missing with a default")
    );

    let plan = Plan {
        columns: vec![col("t", -1, 4, Some(Kind::Text), true)],
        key: vec![],
    };
    let mut body = vec![0x01u8, 18];
    body.extend_from_slice(&[0; 16]);
    let data = tuple_data(&body);
    let t = Tuple {
        natts: 1,
        infomask: 0,
        hoff: 24,
        data: &data,
    };
    assert_eq!(
        plan.encode(&t, false).unwrap(),
        Outcome::Fallback("external TOAST pointer")
    );
}

#[test]
fn dropped_columns_are_skipped_and_overruns_are_errors() {
    let mut plan = Plan {
        columns: vec![
            col("gone", 8, 8, None, true),
            col("x", 2, 2, Some(Kind::Int2), false),
        ],
        key: vec![],
    };
    plan.columns[0].dropped = true;
    // t_hoff 24 is 8-aligned: the dropped int8 at 24..32, then the int2
    let mut body = vec![9u8; 8];
    body.extend_from_slice(&(-3i16).to_le_bytes());
    let data = tuple_data(&body);
    let t = Tuple {
        natts: 2,
        infomask: 0,
        hoff: 24,
        data: &data,
    };
    assert_eq!(
        plan.encode(&t, false).unwrap(),
        Outcome::Encoded {
            value: vec![0x05],
            key: vec![]
        }
    );
    let short = &data[..data.len() - 1];
    let t = Tuple {
        natts: 2,
        infomask: 0,
        hoff: 24,
        data: short,
    };
    assert!(matches!(
        plan.encode(&t, false),
        Err(RowError::Mismatch { .. })
    ));
    let t = Tuple {
        natts: 3,
        infomask: 0,
        hoff: 24,
        data: &data,
    };
    assert_eq!(
        plan.encode(&t, false),
        Err(RowError::Mismatch {
            message: "tuple has 3 attributes, definition has 2".into(),
            field: None
        })
    );
}

#[test]
fn uuid_date_timestamps_and_bool() {
    let plan = Plan {
        columns: vec![
            col("u", 16, 1, Some(Kind::Uuid), false),
            col("d", 4, 4, Some(Kind::Date), false),
            col("ts", 8, 8, Some(Kind::Timestamp), false),
            col("tz", 8, 8, Some(Kind::TimestampTz), false),
            col("b", 1, 1, Some(Kind::Bool), false),
        ],
        key: vec![],
    };
    let mut body = Vec::new();
    body.extend_from_slice(&[
        0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0, 1, 2, 3, 4, 5, 6, 7,
    ]);
    body.extend_from_slice(&0i32.to_le_bytes()); // 40..44
    body.extend_from_slice(&[0; 4]); // pad to 48
    body.extend_from_slice(&0i64.to_le_bytes());
    body.extend_from_slice(&i64::MAX.to_le_bytes());
    body.push(1);
    let data = tuple_data(&body);
    let t = Tuple {
        natts: 5,
        infomask: 0,
        hoff: 24,
        data: &data,
    };
    let (value, _) = encoded(&plan, &t);
    let mut want = vec![72u8];
    want.extend_from_slice(b"12345678-9abc-def0-0001-020304050607");
    avro::long(&mut want, 10_957);
    avro::long(&mut want, datetime::UNIX_EPOCH_USECS);
    avro::bytes(&mut want, b"infinity");
    want.push(1);
    assert_eq!(value, want);
}

#[test]
fn pglz_inline_compressed_text_is_expanded() {
    // pglz stream: control byte 0b0000_0010: literal 'a', then tag copying 9 bytes
    // from offset 1 -> "aaaaaaaaaa" (10 bytes).
    let stream = [0b0000_0010u8, b'a', 0x06, 0x01];
    let rawsize: u32 = 10;
    let total = 8 + stream.len();
    let mut body = Vec::new();
    body.extend_from_slice(&(((total as u32) << 2) | 0x02).to_le_bytes());
    body.extend_from_slice(&rawsize.to_le_bytes()); // method 0 = pglz
    body.extend_from_slice(&stream);
    let data = tuple_data(&body);
    let plan = Plan {
        columns: vec![col("t", -1, 4, Some(Kind::Text), false)],
        key: vec![],
    };
    let t = Tuple {
        natts: 1,
        infomask: 0,
        hoff: 24,
        data: &data,
    };
    let (value, _) = encoded(&plan, &t);
    let mut want = Vec::new();
    avro::bytes(&mut want, b"aaaaaaaaaa");
    assert_eq!(value, want);
}

#[test]
fn float_nan_and_bad_utf8_fall_back() {
    let plan = Plan {
        columns: vec![col("f", 4, 4, Some(Kind::Float4), true)],
        key: vec![],
    };
    // t_hoff 28 (4-aligned): the float4 sits at data[5..9]
    let mut data = vec![0u8; 5];
    data.extend_from_slice(&f32::NAN.to_le_bytes());
    let t = Tuple {
        natts: 1,
        infomask: 0,
        hoff: 28,
        data: &data,
    };
    assert_eq!(
        plan.encode(&t, false).unwrap(),
        Outcome::Fallback("float4 NaN")
    );
    let plan = Plan {
        columns: vec![col("t", -1, 4, Some(Kind::Text), true)],
        key: vec![],
    };
    let data = tuple_data(&[(3 << 1) | 1, 0xff, 0xfe]);
    let t = Tuple {
        natts: 1,
        infomask: 0,
        hoff: 24,
        data: &data,
    };
    assert_eq!(
        plan.encode(&t, false).unwrap(),
        Outcome::Fallback("text is not UTF-8")
    );
}

#[test]
fn never_panics_on_damaged_tuples() {
    let plan = Plan {
        columns: vec![
            col("a", 4, 4, Some(Kind::Int4), false),
            col("b", -1, 4, Some(Kind::Text), true),
            col("c", -1, 4, Some(Kind::VarDecimal), true),
            col("d", 8, 8, Some(Kind::TimestampTz), true),
            col("e", -2, 1, None, true),
        ],
        key: vec![0, 1],
    };
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..20_000 {
        let len = (next() % 64) as usize;
        let data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        let t = Tuple {
            natts: (next() % 7) as usize,
            infomask: (next() % 2) as u16,
            hoff: 16 + (next() % 24) as usize,
            data: &data,
        };
        let _ = plan.encode(&t, true);
    }
}

/// A tuple of int4 id and one on-disk TOAST pointer (varattrib_1b_e, VARTAG_ONDISK) of
/// `rawsize` (header included), `extsize` stored bytes, chunk id `valueid`.
fn toasted(rawsize: u32, extsize: u32, method: u32, valueid: u32) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&1i32.to_le_bytes());
    body.extend_from_slice(&[0x01, 18]);
    body.extend_from_slice(&rawsize.to_le_bytes());
    body.extend_from_slice(&(extsize | (method << 30)).to_le_bytes());
    body.extend_from_slice(&valueid.to_le_bytes());
    body.extend_from_slice(&16384u32.to_le_bytes());
    tuple_data(&body)
}

/// `toasted`'s tuple data of `value`, stored uncompressed under chunk id 77.
fn out_of_line(value: &[u8]) -> Vec<u8> {
    toasted(value.len() as u32 + 4, value.len() as u32, 0, 77)
}

/// The tuple of `toasted`'s two attributes in `data`.
fn id_and_pointer(data: &[u8]) -> Tuple<'_> {
    Tuple {
        natts: 2,
        infomask: 0,
        hoff: 24,
        data,
    }
}

/// The Value record of `id_and_pointer` with the nullable text `doc` whole: id 1, `doc`.
fn id_and_doc(doc: &[u8]) -> Vec<u8> {
    let mut want = Vec::new();
    avro::long(&mut want, 1);
    want.push(avro::SECOND_BRANCH);
    avro::bytes(&mut want, doc);
    want
}

/// The Value record `plan` encodes `t` to with `toast` (a fallback panics).
fn value_of<'a>(plan: &Plan, t: &Tuple<'a>, toast: Option<&Toast<'a>>) -> Vec<u8> {
    match plan.encode_toasted(t, false, toast) {
        Ok(Outcome::Encoded { value, .. }) => value,
        other => panic!("expected an encoding, got {other:?}"),
    }
}

#[test]
fn external_toast_from_the_changes_chunks() {
    // detoast_external_attr: an uncompressed value is its chunks; a missing chunk id (the
    // unchanged-TOAST case) or a size that disagrees is the Python path's.
    let plan = Plan {
        columns: vec![
            col("id", 4, 4, Some(Kind::Int4), false),
            col("doc", -1, 4, Some(Kind::Text), true),
        ],
        key: vec![0],
    };
    let value = b"a value stored out of line".repeat(100);
    let data = out_of_line(&value);
    let t = id_and_pointer(&data);
    let toast: Toast<'_> = [(77u32, value.as_slice())].into_iter().collect();
    assert_eq!(value_of(&plan, &t, Some(&toast)), id_and_doc(&value));
    assert_eq!(
        plan.encode(&t, false),
        Ok(Outcome::Fallback("external TOAST pointer"))
    );
    let other: Toast<'_> = [(78u32, value.as_slice())].into_iter().collect();
    assert_eq!(
        plan.encode_toasted(&t, false, Some(&other)),
        Ok(Outcome::Fallback("external TOAST pointer"))
    );
    let short: Toast<'_> = [(77u32, &value[1..])].into_iter().collect();
    assert_eq!(
        plan.encode_toasted(&t, false, Some(&short)),
        Ok(Outcome::Fallback("TOAST value of another size"))
    );
    // compressed (extsize < rawsize - 4): va_tcinfo then a pglz stream; a stream that
    // does not decompress to its size is the Python path's error
    let broken = [0u8; 12];
    let data = toasted(5000, 12, 0, 77);
    let t = id_and_pointer(&data);
    let bad: Toast<'_> = [(77u32, &broken[..])].into_iter().collect();
    assert!(matches!(
        plan.encode_toasted(&t, false, Some(&bad)),
        Ok(Outcome::Fallback(_))
    ));
    // a pointer cut short is a typed error, never a panic
    let t = id_and_pointer(&data[..data.len() - 3]);
    assert!(plan.encode_toasted(&t, false, Some(&bad)).is_err());
}

#[test]
fn unchanged_toast_writes_the_columns_placeholder() {
    // A pointer whose chunks the change lacks (the Python decoder's UNCHANGED_TOAST): with
    // a placeholder the field is written as the compiler encoded it, with or without
    // a TOAST mapping; without one, or with the pointer's chunks present, as before.
    let field = [avro::SECOND_BRANCH, 0x06, b'a', b'b', b'c'];
    let mut doc = col("doc", -1, 4, Some(Kind::Text), true);
    doc.placeholder = Some(std::sync::Arc::from(&field[..]));
    let plan = Plan {
        columns: vec![col("id", 4, 4, Some(Kind::Int4), false), doc],
        key: vec![0],
    };
    let value = b"stored out of line".repeat(50);
    let data = out_of_line(&value);
    let t = id_and_pointer(&data);
    let mut want = Vec::new();
    avro::long(&mut want, 1);
    want.extend_from_slice(&field);
    let other: Toast<'_> = [(78u32, value.as_slice())].into_iter().collect();
    for toast in [None, Some(&other)] {
        let Ok(Outcome::Encoded { value: got, key }) = plan.encode_toasted(&t, true, toast) else {
            panic!("expected an encoding");
        };
        assert_eq!(got, want);
        assert_eq!(key, [0x02]); // id 1
    }
    // the chunks present: the value itself
    let toast: Toast<'_> = [(77u32, value.as_slice())].into_iter().collect();
    assert_eq!(value_of(&plan, &t, Some(&toast)), id_and_doc(&value));
    // a size that disagrees stays the Python path's error, placeholder or not
    let short: Toast<'_> = [(77u32, &value[1..])].into_iter().collect();
    assert_eq!(
        plan.encode_toasted(&t, false, Some(&short)),
        Ok(Outcome::Fallback("TOAST value of another size"))
    );
    // an unchanged value in a key column is the Python path's
    let keyed = Plan {
        columns: plan.columns.clone(),
        key: vec![1],
    };
    assert_eq!(
        keyed.encode(&t, true),
        Ok(Outcome::Fallback("unchanged TOAST value in the key"))
    );
    assert!(matches!(
        keyed.encode(&t, false),
        Ok(Outcome::Encoded { .. })
    ));
    // a column the record leaves out steps past the pointer with a TOAST mapping, and
    // gives the row up without one, as before
    let mut unread = plan.columns.clone();
    unread[1].kind = None;
    unread[1].read = false;
    let unread = Plan {
        columns: unread,
        key: vec![0],
    };
    assert!(matches!(
        unread.encode_toasted(&t, false, Some(&other)),
        Ok(Outcome::Encoded { .. })
    ));
    assert_eq!(
        unread.encode(&t, false),
        Ok(Outcome::Fallback("external TOAST pointer"))
    );
}

/// A tuple written before ADD COLUMN ... DEFAULT reads each missing attribute as
/// getmissingattr does: its attmissingval datum where the plan carries one (an int4 and
/// a text default here), NULL for a column without atthasmissing; the datum is the
/// value's, as a stored one would be.
#[test]
fn missing_attributes_read_their_default() {
    let mut plan = Plan {
        columns: vec![
            col("id", 4, 4, Some(Kind::Int4), false),
            col("n", 4, 4, Some(Kind::Int4), false),
            col("t", -1, 4, Some(Kind::Text), true),
            col("later", 4, 4, Some(Kind::Int4), true),
        ],
        key: vec![0],
    };
    plan.columns[1].has_missing = true;
    plan.columns[1].missing = Some(std::sync::Arc::from(&42i32.to_le_bytes()[..]));
    plan.columns[2].has_missing = true;
    plan.columns[2].missing = Some(std::sync::Arc::from(&b"it's"[..]));
    let data = tuple_data(&7i32.to_le_bytes());
    let old = Tuple {
        natts: 1,
        infomask: 0,
        hoff: 24,
        data: &data,
    };
    let (value, key) = encoded(&plan, &old);
    let mut want = vec![14, 84]; // 7, 42 (zigzag)
    want.extend_from_slice(&[0x02, 8]);
    want.extend_from_slice(b"it's");
    want.push(0x00); // later: null
    assert_eq!(value, want);
    assert_eq!(key, vec![14]);
    // the same row written in full encodes alike
    let mut body = 7i32.to_le_bytes().to_vec();
    body.extend_from_slice(&42i32.to_le_bytes());
    body.push((5 << 1) | 1);
    body.extend_from_slice(b"it's");
    let data = tuple_data(&body);
    let full = Tuple {
        natts: 3,
        infomask: 0,
        hoff: 24,
        data: &data,
    };
    assert_eq!(encoded(&plan, &full).0, want);
}

/// A varlena whose padding runs to the end of the tuple is read_varlena's DecodeError
/// (past the end after the alignment), as the Python deformer raises it; without the
/// padding byte it is the overrun SchemaMismatchError.
#[test]
fn varlena_past_the_end_after_padding_is_a_decode_error() {
    let plan = Plan {
        columns: vec![
            col("c", 1, 1, Some(Kind::Char), true),
            col("t", -1, 4, Some(Kind::Text), true),
        ],
        key: vec![],
    };
    let data = tuple_data(&[0x41, 0x00]);
    let t = Tuple {
        natts: 2,
        infomask: 0,
        hoff: 24,
        data: &data,
    };
    match plan.encode(&t, false) {
        Err(RowError::Decode { message, .. }) => {
            assert_eq!(
                message,
                "varlena at offset 5 is past the end of a 3-byte datum"
            )
        }
        other => panic!("expected a decode error, got {other:?}"),
    }
    let data = tuple_data(&[0x41]);
    let t = Tuple {
        natts: 2,
        infomask: 0,
        hoff: 24,
        data: &data,
    };
    assert!(matches!(
        plan.encode(&t, false),
        Err(RowError::Mismatch { .. })
    ));
}
