// The pure half of `http.fetch`: how a request's method and URL become the WIT values
// of `wasi:http`, and how a WIT `error-code` becomes the error thrown. Internal to the
// SDK; kept apart from `http.ts` so that tests need no fake of `wasi:http`.

/// <reference path="./platform.d.ts" />
import type { ErrorCode, Method, Scheme } from 'wasi:http/types@0.2.10';

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'CONNECT', 'OPTIONS', 'TRACE', 'PATCH']);

/**
 * A request out failed: the host refused it (`HTTP-request-denied` for a destination
 * the deploy did not allow with `--outbound`), or the connection or the response failed
 * (`connection-refused`, `connection-timeout`, `HTTP-response-body-size`, ...). A
 * `TypeError`, as the web's `fetch` rejects with. The message names the method and the
 * origin, never the path or query, which may carry tokens.
 */
export class FetchError extends TypeError {
  /** The WIT `error-code` case, as `wasi:http` spells it: `connection-refused`, ... */
  readonly code: string;

  /**
   * @param method the request's method
   * @param url the request's URL
   * @param code the WIT error code
   */
  constructor(method: string, url: URL, code: ErrorCode) {
    super(`${method} ${url.origin} failed: ${errorCodeText(code)}`);
    this.code = code.tag;
  }
}
FetchError.prototype.name = 'FetchError';

/** The WIT `method` for an HTTP method name (already upper-cased by `Request`). */
export function witMethod(method: string): Method {
  return METHODS.has(method) ? ({ tag: method.toLowerCase() } as Method) : { tag: 'other', val: method };
}

/** Where a request goes, as `wasi:http` takes it; a `TypeError` for a non-HTTP URL. */
export function witTarget(url: URL): { scheme: Scheme; authority: string; pathWithQuery: string } {
  let scheme: Scheme;
  if (url.protocol === 'http:') {
    scheme = { tag: 'HTTP' };
  } else if (url.protocol === 'https:') {
    scheme = { tag: 'HTTPS' };
  } else {
    throw new TypeError(`fetch takes http and https URLs, not ${url.protocol}`);
  }
  return { scheme, authority: url.host, pathWithQuery: `${url.pathname}${url.search}` };
}

/** An `error-code` as text: its case, then its payload when it has one. */
export function errorCodeText(code: ErrorCode): string {
  const detail = code.val;
  if (detail === undefined || detail === null) {
    return code.tag;
  }
  if (typeof detail === 'object') {
    const fields = Object.entries(detail)
      .filter(([, value]) => value !== undefined && value !== null)
      .map(([name, value]) => `${name} ${String(value)}`);
    return fields.length === 0 ? code.tag : `${code.tag} (${fields.join(', ')})`;
  }
  return `${code.tag} (${String(detail)})`;
}

/** Statuses whose response has no body: `new Response` refuses one for them. */
export function isNullBodyStatus(status: number): boolean {
  return status === 101 || status === 103 || status === 204 || status === 205 || status === 304;
}
