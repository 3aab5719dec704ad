//! pgvector's vector, halfvec and sparsevec: their output text (vector_out, halfvec_out,
//! sparsevec_out) and the values the Avro path writes for Debezium's DoubleVector,
//! FloatVector and SparseDoubleVector.
//!
//! Receives: the varlena payload without its header, little-endian, exactly as the
//! Python reference service.types.pgvector reads it:
//! - vector: int16 dim, int16 unused, float4 x[dim];
//! - halfvec: int16 dim, int16 unused, float2 (IEEE half) x[dim];
//! - sparsevec: int32 dim, int32 nnz, int32 unused, int32 indices[nnz] (0-based),
//!   float4 values[nnz].
//!
//! Bytes after the last element are ignored, as the Python reference ignores them; a
//! sparsevec's indices are neither checked against `dim` nor for order.
//!
//! Hands on:
//! - `vector_text`, `halfvec_text`, `sparsevec_text`: appended to `out`, the text
//!   `[1,2.5]` / `{1:1.5,3:2}/5` (1-based indices), each number as float4out's shortest
//!   digits (`super::float::float4`, the half widened to float4 exactly), as
//!   pgvector.vector_text / halfvec_text / sparsevec_text print it;
//! - `double_vector`: each float4's printed digits read back as a double
//!   (connectors.avro.extension_types.double_vector, `_printed`): 0.1, not
//!   0.100000001490116; NaN is the quiet NaN float('NaN') gives;
//! - `float_vector`: each half widened exactly to the f32 that fastavro packs for the
//!   Python float (extension_types.float_vector);
//! - `sparse_vector`: (dimensions, the (1-based index, printed value) entries) in the
//!   order java.util.HashMap iterates them (extension_types.sparse_vector: the key's
//!   hash `index & 0xFFFF`, a map sized for the entry count, `java_hash_order`).
//!
//! A half has 11 significant bits, so ties of the shortest float4 digits are common
//! among halves (1024 of the 31744 finite positive halves, e.g. 2^-12, which PostgreSQL
//! prints 0.00024414062); `float4` decides them as Ryu does (super::float).
//!
//! Errors: a datum the Python reference rejects (its DecodeError: shorter than the
//! header, a negative count, fewer bytes than the elements need) is `Err(reason)`,
//! and `out` is then as it was. Deliberate fallbacks where Python succeeds:
//! `float_vector` of a half NaN (CPython 3.11 drops its payload, later versions may
//! keep it) and `sparse_vector` of the stored index 2147483647 (its 1-based key,
//! 2^31, is no i32).
//!
//! Pure, no panics.

use super::extension::java_hash_order;
use super::float::float4;
use super::undo_on_err;

const SHORT: &str = "pgvector datum shorter than its header";
const NEGATIVE: &str = "pgvector element count is negative";
const RUNS_OUT: &str = "pgvector elements run out of the datum";
const HALF_NAN: &str = "halfvec NaN: its Avro float is Python's to decide";
const KEY_RANGE: &str = "sparsevec index 2^31 is no Avro int";
const UNREAD: &str = "printed float4 does not read back as a double";

/// The `N` bytes at `at`, if they are there.
fn bytes_at<const N: usize>(d: &[u8], at: usize) -> Option<[u8; N]> {
    d.get(at..at.checked_add(N)?)?.try_into().ok()
}

fn i16_at(d: &[u8], at: usize) -> Option<i16> {
    bytes_at(d, at).map(i16::from_le_bytes)
}

fn i32_at(d: &[u8], at: usize) -> Option<i32> {
    bytes_at(d, at).map(i32::from_le_bytes)
}

fn f32_at(d: &[u8], at: usize) -> Option<f32> {
    bytes_at(d, at).map(f32::from_le_bytes)
}

fn half_at(d: &[u8], at: usize) -> Option<f32> {
    bytes_at(d, at).map(|b| half_to_f32(u16::from_le_bytes(b)))
}

/// An IEEE binary16 value widened exactly to binary32 (as struct's `e` format reads it
/// into a double); a NaN keeps its sign and becomes the quiet NaN without payload.
pub fn half_to_f32(bits: u16) -> f32 {
    let sign = u32::from(bits >> 15) << 31;
    let exp = u32::from((bits >> 10) & 0x1f);
    let frac = u32::from(bits & 0x3ff);
    match exp {
        0 => {
            // subnormal (or zero): frac × 2^-24, exact in binary32
            let magnitude = frac as f32 * f32::from_bits((127 - 24) << 23);
            f32::from_bits(sign | magnitude.to_bits())
        }
        0x1f if frac == 0 => f32::from_bits(sign | 0x7f80_0000),
        0x1f => f32::from_bits(sign | 0x7fc0_0000),
        _ => f32::from_bits(sign | ((exp + 127 - 15) << 23) | (frac << 13)),
    }
}

/// The elements of a dense vector (`width` bytes each, read by `read`), as
/// pgvector._dense checks them: a 4-byte header, dim >= 0, enough bytes.
fn dense(
    d: &[u8],
    width: usize,
    read: fn(&[u8], usize) -> Option<f32>,
) -> Result<Vec<f32>, &'static str> {
    let dim = i16_at(d, 0).ok_or(SHORT)?;
    if d.len() < 4 {
        return Err(SHORT);
    }
    let dim = usize::try_from(dim).map_err(|_| NEGATIVE)?;
    (0..dim)
        .map(|k| read(d, 4 + width * k).ok_or(RUNS_OUT))
        .collect()
}

fn vector_values(d: &[u8]) -> Result<Vec<f32>, &'static str> {
    dense(d, 4, f32_at)
}

fn halfvec_values(d: &[u8]) -> Result<Vec<f32>, &'static str> {
    dense(d, 2, half_at)
}

/// A sparsevec's fields, checked as pgvector.sparsevec_value checks them.
struct Sparse {
    dim: i32,
    /// (0-based stored index, value) in stored order.
    entries: Vec<(i32, f32)>,
}

fn sparse(d: &[u8]) -> Result<Sparse, &'static str> {
    if d.len() < 12 {
        return Err(SHORT);
    }
    let dim = i32_at(d, 0).ok_or(SHORT)?;
    let nnz = usize::try_from(i32_at(d, 4).ok_or(SHORT)?).map_err(|_| NEGATIVE)?;
    let values_at = nnz.checked_mul(4).and_then(|n| n.checked_add(12));
    let end = nnz.checked_mul(8).and_then(|n| n.checked_add(12));
    let (Some(values_at), Some(end)) = (values_at, end) else {
        return Err(RUNS_OUT);
    };
    if d.len() < end {
        return Err(RUNS_OUT);
    }
    let entries = (0..nnz)
        .map(|k| {
            let index = i32_at(d, 12 + 4 * k);
            let value = f32_at(d, values_at + 4 * k);
            index.zip(value).ok_or(RUNS_OUT)
        })
        .collect::<Result<_, _>>()?;
    Ok(Sparse { dim, entries })
}

/// `[x1,x2,...]` with float4out's digits (pgvector._join).
fn join(out: &mut String, values: &[f32]) -> Result<(), &'static str> {
    out.push('[');
    for (k, &v) in values.iter().enumerate() {
        if k > 0 {
            out.push(',');
        }
        float4(out, v)?;
    }
    out.push(']');
    Ok(())
}

/// vector_out's text of a stored vector, appended to `out`.
pub fn vector_text(out: &mut String, d: &[u8]) -> Result<(), &'static str> {
    let values = vector_values(d)?;
    undo_on_err(out, |out| join(out, &values))
}

/// halfvec_out's text of a stored halfvec (each half widened to float4), appended to
/// `out`.
pub fn halfvec_text(out: &mut String, d: &[u8]) -> Result<(), &'static str> {
    let values = halfvec_values(d)?;
    undo_on_err(out, |out| join(out, &values))
}

/// sparsevec_out's text `{i:x,...}/dim` (1-based indices), appended to `out`.
pub fn sparsevec_text(out: &mut String, d: &[u8]) -> Result<(), &'static str> {
    use std::fmt::Write;
    let sv = sparse(d)?;
    undo_on_err(out, |out| {
        out.push('{');
        for (k, &(index, value)) in sv.entries.iter().enumerate() {
            if k > 0 {
                out.push(',');
            }
            let _ = write!(out, "{}:", i64::from(index) + 1);
            float4(out, value)?;
        }
        let _ = write!(out, "}}/{}", sv.dim);
        Ok(())
    })
}

/// The float4's printed digits read as a double (extension_types._printed).
fn printed(v: f32, text: &mut String) -> Result<f64, &'static str> {
    if v.is_nan() {
        return Ok(f64::NAN); // float("NaN"): the positive quiet NaN
    }
    text.clear();
    float4(text, v)?;
    text.parse::<f64>().map_err(|_| UNREAD)
}

/// Debezium's DoubleVector of a stored vector: each element's printed digits as a
/// double (extension_types.double_vector of pgvector.vector_value).
pub fn double_vector(d: &[u8]) -> Result<Vec<f64>, &'static str> {
    let mut text = String::with_capacity(16);
    vector_values(d)?
        .into_iter()
        .map(|v| printed(v, &mut text))
        .collect()
}

/// Debezium's FloatVector of a stored halfvec: each half as the f32 fastavro packs
/// (extension_types.float_vector of pgvector.halfvec_value). A NaN is Err (HALF_NAN).
pub fn float_vector(d: &[u8]) -> Result<Vec<f32>, &'static str> {
    let values = halfvec_values(d)?;
    if values.iter().any(|v| v.is_nan()) {
        return Err(HALF_NAN);
    }
    Ok(values)
}

/// Debezium's SparseDoubleVector of a stored sparsevec (extension_types.sparse_vector):
/// its dimensions as stored, and the (1-based index, printed value) entries in the order
/// java.util.HashMap iterates a map of that many entries keyed by the index.
pub fn sparse_vector(d: &[u8]) -> Result<SparseDoubleVector, &'static str> {
    let sv = sparse(d)?;
    let keys = sv
        .entries
        .iter()
        .map(|&(index, _)| index.checked_add(1).ok_or(KEY_RANGE))
        .collect::<Result<Vec<i32>, _>>()?;
    let hashes: Vec<u32> = keys.iter().map(|&k| key_hash(k)).collect();
    let mut text = String::with_capacity(16);
    let mut entries = Vec::with_capacity(keys.len());
    for k in java_hash_order(&hashes, Some(hashes.len())) {
        let key = keys.get(k).copied().ok_or(RUNS_OUT)?;
        let value = sv.entries.get(k).map(|e| e.1).ok_or(RUNS_OUT)?;
        entries.push((key, printed(value, &mut text)?));
    }
    Ok((sv.dim, entries))
}

/// Debezium's SparseDoubleVector: (dimensions, the (1-based index, value) entries in
/// HashMap order).
pub type SparseDoubleVector = (i32, Vec<(i32, f64)>);

/// The hash extension_types.sparse_vector gives a key: its low 16 bits (`i & 0xFFFF`).
fn key_hash(key: i32) -> u32 {
    key as u32 & 0xFFFF
}

#[cfg(test)]
mod tests {
    use super::*;

    const PREFIX: &str = "kept|";

    /// A sparse vector's (key, value bits) in HashMap order.
    type Pairs = &'static [(i32, u64)];

    /// A Python-reference case: (what, stored, its text, its values); None: it raises.
    type PyCase<T> = (&'static str, &'static str, Option<&'static str>, Option<T>);

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// The text function of `kind` on `d`, after PREFIX; an Err must leave PREFIX alone.
    fn render(kind: &str, d: &[u8]) -> Result<String, &'static str> {
        let mut out = String::from(PREFIX);
        let done = match kind {
            "vector" => vector_text(&mut out, d),
            "halfvec" => halfvec_text(&mut out, d),
            "sparsevec" => sparsevec_text(&mut out, d),
            other => panic!("no type {other}"),
        };
        match done {
            Ok(()) => {
                assert!(out.starts_with(PREFIX), "{out}");
                Ok(out[PREFIX.len()..].to_string())
            }
            Err(why) => {
                assert_eq!(out, PREFIX, "Err ({why}) left text behind");
                Err(why)
            }
        }
    }

    fn f64_bits(v: &[f64]) -> Vec<u64> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    fn f32_bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    fn sparse_bits(v: (i32, Vec<(i32, f64)>)) -> (i32, Vec<(i32, u64)>) {
        (
            v.0,
            v.1.into_iter().map(|(k, x)| (k, x.to_bits())).collect(),
        )
    }

    #[test]
    fn vectors_equal_the_server_and_the_python_values() {
        for &(text, hex, bits) in VECTOR {
            let d = unhex(hex);
            assert_eq!(render("vector", &d).as_deref(), Ok(text), "{hex}");
            let got = double_vector(&d).map(|v| f64_bits(&v));
            assert_eq!(got.as_deref(), Ok(bits), "{text}");
        }
    }

    #[test]
    fn halfvecs_equal_the_server_and_the_python_values() {
        for &(text, hex, bits) in HALFVEC {
            let d = unhex(hex);
            assert_eq!(render("halfvec", &d).as_deref(), Ok(text), "{hex}");
            let got = float_vector(&d).map(|v| f32_bits(&v));
            assert_eq!(got.as_deref(), Ok(bits), "{text}");
        }
    }

    #[test]
    fn sparsevecs_equal_the_server_and_the_python_values() {
        for &(text, hex, dim, pairs) in SPARSEVEC {
            let d = unhex(hex);
            assert_eq!(render("sparsevec", &d).as_deref(), Ok(text), "{hex}");
            let got = sparse_vector(&d).map(sparse_bits);
            assert_eq!(got, Ok((dim, pairs.to_vec())), "{text}");
        }
    }

    #[test]
    fn golden_vectors_cover_the_edges() {
        // a sparsevec of 13 keys in one bucket of 16 (a treeify resize), one of 20
        // (load-factor resizes), one whose keys differ above bit 16 only
        assert!(SPARSEVEC.iter().filter(|g| g.3.len() >= 13).count() >= 4);
        assert!(VECTOR.iter().any(|g| g.2.len() == 100));
        assert!(VECTOR.iter().any(|g| g.0.contains("-0,")));
        assert!(HALFVEC.iter().any(|g| g.0.contains("5.9604645e-08")));
    }

    /// Whether the Python reference's value is what Rust gives, or, for a case named
    /// FALLBACK, Rust refuses what Python decides.
    fn check<T: PartialEq + std::fmt::Debug>(what: &str, rust: Result<T, &str>, python: Option<T>) {
        if what.starts_with("FALLBACK") {
            assert!(rust.is_err(), "{what}: {rust:?}");
        } else {
            assert_eq!(rust.ok(), python, "{what}");
        }
    }

    /// The same for the text, which Rust prints wherever Python does (float4 bounds and
    /// ties included).
    fn check_text(what: &str, rust: Result<String, &str>, python: Option<&str>) {
        assert_eq!(rust.ok().as_deref(), python, "{what}");
    }

    #[test]
    fn rust_equals_the_python_reference() {
        for &(what, hex, text, bits) in PY_VECTOR {
            let d = unhex(hex);
            check_text(what, render("vector", &d), text);
            check(
                what,
                double_vector(&d).map(|v| f64_bits(&v)),
                bits.map(<[u64]>::to_vec),
            );
        }
        for &(what, hex, text, bits) in PY_HALFVEC {
            let d = unhex(hex);
            check_text(what, render("halfvec", &d), text);
            check(
                what,
                float_vector(&d).map(|v| f32_bits(&v)),
                bits.map(<[u32]>::to_vec),
            );
        }
        for &(what, hex, text, value) in PY_SPARSEVEC {
            let d = unhex(hex);
            check_text(what, render("sparsevec", &d), text);
            let python = value.map(|(dim, pairs)| (dim, pairs.to_vec()));
            check(what, sparse_vector(&d).map(sparse_bits), python);
        }
    }

    #[test]
    fn java_hash_order_equals_python() {
        for &(hashes, cap, order) in PY_HASH_ORDER {
            assert_eq!(java_hash_order(hashes, cap), order, "{hashes:?} {cap:?}");
        }
    }

    #[test]
    fn a_stored_index_of_i32_max_is_left_to_python() {
        // 1-based it is 2^31, which Python writes as an Avro long's varint; the text has it
        let mut d = 100i32.to_le_bytes().to_vec();
        d.extend_from_slice(&1i32.to_le_bytes());
        d.extend_from_slice(&0i32.to_le_bytes());
        d.extend_from_slice(&i32::MAX.to_le_bytes());
        d.extend_from_slice(&1.5f32.to_le_bytes());
        assert_eq!(sparse_vector(&d), Err(KEY_RANGE));
        assert_eq!(
            render("sparsevec", &d).as_deref(),
            Ok("{2147483648:1.5}/100")
        );
        d[12..16].copy_from_slice(&i32::MIN.to_le_bytes());
        assert_eq!(sparse_vector(&d), Ok((100, vec![(-2147483647, 1.5)])));
        assert_eq!(
            render("sparsevec", &d).as_deref(),
            Ok("{-2147483647:1.5}/100")
        );
    }

    #[test]
    fn halves_widen_exactly() {
        for bits in 0..=u16::MAX {
            let v = half_to_f32(bits);
            let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
            let (exp, frac) = (i32::from((bits >> 10) & 0x1f), f64::from(bits & 0x3ff));
            let want = match exp {
                0 => sign * frac * 2f64.powi(-24),
                31 if frac == 0.0 => sign * f64::INFINITY,
                31 => f64::NAN,
                _ => sign * (1.0 + frac / 1024.0) * 2f64.powi(exp - 15),
            };
            if want.is_nan() {
                assert_eq!(v.to_bits(), (u32::from(bits) >> 15 << 31) | 0x7fc0_0000);
            } else {
                assert_eq!(f64::from(v).to_bits(), want.to_bits(), "{bits:#06x}");
            }
        }
    }

    #[test]
    fn specials_read_back_as_python_reads_them() {
        let mut d = 4i16.to_le_bytes().to_vec();
        d.extend_from_slice(&[0, 0]);
        for bits in [0x7f80_0000u32, 0xff80_0000, 0xffc0_0001, 0x8000_0000] {
            d.extend_from_slice(&bits.to_le_bytes());
        }
        assert_eq!(
            render("vector", &d).as_deref(),
            Ok("[Infinity,-Infinity,NaN,-0]")
        );
        let got = f64_bits(&double_vector(&d).unwrap());
        let want = [
            0x7ff0_0000_0000_0000,
            0xfff0_0000_0000_0000,
            0x7ff8_0000_0000_0000,
            1 << 63,
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn headers_python_rejects_are_err() {
        for d in [&[][..], &[1], &[0, 0, 0]] {
            assert!(render("vector", d).is_err());
            assert!(render("halfvec", d).is_err());
            assert!(double_vector(d).is_err() && float_vector(d).is_err());
        }
        assert_eq!(render("vector", &[0, 0, 0, 0]).as_deref(), Ok("[]"));
        assert!(render("vector", &[0xff, 0xff, 0, 0]).is_err()); // dim -1
        assert!(render("sparsevec", &[0; 11]).is_err());
        assert_eq!(render("sparsevec", &[0; 12]).as_deref(), Ok("{}/0"));
        let mut d = vec![0; 12];
        d[4..8].copy_from_slice(&i32::MAX.to_le_bytes());
        assert!(render("sparsevec", &d).is_err() && sparse_vector(&d).is_err());
    }

    #[test]
    fn appends_to_what_out_holds() {
        let mut out = String::from("v=");
        vector_text(&mut out, &unhex("0100000000002842")).unwrap();
        assert_eq!(out, "v=[42]");
    }

    /// Byte values a mutation writes: all of them for a small datum, else a spread.
    fn mutations(len: usize, old: u8) -> Vec<u8> {
        if len <= 64 {
            return (0..=255).collect();
        }
        vec![
            0x00,
            0x01,
            0x7f,
            0x80,
            0xc0,
            0xff,
            old ^ 0x01,
            old ^ 0x80,
            old.wrapping_add(1),
            old.wrapping_sub(1),
        ]
    }

    /// The functions of `kind` on `d`: Ok or Err, never a panic; an Err leaves `out`
    /// as it was (render).
    fn run(kind: &str, d: &[u8]) {
        let _ = render(kind, d);
        let _ = match kind {
            "vector" => double_vector(d).map(|_| ()),
            "halfvec" => float_vector(d).map(|_| ()),
            _ => sparse_vector(d).map(|_| ()),
        };
    }

    /// Every truncation of `d` under every type's functions, every single-byte mutation
    /// under `kind`'s.
    fn damage(kind: &str, hexes: impl Iterator<Item = &'static str>) {
        for hex in hexes {
            let d = unhex(hex);
            for n in 0..d.len() {
                for other in ["vector", "halfvec", "sparsevec"] {
                    run(other, &d[..n]);
                }
            }
            let mut m = d.clone();
            for i in 0..d.len() {
                for v in mutations(d.len(), d[i]) {
                    m[i] = v;
                    run(kind, &m);
                }
                m[i] = d[i];
            }
        }
    }

    #[test]
    fn damaged_vectors_are_ok_or_err_never_a_panic() {
        let hexes = VECTOR.iter().map(|g| g.1);
        damage("vector", hexes.chain(PY_VECTOR.iter().map(|g| g.1)));
    }

    #[test]
    fn damaged_halfvecs_are_ok_or_err_never_a_panic() {
        let hexes = HALFVEC.iter().map(|g| g.1);
        damage("halfvec", hexes.chain(PY_HALFVEC.iter().map(|g| g.1)));
    }

    #[test]
    fn damaged_sparsevecs_are_ok_or_err_never_a_panic() {
        let hexes = SPARSEVEC.iter().map(|g| g.1);
        damage("sparsevec", hexes.chain(PY_SPARSEVEC.iter().map(|g| g.1)));
    }

    /// The 1024 finite positive halves whose shortest float4 digits are a tie (e.g.
    /// 2^-12) print too, now that float4 decides ties itself.
    #[test]
    fn every_finite_half_prints() {
        let mut text = String::new();
        let left = (0..0x7c00u16)
            .filter(|&bits| {
                text.clear();
                float4(&mut text, half_to_f32(bits)).is_err()
            })
            .count();
        assert_eq!(left, 0);
    }

    /// Values on a tie or bound print as the server printed them, and their Avro values
    /// (read back from those digits) are written.
    #[test]
    fn ties_and_bounds_print_as_the_server_does() {
        for &(kind, text, hex) in SERVER_TIES {
            let d = unhex(hex);
            assert_eq!(render(kind, &d).as_deref(), Ok(text), "{text}");
            let values_ok = match kind {
                "vector" => double_vector(&d).is_ok(),
                "halfvec" => float_vector(&d).is_ok(),
                _ => sparse_vector(&d).is_ok(),
            };
            assert!(values_ok, "{text}");
        }
    }

    /// PostgreSQL 18 with pgvector 0.8.6: (`col::text`, the stored payload from
    /// pageinspect, the Python reference's values as bits).
    const VECTOR: &[(&str, &str, &[u64])] = &[
        ("[1,2,3]", "030000000000803f0000004000004040", &[0x3ff0000000000000, 0x4000000000000000, 0x4008000000000000]),
        ("[-0,0]", "020000000000008000000000", &[0x8000000000000000, 0x0000000000000000]),
        ("[42]", "0100000000002842", &[0x4045000000000000]),
        ("[1e-45]", "0100000001000000", &[0x3696d601ad376ab9]),
        ("[1e-45,-1.5e-40,1.1754942e-38,1.1754944e-38]", "040000000100000024a20180ffff7f0000008000", &[0x3696d601ad376ab9, 0xb7aa22393b33036b, 0x380fffffbb1dd6a1, 0x381000000b3aeeab]),
        ("[3.4028235e+38,-3.4028235e+38]", "02000000ffff7f7fffff7fff", &[0x47efffffe54daff8, 0xc7efffffe54daff8]),
        ("[0.1,0.2,0.3]", "03000000cdcccc3dcdcc4c3e9a99993e", &[0x3fb999999999999a, 0x3fc999999999999a, 0x3fd3333333333333]),
        ("[123456,1.234567e+06,0.0001,1e-05,-999999.9]", "050000000020f14738b4964917b7d138acc52737fe2374c9", &[0x40fe240000000000, 0x4132d68700000000, 0x3f1a36e2eb1c432d, 0x3ee4f8b588e368f1, 0xc12e847fcccccccd]),
        ("[1e-38,1e+38,3.3333333,1.6777216e+07]", "04000000eee36c009976967e555555400000804b", &[0x380b38fb9daa78e4, 0x47d2ced32a16a1b1, 0x400aaaaaa6315791, 0x4170000000000000]),
        ("[-9.4786535e+10,7.2436285e+27,3.656889e-33,3.749566e+14,-6.985542e-30,-5.9110505e+31,9.474497e+34,5.7710293e+10,9.762551e-35,2.896093e-22,5.7091367e+31,1.03055715e+33,3.7239754e+30,5.643683e-14,-6.804e+14,-4.656019e+18,-2.99767e-17,0.008185501,-8.751375e+17,-6.08959e-31,5.1193283e-19,-1.5198453e+22,-3.9207256e-32,-34012.234,-5.798952e+18,8.399677e-06,-6.9704205e-32,0.7311593,-2.8459553e+09,-2.2562928e+18,-1.6804837e-26,-5.8954418e-05,7.383634e+10,-9.168162e+23,1.6636628e+11,-8.8338383e+15,-706396.7,-9.577312e-21,1.7621772e-11,1.206306e+34,2.62746e-40,4.1894652e+07,-9.530979e+25,4.5664373e+31,-3.9806964e+10,4.815228e+11,1.9060954e-14,-1623.0319,1.02379595e+32,5.366187e+06,7.0315576e-15,-1.4855049e-08,-6.022792e+20,1.1535351e+22,-0.4803951,1441.1749,-4.7862195e-20,2.0521501e+27,-1.4660254e+29,0.0758143,6.9619676e-07,-908258.56,5.325924e+24,-6.364419e-16,8.18333e-11,517638.72,9.896036e-05,-2.5917436e+37,-44722.77,-8.0538124e-28,4700.8,4.82653e-40,-90919.92,8.346488e-25,-7.823029e-15,-8.89011e+15,-8.674986e+09,-4.0138682e-30,1.7000367e-24,1.511507e+19,6.1157334e+36,-65726.83,5.4866006e-24,1.4242938e-28,4.3380943e-16,2.7993726e-14,-5.011619e+35,-2.593648e+13,60904.523,-6.624748e+26,-8.2713967e+24,5.3182494e+27,8.728056e-17,7.7603896e-21,1.4155897e-25,3.2598215e+26,-7.842725e-27,2.4849433e-05,7.722611e+24,-5.617294e-32]", "64000000be8db0d1503ebb6db7e69709b182aa5702af0d8f16853af44dfa9179d3fc56513dc40107de0eaf1b0a263474d73d4b7641033c723c2b7e297eb41ad8013b81de3e3e0aa47b1c063ccf5142dd569e458d8d1817213afa4de462934b8b3cdc04c708f4a0de57ec0c3764f6b48b422d3b3fd5a129cfb37ffadd536da694d34577b8e9878951b52442e7d0f01a52a212fbd9cb752cc90ae9349eb4009b2d4eb014786edc0200bfd01f4c44ad9dea63171074e14a14d1fe39e05291afab2805e1cac4ca86a17456c3a34aac56fd2732357fb2369902e24a551c6459f6f5be9925b444d805629ff62fd46c64d9ecef87449b3d47e23a3529be5dc9ddf98c68207137a60df4b32ed7c0fc48f088cf3822fc9bfdc5b22ec74a3c7f9266e6924571410500f693b1c7d82781175aed0ca810acfcd9724401d064d2a28eb288031884c3515f1e3b937c6a5f80c7a940d418fa8c3411f912fa252325fc28610ac1fa75b6bcd586e86d4720ff08ec2af1dae83979896d5941c924f196121ed43d2f16b4d2866b57571b94c073d037736acc6852d5918b", &[0xc23611b7be580000, 0x45b767c9ffd1a328, 0x3932fcd6d8304f38, 0x42f550562f2fe000, 0xb9e1b5e03fbf8a40, 0xc68750a2bddfae1c, 0x47323f49a510eb11, 0x422adf9a60100000, 0x38e03887aaec5f0e, 0x3b75e1dbcafa0787, 0x468684c13f6992e5, 0x46c967badf4dcfbf, 0x464780682052107b, 0x3d2fc56784c8672a, 0xc303568fc2710000, 0xc3d0276027289e0c, 0xbc8147c7b4ef4ac8, 0x3f80c38f58c56069, 0xc3a84a39d6d23f30, 0xb9a8b3cab3c17005, 0x3c22e311a1d74128, 0xc489bf473ef528b0, 0xb969726c3be8b1f3, 0xc0e09b877ced9168, 0xc3d41e8107ab62a0, 0x3ee19d8ad0fe770e, 0xb9769ecc7dc9b24f, 0x3fe765a8303551f1, 0xc1e5343a9c800000, 0xc3bf4ff658e54580, 0xba94cdaa59740240, 0xbf0ee8ba60cc527e, 0x423130fd23200000, 0xc4e8449695d5f2dc, 0x42435e19fca00000, 0xc33f625441dfef00, 0xc1258eb966666666, 0xbbc69d213fcafbf4, 0x3db360167e359220, 0x47029609c88082ec, 0x37b6e36e7d33bfcd, 0x4183fa17e0000000, 0xc553b5a88468269b, 0x468202ec603d6b5d, 0xc222895c22400000, 0x425c073fb5600000, 0x3d1575f2293458d4, 0xc0995c20aa64c2f8, 0x469430d9406b8d38, 0x4154786ac0000000, 0x3cffaad57eebf5a8, 0xbe4fe6a64920b51f, 0xc4405326c6b1ab39, 0x44838aa93a4cba78, 0xbfdebecb16ea2751, 0x409684b318fc5048, 0xbbec40bafc77fb2b, 0x459a85febf565743, 0xc5fd9b2c761fea19, 0x3fb36890e311b2b0, 0x3ea75c48dd9d3395, 0xc12bb7c51eb851ec, 0x45119f3bac9c3520, 0xbcc6ee23f2cc1b96, 0x3dd67e81ad73a775, 0x411f981ae147ae14, 0x3f19f11e0a091ccf, 0xc7b37f8440622be4, 0xc0e5d658a3d70a3d, 0xba4fe7893dbe75d0, 0x40b25ccccccccccd, 0x37c505c2c2e19f3f, 0xc0f6327eb851eb85, 0x3af024fb0d638490, 0xbd019dab4f8d8d57, 0xc33f958208906c00, 0xc200288e40800000, 0xb9d45a4c7ee6b330, 0x3b00711645866e6b, 0x43ea3870829f253c, 0x47926763bf1adc0b, 0xc0f00bed47ae147b, 0x3b1a881522cda945, 0x3a26919f3ea2f6ab, 0x3cbf425f1cb82461, 0x3d1f84a46592782c, 0xc758214c1ed18f4f, 0xc2b796cead580000, 0x40edbd10bc6a7efa, 0xc5811fe3f6f36502, 0xc51b5e25411b8055, 0x45b12f271daa3c8f, 0x3c99282b2a233fff, 0x3bc252de20338f2c, 0x3ac5e7ba819d3d0f, 0x4570da567c2d5cbf, 0xba836aeae309f023, 0x3efa0e78086f2b09, 0x45198d4e531f0557, 0xb9723aaa4fae8595]),
    ];
    const HALFVEC: &[(&str, &str, &[u32])] = &[
        ("[1,2,3]", "03000000003c00400042", &[0x3f800000, 0x40000000, 0x40400000]),
        ("[-0,0]", "0200000000800000", &[0x80000000, 0x00000000]),
        ("[5.9604645e-08,-5.9604645e-08,6.097555e-05,6.1035156e-05]", "0400000001000180ff030004", &[0x33800000, 0xb3800000, 0x387fc000, 0x38800000]),
        ("[65504,-65504]", "02000000ff7bfffb", &[0x477fe000, 0xc77fe000]),
        ("[0.099975586,0.19995117,0.33325195]", "03000000662e66325535", &[0x3dccc000, 0x3e4cc000, 0x3eaaa000]),
        ("[1]", "01000000003c", &[0x3f800000]),
        ("[1.001358e-05,1000.5,2048,-3.140625]", "04000000a800d163006848c2", &[0x37280000, 0x447a2000, 0x45000000, 0xc0490000]),
        ("[-6812,56800,1459,-26736,3994,930,23904,50720,40800,-10000,-6944,20544,-51232,-23664,47648,52736,19232,-29632,56096,29600,-12208,-40480,39904,24752,-11544,-36512,-48928,-57664,-4960,-57824,2092,1471,-46464,-32576,-49920,-55264,-38208,-44448,41952,38272]", "28000000a7eeef7ab36587f6cd6b4463d675317afb78e2f0c8ee047541fac7f5d179707ab2743cf7d97a3a77f6f1f1f8df780b76a3f175f8f9f90afbd8ec0ffb1668bf65acf9f4f718fabffaaaf86df91f79ac78", &[0xc5d4e000, 0x475de000, 0x44b66000, 0xc6d0e000, 0x4579a000, 0x44688000, 0x46bac000, 0x47462000, 0x471f6000, 0xc61c4000, 0xc5d90000, 0x46a08000, 0xc7482000, 0xc6b8e000, 0x473a2000, 0x474e0000, 0x46964000, 0xc6e78000, 0x475b2000, 0x46e74000, 0xc63ec000, 0xc71e2000, 0x471be000, 0x46c16000, 0xc6346000, 0xc70ea000, 0xc73f2000, 0xc7614000, 0xc59b0000, 0xc761e000, 0x4502c000, 0x44b7e000, 0xc7358000, 0xc6fe8000, 0xc7430000, 0xc757e000, 0xc7154000, 0xc72da000, 0x4723e000, 0x47158000]),
    ];
    const SPARSEVEC: &[(&str, &str, i32, Pairs)] = &[
        ("{1:1.5,3:2}/5", "05000000020000000000000000000000020000000000c03f00000040", 5, &[(1, 0x3ff8000000000000), (3, 0x4000000000000000)]),
        ("{}/5", "050000000000000000000000", 5, &[]),
        ("{1:1e-45}/1", "0100000001000000000000000000000001000000", 1, &[(1, 0x3696d601ad376ab9)]),
        ("{2:-0.1,70000:3.4028235e+38}/100000", "a08601000200000000000000010000006f110100cdccccbdffff7f7f", 100000, &[(70000, 0x47efffffe54daff8), (2, 0xbfb999999999999a)]),
        ("{16:1.25,32:2.25,48:3.25,64:4.25,80:5.25,96:6.25,112:7.25,128:8.25,144:9.25,160:10.25,176:11.25,192:12.25,208:13.25}/1000", "e80300000d000000000000000f0000001f0000002f0000003f0000004f0000005f0000006f0000007f0000008f0000009f000000af000000bf000000cf0000000000a03f0000104000005040000088400000a8400000c8400000e840000004410000144100002441000034410000444100005441", 1000, &[(32, 0x4002000000000000), (64, 0x4011000000000000), (96, 0x4019000000000000), (128, 0x4020800000000000), (160, 0x4024800000000000), (192, 0x4028800000000000), (16, 0x3ff4000000000000), (48, 0x400a000000000000), (80, 0x4015000000000000), (112, 0x401d000000000000), (144, 0x4022800000000000), (176, 0x4026800000000000), (208, 0x402a800000000000)]),
        ("{65:-0.001,129:-0.002,193:-0.003,257:-0.004,321:-0.005,385:-0.006,449:-0.007,513:-0.008,577:-0.009,641:-0.01,705:-0.011,769:-0.012,833:-0.013,897:-0.014,961:-0.015,1025:-0.016,1089:-0.017,1153:-0.018,1217:-0.019,1281:-0.02}/100000", "a086010014000000000000004000000080000000c0000000000100004001000080010000c0010000000200004002000080020000c0020000000300004003000080030000c0030000000400004004000080040000c0040000000500006f1283ba6f1203bba69b44bb6f1283bb0ad7a3bba69bc4bb4260e5bb6f1203bcbc7413bc0ad723bc583934bca69b44bcf4fd54bc426065bc8fc275bc6f1283bc96438bbcbc7493bce3a59bbc0ad7a3bc", 100000, &[(65, 0xbf50624dd2f1a9fc), (129, 0xbf60624dd2f1a9fc), (193, 0xbf689374bc6a7efa), (257, 0xbf70624dd2f1a9fc), (321, 0xbf747ae147ae147b), (385, 0xbf789374bc6a7efa), (449, 0xbf7cac083126e979), (513, 0xbf80624dd2f1a9fc), (577, 0xbf826e978d4fdf3b), (641, 0xbf847ae147ae147b), (705, 0xbf86872b020c49ba), (769, 0xbf889374bc6a7efa), (833, 0xbf8a9fbe76c8b439), (897, 0xbf8cac083126e979), (961, 0xbf8eb851eb851eb8), (1025, 0xbf90624dd2f1a9fc), (1089, 0xbf916872b020c49c), (1153, 0xbf926e978d4fdf3b), (1217, 0xbf9374bc6a7ef9db), (1281, 0xbf947ae147ae147b)]),
        ("{3027:-96930.77,4413:46616.08,4762:10209.825,9687:-62108.7,11327:-5047.872,13207:86928.57,15081:-78743.734,17465:63784.027,18983:-13564.482,21953:-999.6853,23218:66922.79,23452:-21382.785,28693:1337.1904,31898:37548.348,33876:96488.11,39156:-31459.074,42323:66457.31,46636:41345.082,47487:27195.39,48063:-19060.459,52893:-30489.564,53968:-89122.29,58303:-74036.28,62505:-85855.44,65654:48177.84,68303:-48881.227,68655:-67350.695,69325:-83103.02,70218:68253.8,70497:74107.56,70916:34108.66,73155:-43613.344,76012:-51557.414,79956:-41388.3,81787:-8109.411,85734:-68493.414,88907:-10835.078,90965:-47351.387,106417:92357.305,109514:94524.6,111495:9414.675,116835:-51110.703,118955:93133.35,129660:-38090.418,131096:-28683.217,134948:-99786.22,138128:-23674.678,139221:-5071.2744,140667:552.8013,144983:-59803.99,149579:947.1279,159431:-99009.89,162976:-47166.26,164803:-82049.32,166315:-20097.766,176202:-91666.61,180409:-95501.17,183611:-39151.09,186001:-53438.086,199098:17116.656}/200000", "400d03003c00000000000000d20b00003c11000099120000d62500003e2c000096330000e83a000038440000264a0000c0550000b15a00009b5b000014700000997c000053840000f398000052a500002bb600007eb90000bebb00009cce0000cfd20000bee3000028f4000075000100ce0a01002e0c0100cc0e0100491201006013010003150100c21d0100eb280100533801007a3f0100e54e01004a5b010054630100b09f0100c9ab010086b3010062c80100aad001007bfa010017000200230f02008f1b0200d41f02007a250200563602004a480200c66e02009f7c0200c2830200aa89020049b00200b8c002003acd020090d60200b90903006351bdc7141836474d871f46b39c72c7fabe9dc549c8a947decb99c707287947eef153c6dceb79c465b58247920da7c61826a74459ac12470e74bc4726c6f5c6a8cc814715812147c876d446ebe894c62133eec62511aec7249a90c7b8afa7c7d7313c473af13ec7598b83c7834fa2c7e64e8547c8bd9047a93c0547585d2ac76a6549c74dac21c74a6bfdc5b5c685c7504c29c663f738c7a762b4474d9eb847b31a1346b4a647c7ade6b5476bca14c76f16e0c61ce5c2c75bf5b8c6327a9ec548330a44fd9b69c730c86c44f260c1c7433e38c7a940a0c788039dc64e09b3c79686bac717ef18c716be50c750b98546", 200000, &[(70916, 0x40e0a7951eb851ec), (111495, 0x40c2635666666666), (138128, 0xc0d71eab645a1cac), (186001, 0xc0ea17c2c083126f), (28693, 0x4094e4c2f837b4a2), (13207, 0x40f539091eb851ec), (131096, 0xc0dc02cde353f7cf), (4762, 0x40c3f0e99999999a), (31898, 0x40e2558b22d0e560), (23452, 0xc0d4e1b23d70a3d7), (52893, 0xc0ddc664189374bc), (162976, 0xc0e707c851eb851f), (134948, 0xc0f85ca3851eb852), (18983, 0xc0ca7e3db22d0e56), (62505, 0xc0f4f5f70a3d70a4), (118955, 0x40f6bcd59999999a), (166315, 0xc0d3a0710624dd2f), (46636, 0x40e430229fbe76c9), (68655, 0xc0f0716b1eb851ec), (106417, 0x40f68c54e147ae14), (23218, 0x40f056aca3d70a3d), (17465, 0x40ef2500dd2f1aa0), (180409, 0xc0f750d2b851eb85), (199098, 0x40d0b729fbe76c8b), (183611, 0xc0e31de2e147ae14), (4413, 0x40e6c3028f5c28f6), (11327, 0xc0b3b7df3b645a1d), (48063, 0xc0d29d1d60418937), (58303, 0xc0f213447ae147ae), (21953, 0xc08f3d7b7e90ff97), (73155, 0xc0e54bab020c49ba), (164803, 0xc0f408151eb851ec), (159431, 0xc0f82c1e3d70a3d7), (70218, 0x40f0a9dccccccccd), (109514, 0x40f713c99999999a), (176202, 0xc0f66129c28f5c29), (88907, 0xc0c52989fbe76c8b), (149579, 0x408d9905f06f6944), (69325, 0xc0f449f051eb851f), (68303, 0xc0e7de2743958106), (53968, 0xc0f5c224a3d70a3d), (3027, 0xc0f7aa2c51eb851f), (42323, 0x40f03994f5c28f5c), (33876, 0x40f78e81c28f5c29), (79956, 0xc0e435899999999a), (90965, 0xc0e71eec624dd2f2), (139221, 0xc0b3cf463f141206), (9687, 0xc0ee539666666666), (144983, 0xc0ed337fae147ae1), (70497, 0x40f217b8f5c28f5c), (116835, 0xc0e8f4d67ef9db23), (85734, 0xc0f0b8d69fbe76c9), (15081, 0xc0f3397bbe76c8b4), (76012, 0xc0e92cad3f7ced91), (39156, 0xc0deb8c4bc6a7efa), (65654, 0x40e7863ae147ae14), (81787, 0xc0bfad69374bc6a8), (140667, 0x408146690ff97247), (129660, 0xc0e2994d60418937), (47487, 0x40da8ed8f5c28f5c)]),
        ("{65541:1,131077:2,196613:3,262149:4,327685:5,393221:6,458757:7,524293:8,589829:9,655365:10,720901:11,786437:12,851973:13,917509:14}/2000000", "80841e000e0000000000000004000100040002000400030004000400040005000400060004000700040008000400090004000a0004000b0004000c0004000d0004000e000000803f0000004000004040000080400000a0400000c0400000e04000000041000010410000204100003041000040410000504100006041", 2000000, &[(65541, 0x3ff0000000000000), (131077, 0x4000000000000000), (196613, 0x4008000000000000), (262149, 0x4010000000000000), (327685, 0x4014000000000000), (393221, 0x4018000000000000), (458757, 0x401c000000000000), (524293, 0x4020000000000000), (589829, 0x4022000000000000), (655365, 0x4024000000000000), (720901, 0x4026000000000000), (786437, 0x4028000000000000), (851973, 0x402a000000000000), (917509, 0x402c000000000000)]),
        ("{1:1,2:2,3:3,4:4,5:5,6:6,7:7,8:8,9:9,10:10,11:11,12:12,13:13}/13", "0d0000000d00000000000000000000000100000002000000030000000400000005000000060000000700000008000000090000000a0000000b0000000c0000000000803f0000004000004040000080400000a0400000c0400000e040000000410000104100002041000030410000404100005041", 13, &[(1, 0x3ff0000000000000), (2, 0x4000000000000000), (3, 0x4008000000000000), (4, 0x4010000000000000), (5, 0x4014000000000000), (6, 0x4018000000000000), (7, 0x401c000000000000), (8, 0x4020000000000000), (9, 0x4022000000000000), (10, 0x4024000000000000), (11, 0x4026000000000000), (12, 0x4028000000000000), (13, 0x402a000000000000)]),
    ];
    /// Values whose float4 digits `float4` leaves to Python (a tie or a bound): (type,
    /// `col::text`, stored payload); the Python reference prints the server's text.
    const SERVER_TIES: &[(&str, &str, &str)] = &[
        ("halfvec", "[0.00024414062]", "01000000000c"),
        ("halfvec", "[1,0.0014648438,2]", "03000000003c00160040"),
        ("vector", "[0.00024414062]", "0100000000008039"),
        ("vector", "[0.20117188]", "0100000000004e3e"),
        (
            "sparsevec",
            "{3:0.0053710938}/4",
            "040000000100000000000000020000000000b03b",
        ),
    ];
    /// service.types.pgvector + extension_types on stored forms: (what, stored, text, the
    /// DoubleVector bits); None where the reference raises.
    const PY_VECTOR: &[PyCase<&[u64]>] = &[
        ("random", "05000000ed362ddad4ebcaf77a3236440100c0ff569055c4", Some("[-1.2188891e+16,-8.231462e+33,728.7887,NaN,-854.25525]"), Some(&[0xc345a6ddab216700, 0xc6f95d7a8335df1c, 0x4086c64f41f212d7, 0x7ff8000000000000, 0xc08ab20ac083126f])),
        ("float4 bound, searched in the open interval", "030000000000c07fb80cd94c19015d43", Some("[NaN,1.13796544e+08,221.00429]"), Some(&[0x7ff8000000000000, 0x419b219700000000, 0x406ba02324c83665])),
        ("random", "05000000ce5fdc42e9f270c8fa0b76c40000803faa24f0c0", Some("[110.18712,-246731.64,-984.18713,1,-7.5044756]"), Some(&[0x405b8bf9c62a1b5c, 0xc10e1e5d1eb851ec, 0xc08ec17f3e0370ce, 0x3ff0000000000000, 0xc01e0495406e8519])),
        ("negative dim", "ffff0000de00b04370d249c4", None, None),
        ("trailing bytes", "0d00070033fc174467bc83c3ffff7f7fa6cc154407000bb4f74762c48edf4244000080ff899bcac2d91664c40000c07f789f3e5150646744aabb", Some("[607.9406,-263.4719,3.4028235e+38,599.19763,-1.2945394e-07,-905.12445,779.49304,-Infinity,-101.30378,-912.357,NaN,5.116995e+10,925.5674]"), Some(&[0x4082ff86594af4f1, 0xc070778ce703afb8, 0x47efffffe54daff8, 0x4082b994bf0995ab, 0xbe816000e5f90ad1, 0xc08c48fedfa43fe6, 0x40885bf1bef49cf5, 0xfff0000000000000, 0xc059537121ab4b73, 0xc08c82db22d0e560, 0x7ff8000000000000, 0x4227d3eef2600000, 0x408cec8a0902de01])),
        ("truncated", "050000007935034406a821c4987d9b43a86d1b449b38", None, None),
        ("random", "00000000", Some("[]"), Some(&[])),
        ("random", "02000000a32ef843a0b35244", Some("[496.36435,842.80664]"), Some(&[0x407f05d460aa64c3, 0x408a5673ffac1d2a])),
        ("random", "01000000f4bed2c3", Some("[-421.49182]"), Some(&[0xc07a57de7ea5f84d])),
        ("random", "080000008ab4f6200000803f24c103c400000000654d54c479fbc0e0964975c74dabae2e", Some("[4.1793492e-19,1,-527.0178,0,-849.2093,-1.1124673e+20,-62793.586,7.943033e-11]"), Some(&[0x3c1ed69143489592, 0x3ff0000000000000, 0xc080782474538ef3, 0x0000000000000000, 0xc08a89aca57a786c, 0xc4181f6f1e19272a, 0xc0eea932c083126f, 0x3dd5d5699e4cd19e])),
        ("trailing bytes", "01000000be49a342aabb", Some("[81.64403]"), Some(&[0x40546937c99ae925])),
        ("truncated", "0100", None, None),
        ("random", "03000000ffff7f7f52cf034afef25ec4", Some("[3.4028235e+38,2.1595725e+06,-891.79675]"), Some(&[0x47efffffe54daff8, 0x414079ea40000000, 0xc08bde5fbe76c8b4])),
        ("random", "0500000002c1301c04e34c4473004643457d4d7b00000000", Some("[5.848297e-22,819.5471,198.00175,1.0669616e+36,0]"), Some(&[0x3b861820341e3eed, 0x40899c6075f6fd22, 0x4068c00e56041893, 0x4769afa8965451df, 0x0000000000000000])),
        ("random", "00000000", Some("[]"), Some(&[])),
        ("random", "0100000001000000", Some("[1e-45]"), Some(&[0x3696d601ad376ab9])),
        ("trailing bytes", "030007006c13253bffff7f7fff321cc4aabb", Some("[0.0025188578,3.4028235e+38,-624.7968]"), Some(&[0x3f64a26d7bfa0e89, 0x47efffffe54daff8, 0xc083865fd8adab9f])),
        ("truncated", "08000700a92f26430100c0ff934949440000c07f7b8e0ec400008000ffff7f80a738", None, None),
        ("random", "02000000f18e7344ac7b4fc4", Some("[974.23346,-829.9324]"), Some(&[0x408e71de2046c765, 0xc089ef758e219653])),
        ("random", "0100000000008000", Some("[1.1754944e-38]"), Some(&[0x381000000b3aeeab])),
        ("random", "00000000", Some("[]"), Some(&[])),
        ("random", "010007001f981244", Some("[586.3769]"), Some(&[0x40825303e425aee6])),
        ("trailing bytes", "08000000f74f00c4ffff7f7ff42f19c46f3256c4d5af66850100c0ff0100c0ff06833e44aabb", Some("[-513.24945,3.4028235e+38,-612.74927,-856.788,-1.0846843e-35,NaN,NaN,762.04724]"), Some(&[0xc08009fedfa43fe6, 0x47efffffe54daff8, 0xc08325fe81450efe, 0xc08ac64dd2f1a9fc, 0xb8acd5fa93e7267c, 0x7ff8000000000000, 0x7ff8000000000000, 0x4087d060bf5d7881])),
        ("truncated", "0200000005659ec3cb", None, None),
    ];
    /// (what, stored, text, the FloatVector's f32 bits as fastavro packs them).
    const PY_HALFVEC: &[PyCase<&[u32]>] = &[
        ("random", "01000000ff83", Some("[-6.097555e-05]"), Some(&[0xb87fc000])),
        ("random", "07000000850ceae34d9768e53ce5dc060320", Some("[0.0002758503,-1013,-0.0017824173,-1384,-1340,0.000104665756,0.007835388]"), Some(&[0x3990a000, 0xc47d4000, 0xbae9a000, 0xc4ad0000, 0xc4a78000, 0x38db8000, 0x3c006000])),
        ("random", "0700000060a0421b3a6311efd40e80303491", Some("[-0.008544922,0.0035438538,925,-7236,0.00041675568,0.140625,-0.0006351471]"), Some(&[0xbc0c0000, 0x3b684000, 0x44674000, 0xc5e22000, 0x39da8000, 0x3e100000, 0xba268000])),
        ("negative dim", "00800000bdab", None, None),
        ("FALLBACK NaN trailing byte", "100000001cb2e934008000c369a5b6c600fcf4c3a1ea81545b76ceb8cf7f00000100eb5501", Some("[-0.19091797,0.30688477,-0,-3.5,-0.021133423,-6.7109375,-Infinity,-3.9765625,-3394,72.0625,26032,-0.60058594,NaN,0,5.9604645e-08,94.6875]"), Some(&[0xbe438000, 0x3e9d2000, 0x80000000, 0xc0600000, 0xbcad2000, 0xc0d6c000, 0xff800000, 0xc07e8000, 0xc5542000, 0x42902000, 0x46cb6000, 0xbf19c000, 0x7fc00000, 0x00000000, 0x33800000, 0x42bd6000])),
        ("truncated", "100000000100cc82b225003c3de500fc2bdb6376590737f0007efa1013a51323716001", None, None),
        ("random", "0100000000fc", Some("[-Infinity]"), Some(&[0xff800000])),
        ("random", "00000000", Some("[]"), Some(&[])),
        ("random", "04000000a7750080a5a941d3", Some("[23152,-0,-0.0440979,-58.03125]"), Some(&[0x46b4e000, 0x80000000, 0xbd34a000, 0xc2682000])),
        ("random", "100000009afa0100ff7b4c9a94430000a439718239963d62e3c0e550bb32b2e300806b0d", Some("[-54080,5.9604645e-08,65504,-0.003074646,3.7890625,0,0.7050781,-3.7252903e-05,-0.0015192032,798.5,-2.4433594,39.15625,0.21032715,-985,-0,0.00033068657]"), Some(&[0xc7534000, 0x33800000, 0x477fe000, 0xbb498000, 0x40728000, 0x00000000, 0x3f348000, 0xb81c4000, 0xbac72000, 0x4447a000, 0xc01c6000, 0x421ca000, 0x3e576000, 0xc4764000, 0x80000000, 0x39ad6000])),
        ("FALLBACK NaN trailing byte", "01000000007e01", Some("[NaN]"), Some(&[0x7fc00000])),
        ("truncated", "000000", None, None),
        ("random", "0100000066a9", Some("[-0.042175293]"), Some(&[0xbd2cc000])),
        ("FALLBACK NaN random", "07000000ff7b007e4563666a0000cb3300fc", Some("[65504,NaN,930.5,3276,0,0.24353027,-Infinity]"), Some(&[0x477fe000, 0x7fc00000, 0x4468a000, 0x454cc000, 0x00000000, 0x3e796000, 0xff800000])),
        ("random", "1000000024f742b5f5564e39ff8300809543008000fc48a70080c55d4772000037588b9c", Some("[-29248,-0.32861328,111.3125,0.66308594,-6.097555e-05,-0,3.7910156,-0,-Infinity,-0.028442383,-0,369.25,12856,0,134.875,-0.004436493]"), Some(&[0xc6e48000, 0xbea84000, 0x42dea000, 0x3f29c000, 0xb87fc000, 0x80000000, 0x4072a000, 0x80000000, 0xff800000, 0xbce90000, 0x80000000, 0x43b8a000, 0x4648e000, 0x00000000, 0x4306e000, 0xbb916000])),
        ("random", "00000000", Some("[]"), Some(&[])),
        ("trailing byte", "07000000337b0080d4df003c54f532be208901", Some("[58976,-0,-501,1,-21824,-1.5488281,-0.00015640259]"), Some(&[0x47666000, 0x80000000, 0xc3fa8000, 0x3f800000, 0xc6aa8000, 0xbfc64000, 0xb9240000])),
        ("truncated", "000000", None, None),
        ("random", "07000000f48fcd054eb5bc237389563adef4", Some("[-0.00048542023,8.85129e-05,-0.33154297,0.015106201,-0.00016629696,0.7919922,-19936]"), Some(&[0xb9fe8000, 0x38b9a000, 0xbea9c000, 0x3c778000, 0xb92e6000, 0x3f4ac000, 0xc69bc000])),
        ("random", "00000000", Some("[]"), Some(&[])),
        ("random", "00000000", Some("[]"), Some(&[])),
        ("FALLBACK NaN random", "100000005b63d4aa3814007eff7be7fe0fb83c5cf25a00048c4c00fe000433630100741b", Some("[941.5,-0.053344727,0.0010299683,NaN,65504,NaN,-0.5073242,271,222.25,6.1035156e-05,18.1875,NaN,6.1035156e-05,921.5,5.9604645e-08,0.0036392212]"), Some(&[0x446b6000, 0xbd5a8000, 0x3a870000, 0x7fc00000, 0x477fe000, 0xffc00000, 0xbf01e000, 0x43878000, 0x435e4000, 0x38800000, 0x41918000, 0xffc00000, 0x38800000, 0x44666000, 0x33800000, 0x3b6e8000])),
        ("trailing byte", "0000000001", Some("[]"), Some(&[])),
        ("truncated", "02000000edb068", None, None),
    ];
    /// (what, stored, text, (dimensions, [(key, value bits)]) in HashMap order).
    const PY_SPARSEVEC: &[PyCase<(i32, Pairs)>] = &[
        ("random", "fbffffff020000000000000062210000d6c002004b13d9d5eefc1725", Some("{8547:-2.983461e+13,180439:1.3182858e-16}/-5"), Some((-5, &[(8547, 0xc2bb226954c08000), (180439, 0x3ca2ff9dbc401165)]))),
        ("random", "020000000200000000000000fff2d1a3e4317e3e5b8479c48fda29f4", Some("{-1546521856:-998.06805,1048457701:-5.38288e+31}/2"), Some((2, &[(-1546521856, 0xc08f308b5dcc63f1), (1048457701, 0xc6853b51de0e5317)]))),
        ("random", "701101000000000000000000", Some("{}/70000"), Some((70000, &[]))),
        ("float4 bound, searched in the open interval", "7011010046000000000000003e4a000029570000a98d000034050100131e01002a2e01007802020009360200e354020055e602005ee9020001700300e48d0300a4a4030074ab030015b60300bec003004de603009b000400c17404006e990400c6a3040003aa0400560105007daa0500ca5106007da2060083ac0600fab0060054a40700fdb30700cd0308003419080086c608008f4909006c7e0900159109006bb70900d4d90900cb100a0045390a009b3c0a00d7b60a00970d0b005d390b0077590b005e790b00f87b0b00817e0b00cdc40b00cae20b007b230c0016340c002f350c00805a0c00ee740c005da50c00b2020d00191a0d00f83d0d0036dc0d003b130e0080350e0029550e00377f0e0051ad0e00f8f80e00d4030f00e52a0f0070840f0055f90cc44769b0b29c63adc3000000000100c0ff859ab400cf3d78c34a65db42b9fc4c44421861c44659a7c10c3260c300000000f1af17c423ed1b6612bb50c450eb7871bfd951c329a900c4251fde211a366ac49bdf1cf1c60317c20100000086447943a1b2da70c068b5c083e826443c0e1667be4a3635dcb15c732b6b9a43afebaeb18f9f13431f6127c3000080ffad13f5c3a7ba70c49a120ec4aa95f5c2eee963c7b868cf74aa3ee14f75aaa70c97b9dae86d5c66c3dcd535c4cf65df5ff3b2ae48812b2d71151c4c4444ced78ecdd348c3916ddd399e24524488e662430000c07f9069c3c20530548c0ff6864300e28fc3649830c417a729b1dc5e2fc30000803fea42c2b400008000a5d0cc43000080ff29bafbdd", Some("{19007:-563.8958,22314:-2.0536971e-08,36266:-346.7782,66869:0,73236:NaN,77355:1.658582e-38,131705:-248.24144,144906:109.69783,152804:819.9488,190038:-900.379,190815:-20.91859,225282:-224.1955,232933:0,238757:-606.7491,240501:1.840853e+23,243222:-834.923,245951:1.2325881e+30,255566:-209.85057,262300:-514.6431,292034:1.5051549e-18,301423:-936.84534,304071:-7.7679974e+29,305668:-37.753685,328023:1e-45,371326:249.26767,414155:5.4146945e+29,434814:-5.669037,437380:667.633,438523:7.0861755e+23,500821:6.790905e-07,504830:1.748524e+31,525262:308.83725,530741:-5.0908606e-09,575111:147.62328,608656:-167.37938,622189:-Infinity,626966:-490.15372,636780:-962.91644,645589:-568.29065,659660:-122.79231,670022:-58345.93,670876:1.3146111e+32,702168:7.5579607e+09,724376:2.5833014e-31,735582:-8.2631954e+24,743800:-230.36104,751967:-727.34155,752633:3.2195e+19,753282:357783.6,771278:8.57496e+29,778955:816.4388,795516:-5.320022e-30,799767:-200.82735,800048:0.00042234038,809601:840.57214,816367:226.90051,828766:NaN,852659:-97.70618,858650:-1.6346336e-31,867833:269.92233,908343:-287.76562,922428:-706.3811,931201:-2.4687716e-09,939306:-175.37054,950072:1,961874:-3.6184002e-07,981241:1.1754944e-38,984021:409.63004,994022:-Infinity,1016945:-2.267357e+18}/70000"), Some((70000, &[(809601, 0x408a4493be22e5de), (931201, 0xbe2534e2db7348ef), (225282, 0xc06c064189374bc7), (753282, 0x4115d65e66666666), (305668, 0xc042e078c0053e2d), (437380, 0x4084dd10624dd2f2), (575111, 0x406273f1e8e60807), (144906, 0x405b6ca93f290abb), (608656, 0xc064ec23e1869835), (73236, 0x7ff8000000000000), (243222, 0xc08a17624dd2f1aa), (626966, 0xc07ea275a31a4bdc), (799767, 0xc0691a79a6b50b0f), (724376, 0x3994f54e9df1e2fa), (858650, 0xb98a8600985d7d76), (262300, 0xc0801525119ce076), (670876, 0x4699ed1705fc9f2d), (238757, 0xc082f5fe28240b78), (22314, 0xbe560d28dbc58c7a), (36266, 0xc075ac7381d7dbf5), (939306, 0xc065ebdb76b3bb84), (77355, 0x381693509539e70d), (800048, 0x3f3badb21eb07838), (852659, 0xc0586d320d9945b7), (66869, 0x0000000000000000), (530741, 0xbe35dd75de6b21a7), (908343, 0xc071fc3ffac1d29e), (950072, 0x3ff0000000000000), (922428, 0xc086130c7e28240b), (19007, 0xc0819f2a9930be0e), (245951, 0x462f1d69f58bfa5f), (292034, 0x3c3bc3e49f02575f), (670022, 0xc0ec7d3dc28f5c29), (304071, 0xc6239bf35e996ae1), (414155, 0x461b56542014e800), (778955, 0x40898382a9930be1), (659660, 0xc05eb2b5350092cd), (255566, 0xc06a3b37de939eae), (525262, 0x40734d6560418937), (771278, 0x4625a5702211c355), (961874, 0xbe98485d3ccf57c8), (500821, 0x3ea6c957cd5806ea), (645589, 0xc081c253404ea4a9), (984021, 0x40799a14a4d2b2c0), (190038, 0xc08c23083126e979), (328023, 0x3696d601ad376ab9), (702168, 0x41fc27d53fc00000), (735582, 0xc51b5732e180b9bb), (828766, 0x7ff8000000000000), (190815, 0xc034eb28b6d86ec1), (751967, 0xc086babb7e90ff97), (152804, 0x40899f972474538f), (232933, 0x0000000000000000), (994022, 0xfff0000000000000), (636780, 0xc08e1754de7ea5f8), (622189, 0xfff0000000000000), (301423, 0xc08d46c3419e3001), (816367, 0x406c5cd0fa58f712), (1016945, 0xc3bf77452db3fed0), (240501, 0x44c37da45db023d8), (743800, 0xc06ccb8da3c21188), (131705, 0xc06f07b9e060fe48), (752633, 0x43fbecb9dec6fb38), (867833, 0x4070dec1dd1a21ea), (981241, 0x381000000b3aeeab), (438523, 0x44e2c1c77fdd8a05), (795516, 0xb9daf9c88b8ed052), (371326, 0x406f2890c0ad03da), (434814, 0xc016ad18090b417d), (504830, 0x466b963b711530b5)]))),
        ("random", "000000404600000000000000879bf38c4e02a1e09a0ca0c3ff40551223e80ebdfad174b6640e3e72931f1197667edd2bd9fc74be24875bf5c00fb32a4310e9334b00cfb2242fa2b63067b1b3b0a01fd35dc190c1a7b75c57fb2469ac36852341499ab17c77007281fb11772f9aec1a0895fbeedea3b22c40c43f0549ad70379affb53dfbf100bba15af4fe02a42db72549ca4c4bae43a1cc5c01c76a5e1544b35ecc21e40fce9eba22a203cefb0ff8c3179903ee8ebf5f8c74635c36c6fbefd76989daf6530a5279c6ba1dd934032d0ed90cb843f103211f7dbf04fc3cbaadf17da924b56acfa4cdfa7e420c591df30c877a14c9e367527ac10480ab78e92a9e3e044100cd7124581c553f5b8292e533120955a07a820e73867fac6726cbc99b153eb0466603fe43bdd21cc46bb2eac25ec57944000080003893b643b488d042cc0e65c70000803fc26467f1e199616afdc95cc4066a6cc4030959449731fb65cd469c169b8770c4ec163fc4a9c4ca42c769e1c2ffff7f802eb2b643686b217ad6844fc40ead80b42aa3f3c33ec6e82835c75c1628729e43ae6c6e44077a6f1f285c968daf1eaf120000c07f057dfc5ba37db3420000807f2a74d907d00842b59cef9bc31b3112df2c46b6439135dbf1857e65c414a55842837ed8c33d93d97ab3f3269401000000000080ff16e263fbc5a81f44c598ee430ca43444097bc7c30af13344c9606e4dffff7f80d11460432adfaea3dcdc33430000807f0000807faa8949c30000c07fa0f1bac3000080ff3b14cdc3c71179c408af5ac3", Some("{-1930191992:508.02655,-526319025:-627.2928,-1012921189:-117.34847,307577088:999.08386,-1123096540:1.1754944e-38,-1233858053:365.15015,1916669541:104.267,-1760485484:-58638.797,735936103:1,-1099629350:-1.1458055e+30,-178551003:6.8183746e+25,716378049:-883.15607,870912068:-945.6566,-1295056820:868.1408,-1230885083:1.48278595e+23,-1280219343:2.524784e-25,-752901967:-962.11884,-1047477922:-764.35815,1465694120:101.3841,-1402395396:-112.7066,1092846903:-1.1754942e-38,2092014154:365.39203,-2123235208:2.0953456e+35,796332540:-830.07556,135982235:-2.3967772e-07,-554763370:-487.27472,1076671140:2.5843148e-14,1225080773:1.7834317e-25,-1707642706:316.89185,-79841792:953.6981,-1581580046:5.0711157e-20,50263131:-9.26665e-31,632761765:1.1051617e-27,1263323722:NaN,-861846609:1.4213831e+17,1791426909:89.745384,-1287383713:Infinity,-467547041:3.2718806e-34,-1163997680:-7.2283456e-07,-838622685:-311.87195,-1007153156:-1.0534231e+19,-301754088:364.54822,-1939882097:-2.1709432e+30,912024437:-917.97687,-672138297:54.16121,-153450134:-432.98837,2035419732:5.648574e+35,-652363065:-8.4289195e-27,237830965:1e-45,1136135386:-Infinity,522257394:-1.18323695e+36,-66797698:638.637,-240272835:477.1935,-1255888514:722.56323,-844837013:-398.9612,205684475:719.76624,217259354:2.4995752e+08,-921404792:-1.1754942e-38,2052220900:224.08131,-1417673534:-1.8959631e-17,-1641354887:179.86273,4260927:Infinity,1478783438:Infinity,1530877213:-201.53775,870683267:NaN,-1605039853:-373.8877,1930330747:-Infinity,1739358087:-410.15805,-1681274073:-996.2778,1185955350:-218.68372}/1073741824"), Some((1073741824, &[(307577088, 0x408f38abbecaab8a), (-79841792, 0x408dcd95b573eab3), (870683267, 0x7ff8000000000000), (1739358087, 0xc079a2875f6fd220), (-1930191992, 0x407fc06cbfb15b57), (-921404792, 0xb80fffffbb1dd6a1), (-1939882097, 0xc63b66b2204121b4), (-1163997680, 0xbea8411a01e220e7), (-1605039853, 0xc0775e3404ea4a8c), (-1760485484, 0xc0eca1d9810624dd), (-554763370, 0xc07e746540cc78ea), (1185955350, 0xc06b55e108c3f3e0), (-301754088, 0x4076c8c58255b036), (-1012921189, 0xc05d564d551d68c7), (135982235, 0xbe9015a1c29ec8de), (1530877213, 0xc06931353f7ced91), (-838622685, 0xc0737df381d7dbf5), (-1123096540, 0x381000000b3aeeab), (1076671140, 0x3d1d18c7bfb549e6), (-178551003, 0x454c333c2377078b), (-1230885083, 0x44bf6632e0bad574), (632761765, 0x3a55e3d5e7e0978f), (-1681274073, 0xc08f2238ef34d6a1), (1465694120, 0x40595895182a9931), (-1707642706, 0x4073ce4504816f00), (-861846609, 0x437f8fa0a34863c0), (-1280219343, 0x3ad388d994cabede), (-752901967, 0xc08e10f36262cba7), (237830965, 0x3696d601ad376ab9), (1092846903, 0xb80fffffbb1dd6a1), (-240272835, 0x407dd3189374bc6a), (4260927, 0x7ff0000000000000), (716378049, 0xc08b993fa1a0cf18), (-1417673534, 0xbc75dbe53723e7bf), (870912068, 0xc08d8d40b780346e), (1225080773, 0x3acb98e69caa83a7), (-672138297, 0x404b14a2877ee4e2), (-652363065, 0xba84de7661ecf06d), (2092014154, 0x4076d645c13fd0d0), (1263323722, 0x7ff8000000000000), (-1295056820, 0x408b21205bc01a37), (1478783438, 0x7ff0000000000000), (-526319025, 0xc0839a57a786c227), (2035419732, 0x475b3267adf64714), (-1099629350, 0xc62cec9830d2957f), (1136135386, 0xfff0000000000000), (217259354, 0x41adcc1920000000), (50263131, 0xb9b2cb850f8af461), (1791426909, 0x40566fb45f17bd8c), (-1047477922, 0xc087e2dd7dbf4880), (-1287383713, 0x7ff0000000000000), (-467547041, 0x38fb2e853d60fc1b), (2052220900, 0x406c029a176ddacf), (1916669541, 0x405a1116872b020c), (735936103, 0x3ff0000000000000), (-153450134, 0xc07b0fd05d0fa58f), (-844837013, 0xc078ef6113404ea5), (-1581580046, 0x3bedef40dd82a2ce), (522257394, 0xc76c7c42be310c0a), (912024437, 0xc08cafd0a137f38c), (-2123235208, 0x47442d6cfb3dea21), (-1641354887, 0x40667b9b7bf1e8e6), (-1233858053, 0x4076d26703afb7e9), (205684475, 0x40867e21426fe719), (1930330747, 0xfff0000000000000), (-1402395396, 0xc05c2d38ef34d6a1), (796332540, 0xc089f09abf338716), (-1007153156, 0xc3e2462369041d0e), (-66797698, 0x4083f5189374bc6a), (-1255888514, 0x408694817ebaf102)]))),
        ("truncated", "701101001100000000000000000000000000010000000200000003000f000400000005000f000600000007000f0008000f00090000000a000f000b0000000c0000000d000f000e0000000f00000010003d7f38444abf7a4328f17944cdcccc3da7aa9366d56b7308a800ec8397b8c7c3cdcccc3d8831f5d66a845d5aea5fb35438632d1c187403c4c2011fc3bdfe64c4c03c", None, None),
        ("random", "701101000200000000000000e0dd0600517f0c00a69830c4a37440c3", Some("{450017:-706.38513,819026:-192.45561}/70000"), Some((70000, &[(450017, 0xc0861314bf0995ab), (819026, 0xc0680e945b6c3761)]))),
        ("FALLBACK index 2^31-1", "64000000090000000000000020dc161642b9080c9ca188e52cef87907e2a1cc6add62364ac5f28c362f907fcffffff7f65a63086bdc2394328f0fd9271d14e432951a7fa5a472444cde00a435da8485b05defec2", Some("{370596897:-3.3224168e-35,201898307:185.7607,-444030563:-1.6025748e-27,-1870139603:206.81813,-971232641:-4.3437985e+35,1680070318:657.11487,-1020764243:138.87813,-66586269:5.6480113e+16,2147483648:-127.43363}/100"), None),
        ("short header", "0000000000000000000000", None, None),
        ("random", "fbffffff0100000000000000c19d060000008000", Some("{433602:1.1754944e-38}/-5"), Some((-5, &[(433602, 0x381000000b3aeeab)]))),
        ("random", "010000000100000000000000e28288a2ffff7f7f", Some("{-1568111901:3.4028235e+38}/1"), Some((1, &[(-1568111901, 0x47efffffe54daff8)]))),
        ("negative nnz", "70110100ffffffff000000000f0000000f26a620", None, None),
        ("random", "000000400d000000000000006a46030016e70300571904004d760500f5fc0500119a0600be6d08005a9d0a00532a0b00695c0c0008790e00a5de0e00825d0f00637a32443a5523c4000080ffb65691c251ef38c41e3fc743c3bea2fa702b6a44cc2f9842000000000100c0ffdb012e380d040c45", Some("{214635:713.9123,255767:-653.33167,268632:-Infinity,357966:-72.66936,392438:-739.7393,432658:398.4931,552383:-4.225106e+35,695643:936.6787,731732:76.09335,810090:0,948489:NaN,974502:4.148656e-05,1006979:2240.2532}/1073741824"), Some((1073741824, &[(1006979, 0x40a18081a36e2eb2), (974502, 0x3f05c03b58ee711e), (948489, 0x7ff8000000000000), (810090, 0x0000000000000000), (214635, 0x40864f4c63f14120), (357966, 0xc0522ad6cb535009), (432658, 0x4078e7e3bcd35a86), (731732, 0x405305f972474539), (392438, 0xc0871dea161e4f76), (255767, 0xc0846aa74299d884), (268632, 0xfff0000000000000), (695643, 0x408d456dfa43fe5d), (552383, 0xc75457d860a5896d)]))),
        ("trailing bytes", "0000004011000000000000001649dddbfb24536333a89a838668b780ce443fd8b9fd6a383c37167ba7e816dd0c4aabd94eb5631355ec3e45f2cc43cce0dfb3e517de382968187a723d4c168005df21a932dccec3596d7544888593ca000000001257f1b599a9009eaff25787220e02b83f22d6c30fb550440000c07f1c0b2b44686979c4ebf7a3412fa6ecc311fb6416e93a482e000102", Some("{-606254825:-413.72028,1666393340:981.70856,-2087016396:-4.833988e+06,-2135463801:0,-666942257:-1.798124e-06,946535866:-6.8113356e-21,2065053501:-1.624612e-34,-585701208:-3.1007577e-05,-643085811:-428.26755,325301583:834.82904,1161751638:NaN,-867971853:684.1736,-441196575:-997.647,691592728:20.496054,1920604265:-473.2983,-2146022338:1.8496916e-25,-1457398010:4.5527058e-11}/1073741824"), Some((1073741824, &[(-441196575, 0xc08f2d2d0e560419), (-1457398010, 0x3dc9075d21ad6e61), (-2135463801, 0x0000000000000000), (-585701208, 0xbf0041c43baf6e55), (1920604265, 0xc07d94c5d6388659), (-643085811, 0xc07ac447e28240b8), (-666942257, 0xbebe2ae23f05daea), (325301583, 0x408a16a1dfb9389b), (-867971853, 0x40856163886594af), (-2087016396, 0xc15270b100000000), (1161751638, 0x7ff8000000000000), (-606254825, 0xc079db8644523f68), (691592728, 0x40347efd651b0ccc), (946535866, 0xbbc0153321ed9138), (1666393340, 0x408eadab21815a08), (2065053501, 0xb8eafe55d03b1ee9), (-2146022338, 0x3acc9f62223268e3)]))),
        ("random", "000000400200000000000000000000002f000000b6d87027ffff7f7f", Some("{1:3.342417e-15,48:3.4028235e+38}/1073741824"), Some((1073741824, &[(48, 0x47efffffe54daff8), (1, 0x3cee1b16c06700fc)]))),
        ("random", "000000002800000000000000a82800007629000006c70000f24801002b5f0100086b0100d6860100d0910100c8f10100db0e0200b5b802003fd80200c92b030074740300ccc60300b6c80300951d0400593f05003c8a05003748060004a70600a02c07009a4207007572070008780800c64f09004c9c09001ba00900eba50900c3a70900b0400b00b4930b00d9cd0b0059230d00e0300d0058b50d00b4e10e0067520f00fc530f00bc830f0078b130442a275a86da1b11440c9ba5c374b1b31ddb7e4bc40100c0ff4e7843c429f2ebbbb116fb94192492c3754d3bc4f226c3d0f10275c400000000eb1975c496b1a6c3226802c43b893821923b5044971c0bc44d1fdae375cff742dd24626071bdabc3456a46c4ca5f59c22a7c79449de3a443517ab29c9afa4c20f56094c3000000805759cac2e9687ec1cdd2664492e3fa630100c0ff0000803fcd3cee43", Some("{10409:706.77295,10615:-4.1030016e-35,50951:580.4352,84211:-331.2113,89900:4.7564388e-21,92937:-813.9821,100055:NaN,102865:-781.87976,127433:-0.0072004986,134876:-2.5353473e-26,178358:-292.282,186432:-749.21027,207818:-2.6192876e+10,226421:-980.04596,247501:0,247991:-980.40497,269718:-333.3874,343898:-521.6271,363069:6.252325e-19,411704:832.9308,435973:-556.4467,470177:-8.0472913e+21,475803:123.90519,488054:6.518157e+19,555017:-343.48,610247:-793.66046,629837:-54.343544,630812:997.94006,632300:329.77823,632772:-1.181067e-21,737457:1.7362389e-19,758709:-296.75748,773594:-0,861018:-101.17449,864481:-15.900613,898393:923.29376,975285:9.2561684e+21,1004136:NaN,1004541:1,1016765:476.475}/0"), Some((0, &[(186432, 0xc08769aea209aaa4), (632772, 0xbb964f4a20dd6c9d), (435973, 0xc0816392d77318fc), (50951, 0x4082237b4a2339c1), (610247, 0xc088cd489f40a287), (92937, 0xc0896fdb573eab36), (127433, 0xbf7d7e452007c1c7), (555017, 0xc07577ae147ae148), (207818, 0xc21864de47800000), (247501, 0x0000000000000000), (629837, 0xc04b2bf93ff25e57), (102865, 0xc0886f09bf9c62a2), (269718, 0xc074d632ca57a787), (100055, 0x7ff8000000000000), (898393, 0x408cda599ed7c6fc), (343898, 0xc0804d044d013a93), (773594, 0x8000000000000000), (861018, 0xc0594b2ad81adea9), (475803, 0x405ef9eea209aaa4), (134876, 0xba9f62d618d7e86d), (630812, 0x408f2f853e2d6239), (470177, 0xc47b43e99e0f92f7), (864481, 0xc02fcd1d25aab474), (1004136, 0x7ff8000000000000), (10409, 0x4086162f0068db8c), (89900, 0x3bb6762e823c4d2a), (632300, 0x40749c73a14cec42), (737457, 0x3c099f533a6a3ae4), (84211, 0xc074b3617c1bda51), (226421, 0xc08ea05e2046c765), (758709, 0xc0728c1ea35935fc), (975285, 0x447f5c72416849bd), (178358, 0xc0724483126e978d), (488054, 0x440c449ba48bc211), (10615, 0xb8cb44e53e276092), (247991, 0xc08ea33d60e94ee4), (411704, 0x408a0772474538ef), (363069, 0x3c2711276cce6649), (1004541, 0x3ff0000000000000), (1016765, 0x407dc7999999999a)]))),
        ("random", "0d0000000d000000000000000f9d83a99e4fc9baf58ab960b194eb4131d2d30fb4ad9a06e169fcdffab1712ec2471a26209758544ebf1d1a04d543c98b586dda196dcbc3c2238d1e88375fc4056377421723a494d4d8c744000080ff4c81aae4bd92e2c3f12ab2c365e73e44368b60744653c738", Some("{-1450992368:-406.85233,-1161212001:1.4943745e-20,1622772470:-892.8677,1105958066:61.8467,265540146:-1.6573609e-26,110800309:1598.7759,-537105950:-Infinity,779203067:-2.5162107e+22,639256515:-453.1464,1415092001:-356.33548,438157135:763.61554,-918301435:7.116077e+31,-630368116:9.50457e-05}/13"), Some((13, &[(1415092001, 0xc076455e2046c765), (-537105950, 0xfff0000000000000), (639256515, 0xc07c5257a786c227), (-918301435, 0x468c1166ca8bf886), (-630368116, 0x3f18ea68b147cac0), (438157135, 0x4087dceca03c4b0a), (-1450992368, 0xc0796da324c83665), (1105958066, 0x404eec60aa64c2f8), (265540146, 0xba948462e7c7f8ac), (110800309, 0x4098fb1a858793de), (1622772470, 0xc08be6f10cb295ea), (779203067, 0xc495502986e7c627), (-1161212001, 0x3bd1a478445ba162)]))),
        ("random", "0d0000000d00000000000000000000000f0001000f00020000000300000004000f0005000f000600000007000f000800000009000f000a0000000b0000000c000000c07fea566d430000c07fb9c7bfc321ca29260c26f5c28814ce42ffff7f7f0000807f10bfe7b1c963eb43478d6ac4b4b77544", Some("{1:NaN,65552:237.33951,131088:NaN,196609:-383.56033,262145:5.890759e-16,327696:-122.57431,393232:103.0401,458753:3.4028235e+38,524304:Infinity,589825:-6.744706e-09,655376:470.77957,720897:-938.20746,786433:982.87036}/13"), Some((13, &[(1, 0x7ff8000000000000), (196609, 0xc077f8f71c970f7c), (262145, 0x3cc53944249c8244), (458753, 0x47efffffe54daff8), (589825, 0xbe3cf7e1f6da69cb), (720897, 0xc08d51a8e0c9d9d3), (786433, 0x408eb6f67f4dbdf9), (65552, 0x406daadd44135547), (131088, 0x7ff8000000000000), (327696, 0xc05ea4c17ebaf102), (393232, 0x4059c290ff972474), (524304, 0x7ff0000000000000), (655376, 0x407d6c791e646f15)]))),
        ("float4 bound, searched in the open interval", "640000002800000000000000ca250000e990000011e7000056750200cdb70200abdc02003b08030091110300a23103005b8a030008200400954a040094e70400d20a05008c53050054790500b28c05008ac60500c4ce0600d4ef0600465b07007c6d07001d9007007daf08002bdb0800a74c09009e8d0a00dfc30b00b7d30b00f2f10b00d81d0c007d9c0c004fe10c00e4560d0098a70d0023b80d0056320e00406b0f0016e60f00cae80f000000803fc12a73d0f30942c4c54945fba4c8cfc35e5e0886c67cf9c279dc02f3263276c4ffff7f805d1316765f637843ab5fd7590000803f6591a0c20100000058765709d22b23c499d425261e7c78de7ea2004459996b4457b3cbc331a863c43ccbe4c8dd895993477eefc3a7ad06c1ffff7f7fd26a90fa24e576ac7b510ec42e760944000080ff376a08445ad3b0c261651644c3edeb557d046bc4409962c4", Some("{9675:1,37098:-1.6318662e+10,59154:-776.15546,161111:-1.0243787e+36,178126:-415.5675,187564:-2.5648087e-35,198716:-124.7437,201106:-1.0367894e+31,209315:-984.78357,232028:-1.1754942e-38,270345:7.609739e+32,281238:248.38817,321429:7.5777885e+15,330451:1,349069:-80.28397,358741:1e-45,363699:2.5935329e-33,378507:-652.6847,446149:5.7534e-16,454613:-4.4763048e+18,482119:514.53894,486781:942.39606,495646:-407.4011,569214:-910.628,580396:-468569.88,609448:-2.7457222e-27,691615:-478.98654,771040:-8.417396,775096:3.4028235e+38,782835:-3.7492866e+35,794073:-3.5085901e-12,826494:-569.27313,844112:549.84656,874213:-Infinity,894873:545.6596,899108:-88.412796,930391:601.58405,1010497:3.2425801e+13,1041943:-940.0701,1042635:-906.39453}/100"), Some((100, &[(1010497, 0x42bd7db859a44000), (446149, 0x3cc4ba932a874e6c), (482119, 0x4080144fbfc6540d), (270345, 0x46c2c26ba45e932d), (9675, 0x3ff0000000000000), (378507, 0xc084657a43fe5c92), (1042635, 0xc08c5327ff583a54), (349069, 0xc054122c9081c2e3), (178126, 0xc079f9147ae147ae), (844112, 0x40812ec5c13fd0d0), (59154, 0xc088413e61cffeb0), (201106, 0xc6605b8f1d1d1f15), (330451, 0x3ff0000000000000), (321429, 0x433aebf55fb9bd00), (358741, 0x3696d601ad376ab9), (454613, 0xc3cf0f83bfe33020), (281238, 0x406f0c6be37de93a), (161111, 0xc768a9389dfd08c6), (930391, 0x4082ccac226809d5), (1041943, 0xc08d608f9096bb99), (794073, 0xbd8edca47d12f231), (894873, 0x40810d46dc5d6388), (232028, 0xb80fffffbb1dd6a1), (495646, 0xc079766ae7d566cf), (691615, 0xc07defc8de2ac322), (771040, 0xc020d5b4edb2f662), (209315, 0xc08ec644c0592104), (899108, 0xc0561a6b3fe9fadb), (874213, 0xfff0000000000000), (609448, 0xba6b313b981c6bb9), (37098, 0xc20e65582b800000), (187564, 0xb8c10bcbbe8224b9), (580396, 0xc11c9967851eb852), (363699, 0x392aeecb071dcffa), (782835, 0xc7520d5a3f9c9f18), (775096, 0x47efffffe54daff8), (198716, 0xc05f2f98c7e28241), (486781, 0x408d732b21815a08), (569214, 0xc08c750624dd2f1b), (826494, 0xc081ca2f5ec80c74)]))),
        ("random", "000000402800000000000000cb586c2c4fdcbf0680a3a8769c86a5c62d63ed9ce8df23af1766cf6b5e2f87d444e4785f3aec9dd548b1004f07f201ec3c09649a311d33f50f17e25f65772a0a0f8a07f909a24ac5e04c592885faad59f25f85b1c36c54920608f9b0ac2a776a623daa43d3a2f29d9f30b6bf43af52dee681b1d2e996c8caca4350f9aa9644e0bf27fcbc939cf144244ea7ebf805a99497e1bcb5cdae38568441a09d7153fb7509cee9d6533a338a77b0f002368140c43d0b514e4b865644010000008cfd3f44405c14c28aa5869fe07319c239424e444f4dc2c5d8fe64c44993cfcef0f8c0a2b4c8e69990bda943198acc4327ff7b6372b94744ec4832c4cc06e2c3fb8f69c424c540440000807fc21e56c4000000809d78d5c3a3e322c3000080ffc005a115ffff7f8002ca5ec416076d43ffff7f8011c02844bd5b1d4457488d4311e77b34", Some("{745298124:-1.2853556e+14,113237072:-8.629506e-33,1990763393:3.5366116e-37,-962230627:-770.0189,-1662164178:8.7679366e+08,-1356603415:858.0983,1808754200:1e-45,-729338017:767.9617,1601758277:-37.090088,-711070661:-5.702507e-20,1325445449:-38.36316,-335416824:825.0347,-1704720067:-6217.6636,-181199566:-915.98193,1608652560:-1.7412681e+09,170555238:-5.2305277e-18,-116946416:-2.3862506e-23,-984964598:339.48096,676941025:409.0789,1504574086:4.6485184e+21,-1316659213:798.8976,-1839960892:-713.1394,-1325856761:-452.0531,1786194605:-934.2497,1135230307:771.0803,-1645042988:Infinity,-1078579040:-856.4806,-565006524:-0,-760118809:-426.9423,-892823830:-162.8892,-112180277:-Infinity,-532375893:6.5036454e-26,-1124325440:-1.1754942e-38,1156684948:-891.1564,-341357019:237.02768,-1800862215:-1.1754942e-38,-1245912680:675.00104,1446555342:629.4334,-1650441851:282.56516,1979405170:2.3460258e-07}/1073741824"), Some((1073741824, &[(-1124325440, 0xb80fffffbb1dd6a1), (1990763393, 0x385e160eda9c162c), (-1839960892, 0xc086491d7dbf4880), (-565006524, 0x8000000000000000), (1601758277, 0xc0428b8800eae18b), (-1650441851, 0x4071a90ae536501e), (1504574086, 0x446f7fe4dcfc9b66), (-1325856761, 0xc07c40d97f62b6ae), (-335416824, 0x4089c84710cb295f), (1325445449, 0xc0432e7c06e19b91), (-984964598, 0x407537b2031ceaf2), (-112180277, 0xfff0000000000000), (745298124, 0xc2dd39c119448000), (1446555342, 0x4083ab779a6b50b1), (113237072, 0xb946674a5d0f9879), (1608652560, 0xc1d9f26921000000), (-116946416, 0xbb3cd91680dc9188), (-1645042988, 0x7ff0000000000000), (1156684948, 0xc08bd9404ea4a8c1), (1808754200, 0x3696d601ad376ab9), (-1245912680, 0x4085180221426fe7), (-962230627, 0xc0881026b50b0f28), (-729338017, 0x4087ffb18fc50481), (-1078579040, 0xc08ac3d844d013a9), (676941025, 0x407991432ca57a78), (1135230307, 0x408818a474538ef3), (-341357019, 0x406da0e2c12ad81b), (170555238, 0xbc581f1dff26bd85), (-760118809, 0xc07aaf13a92a3055), (-1356603415, 0x408ad0c95182a993), (-892823830, 0xc0645c74538ef34d), (-532375893, 0x3ab420b7ffcb60bc), (1786194605, 0xc08d31ff62b6ae7d), (-1662164178, 0x41ca21679e000000), (-181199566, 0xc08c9fdafe1da7b1), (1979405170, 0x3e8f7ce21def1fc5), (-1316659213, 0x4088f72e48e8a71e), (-1800862215, 0xb80fffffbb1dd6a1), (-711070661, 0xbbf0d4b145958e8a), (-1704720067, 0xc0b849a9e1b089a0)]))),
        ("random", "2800000028000000000000000f000000100000002f000000300000004f0000005000000060000000700000008000000090000000a0000000b0000000cf000000df000000e0000000ff000000000100001f010000200100003001000040010000500100006f0100007f0100008f0100009f010000a0010000bf010000cf010000df010000e0010000ff01000000020000100200002f0200003f020000400200005f0200006f0200007f02000067f717c466ff3a918f7f1b444be45844e1fb5ac400000080d88bae8324f3657bcdafa6c33750eabe349f53c4cf297d9babb50e4231151443e3723043cf89ed5b38fec977b58bebc3000000804de49fc2f52c06c2c79b686cd49cc05e3f8b3b446fc7caa800000080ce8b5fc4f11dd5c3d817e10a11c9e3c30a523744d8e413440000c07f564e8f6e000080ff68d66b43d2f933c3ce03991d379a36c46a78b543", Some("{16:-607.86566,17:-1.4751514e-28,48:621.9931,49:867.5671,80:-875.9356,81:-0,97:-1.0258907e-36,113:1.19396746e+36,129:-333.37344,145:-0.45764324,161:-846.48755,177:-2.0941179e-22,208:35.67741,224:148.08278,225:176.44878,256:1.3372218e+17,257:8.193811e+33,288:-471.09146,289:-0,305:-79.9459,321:-33.543903,337:1.1248257e+27,368:6.9396006e+18,384:750.1757,400:-2.2512996e-14,416:-0,417:-894.18445,448:-426.23392,464:2.1675681e-32,480:-455.57083,481:733.28186,512:591.5757,513:NaN,529:2.217553e+28,560:-Infinity,576:235.83752,577:-179.97586,608:4.0502697e-21,624:-730.4096,640:362.94073}/40"), Some((40, &[(256, 0x437db139d3d7da80), (384, 0x40877167d566cf42), (448, 0xc07aa3be22e5de16), (512, 0x40827c9b089a0275), (576, 0x406d7accf6be37df), (640, 0x4076af0d3ae685db), (129, 0xc074d5f99c38b04b), (257, 0x46f93fc6f421fad3), (321, 0xc040c59e9d0e9920), (513, 0x7ff8000000000000), (577, 0xc0667f3a3ec02f30), (16, 0xc082feecdf266ba5), (80, 0xc08b5f7c1bda511a), (208, 0x4041d6b55ef1fddf), (400, 0xbd1958ede6f51f9c), (464, 0x395c22fb0242686a), (17, 0xba275feccbc7bf49), (81, 0x8000000000000000), (145, 0xbfdd4a06df42454a), (337, 0x458d1378db0b02ca), (529, 0x45d1e9cac88674b8), (224, 0x406282a6223e186a), (288, 0xc07d71769ec2ce46), (416, 0x8000000000000000), (480, 0xc07c79221ea35936), (608, 0x3bb32079c204a8cc), (97, 0xb875d17af1a2c8bd), (161, 0xc08a73e6809d4952), (225, 0x40660e5c67dfe32a), (289, 0x8000000000000000), (417, 0xc08bf179c0ebedfa), (481, 0x4086ea413fd0d068), (48, 0x40836ff1de69ad43), (368, 0x43d8139a7e99859c), (560, 0xfff0000000000000), (624, 0xc086d346dc5d6388), (49, 0x408b1c896bb98c7e), (113, 0x476cbe6480aa65d8), (177, 0xbb6fa539ea93a4f6), (305, 0xc053fc89a0275254)]))),
        ("random", "640000000d0000000000000009ad00007cc804009d37060070f2090088fe09000b2e0a00fe4f0a00aef30c00eaa90d0033330e00e2d60e00b33a0f0074990f008fb7cfc3a81ee44262c266cf00000080b7ca35c4189d24c4519938c4eb1566c30248499e2c8b98c202e6d6f900008000e6341cc2", Some("{44298:-415.43405,313469:114.059875,407454:-3.8714988e+09,651889:-0,654985:-727.1674,667148:-658.4546,675839:-738.39557,848815:-230.08562,895467:-1.0655742e-20,930612:-76.27182,972515:-1.3947708e+35,998068:1.1754944e-38,1022325:-39.05166}/100"), Some((100, &[(972515, 0xc73adcc03fd781f5), (654985, 0xc086b956d5cfaace), (44298, 0xc079f6f1de69ad43), (895467, 0xbbc9290035716ad0), (667148, 0xc08493a305532618), (848815, 0xc06cc2bd66277c46), (651889, 0x8000000000000000), (930612, 0xc05311657fb69985), (998068, 0x381000000b3aeeab), (1022325, 0xc043869ccb7d4174), (313469, 0x405c83d4fdf3b646), (407454, 0xc1ecd84c46000000), (675839, 0xc087132a209aaa3b)]))),
        ("random", "640000000000000000000000", Some("{}/100"), Some((100, &[]))),
        ("random", "4600000046000000000000000f0000001f00000020000000300000004f0000005f0000006f0000007f0000008000000090000000a0000000bf000000cf000000df000000e0000000ff0000000f0100001f0100002f0100003f010000400100005f010000600100007f0100008001000090010000af010000bf010000c0010000df010000e0010000f00100000f02000010020000200200003f02000040020000500200006f0200007f0200008002000090020000a0020000b0020000c0020000d0020000ef020000ff020000000300001f030000200300003003000040030000500300006f0300007f030000800300009f030000a0030000b0030000c0030000d0030000ef030000ff030000000400001f040000200400003f0400004f0400005004000000000000c4d879c447d96b355a859195052b6fcdf47537c4b184634488c6fac697b928c401000000eb166fbec9f9ae9f071e5543b90808c30000807f1510b9690000807ffdcb74ede07dd027ecdd5b44ffff7f807896ff7b4c0dd795260ea014d49c83060e3b4fc4fe516a957ad035440a9e09408984114421334844c6710744a0dce8e2f67f0cc28c135c7b1f9222ce898280acfe58e63c00000080408d24c4550eeebd7b20d5433ce301c3160716a13e75c243ae9a9ac30da9ff6b24ee6043c11d3444292a9b73fb221d4380865a52e0ae0c44a1ec68c44c241d31673259447a91e0c3a1fd221103445244213ba89fd2433c436430e2a0936f6d22ed441b440000803f0000800000000080c5b5d8c368a9743201ff72c4", Some("{16:0,32:-999.38696,33:8.78605e-07,49:-5.8775425e-26,80:-2.5078587e+08,96:-733.843,112:910.0733,128:-32099.266,129:-674.89984,145:1e-45,161:-0.23348586,192:-7.41051e-20,208:213.1173,224:-136.03407,225:Infinity,256:2.7965903e+25,272:Infinity,288:-4.7350593e+27,304:5.786807e-15,320:879.4675,321:-1.1754942e-38,352:2.6541751e+36,353:-8.685879e-26,384:1.6161452e-26,385:4.950716e-35,401:-828.9227,432:-4.7320604e-26,448:727.25745,449:2.150271,480:582.07086,481:800.7989,497:541.7777,528:-2.1477712e+21,529:-35.12496,545:1.1427018e+36,576:-6.818713e+08,577:-3.652471e-12,593:0.028118607,624:-0,640:-658.20703,641:-0.11623827,657:426.25375,673:-129.88763,689:-5.0831355e-19,705:388.91595,721:-309.20844,752:6.181488e+26,768:224.93024,769:720.4649,800:2.4586826e+31,801:157.13664,817:2.3463985e+11,833:562.7324,849:-931.6973,880:2.286714e-09,896:868.78754,897:-449.13654,928:1.2857702e-28,929:841.0627,945:-7.124859e-20,961:188.26492,977:-3.8317911e-19,1008:3.2178556e-18,1024:621.07697,1025:1,1056:1.1754944e-38,1057:-0,1088:-433.42007,1104:1.4241188e-08,1105:-971.98444}/70"), Some((70, &[(128, 0xc0df58d10624dd2f), (256, 0x45372202a3b01ba4), (384, 0x3a9401c4c1cbbc8a), (640, 0xc08491a7ff583a54), (768, 0x406c1dc486ad2dcb), (896, 0x408b264ce1c58256), (1024, 0x4083689da272862f), (129, 0xc0851732df505d10), (385, 0x38d0739a782a6cbf), (641, 0xbfbdc1ca903190f2), (769, 0x408683b81d7dbf48), (897, 0xc07c122f44912989), (1025, 0x3ff0000000000000), (16, 0x0000000000000000), (272, 0x7ff0000000000000), (528, 0xc45d1b9407c14f9d), (145, 0x3696d601ad376ab9), (401, 0xc089e761b089a027), (529, 0xc0418ffeb074a772), (657, 0x407aa40f5c28f5c3), (32, 0xc08f3b187e7c06e2), (288, 0xc5ae997f9dfda30d), (800, 0x467365451ca9a278), (928, 0x3a245fb41d327b50), (1056, 0x381000000b3aeeab), (33, 0x3ead7b28d3d36329), (161, 0xbfcde2dd5a63a3be), (545, 0x476b82718d7d2e50), (673, 0xc0603c6777079e5a), (801, 0x4063a45f5ad96a6a), (929, 0x408a488068db8bac), (1057, 0x8000000000000000), (304, 0x3cfa0fbbf6b6d3a7), (432, 0xbaad4a3fbefc80db), (49, 0xbab230ab3e962819), (689, 0xbc22c0e2c007348c), (817, 0x424b50cffd080000), (945, 0xbbf507642936ea3f), (192, 0xbbf5df39199ef914), (320, 0x408b7bbd70a3d70a), (448, 0x4086ba0f41f212d7), (576, 0xc1c45243e2000000), (1088, 0xc07b16b89b52007e), (321, 0xb80fffffbb1dd6a1), (449, 0x400133c148344c38), (577, 0xbd901051171836a8), (705, 0x40784ea7bb2fec57), (833, 0x408195dbf487fcb9), (961, 0x4067887a398201cd), (80, 0xc1ade5609c000000), (208, 0x406aa3c0ebedfa44), (1104, 0x3e4e952d07c2cab3), (593, 0x3f9ccb1fc5e5745b), (721, 0xc0735355c52e72da), (849, 0xc08d1d941205bc02), (977, 0xbc1c460c7a7c9acd), (1105, 0xc08e5fe0221426fe), (96, 0xc086eebe76c8b439), (224, 0xc061011719f7f8cb), (352, 0x477ff2cef8d50fe5), (480, 0x408230911f0c34c2), (225, 0x7ff0000000000000), (353, 0xbabae1a98e7400be), (481, 0x4089066425aee632), (112, 0x408c70961e4f7660), (624, 0x8000000000000000), (752, 0x457ff5219980e1d7), (880, 0x3e23a4898a2f898e), (1008, 0x3c4dadf25bfc1e27), (497, 0x4080ee38bac710cb)]))),
        ("random", "640000000d000000000000004103000049f20200f9ca05003ccc0600cfee0a00ea230b008d5a0b00a0a20b00ae9b0c0092b70c00b6cd0c0096a80d00327f0e004f1be1437d1b7644bef441c41e548c46c21eafa8c5214744f41ea743024d4b50f0cb178b065649c30929e7611eaff4c300008000", Some("{834:450.21335,193098:984.4295,379642:-775.8241,445501:17962.059,716496:-1.9442242e-14,730091:796.52765,744078:334.24182,762529:1.3643287e+10,826287:-2.9234968e-32,833427:-201.33603,839095:5.3301935e+20,895127:-489.3681,950067:1.1754944e-38}/100"), Some((100, &[(762529, 0x420969a04ec00000), (834, 0x407c2369e1b089a0), (193098, 0x408ec36f9db22d0e), (730091, 0x4088e438a0902de0), (744078, 0x4074e3de7ea5f84d), (826287, 0xb962f97e0373e649), (716496, 0xbd15e3d83fe3fbdf), (833427, 0xc0692ac0c1fc8f32), (950067, 0x381000000b3aeeab), (839095, 0x443ce52122c4779b), (895127, 0xc07e95e3bcd35a86), (379642, 0xc0883e97c1bda512), (445501, 0x40d18a83c6a7ef9e)]))),
        ("random", "640000000100000000000000e56ff2780000803f", Some("{2029154278:1}/100"), Some((100, &[(2029154278, 0x3ff0000000000000)]))),
    ];
    /// extension_types.java_hash_order: (hashes, initial capacity, order).
    const PY_HASH_ORDER: &[(&[u32], Option<usize>, &[usize])] = &[
        (
            &[
                131072, 524352, 852096, 393264, 131136, 655680, 590208, 393328, 65664,
            ],
            Some(9),
            &[8, 0, 4, 3, 7, 1, 6, 5, 2],
        ),
        (&[], Some(0), &[]),
        (
            &[
                327680, 393248, 589952, 589872, 655616, 852048, 852160, 112, 786944,
            ],
            Some(9),
            &[7, 0, 1, 2, 3, 4, 8, 5, 6],
        ),
        (
            &[
                4222596258, 2397748893, 2391898041, 1657929363, 504096134, 703512782, 3459005539,
                2920189979, 583828818, 3074745835, 976585380, 3894894203, 3000375535, 1630746622,
                2603935575, 3508719520, 3152259276, 2660200394, 533431486, 2306357345, 3612561853,
                1215807907, 214218686, 685454182, 4055159508, 3004380511, 1741277162, 498583769,
                3337639145, 3530973142, 58729987, 1548443835, 152722200, 756785369, 2135917887,
                2228209894, 3133464030, 248893814, 2326951316, 4234208529, 1482578854, 1722911447,
                2050157353, 2935407036, 2813537783, 4112589488, 4025189023, 69839326, 4107109077,
                3764586261, 255007719, 2889640172, 2873210782, 2767933000, 699559464, 1305111574,
                3789970181, 3911610390, 3872078300, 1804754384, 2006855031, 1870916827, 810135545,
                1731909665, 3702833340, 1599627795, 3420173904, 2487707500, 3852689912, 1064726145,
                53894517, 3567501886, 803453732, 1077950821, 4043577453, 910413805, 3934769666,
                1810439798, 2473412503, 2871224284, 423536034, 114460527, 4222602617, 2901275722,
                3130993803, 1501455650, 2297684195, 1683336733, 3552847920, 2648387414, 3440387948,
                1051107970, 533288875, 4172700619, 1620369335, 3253834214, 1149685068, 273320543,
                2578814628, 1964010541,
            ],
            Some(100),
            &[
                32, 64, 0, 86, 98, 84, 7, 97, 58, 95, 48, 19, 28, 36, 42, 63, 5, 26, 94, 91, 73,
                38, 2, 35, 67, 16, 57, 12, 99, 3, 59, 70, 44, 17, 87, 43, 65, 25, 6, 61, 68, 11,
                85, 24, 92, 14, 41, 74, 27, 34, 39, 46, 18, 49, 1, 22, 90, 93, 15, 30, 76, 66, 4,
                89, 10, 45, 54, 80, 71, 8, 77, 29, 37, 83, 75, 9, 62, 53, 23, 81, 33, 72, 96, 13,
                51, 21, 50, 82, 55, 52, 56, 60, 20, 31, 88, 47, 69, 40, 78, 79,
            ],
        ),
        (
            &[
                327680, 458768, 327808, 983232, 524352, 655440, 131168, 65760, 459264, 983184,
                721536, 983216, 983232,
            ],
            Some(3),
            &[7, 6, 0, 2, 8, 4, 10, 3, 12, 1, 5, 9, 11],
        ),
        (
            &[
                1679206370, 4010329540, 372726526, 422626959, 1239022306, 1064284252, 3186536945,
                3215559184, 2172106829, 3413220116, 4180034534, 2304655053, 4113292388, 150837074,
                3892411121, 795118858, 829279005, 1498968648, 1398515059, 293683130, 3359593838,
                3046099563, 1575792351, 867610362, 2995571595, 3854787135, 1470779471, 1090199371,
                3209954207, 3144397572, 2609467481, 2663429608, 2659713839, 2720069950, 3234637909,
                3395397069, 1255158526, 4141335924, 1711286282, 669367066, 672769898, 943707574,
                144773463, 2674625297, 4178164457, 1293944016, 2910078965, 3944688573, 3912723072,
                2483650406, 3376954321, 1776223867, 1348724304, 813497327, 2840775693, 933845589,
                2942098159, 3963522233, 2425243941, 2002328350, 1794236680, 4101846406, 2861588849,
                4205189954, 3547837557, 562550263, 2110677254, 1508629765, 1185616608, 1263792448,
                107421638, 2244040126, 690643023, 1502120931, 403513923, 2524912726, 2413721181,
                3051520118, 3705840273, 921352261, 339070216, 322054138, 3172415197, 121520395,
                2524070973, 3390866360, 1685711059, 22056504, 3715038404, 2895401520, 1206153963,
                95745208, 1966814385, 2437862280, 526558447, 1927941162, 14572522, 1200000003,
                1536692575, 4225530968,
            ],
            Some(3),
            &[
                64, 24, 38, 91, 90, 17, 69, 33, 6, 18, 31, 75, 36, 5, 22, 52, 96, 83, 8, 4, 19, 80,
                59, 68, 23, 74, 12, 84, 20, 54, 9, 72, 87, 73, 15, 29, 49, 16, 65, 40, 78, 43, 71,
                46, 76, 99, 97, 57, 41, 92, 94, 11, 53, 77, 34, 50, 70, 47, 37, 51, 85, 89, 32, 86,
                88, 58, 35, 13, 79, 27, 56, 48, 7, 3, 10, 95, 93, 98, 66, 81, 2, 82, 28, 1, 30, 44,
                62, 21, 63, 26, 67, 14, 45, 0, 42, 60, 61, 25, 55, 39,
            ],
        ),
        (
            &[
                327680, 655424, 327808, 524480, 65664, 65616, 262528, 131520, 197120, 852112,
                524928, 590528,
            ],
            Some(12),
            &[4, 5, 7, 8, 6, 0, 2, 3, 10, 11, 1, 9],
        ),
        (
            &[
                2614251045, 3717937019, 3835960301, 2090989338, 4174318901, 2936166718, 1241481733,
                2715242168, 1852866680, 3730603723, 1899524651, 552456704, 3205652605, 347139763,
                2405692499, 1462814837, 1922746777, 2923192140, 2462858653, 1888474482, 498436394,
                405038793, 3655501159, 820663586, 1179662904, 3292247378, 3323316874, 1356230761,
                717917037, 2304176096, 1313043024, 959616807, 4245453889, 2469510599, 3212624681,
                489276496, 2658572746, 3278222703, 4075767499, 3868216854, 3148870321, 1669558813,
                370455832, 702463766, 2444254024, 984469057, 58472336, 296055882, 3116786954,
                2678642017, 1305413633, 2931680450, 866952433, 2220686405, 2077542858, 1328333867,
                4109744780, 1480054829, 1777957669, 1536949474, 3954259301, 2525823268, 1717643033,
                4201522848, 910475649, 1787754392, 3063962773, 3102833173, 3838395951, 1223036309,
                3290865440, 3895784324, 2027969279, 606818914, 3343026845, 2420797317, 3606415053,
                1643201630, 2045691685, 2671112597, 756305130, 1217805482, 3915290110, 1134707864,
                3987417863, 886867137, 2742332756, 271013789, 4075201816, 2200348368, 1682877427,
                3776465281, 2948756762, 3606821369, 3194721992, 3608036325, 3194080629, 207770630,
                866221744, 1655436948,
            ],
            Some(100),
            &[
                93, 13, 16, 70, 55, 8, 37, 42, 98, 10, 30, 96, 31, 65, 53, 57, 85, 40, 54, 72, 86,
                38, 14, 66, 76, 83, 5, 81, 99, 15, 2, 73, 32, 18, 34, 52, 97, 24, 25, 7, 12, 17,
                69, 62, 35, 56, 59, 51, 22, 39, 9, 91, 41, 20, 26, 79, 82, 94, 28, 61, 84, 77, 71,
                29, 87, 3, 36, 90, 27, 64, 23, 43, 49, 78, 48, 50, 63, 75, 60, 92, 58, 74, 1, 67,
                68, 95, 45, 46, 11, 21, 47, 33, 89, 0, 44, 4, 6, 19, 80, 88,
            ],
        ),
    ];
}
