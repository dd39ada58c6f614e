// Rust's ways of showing bytes and strings in messages, so that the SDK's messages are
// the Rust SDK's byte for byte. Internal to the SDK.

/**
 * `bytes` as Rust's `<[u8]>::escape_ascii` shows them: printable ASCII as it is, `\t`,
 * `\r`, `\n`, `\\`, `\'` and `\"` escaped, any other byte as `\xNN`.
 */
export function escapeAscii(bytes: Uint8Array): string {
  let out = '';
  for (const byte of bytes) {
    switch (byte) {
      case 0x09:
        out += '\\t';
        break;
      case 0x0a:
        out += '\\n';
        break;
      case 0x0d:
        out += '\\r';
        break;
      case 0x22:
      case 0x27:
      case 0x5c:
        out += '\\' + String.fromCharCode(byte);
        break;
      default:
        out += byte >= 0x20 && byte < 0x7f ? String.fromCharCode(byte) : '\\x' + byte.toString(16).padStart(2, '0');
    }
  }
  return out;
}

/**
 * `text` as Rust's `{:?}` shows a string: in double quotes, with `\0`, `\t`, `\r`, `\n`,
 * `\\` and `\"` escaped, and characters that are not printable as `\u{XXXX}`.
 *
 * The engine has no Unicode property tables, so "not printable" is an approximation of
 * Rust's: control and format characters, separators other than the space, private
 * use, noncharacters and the common combining marks.
 */
export function debugString(text: string): string {
  let out = '"';
  for (const char of text) {
    const code = char.codePointAt(0)!;
    switch (char) {
      case '\0':
        out += '\\0';
        break;
      case '\t':
        out += '\\t';
        break;
      case '\r':
        out += '\\r';
        break;
      case '\n':
        out += '\\n';
        break;
      case '\\':
      case '"':
        out += '\\' + char;
        break;
      default:
        out += escapedInDebug(code) ? `\\u{${code.toString(16)}}` : char;
    }
  }
  return out + '"';
}

/** Ranges of code points Rust's `{:?}` escapes (besides the ones with a short escape). */
const ESCAPED: readonly (readonly [number, number])[] = [
  [0x0000, 0x001f], // Cc
  [0x007f, 0x00a0], // Cc, NBSP
  [0x00ad, 0x00ad], // soft hyphen
  [0x0300, 0x036f], // combining diacritical marks
  [0x0600, 0x0605],
  [0x061c, 0x061c],
  [0x06dd, 0x06dd],
  [0x070f, 0x070f],
  [0x1680, 0x1680],
  [0x180e, 0x180e],
  [0x1ab0, 0x1aff], // combining marks
  [0x1dc0, 0x1dff], // combining marks
  [0x2000, 0x200f], // spaces, zero-width characters, marks
  [0x2028, 0x202f], // separators, bidi controls, narrow NBSP
  [0x205f, 0x206f], // space, invisible operators, bidi controls
  [0x20d0, 0x20ff], // combining marks for symbols
  [0x3000, 0x3000],
  [0xd800, 0xf8ff], // surrogates, private use
  [0xfe00, 0xfe0f], // variation selectors
  [0xfe20, 0xfe2f], // combining half marks
  [0xfeff, 0xfeff], // BOM
  [0xfff0, 0xfffb], // specials
  [0xfffe, 0xffff], // noncharacters
  [0xe0000, 0xe0fff], // tags, variation selectors supplement
  [0xf0000, 0x10ffff], // private use
];

function escapedInDebug(code: number): boolean {
  return ESCAPED.some(([first, last]) => code >= first && code <= last);
}
