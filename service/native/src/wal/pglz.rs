//! PGLZ decompression (pglz_decompress in pg_lzcompress.c; the native twin of
//! service/pglz.py, written from the algorithm, message for message).
//!
//! Receives: a compressed page image (`BKPIMAGE_COMPRESS_PGLZ`) and the exact raw size.
//! Hands on: the decompressed bytes, exactly `rawsize` long, or the message of the
//! `DecodeError` service.pglz would raise (the caller wraps it into the corruption error
//! the Python reader raises). The input must be consumed exactly when the output is
//! full (`check_complete`, as RestoreBlockImage asks).
//!
//! Format: groups of a control byte and up to 8 items, least significant bit first. A 0
//! bit is one literal byte; a 1 bit is a tag `len = (b0 & 0x0F) + 3`,
//! `off = ((b0 & 0xF0) << 4) | b1`, with a third length byte when `len == 18`. The copy
//! may overlap what it writes (a run); `off` must be 1..=the bytes written so far.

pub fn decompress(src: &[u8], rawsize: usize) -> Result<Vec<u8>, String> {
    let mut out: Vec<u8> = Vec::with_capacity(rawsize);
    let mut sp = 0usize;
    let srcend = src.len();
    while sp < srcend && out.len() < rawsize {
        let mut ctrl = src[sp];
        sp += 1;
        for _ in 0..8 {
            if sp >= srcend || out.len() >= rawsize {
                break;
            }
            if ctrl & 1 != 0 {
                if sp + 1 >= srcend {
                    return Err("pglz: truncated back-reference tag".to_string());
                }
                let b0 = src[sp];
                let mut length = usize::from(b0 & 0x0F) + 3;
                let off = (usize::from(b0 & 0xF0) << 4) | usize::from(src[sp + 1]);
                sp += 2;
                if length == 18 {
                    if sp >= srcend {
                        return Err("pglz: truncated back-reference length".to_string());
                    }
                    length += usize::from(src[sp]);
                    sp += 1;
                }
                let dp = out.len();
                if off == 0 || off > dp {
                    return Err(format!("pglz: back-reference offset {off} at {dp}"));
                }
                length = length.min(rawsize - dp);
                // Byte by byte: an overlapping copy repeats the last `off` bytes.
                let start = dp - off;
                for i in 0..length {
                    let b = out[start + i];
                    out.push(b);
                }
            } else {
                out.push(src[sp]);
                sp += 1;
            }
            ctrl >>= 1;
        }
    }
    if out.len() != rawsize {
        return Err(format!(
            "pglz: produced {} bytes, expected {rawsize}",
            out.len()
        ));
    }
    if sp != srcend {
        return Err(format!(
            "pglz: {} bytes of input left after {rawsize} bytes of output",
            srcend - sp
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::decompress;

    #[test]
    fn literals_and_a_run() {
        // ctrl 0b0000_0010: literal 'a', then a tag len 3+0=3 off 1 -> "aaaa"
        let src = [0b10u8, b'a', 0x00, 0x01];
        assert_eq!(decompress(&src, 4).unwrap(), b"aaaa");
    }

    #[test]
    fn offset_before_start_is_an_error() {
        let src = [0b1u8, 0x00, 0x05];
        assert_eq!(
            decompress(&src, 4).unwrap_err(),
            "pglz: back-reference offset 5 at 0"
        );
    }

    #[test]
    fn trailing_input_is_an_error() {
        let src = [0u8, b'a', b'b'];
        assert!(decompress(&src, 1).unwrap_err().contains("left after"));
    }
}
