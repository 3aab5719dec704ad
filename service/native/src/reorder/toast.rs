//! The TOAST chunks of a replayed run: what ReorderBufferToastAppendChunk collects
//! (reorderbuffer.c) for the next main-table row, and what ReorderBufferToastReset
//! drops after a row with clear_toast_afterwards.
//!
//! Receives: the tuples of a run's TOAST chunk inserts (rows on the toast relation), in
//! WAL order: each its attribute count, t_infomask, t_hoff and the bytes from
//! offsetof(HeapTupleHeaderData, t_bits) on, as `RawTuple.data` holds them.
//! Hands on: per chunk_id (va_valueid), the concatenated chunk_data of its chunks, in
//! the order the chunk_ids first came: the `ReplayChange.toast` mapping the Python
//! replay builds (`service.reorder.replay._ToastState`, `service.reorder.changes
//! .toast_chunk`), with its errors' exact messages, so that either side raises the
//! same DecodeError at the same LSN.
//!
//! The chunk tuple's layout is fixed (chunk_id oid, chunk_seq int4, chunk_data bytea,
//! no nulls); chunk_data is a plain varlena with a 4-byte or a 1-byte header, never
//! compressed or external. Little-endian headers, as the WAL's. Pure: no Python, no I/O.

/// offsetof(HeapTupleHeaderData, t_bits): where a logged tuple's data begins.
const BITS_OFFSET: usize = 23;
/// HEAP_HASNULL
const HASNULL: u16 = 0x0001;

/// (chunk_id, chunk_seq, chunk_data) of a toast-table tuple (`toast_chunk`), or the
/// reason it is not one.
pub fn chunk(
    natts: u16,
    infomask: u16,
    hoff: u8,
    data: &[u8],
) -> Result<(u32, i32, &[u8]), &'static str> {
    if natts != 3 || infomask & HASNULL != 0 {
        return Err("malformed toast chunk tuple");
    }
    let off = usize::from(hoff)
        .checked_sub(BITS_OFFSET)
        .ok_or("toast chunk tuple too short")?;
    if data.len() < off + 9 {
        return Err("toast chunk tuple too short");
    }
    let le4 = |at: usize| {
        let mut b = [0u8; 4];
        let avail = &data[at..data.len().min(at + 4)];
        b[..avail.len()].copy_from_slice(avail);
        u32::from_le_bytes(b)
    };
    let chunk_id = le4(off);
    let seq = le4(off + 4) as i32;
    let pos = off + 8;
    let first = data[pos];
    let (start, end) = if first & 0x01 != 0 {
        if first == 0x01 {
            return Err("external toast chunk");
        }
        (pos + 1, pos + usize::from(first >> 1))
    } else if first & 0x03 == 0 {
        let len = (le4(pos) >> 2) & 0x3FFF_FFFF;
        (pos + 4, pos + len as usize)
    } else {
        return Err("compressed toast chunk");
    };
    if end > data.len() || end < start {
        return Err("toast chunk length out of range");
    }
    Ok((chunk_id, seq, &data[start..end]))
}

/// The chunks held since the last reset (the ReorderBufferToastEnt hash of one
/// transaction's replay): per chunk_id its last chunk_seq and its data so far, in
/// the order the chunk_ids first came.
#[derive(Default)]
pub struct ToastHash {
    values: Vec<(u32, i32, Vec<u8>)>,
}

impl ToastHash {
    /// ReorderBufferToastAppendChunk: the chunks of one value come in chunk_seq order
    /// from 0; anything else is the error message the Python replay raises.
    pub fn append(&mut self, chunk_id: u32, seq: i32, data: &[u8]) -> Result<(), String> {
        let at = self.values.iter().position(|v| v.0 == chunk_id);
        let expected = at.map_or(0, |i| i64::from(self.values[i].1) + 1);
        if i64::from(seq) != expected {
            return Err(format!(
                "got sequence entry {seq} for toast chunk {chunk_id} instead of seq {expected}"
            ));
        }
        match at {
            Some(i) => {
                self.values[i].1 = seq;
                self.values[i].2.extend_from_slice(data);
            }
            None => self.values.push((chunk_id, seq, data.to_vec())),
        }
        Ok(())
    }

    /// The hash as another replay left it: value `chunk_id` held with `data` so far,
    /// its last chunk `last_seq` (replacing what this one held of it).
    pub fn seed(&mut self, chunk_id: u32, last_seq: i32, data: Vec<u8>) {
        self.values.retain(|v| v.0 != chunk_id);
        self.values.push((chunk_id, last_seq, data));
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The held values: (chunk_id, data), in the order their first chunks came.
    pub fn values(&self) -> impl Iterator<Item = (u32, &[u8])> {
        self.values.iter().map(|v| (v.0, v.2.as_slice()))
    }

    /// The held values as `seed` takes them: (chunk_id, last chunk_seq, data).
    pub fn entries(&self) -> impl Iterator<Item = (u32, i32, &[u8])> {
        self.values.iter().map(|v| (v.0, v.1, v.2.as_slice()))
    }

    /// ReorderBufferToastReset.
    pub fn reset(&mut self) {
        self.values.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tuple(id: u32, seq: i32, payload: &[u8]) -> Vec<u8> {
        let mut t = vec![0u8];
        t.extend_from_slice(&id.to_le_bytes());
        t.extend_from_slice(&seq.to_le_bytes());
        t.extend_from_slice(&(((payload.len() + 4) as u32) << 2).to_le_bytes());
        t.extend_from_slice(payload);
        t
    }

    #[test]
    fn chunks_of_one_value_concatenate_in_seq_order() {
        let mut h = ToastHash::default();
        for (seq, part) in [b"ab".as_slice(), b"cd"].iter().enumerate() {
            let t = tuple(7, seq as i32, part);
            let (id, s, d) = chunk(3, 0x0002, 24, &t).unwrap();
            h.append(id, s, d).unwrap();
        }
        assert_eq!(
            h.values().collect::<Vec<_>>(),
            vec![(7, b"abcd".as_slice())]
        );
        assert_eq!(
            h.append(7, 5, b"x").unwrap_err(),
            "got sequence entry 5 for toast chunk 7 instead of seq 2"
        );
        assert_eq!(
            h.append(8, 1, b"x").unwrap_err(),
            "got sequence entry 1 for toast chunk 8 instead of seq 0"
        );
        h.reset();
        assert!(h.is_empty());
        h.seed(9, 1, b"ef".to_vec());
        h.append(9, 2, b"g").unwrap();
        assert_eq!(h.values().collect::<Vec<_>>(), vec![(9, b"efg".as_slice())]);
    }

    #[test]
    fn short_header_and_damaged_chunks_are_refused() {
        let mut t = vec![0u8];
        t.extend_from_slice(&9u32.to_le_bytes());
        t.extend_from_slice(&0i32.to_le_bytes());
        t.push((3 << 1) | 1); // a 1-byte header: 2 bytes of data
        t.extend_from_slice(b"zz");
        assert_eq!(chunk(3, 2, 24, &t).unwrap(), (9, 0, b"zz".as_slice()));
        assert_eq!(chunk(2, 2, 24, &t), Err("malformed toast chunk tuple"));
        assert_eq!(chunk(3, 1, 24, &t), Err("malformed toast chunk tuple"));
        assert_eq!(chunk(3, 2, 20, &t), Err("toast chunk tuple too short"));
        assert_eq!(chunk(3, 2, 24, &t[..8]), Err("toast chunk tuple too short"));
        let mut ext = t.clone();
        ext[9] = 0x01;
        assert_eq!(chunk(3, 2, 24, &ext), Err("external toast chunk"));
        let mut comp = t.clone();
        comp[9] = 0x02;
        assert_eq!(chunk(3, 2, 24, &comp), Err("compressed toast chunk"));
        let mut long = t.clone();
        long[9] = (9 << 1) | 1;
        assert_eq!(
            chunk(3, 2, 24, &long),
            Err("toast chunk length out of range")
        );
        let mut four = t[..10].to_vec(); // a 4-byte header cut after its first byte
        four[9] = 0x40;
        assert_eq!(
            chunk(3, 2, 24, &four),
            Err("toast chunk length out of range")
        );
    }
}
