// The parts of a rich tool result (contract 0.2, docs/contract.md): text as
// text, a link as its text, and an image drawn only when its bytes are the
// raster type it declares. The image is decoded here from the base64 the
// service sent, checked by its first bytes, and shown through a `blob:` URL
// made from those bytes (the policy allows `img-src 'self' blob:` and
// nothing else), so no address a tool wrote is ever loaded. The URLs are
// collected by the caller and revoked when its view is cleared.

import { el } from './dom.js';

const starts = (bytes, prefix, at = 0) => prefix.every((b, i) => bytes[at + i] === b);

/** The raster types a result may carry and the bytes each file begins with. */
const SIGNATURES = {
  'image/png': (b) => starts(b, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
  'image/jpeg': (b) => starts(b, [0xff, 0xd8, 0xff]),
  'image/gif': (b) => starts(b, [0x47, 0x49, 0x46, 0x38]) && (b[4] === 0x37 || b[4] === 0x39) && b[5] === 0x61,
  'image/webp': (b) => starts(b, [0x52, 0x49, 0x46, 0x46]) && starts(b, [0x57, 0x45, 0x42, 0x50], 8),
};

/** The size as the model's projection writes it: `N B`, one decimal in KB from 1,024 bytes and in MB from 1,048,576. */
function size(n) {
  if (n >= 1048576) return `${(n / 1048576).toFixed(1)} MB`;
  if (n >= 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${n} B`;
}

/** The bytes of a base64 text, or null when it is not base64. */
function decode(text) {
  try {
    const binary = atob(String(text));
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i += 1) bytes[i] = binary.charCodeAt(i);
    return bytes;
  } catch {
    return null;
  }
}

function imagePart(part, urls) {
  const type = String(part.mime_type);
  const bytes = decode(part.data);
  const projection = `[image: ${type}, ${size(bytes ? bytes.length : 0)}]`;
  const matches = SIGNATURES[type];
  if (!bytes || !matches || !matches(bytes)) {
    return el('p', { class: 'part part-refused error', 'data-part': 'image' }, projection,
      ` (not drawn: ${bytes ? `its bytes are not ${type}` : 'its data is not base64'})`);
  }
  const url = URL.createObjectURL(new Blob([bytes], { type }));
  urls.push(url);
  return el('figure', { class: 'part part-image', 'data-part': 'image' },
    el('img', { src: url, alt: projection }), el('figcaption', {}, projection));
}

/**
 * The view of a result's parts; each `blob:` URL it makes is pushed on
 * `urls`, for `revoke` when the view goes away.
 */
export function partsView(parts, urls) {
  return el('div', { class: 'parts' }, (Array.isArray(parts) ? parts : []).map((part) => {
    switch (part && part.type) {
      case 'text':
        return el('pre', { class: 'part part-text' }, part.text);
      case 'image':
        return imagePart(part, urls);
      case 'resource_link':
        return el('p', { class: 'part part-link' },
          `[resource link: ${part.name}, ${part.uri}${part.mime_type ? `, ${part.mime_type}` : ''}]`);
      default:
        return el('pre', { class: 'part' }, JSON.stringify(part));
    }
  }));
}

/** Revokes and forgets every URL in `urls`. */
export function revoke(urls) {
  for (const url of urls.splice(0)) URL.revokeObjectURL(url);
}
