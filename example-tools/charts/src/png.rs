//! A minimal PNG writer: 8-bit grayscale, zlib with stored (uncompressed)
//! blocks. A chart of at most 64 bars is a few kilobytes, so compression
//! would buy nothing worth a dependency in an example.

const BAR: usize = 6;
const GAP: usize = 2;
const HEIGHT: usize = 50;

/// White bars on black, one per value, scaled to the highest value.
pub(crate) fn bar_chart(values: &[u32]) -> Vec<u8> {
    let width = values.len() * (BAR + GAP) + GAP;
    let max = values.iter().copied().max().unwrap_or(0).max(1) as usize;
    let mut raw = Vec::with_capacity((width + 1) * HEIGHT);
    for row in 0..HEIGHT {
        raw.push(0); // filter: none
        let from_bottom = HEIGHT - row;
        for x in 0..width {
            let column = x.checked_sub(GAP).map(|x| (x / (BAR + GAP), x % (BAR + GAP)));
            let lit = match column {
                Some((bar, offset)) if offset < BAR && bar < values.len() => {
                    from_bottom <= (values[bar] as usize * HEIGHT).div_ceil(max)
                }
                _ => false,
            };
            raw.push(if lit { 255 } else { 0 });
        }
    }
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut header = Vec::with_capacity(13);
    header.extend_from_slice(&(width as u32).to_be_bytes());
    header.extend_from_slice(&(HEIGHT as u32).to_be_bytes());
    header.extend_from_slice(&[8, 0, 0, 0, 0]); // 8-bit, grayscale, deflate, no filter choice, no interlace
    chunk(&mut out, b"IHDR", &header);
    chunk(&mut out, b"IDAT", &zlib_stored(&raw));
    chunk(&mut out, b"IEND", &[]);
    out
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let start = out.len();
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let crc = crc32(&out[start..]);
    out.extend_from_slice(&crc.to_be_bytes());
}

fn zlib_stored(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x78, 0x01];
    let mut blocks = data.chunks(65_535).peekable();
    if blocks.peek().is_none() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(block) = blocks.next() {
        out.push(u8::from(blocks.peek().is_none()));
        let len = block.len() as u16;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(block);
    }
    let (mut a, mut b) = (1u32, 0u32);
    for &byte in data {
        a = (a + u32::from(byte)) % 65_521;
        b = (b + a) % 65_521;
    }
    out.extend_from_slice(&((b << 16) | a).to_be_bytes());
    out
}

fn crc32(data: &[u8]) -> u32 {
    let mut crc = 0xffff_ffffu32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xedb8_8320 } else { crc >> 1 };
        }
    }
    !crc
}
