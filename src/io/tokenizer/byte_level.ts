/**
 * The GPT-2 byte ↔ unicode map that byte-level BPE vocabularies are written in: every byte gets a
 * printable character so a token's bytes can be stored as a JSON string. Printable Latin-1 bytes
 * ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for themselves; the other 68 bytes take U+0100, U+0101, …
 * in byte order (so the space 0x20 is 'Ġ' U+0120 and '\n' is 'Ċ' U+010A).
 */

function buildByteChars(): string[] {
  const chars = new Array<string>(256);
  const printable = (b: number) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  let next = 256;
  for (let b = 0; b < 256; b++) chars[b] = String.fromCharCode(printable(b) ? b : next++);
  return chars;
}

/** BYTE_CHARS[b] is the character byte b is written as in a byte-level vocabulary. */
export const BYTE_CHARS: readonly string[] = buildByteChars();

/** The inverse of BYTE_CHARS: character code → byte value. */
const CHAR_BYTES: ReadonlyMap<number, number> = new Map(BYTE_CHARS.map((c, b) => [c.charCodeAt(0), b]));

const utf8 = new TextEncoder();

/** The UTF-8 bytes of `text` (lone surrogates become U+FFFD, as UTF-8 cannot hold them). */
export function utf8Bytes(text: string): Uint8Array {
  return utf8.encode(text);
}

/** The byte-level spelling of some bytes: what a vocabulary entry for them looks like. */
export function bytesToByteLevel(bytes: ArrayLike<number>): string {
  let s = '';
  for (let i = 0; i < bytes.length; i++) s += BYTE_CHARS[bytes[i]];
  return s;
}

/**
 * The bytes a token string stands for, by the rule of Hugging Face's ByteLevel decoder: if every
 * character is in the byte map, the mapped bytes; otherwise (an added token such as "<s> x" with
 * characters outside the map) the token's own UTF-8 bytes, unchanged.
 */
export function byteLevelToBytes(token: string): Uint8Array {
  const out = new Uint8Array(token.length);
  for (let i = 0; i < token.length; i++) {
    const b = CHAR_BYTES.get(token.charCodeAt(i));
    if (b === undefined) return utf8.encode(token);
    out[i] = b;
  }
  return out;
}
