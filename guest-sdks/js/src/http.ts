/**
 * Requests out of an HTTP function, with the web's `fetch` signature, on
 * `wasi:http/outgoing-handler`:
 *
 * ```ts
 * const response = await http.fetch(config.get('upstream')!, {
 *   method: 'POST',
 *   headers: { 'content-type': 'application/json' },
 *   body: JSON.stringify(order),
 * });
 * if (!response.ok) throw new Error(`upstream answered ${response.status}`);
 * ```
 *
 * Why not the engine's global `fetch`: StarlingMonkey's `fetch` works for requests that
 * get an answer, but it traps the instance when the host refuses a request
 * (`HTTP-request-denied`, a destination the deploy did not allow) and rejects every other
 * failure with a bare `NetworkError`, dropping the `wasi:http` error code. This one throws
 * a {@link FetchError} with the code in its message and `code`.
 *
 * Each request is a step of the invocation: the host logs its response before the
 * function sees it, so a re-execution gets the logged response instead of sending again,
 * and adds an `Idempotency-Key` header unless the request has one. Only destinations
 * named at deploy (`--outbound http://127.0.0.1:9000`) are reachable.
 *
 * The request body is collected whole before it is sent, and the response body whole
 * before the promise settles (the host allows `outgoing_response_bytes_max`, at most
 * 768 KiB). The call blocks the instance while the request is out, like every platform
 * call: requests go one at a time, and timers do not run meanwhile. Redirects are not
 * followed. Only in world `http-function`: a plain function has no `wasi:http` imports.
 *
 * @module
 */

/// <reference path="./platform.d.ts" />
import { handle } from 'wasi:http/outgoing-handler@0.2.10';
import {
  type ErrorCode,
  Fields,
  type FutureIncomingResponse,
  httpErrorCode,
  type IncomingResponse,
  OutgoingBody,
  OutgoingRequest,
} from 'wasi:http/types@0.2.10';
import { fromHost } from './bytes.js';
import { FetchError, isNullBodyStatus, witMethod, witTarget } from './outgoing.js';

export { FetchError } from './outgoing.js';

const encoder = new TextEncoder();

/** `blocking-write-and-flush` takes at most 4096 bytes a call. */
const WRITE_CHUNK_BYTES = 4096;
const READ_CHUNK_BYTES = 64n * 1024n;

/**
 * Sends a request and resolves to the response, as the web's `fetch` does; rejects with
 * a {@link FetchError} when the request fails, and with a `TypeError` for a request that
 * cannot be made (a URL that is not `http` or `https`, a body on a `GET`).
 */
export async function fetch(input: string | URL | Request, init?: RequestInit): Promise<Response> {
  const request = new Request(input, init);
  const body = new Uint8Array(await request.arrayBuffer());
  return send(request.method, new URL(request.url), request.headers, body);
}

function send(method: string, url: URL, headers: Headers, body: Uint8Array): Response {
  const target = witTarget(url);
  const fields = Fields.fromList([...headers].map(([name, value]) => [name, encoder.encode(value)]));
  const request = new OutgoingRequest(fields);
  try {
    request.setMethod(witMethod(method));
    request.setScheme(target.scheme);
    request.setAuthority(target.authority);
    request.setPathWithQuery(target.pathWithQuery);
  } catch {
    throw new TypeError(`${method} ${url.origin}: wasi:http refused the method or the URL`);
  }
  const outgoing = request.body();
  let future: FutureIncomingResponse;
  try {
    future = handle(request, undefined);
  } catch (thrown) {
    drop(outgoing);
    throw new FetchError(method, url, errorCode(thrown));
  }
  try {
    write(outgoing, body);
    try {
      OutgoingBody.finish(outgoing, undefined);
    } catch (thrown) {
      throw new FetchError(method, url, errorCode(thrown));
    }
    const pollable = future.subscribe();
    pollable.block();
    drop(pollable);
    const outcome = future.get();
    if (outcome === undefined || outcome.tag === 'err') {
      throw new FetchError(method, url, { tag: 'internal-error', val: 'the response was taken already' });
    }
    if (outcome.val.tag === 'err') {
      throw new FetchError(method, url, outcome.val.val);
    }
    return read(outcome.val.val, method, url);
  } finally {
    drop(future);
  }
}

/**
 * Writes the request body. A write that fails stops the writing: the response's
 * outcome then says why the request failed.
 */
function write(outgoing: OutgoingBody, body: Uint8Array): void {
  const stream = outgoing.write();
  try {
    for (let at = 0; at < body.length; at += WRITE_CHUNK_BYTES) {
      stream.blockingWriteAndFlush(body.subarray(at, at + WRITE_CHUNK_BYTES));
    }
  } catch {
    // The outcome of the request says what went wrong.
  } finally {
    // A stream must be dropped before its body is finished.
    drop(stream);
  }
}

/** The response, its body read whole; the handles are dropped children first. */
function read(incoming: IncomingResponse, method: string, url: URL): Response {
  try {
    const status = incoming.status();
    const fields = incoming.headers();
    const headers = new Headers();
    for (const [name, value] of fields.entries()) {
      headers.append(name, new TextDecoder().decode(value));
    }
    drop(fields);
    const chunks: Uint8Array[] = [];
    const body = incoming.consume();
    const stream = body.stream();
    try {
      for (;;) {
        let chunk: Uint8Array;
        try {
          chunk = stream.blockingRead(READ_CHUNK_BYTES);
        } catch (thrown) {
          const payload = (thrown as { payload?: { tag?: string; val?: unknown } }).payload;
          if (payload?.tag === 'closed') {
            break;
          }
          const code = payload?.tag === 'last-operation-failed' ? httpErrorCode(payload.val) : undefined;
          throw new FetchError(method, url, code ?? { tag: 'internal-error', val: 'reading the response body failed' });
        }
        chunks.push(fromHost(chunk).slice());
      }
    } finally {
      drop(stream);
      drop(body);
    }
    return new Response(isNullBodyStatus(status) ? null : concat(chunks), { status, headers });
  } finally {
    drop(incoming);
  }
}

function concat(chunks: Uint8Array[]): Uint8Array<ArrayBuffer> {
  const all = new Uint8Array(chunks.reduce((total, chunk) => total + chunk.length, 0));
  let at = 0;
  for (const chunk of chunks) {
    all.set(chunk, at);
    at += chunk.length;
  }
  return all;
}

/**
 * The bindings' resources drop their handle on `Symbol.dispose` (`Symbol.for('dispose')`
 * where the engine has no `Symbol.dispose`). Handles are dropped by hand, children
 * first, since the host refuses to drop a resource that still has children.
 */
const DISPOSE: symbol = (Symbol as { dispose?: symbol }).dispose ?? Symbol.for('dispose');

function drop(resource: object): void {
  (resource as Record<symbol, () => void>)[DISPOSE]!();
}

/** The `error-code` a failed `wasi:http` call threw. */
function errorCode(thrown: unknown): ErrorCode {
  const payload = (thrown as { payload?: unknown } | null)?.payload as ErrorCode | undefined;
  if (typeof payload?.tag === 'string') {
    return payload;
  }
  return { tag: 'internal-error', val: String(thrown) };
}
