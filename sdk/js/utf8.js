// UTF-8 by hand: QuickJS as componentize-qjs builds it has no TextEncoder
// or TextDecoder.

/** The UTF-8 bytes of `text` (a lone surrogate becomes U+FFFD, as TextEncoder does). */
export function encode(text) {
  const out = [];
  for (const ch of text) {
    let c = ch.codePointAt(0);
    if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd;
    if (c < 0x80) out.push(c);
    else if (c < 0x800) out.push(0xc0 | (c >> 6), 0x80 | (c & 63));
    else if (c < 0x10000) out.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
    else out.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 63), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
  }
  return Uint8Array.from(out);
}

/** The text `bytes` encode, or undefined when they are not UTF-8. */
export function decode(bytes) {
  let out = "";
  for (let i = 0; i < bytes.length; ) {
    const b = bytes[i];
    const need = b < 0x80 ? 0 : b >= 0xc2 && b < 0xe0 ? 1 : b >= 0xe0 && b < 0xf0 ? 2 : b >= 0xf0 && b < 0xf5 ? 3 : -1;
    if (need < 0 || i + need >= bytes.length) return undefined;
    let c = need === 0 ? b : b & (0x3f >> need);
    for (let k = 1; k <= need; k++) {
      const next = bytes[i + k];
      if ((next & 0xc0) !== 0x80) return undefined;
      c = (c << 6) | (next & 63);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
    if ((need === 2 && (c < 0x800 || (c >= 0xd800 && c <= 0xdfff))) || (need === 3 && (c < 0x10000 || c > 0x10ffff))) {
      return undefined;
    }
    out += String.fromCodePoint(c);
    i += need + 1;
  }
  return out;
}
