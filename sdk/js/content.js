// `Content`: a rich result of text, images and resource links (contract
// 0.2's `output.parts`), the twin of the Rust SDK's `lovia::Content` and the
// Python SDK's `lovia.Content`. The host checks the parts (at most 256,
// raster image types only, bounded link fields) and refuses a result
// outside them as an error the model reads; this checks only the types, so
// a wrong type is caught where the tool wrote it.

function text(what, value) {
  if (typeof value !== "string") throw new TypeError(`Content: ${what} must be a string, got ${typeof value}`);
  return value;
}

/** A result made of parts, in order, for clients that show images and links.
 *
 * ```ts
 * return new Content().text("Sales rose 12% this week.")
 *   .image("image/png", png)
 *   .link("https://example.com/sales.csv", "sales.csv", "text/csv");
 * ```
 */
export class Content {
  #parts = [];

  /** Adds a text part, shown verbatim. */
  text(value) {
    this.#parts.push({ type: "text", text: text("text", value) });
    return this;
  }

  /** Adds an image: its media type (`image/png`, `image/jpeg`, `image/gif`,
   * `image/webp`) and its encoded bytes. */
  image(mimeType, data) {
    if (!(data instanceof Uint8Array)) throw new TypeError("Content: image data must be a Uint8Array");
    this.#parts.push({ type: "image", mimeType: text("the image's mimeType", mimeType), data });
    return this;
  }

  /** Adds a link to a resource: where it is, what to call it, and its media type when known. */
  link(uri, name, mimeType) {
    if (mimeType !== undefined) text("the link's mimeType", mimeType);
    this.#parts.push({ type: "link", uri: text("the link's uri", uri), name: text("the link's name", name), mimeType });
    return this;
  }

  /** The parts so far, in order. */
  get parts() {
    return [...this.#parts];
  }
}
