// The webhook of the HTTP-functions contract, in plain JavaScript: a signed POST is
// passed on to the `upstream` setting, and the upstream's answer is counted in table
// `hooks`. Deployed with --config upstream=URL --secret webhook_secret=S --outbound URL.
import { config, http, state } from '@tally/sdk';

const encoder = new TextEncoder();

export default {
  /** @param {Request} request */
  async fetch(request) {
    if (request.method !== 'POST') {
      return text(405, 'method not allowed');
    }
    const body = new Uint8Array(await request.arrayBuffer());
    const secret = config.get('webhook_secret');
    const signature = request.headers.get('x-signature') ?? '';
    if (secret === undefined || !equalInConstantTime(signature, `sha256=${await hmacSha256Hex(secret, body)}`)) {
      return text(401, 'bad signature');
    }
    const upstream = config.get('upstream');
    if (upstream === undefined) {
      return text(500, 'the setting `upstream` is missing');
    }
    let answer;
    try {
      answer = await http.fetch(upstream, {
        method: 'POST',
        headers: { 'content-type': 'application/octet-stream' },
        body,
      });
    } catch (error) {
      return text(502, String(error instanceof Error ? error.message : error));
    }
    if (!answer.ok) {
      return text(502, `upstream answered ${answer.status}`);
    }
    const reply = await answer.text();
    const count = (state.getI64('hooks', 'count') ?? 0n) + 1n;
    state.putI64('hooks', 'count', count);
    state.put('hooks', 'last', reply);
    return text(201, `${count} ${reply}`);
  },
};

/**
 * HMAC-SHA256 of `message` under the UTF-8 bytes of `key`, as lowercase hex, with the
 * engine's Web Crypto (StarlingMonkey has `crypto.subtle` HMAC).
 * @param {string} key
 * @param {Uint8Array<ArrayBuffer>} message
 */
async function hmacSha256Hex(key, message) {
  const cryptoKey = await crypto.subtle.importKey('raw', encoder.encode(key), { name: 'HMAC', hash: 'SHA-256' }, false, [
    'sign',
  ]);
  const mac = new Uint8Array(await crypto.subtle.sign('HMAC', cryptoKey, message));
  return Array.from(mac, (byte) => byte.toString(16).padStart(2, '0')).join('');
}

/**
 * Whether two strings are equal, in a time that depends on their lengths only, so that
 * a caller cannot find the signature a byte at a time.
 * @param {string} a
 * @param {string} b
 */
function equalInConstantTime(a, b) {
  let difference = a.length ^ b.length;
  for (let i = 0; i < b.length; i++) {
    difference |= (i < a.length ? a.charCodeAt(i) : 0) ^ b.charCodeAt(i);
  }
  return difference === 0;
}

/**
 * A `text/plain` response.
 * @param {number} status
 * @param {string} message
 */
function text(status, message) {
  return new Response(message, { status, headers: { 'content-type': 'text/plain' } });
}
