//! LZ4 block decompression with the acceptance rules of LZ4_decompress_safe (lz4.c),
//! which is what the Python reference calls through `lz4.block.decompress(img,
//! uncompressed_size=want)` and what PostgreSQL's RestoreBlockImage calls.
//!
//! Receives: a compressed page image (`BKPIMAGE_COMPRESS_LZ4`) and the capacity `want`
//! (BLCKSZ minus the hole).
//! Hands on: the decoded bytes (possibly fewer than `want`: the caller checks the
//! length, as the Python reference does), or `Err(())` where LZ4_decompress_safe returns
//! a negative value.
//!
//! Why not a generic LZ4 decoder: liblz4 decides whether a malformed block is refused by
//! which of its three loops (the fast loop, the safe loop's shortcut, the careful path)
//! is reading at that point, and those are chosen by how far the read and write
//! positions are from the ends. To refuse exactly what the reference refuses, this
//! decoder takes the same loop decisions on the same positions; it copies byte-exactly
//! where liblz4 copies in wide strides. One deliberate difference: an offset of 0 is
//! refused here, where liblz4 copies bytes it never wrote (no defined result to match).

const MINMATCH: usize = 4;
const LASTLITERALS: usize = 5;
const MFLIMIT: usize = 12;
const MATCH_SAFEGUARD_DISTANCE: usize = 12;
const FASTLOOP_SAFE_DISTANCE: usize = 64;
const RUN_MASK: usize = 15;
const ML_MASK: usize = 15;

/// read_variable_length: bytes of 255 continue; `limit` is an input index that the
/// position may reach but not pass (`initial_check`: may not even start at it).
fn read_varlen(src: &[u8], ip: &mut usize, limit: isize, initial_check: bool) -> Option<usize> {
    let mut length = 0usize;
    if initial_check && (*ip as isize) >= limit {
        return None;
    }
    loop {
        let s = *src.get(*ip)?;
        *ip += 1;
        length += usize::from(s);
        if (*ip as isize) > limit {
            return None;
        }
        if s != 255 {
            return Some(length);
        }
    }
}

fn copy_match(out: &mut Vec<u8>, offset: usize, length: usize) -> Option<()> {
    let start = out.len().checked_sub(offset)?;
    for i in 0..length {
        let b = out[start + i];
        out.push(b);
    }
    Some(())
}

enum Step {
    /// Continue at the literal-copy step of the careful path with this literal length.
    Literals(usize),
    /// Continue at the match-copy step with (offset, full match length).
    Match(usize, usize),
}

/// Decode `src` into at most `want` bytes, as LZ4_decompress_safe(src, dst, len, want).
#[allow(clippy::result_unit_err)]
pub fn decompress(src: &[u8], want: usize) -> Result<Vec<u8>, ()> {
    let iend = src.len();
    let oend = want;
    let mut out: Vec<u8> = Vec::with_capacity(want);
    if want == 0 {
        return if src == [0] { Ok(out) } else { Err(()) };
    }
    if iend == 0 {
        return Err(());
    }
    let iend_i = iend as isize;
    let mut ip = 0usize;
    // Where to enter the safe loop: at its top, or mid-way from the fast loop.
    let mut resume: Option<(u8, Step)> = None;

    // The fast loop: only while at least FASTLOOP_SAFE_DISTANCE bytes of output remain.
    if oend >= FASTLOOP_SAFE_DISTANCE {
        loop {
            let op = out.len();
            let token = *src.get(ip).ok_or(())?;
            ip += 1;
            let mut length = usize::from(token >> 4);
            if length == RUN_MASK {
                length += read_varlen(src, &mut ip, iend_i - RUN_MASK as isize, true).ok_or(())?;
                let cpy = op + length;
                if cpy as isize > oend as isize - 32 || (ip + length) as isize > iend_i - 32 {
                    resume = Some((token, Step::Literals(length)));
                    break;
                }
            } else if ip as isize > iend_i - 17 {
                resume = Some((token, Step::Literals(length)));
                break;
            }
            out.extend_from_slice(src.get(ip..ip + length).ok_or(())?);
            ip += length;
            let op = out.len();
            let offset = usize::from(u16::from_le_bytes([
                *src.get(ip).ok_or(())?,
                *src.get(ip + 1).ok_or(())?,
            ]));
            ip += 2;
            let mut mlen = usize::from(token & 0x0F);
            if mlen == ML_MASK {
                mlen += read_varlen(src, &mut ip, iend_i - LASTLITERALS as isize + 1, false)
                    .ok_or(())?;
                mlen += MINMATCH;
                if offset > op {
                    return Err(());
                }
                if op + mlen >= oend.saturating_sub(FASTLOOP_SAFE_DISTANCE) {
                    resume = Some((token, Step::Match(offset, mlen)));
                    break;
                }
            } else {
                mlen += MINMATCH;
                if op + mlen >= oend.saturating_sub(FASTLOOP_SAFE_DISTANCE) {
                    resume = Some((token, Step::Match(offset, mlen)));
                    break;
                }
            }
            if offset > op || offset == 0 {
                return Err(());
            }
            copy_match(&mut out, offset, mlen).ok_or(())?;
        }
    }

    // The safe loop (its shortcut, then the careful path).
    loop {
        let (token, step) = match resume.take() {
            Some(r) => r,
            None => {
                let op = out.len();
                let token = *src.get(ip).ok_or(())?;
                ip += 1;
                let length = usize::from(token >> 4);
                let shortiend = iend_i - 14 - 2;
                let shortoend = oend as isize - 14 - 18;
                if length != RUN_MASK && (ip as isize) < shortiend && op as isize <= shortoend {
                    out.extend_from_slice(src.get(ip..ip + length).ok_or(())?);
                    ip += length;
                    let op = out.len();
                    let mlen = usize::from(token & 0x0F);
                    let offset = usize::from(u16::from_le_bytes([
                        *src.get(ip).ok_or(())?,
                        *src.get(ip + 1).ok_or(())?,
                    ]));
                    ip += 2;
                    if mlen != ML_MASK && offset >= 8 && offset <= op {
                        copy_match(&mut out, offset, mlen + MINMATCH).ok_or(())?;
                        continue;
                    }
                    // _copy_match with the match length not yet extended.
                    let mut mlen = mlen;
                    if mlen == ML_MASK {
                        mlen +=
                            read_varlen(src, &mut ip, iend_i - LASTLITERALS as isize + 1, false)
                                .ok_or(())?;
                    }
                    (token, Step::Match(offset, mlen + MINMATCH))
                } else {
                    let mut length = length;
                    if length == RUN_MASK {
                        length +=
                            read_varlen(src, &mut ip, iend_i - RUN_MASK as isize, true).ok_or(())?;
                    }
                    (token, Step::Literals(length))
                }
            }
        };
        let (offset, mlen) = match step {
            Step::Literals(length) => {
                let op = out.len();
                let cpy = op + length;
                if cpy as isize > oend as isize - MFLIMIT as isize
                    || (ip + length) as isize > iend_i - (2 + 1 + LASTLITERALS) as isize
                {
                    // Must be the last sequence: consume the input exactly, fit the output.
                    if ip + length != iend || cpy > oend {
                        return Err(());
                    }
                    out.extend_from_slice(&src[ip..iend]);
                    return Ok(out);
                }
                out.extend_from_slice(src.get(ip..ip + length).ok_or(())?);
                ip += length;
                let offset = usize::from(u16::from_le_bytes([
                    *src.get(ip).ok_or(())?,
                    *src.get(ip + 1).ok_or(())?,
                ]));
                ip += 2;
                let mut mlen = usize::from(token & 0x0F);
                if mlen == ML_MASK {
                    mlen += read_varlen(src, &mut ip, iend_i - LASTLITERALS as isize + 1, false)
                        .ok_or(())?;
                }
                (offset, mlen + MINMATCH)
            }
            Step::Match(offset, mlen) => (offset, mlen),
        };
        // safe_match_copy
        let op = out.len();
        if offset > op || offset == 0 {
            return Err(());
        }
        let cpy = op + mlen;
        if cpy as isize > oend as isize - MATCH_SAFEGUARD_DISTANCE as isize
            && cpy as isize > oend as isize - LASTLITERALS as isize
        {
            // The last LASTLITERALS bytes must be literals.
            return Err(());
        }
        copy_match(&mut out, offset, mlen).ok_or(())?;
    }
}

#[cfg(test)]
mod tests {
    use super::decompress;

    #[test]
    fn literals_only_block() {
        // token 0x50: five literals, no match: a valid last sequence.
        let src = [0x50u8, 1, 2, 3, 4, 5];
        assert_eq!(decompress(&src, 100).unwrap(), vec![1, 2, 3, 4, 5]);
    }

    #[test]
    fn empty_input_is_refused() {
        assert!(decompress(&[], 10).is_err());
    }

    #[test]
    fn literals_overrunning_the_output_are_refused() {
        let src = [0x50u8, 1, 2, 3, 4, 5];
        assert!(decompress(&src, 4).is_err());
    }
}
