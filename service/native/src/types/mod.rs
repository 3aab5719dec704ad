//! The type family decoders: a stored datum (a fixed-length image, or a varlena's
//! payload) read as its type's value, and the helpers they share. One module per type
//! family, as service.types has (psycopg's layout): `numeric`, `datetime`, `float`,
//! `formats` (bits, money, interval, timetz, char, xml), `network`, `jsonb`, `jsonpath`,
//! `array`, `range`, `geometric`, `tsearch`, `postgis`, `pgvector`, the `extension`
//! types, and `regproc` (reg* and aclitem, from the names the catalog stage resolved); `outtext` names the types published as their output text; `deform` is
//! heap_deform_tuple over a table's attributes (service.types.deform).
//!
//! Receives: bytes the deform (or a COPY field rewritten to its stored form) hands over.
//! Hands on: values and output texts, never Avro: the plugins in crate::output decide
//! how a value is published, so nothing here imports them (types sit below output).
//! Errors: `Err(reason)`, a `&'static str` naming why the Python reference must decide
//! the row (a fallback, the whole row); the deform's `RowError` for a tuple that does
//! not fit its definition. Pure: no Python, no I/O, no panics on any input.

pub mod array;
pub mod datetime;
pub mod deform;
pub mod extension;
pub mod float;
pub mod formats;
pub mod geometric;
pub mod jsonb;
pub mod jsonpath;
pub mod network;
pub mod numeric;
pub mod outtext;
pub mod pgvector;
pub mod postgis;
pub mod range;
pub mod regproc;
pub mod snapshot;
pub mod tsearch;

/// An enum type's labels by the OID its datums store.
pub type Labels = std::collections::HashMap<u32, String>;

/// A little-endian u32 at `at`, None past the end (the value readers' one bounds check).
pub fn u32_at(d: &[u8], at: usize) -> Option<u32> {
    let bytes = d.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes(bytes.try_into().ok()?))
}

/// Why a varlena nested in another datum (an array element, a range bound, a jsonb
/// numeric) is not read here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nested {
    /// A TOAST pointer (never nested in a valid datum).
    Toast,
    /// Inline-compressed: Python decompresses it.
    Compressed,
    /// Its header or size runs past the datum.
    Overrun,
}

/// The varlena at `at` of `d` (service.types.varlena.read_varlena for a nested datum):
/// its payload and its whole size, header included; a 1-byte or an uncompressed 4-byte
/// header.
pub fn nested_varlena(d: &[u8], at: usize) -> Result<(&[u8], usize), Nested> {
    let b0 = *d.get(at).ok_or(Nested::Overrun)?;
    if b0 == 0x01 {
        return Err(Nested::Toast);
    }
    if b0 & 0x01 != 0 {
        let size = (b0 >> 1) as usize;
        let payload = d.get(at + 1..at + size).ok_or(Nested::Overrun)?;
        return Ok((payload, size));
    }
    let size = (u32_at(d, at).ok_or(Nested::Overrun)? >> 2) as usize;
    let end = at.checked_add(size).ok_or(Nested::Overrun)?;
    if size < 4 || end > d.len() {
        return Err(Nested::Overrun);
    }
    if b0 & 0x03 == 0x02 {
        return Err(Nested::Compressed);
    }
    Ok((&d[at + 4..end], size))
}

/// Runs `write` on `out`; on Err, `out` is cut back to what it was (the output writers'
/// rule: a value that falls back leaves no partial text behind).
pub fn undo_on_err(
    out: &mut String,
    write: impl FnOnce(&mut String) -> Result<(), &'static str>,
) -> Result<(), &'static str> {
    let mark = out.len();
    let done = write(out);
    if done.is_err() {
        out.truncate(mark);
    }
    done
}

/// enum_out: the label of a stored pg_enum OID, or a fallback (Python raises its
/// UnknownTypeError naming the type).
pub fn enum_label<'a>(labels: &'a Labels, d: &[u8]) -> Result<&'a str, &'static str> {
    let oid = u32::from_le_bytes(fixed(d)?);
    labels
        .get(&oid)
        .map(String::as_str)
        .ok_or("enum label Python decides")
}

/// The stored image of a fixed-length type, or a fallback when its size differs.
pub fn fixed<const N: usize>(d: &[u8]) -> Result<[u8; N], &'static str> {
    d.try_into()
        .map_err(|_| "stored size differs from the type's")
}
