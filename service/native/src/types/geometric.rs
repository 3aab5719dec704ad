//! Geometric types' output text: point, line, lseg, box, path, polygon and circle
//! (geo_ops.c point_out, line_out, lseg_out, box_out, path_out, poly_out, circle_out,
//! which print through pair_encode / single_encode / path_encode and float8out).
//!
//! Receives: a datum's stored bytes as deform hands them on: the fixed-length
//! little-endian image (point 16 bytes, line 24, lseg 32, box 32, circle 24) or, for
//! path and polygon, the varlena payload without its header:
//! - PATH {int32 npts, int32 closed, int32 padding, Point p[npts]} (points at 12);
//! - POLYGON {int32 npts, BOX boundbox, Point p[npts]} (points at 36).
//!
//! Hands on: appended to a String, the output function's text, as the Python reference
//! service.types.geometric prints it: every coordinate with float8out's shortest
//! round-trip digits (`super::float::float8`), in the shapes `(x,y)` (point), `{A,B,C}`
//! (line), `[(x1,y1),(x2,y2)]` (lseg), `(hx,hy),(lx,ly)` (box), `((..),..)` for a
//! closed path and `[(..),..]` for an open one, `((..),..)` (polygon, its bounding box
//! not shown) and `<(x,y),r>` (circle). Also `point_xy`, a point's coordinates.
//!
//! Errors: a size or point count the Python reference rejects (its DecodeError) and a
//! coordinate whose shortest digits `float8` leaves to Python (a rounding-bound case)
//! are `Err(reason)`; `out` is then as it was. A path or polygon of 0 points prints
//! `[]` / `()` as the Python reference does (PostgreSQL's input and receive functions
//! never make one).
//!
//! Pure, no panics.

use super::float::float8;
use super::undo_on_err;

const BAD_SIZE: &str = "geometric datum size Python decides";
const BAD_COUNT: &str = "geometric point count Python decides";

/// Where a path's and a polygon's points start in the payload.
const PATH_POINTS: usize = 12;
const POLYGON_POINTS: usize = 36;

/// The little-endian float8 at `at`, if the bytes are there.
fn f8_at(d: &[u8], at: usize) -> Option<f64> {
    let bytes = d.get(at..at.checked_add(8)?)?;
    Some(f64::from_le_bytes(bytes.try_into().ok()?))
}

/// The little-endian int32 at `at`, if the bytes are there.
fn i32_at(d: &[u8], at: usize) -> Option<i32> {
    let bytes = d.get(at..at.checked_add(4)?)?;
    Some(i32::from_le_bytes(bytes.try_into().ok()?))
}

/// The `N` float8s of a fixed-length image of exactly `8 * N` bytes.
fn fixed<const N: usize>(d: &[u8]) -> Result<[f64; N], &'static str> {
    if d.len() != 8 * N {
        return Err(BAD_SIZE);
    }
    let mut v = [0.0; N];
    for (i, slot) in v.iter_mut().enumerate() {
        *slot = f8_at(d, 8 * i).ok_or(BAD_SIZE)?;
    }
    Ok(v)
}

/// pair_encode within parentheses: `(x,y)`.
fn pair(out: &mut String, x: f64, y: f64) -> Result<(), &'static str> {
    out.push('(');
    float8(out, x)?;
    out.push(',');
    float8(out, y)?;
    out.push(')');
    Ok(())
}

/// The points of `coords` (16 bytes each: x, y), comma-separated.
fn points(out: &mut String, coords: &[u8]) -> Result<(), &'static str> {
    if coords.len() % 16 != 0 {
        return Err(BAD_COUNT);
    }
    for (i, p) in coords.chunks_exact(16).enumerate() {
        if i > 0 {
            out.push(',');
        }
        let (x, y) = point_xy(p)?;
        pair(out, x, y)?;
    }
    Ok(())
}

/// The point bytes of a path or polygon payload whose points start at `at`: the int32
/// npts at 0 must be non-negative and the payload exactly `at + 16 * npts` bytes.
fn counted(d: &[u8], at: usize) -> Result<&[u8], &'static str> {
    let npts = i32_at(d, 0).ok_or(BAD_COUNT)?;
    let npts = usize::try_from(npts).map_err(|_| BAD_COUNT)?;
    let size = npts
        .checked_mul(16)
        .and_then(|n| n.checked_add(at))
        .ok_or(BAD_COUNT)?;
    if d.len() != size {
        return Err(BAD_COUNT);
    }
    d.get(at..).ok_or(BAD_COUNT)
}

/// A point's coordinates from its 16 stored bytes.
pub fn point_xy(d: &[u8]) -> Result<(f64, f64), &'static str> {
    let [x, y] = fixed::<2>(d)?;
    Ok((x, y))
}

/// point_out: `(x,y)`.
pub fn point_text(out: &mut String, d: &[u8]) -> Result<(), &'static str> {
    let (x, y) = point_xy(d)?;
    undo_on_err(out, |out| pair(out, x, y))
}

/// line_out: `{A,B,C}` of the line Ax + By + C = 0.
pub fn line_text(out: &mut String, d: &[u8]) -> Result<(), &'static str> {
    let abc = fixed::<3>(d)?;
    undo_on_err(out, |out| {
        out.push('{');
        for (i, v) in abc.into_iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            float8(out, v)?;
        }
        out.push('}');
        Ok(())
    })
}

/// lseg_out: the two end points as an open path, `[(x1,y1),(x2,y2)]`.
pub fn lseg_text(out: &mut String, d: &[u8]) -> Result<(), &'static str> {
    fixed::<4>(d)?;
    undo_on_err(out, |out| {
        out.push('[');
        points(out, d)?;
        out.push(']');
        Ok(())
    })
}

/// box_out: the high corner, then the low one, `(hx,hy),(lx,ly)`.
pub fn box_text(out: &mut String, d: &[u8]) -> Result<(), &'static str> {
    fixed::<4>(d)?;
    undo_on_err(out, |out| points(out, d))
}

/// circle_out: `<(x,y),r>`.
pub fn circle_text(out: &mut String, d: &[u8]) -> Result<(), &'static str> {
    let [x, y, r] = fixed::<3>(d)?;
    undo_on_err(out, |out| {
        out.push('<');
        pair(out, x, y)?;
        out.push(',');
        float8(out, r)?;
        out.push('>');
        Ok(())
    })
}

/// path_out: `((..),..)` when the int32 `closed` is not zero, else `[(..),..]`.
pub fn path_text(out: &mut String, d: &[u8]) -> Result<(), &'static str> {
    let coords = counted(d, PATH_POINTS)?;
    let closed = i32_at(d, 4).ok_or(BAD_COUNT)? != 0;
    let (open, close) = if closed { ('(', ')') } else { ('[', ']') };
    undo_on_err(out, |out| {
        out.push(open);
        points(out, coords)?;
        out.push(close);
        Ok(())
    })
}

/// poly_out: the points as a closed path, `((..),..)`.
pub fn polygon_text(out: &mut String, d: &[u8]) -> Result<(), &'static str> {
    let coords = counted(d, POLYGON_POINTS)?;
    undo_on_err(out, |out| {
        out.push('(');
        points(out, coords)?;
        out.push(')');
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The type's text function by name.
    fn text_of(kind: &str, d: &[u8], out: &mut String) -> Result<(), &'static str> {
        match kind {
            "point" => point_text(out, d),
            "line" => line_text(out, d),
            "lseg" => lseg_text(out, d),
            "box" => box_text(out, d),
            "circle" => circle_text(out, d),
            "path" => path_text(out, d),
            "polygon" => polygon_text(out, d),
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

    fn f8s(v: &[f64]) -> Vec<u8> {
        v.iter().flat_map(|f| f.to_le_bytes()).collect()
    }

    /// PostgreSQL 15: (type, the literal inserted, the stored bytes from pageinspect's
    /// t_data, `SELECT v::text`).
    const SERVER: &[(&str, &str, &str, &str)] = &[
        ("point", "(0,0)", "00000000000000000000000000000000", "(0,0)"),
        ("point", "(-0,-0)", "00000000000000800000000000000080", "(-0,-0)"),
        ("point", "(NaN,Infinity)", "000000000000f87f000000000000f07f", "(NaN,Infinity)"),
        ("point", "(-Infinity,NaN)", "000000000000f0ff000000000000f87f", "(-Infinity,NaN)"),
        ("point", "(1e308,1e-308)", "a0c8eb85f3cce17fd2e81978d6300700", "(1e+308,1e-308)"),
        ("point", "(5e-324,1.7976931348623157e308)", "0100000000000000ffffffffffffef7f", "(5e-324,1.7976931348623157e+308)"),
        ("point", "(0.1,0.2)", "9a9999999999b93f9a9999999999c93f", "(0.1,0.2)"),
        ("point", "(123456789012345,1e15)", "40de77832112dc4200003426f56b0c43", "(123456789012345,1e+15)"),
        ("point", "(0.0001,0.00001234)", "2d431cebe2361a3ffc8093affce0e93e", "(0.0001,1.234e-05)"),
        ("point", "(-1.5,2.25)", "000000000000f8bf0000000000000240", "(-1.5,2.25)"),
        ("point", "(-2.2250738585072014e-308,4.9406564584124654e-324)", "00000000000010800100000000000000", "(-2.2250738585072014e-308,5e-324)"),
        ("point", "(3.141592653589793,-2.718281828459045)", "182d4454fb2109406957148b0abf05c0", "(3.141592653589793,-2.718281828459045)"),
        ("point", "(1e22,1e21)", "92d54d06cff0804450efe2d6e41a4b44", "(1e+22,1e+21)"),
        ("point", "(100,-0.001)", "0000000000005940fca9f1d24d6250bf", "(100,-0.001)"),
        ("line", "{1,2,3}", "000000000000f03f00000000000000400000000000000840", "{1,2,3}"),
        ("line", "{0,-1,1e300}", "0000000000000000000000000000f0bf9c7500883ce4377e", "{0,-1,1e+300}"),
        ("line", "[(0,0),(1,1)]", "000000000000f03f000000000000f0bf0000000000000000", "{1,-1,0}"),
        ("line", "{-0,1,-0}", "0000000000000080000000000000f03f0000000000000080", "{-0,1,-0}"),
        ("line", "{NaN,1,Infinity}", "000000000000f87f000000000000f03f000000000000f07f", "{NaN,1,Infinity}"),
        ("line", "{1.5,-Infinity,0.3}", "000000000000f83f000000000000f0ff333333333333d33f", "{1.5,-Infinity,0.3}"),
        ("lseg", "[(0,0),(1,1)]", "00000000000000000000000000000000000000000000f03f000000000000f03f", "[(0,0),(1,1)]"),
        ("lseg", "[(-0,NaN),(Infinity,-Infinity)]", "0000000000000080000000000000f87f000000000000f07f000000000000f0ff", "[(-0,NaN),(Infinity,-Infinity)]"),
        ("lseg", "[(1e-320,2),(3,4e100)]", "e807000000000000000000000000004000000000000008407dc39425ad49d254", "[(1e-320,2),(3,4e+100)]"),
        ("lseg", "[(0.1,0.2),(0.3,0.4)]", "9a9999999999b93f9a9999999999c93f333333333333d33f9a9999999999d93f", "[(0.1,0.2),(0.3,0.4)]"),
        ("box", "(1,1),(0,0)", "000000000000f03f000000000000f03f00000000000000000000000000000000", "(1,1),(0,0)"),
        ("box", "(0,0),(1,1)", "000000000000f03f000000000000f03f00000000000000000000000000000000", "(1,1),(0,0)"),
        ("box", "(-0,-0),(0,0)", "0000000000000080000000000000008000000000000000000000000000000000", "(-0,-0),(0,0)"),
        ("box", "(Infinity,Infinity),(-Infinity,-Infinity)", "000000000000f07f000000000000f07f000000000000f0ff000000000000f0ff", "(Infinity,Infinity),(-Infinity,-Infinity)"),
        ("box", "(1e16,-1e-5),(0.5,-7)", "0080e03779c34143f168e388b5f8e4be000000000000e03f0000000000001cc0", "(1e+16,-1e-05),(0.5,-7)"),
        ("circle", "<(0,0),1>", "00000000000000000000000000000000000000000000f03f", "<(0,0),1>"),
        ("circle", "<(-0,NaN),Infinity>", "0000000000000080000000000000f87f000000000000f07f", "<(-0,NaN),Infinity>"),
        ("circle", "<(1e-310,2.5e-5),0>", "2be6708b681200002d431cebe236fa3e0000000000000000", "<(1e-310,2.5e-05),0>"),
        ("circle", "<(1.5,-2.5),1e100>", "000000000000f83f00000000000004c07dc39425ad49b254", "<(1.5,-2.5),1e+100>"),
        ("path", "[(0,0),(1,1),(2,0)]", "03000000000000000000000000000000000000000000000000000000000000000000f03f000000000000f03f00000000000000400000000000000000", "[(0,0),(1,1),(2,0)]"),
        ("path", "((0,0),(1,1),(2,0))", "03000000010000000000000000000000000000000000000000000000000000000000f03f000000000000f03f00000000000000400000000000000000", "((0,0),(1,1),(2,0))"),
        ("path", "((1e-300,-0))", "01000000010000000000000059f3f8c21f6ea5010000000000000080", "((1e-300,-0))"),
        ("path", "[(NaN,Infinity)]", "010000000000000000000000000000000000f87f000000000000f07f", "[(NaN,Infinity)]"),
        ("path", "[(-0,-0),(0.1,1e20)]", "020000000000000000000000000000000000008000000000000000809a9999999999b93f408cb5781daf1544", "[(-0,-0),(0.1,1e+20)]"),
        ("path", "((1,2),(3,4),(5,6),(7,8),(9,10))", "050000000100000000000000000000000000f03f000000000000004000000000000008400000000000001040000000000000144000000000000018400000000000001c40000000000000204000000000000022400000000000002440", "((1,2),(3,4),(5,6),(7,8),(9,10))"),
        ("polygon", "((0,0),(1,1),(2,0))", "030000000000000000000040000000000000f03f0000000000000000000000000000000000000000000000000000000000000000000000000000f03f000000000000f03f00000000000000400000000000000000", "((0,0),(1,1),(2,0))"),
        ("polygon", "((0,0))", "01000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000", "((0,0))"),
        ("polygon", "((-0,1.5),(Infinity,NaN))", "02000000000000000000f07f000000000000f87f0000000000000080000000000000f83f0000000000000080000000000000f83f000000000000f07f000000000000f87f", "((-0,1.5),(Infinity,NaN))"),
        ("polygon", "((1e300,-1e-300),(2,3),(-4,5))", "030000009c7500883ce4377e000000000000144000000000000010c059f3f8c21f6ea5819c7500883ce4377e59f3f8c21f6ea5810000000000000040000000000000084000000000000010c00000000000001440", "((1e+300,-1e-300),(2,3),(-4,5))"),
    ];

    /// service.types.geometric on random stored forms: (type, stored bytes, its text or
    /// None where it raises).
    const PYTHON: &[(&str, &str, Option<&str>)] = &[
        ("point", "8a81c7c1708d56c30000000000b055c0", Some("(-2.5391859658262056e+16,-86.75)")),
        ("point", "81d1e5ed1aa41a41cdccccccfa2e14c1", Some("(436486.732322,-330686.7)")),
        ("point", "4c9137452bb2e53f88579f57d3c54e43", Some("(0.6779991485496253,1.7323521600302864e+16)")),
        ("line", "b6f2a253adf4d9003646c34c1acf144d0000000000c032c0", Some("{1.4784897218736648e-304,2.1400810121577243e+63,-18.75}")),
        ("line", "76726206d823a6dfc6de554c211e3c43a7e7accecc0ece31", Some("{-5.797833380365205e+152,7.914427711348422e+15,8.710204954362182e-69}")),
        ("lseg", "0000000000704c40000000000000f0ffcdcccccca4fe1ac100000000005051c0", Some("[(56.875,-Infinity),(-442281.2,-69.25)]")),
        ("lseg", "cc1803e15abb7543000000000000108001000000000000000000000000205e40", Some("[(9.787157611921734e+16,-2.2250738585072014e-308),(5e-324,120.5)]")),
        ("lseg", "30f59f7d189ae03f21b07268fbb228c12436a6dabc3edc3f0000000000005940", Some("[(0.5188105062112864,-809341.704),(0.4413292060133662,100)]")),
        ("box", "0000000000000080fefc62f81b6865c347c63fc4b9daef3f0000000000004640", Some("(-0,-4.820355081253067e+16),(0.9954499085417375,44)")),
        ("box", "f6c0b59dac99d23f0000000000704e4057ec2ffbd1b018410100000000000000", Some("(0.290629533780716,60.875),(404532.4953,5e-324)")),
        ("box", "0000000000802b40000000000000f07f05208cd6d2d3005ca0a6962d23982041", Some("(13.75,Infinity),(1.5288540038613742e+135,543761.58904)")),
        ("circle", "00000000000030c000ab47632a56a73f0000000000e855c0", Some("<(-16,0.04557926618493546),-87.625>")),
        ("circle", "000000000000f0ff00000000008055400000000000f85240", Some("<(-Infinity,86),75.875>")),
        ("circle", "5a0d89cb42ea2dc17202a00279f2139a000000000000f07f", Some("<(-980257.39753,-4.694438931057222e-183),Infinity>")),
        ("path", "020000000200000007000000b2da8e3c5f2ec58d1b2fdde4aff920c1c2b4e1146694504342442a2f64f1f848", Some("((-2.481663219860739e-242,-556247.947),(1.866706314112692e+16,3.4765377287759873e+43))")),
        ("path", "000000000001000000000000", Some("()")),
        ("path", "0300000002000000000000008483dc9b38f566d5000000000000f0ff01000000000000004c95acf2fcb9c83fc09aa65209e4c825ed36900f8acd4b7c", Some("((-2.5709912344975704e+103,-Infinity),(5e-324,0.19317590569805032),(1.1490796092503208e-126,5.41895745834084e+290))")),
        ("path", "000000000200000007000000", Some("()")),
        ("polygon", "030000000000000000c85a4000000000a2ab29c1c5a31fbe9909ee6f5ed231813409e73f52b81ec5bd672141e65aa6fc805ce13f0000000000c05b40000000000000f0ff0000000000b047c0b11d98440b3d66c3", Some("((570334.885,0.5425419745032201),(111,-Infinity),(-47.375,-5.007654473911028e+16))")),
        ("polygon", "030000009cd3fb95eeba45a60000000000a030c00000000000b046400000000000001bc06045889fcab79a3f000000000000008000000000000040c0000000000040354001e0e250a2618b999a9999993d5b2a41", Some("((0.026091733920173055,-0),(-32,21.25),(-1.2586009752978635e-185,863646.8))")),
        ("polygon", "030000008bba47dd6d2d1a0a0000000000804d4000000000006040400000000000802e4000000000006058c03f0f9d85cd1d4483000000000000f0ff0000000000001080fa039dd12d32d23f0000000000305fc0", Some("((-97.5,-6.299482343865942e-293),(-Infinity,-2.2250738585072014e-308),(0.28431268186619685,-124.75))")),
        ("polygon", "030000007d224f1a404c23c1c976be9f8c622641000000000000f87ff47450ade2b56fc3010000000000000068ca2b4907e7fd1ad06eab2199303843c2d73cc6d80ad63f0000000084ea0ec17bdb563f259bd147", Some("((5e-324,1.1530003221430364e-178),(6.808833694068432e+15,0.34441203459880054),(-253264.5,9.360974963530835e+37))")),
        ("point", "b898d409fb1ec43f250681951dcf27", None),
        ("line", "0000000000c05c4000000000c05308c16c33e1e7a8a7e63f7053f1a53985f0c3", None),
        ("path", "0200000000000000000000006d5ce67b2ea47b3500000000007049c0378941404d5724c1", None),
        ("path", "ffffffff0000000000000000", None),
        ("polygon", "01000000000000000000f4bf3a57256fc8f086493a92cb4fbfe42441e20e3d35b888e33f0000000000000080", None),
        ("polygon", "000000", None),
    ];

    #[test]
    fn prints_as_the_server() {
        for (kind, literal, stored, expected) in SERVER {
            assert_eq!(
                text(kind, &unhex(stored)).as_deref(),
                Ok(*expected),
                "{kind} {literal}"
            );
        }
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
    fn point_xy_reads_the_coordinates() {
        assert_eq!(point_xy(&f8s(&[-1.5, 2.25])), Ok((-1.5, 2.25)));
        let (x, y) = point_xy(&f8s(&[-0.0, f64::NAN])).unwrap();
        assert!(x == 0.0 && x.is_sign_negative() && y.is_nan());
        assert!(point_xy(&[0; 15]).is_err());
        assert!(point_xy(&[0; 17]).is_err());
        assert!(point_xy(&[]).is_err());
    }

    #[test]
    fn sizes_python_rejects_are_err() {
        assert!(text("point", &[0; 24]).is_err());
        assert!(text("line", &[0; 16]).is_err());
        assert!(text("lseg", &[0; 24]).is_err());
        assert!(text("box", &[0; 33]).is_err());
        assert!(text("circle", &[0; 32]).is_err());
        // npts negative, too many, too few; a payload shorter than its count
        let mut path = vec![0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0];
        assert!(text("path", &path).is_err());
        path[..4].copy_from_slice(&1i32.to_le_bytes());
        assert!(text("path", &path).is_err());
        path.extend_from_slice(&f8s(&[1.0, 2.0]));
        assert_eq!(text("path", &path).as_deref(), Ok("[(1,2)]"));
        path.push(0);
        assert!(text("path", &path).is_err());
        assert!(text("path", &[0; 11]).is_err());
        assert!(text("polygon", &[0; 35]).is_err());
        assert!(text("path", &i32::MAX.to_le_bytes()).is_err());
    }

    #[test]
    fn empty_paths_print_as_python_does() {
        // The server never makes one (path_in and path_recv refuse 0 points); the
        // Python reference prints the empty shapes.
        assert_eq!(text("path", &[0; 12]).as_deref(), Ok("[]"));
        let closed = [0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(text("path", &closed).as_deref(), Ok("()"));
        assert_eq!(text("polygon", &[0; 36]).as_deref(), Ok("()"));
    }

    #[test]
    fn any_nonzero_closed_flag_is_closed() {
        let mut path = 1i32.to_le_bytes().to_vec();
        path.extend_from_slice(&0x0100i32.to_le_bytes());
        path.extend_from_slice(&[0; 4]);
        path.extend_from_slice(&f8s(&[0.5, -0.0]));
        assert_eq!(text("path", &path).as_deref(), Ok("((0.5,-0))"));
        path[4..8].copy_from_slice(&(-1i32).to_le_bytes());
        assert_eq!(text("path", &path).as_deref(), Ok("((0.5,-0))"));
    }

    #[test]
    fn a_rounding_bound_prints_its_longer_digits() {
        // The double just below 1e23: `{:e}` says 1e23, float8out prints
        // 9.999999999999999e+22 (float.rs searches the open interval).
        let bound = 99_999_999_999_999_991_611_392.0f64;
        let cases: [(&str, Vec<u8>); 7] = [
            ("point", f8s(&[1.0, bound])),
            ("line", f8s(&[1.0, 2.0, bound])),
            ("lseg", f8s(&[1.0, 2.0, 3.0, bound])),
            ("box", f8s(&[bound, 2.0, 3.0, 4.0])),
            ("circle", f8s(&[1.0, 2.0, bound])),
            (
                "path",
                [
                    &[1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0][..],
                    &f8s(&[1.0, bound]),
                ]
                .concat(),
            ),
            (
                "polygon",
                [&[1, 0, 0, 0][..], &f8s(&[0.0; 4]), &f8s(&[bound, 1.0])].concat(),
            ),
        ];
        for (kind, d) in cases {
            let mut out = String::from("kept ");
            text_of(kind, &d, &mut out).unwrap();
            assert!(out.starts_with("kept "), "{kind}");
            assert!(out.contains("9.999999999999999e+22"), "{kind}: {out}");
        }
    }

    #[test]
    fn a_bound_prints_as_python_does() {
        // A random line of the differential run: its B, -47635264444366784, is 8 apart
        // from its neighbours and 47635264444366780 lies exactly on the lower bound, so
        // float8 searches the open interval, printing what Python prints.
        let d = unhex("db8afd6551611e41f89fffa8802765c30000000000000000");
        assert_eq!(
            text("line", &d).as_deref(),
            Ok("{497748.3496,-4.7635264444366784e+16,0}")
        );
    }

    #[test]
    fn appends_to_what_out_holds() {
        let mut out = String::from("x=");
        point_text(&mut out, &f8s(&[1.0, 2.0])).unwrap();
        assert_eq!(out, "x=(1,2)");
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
    }
}
