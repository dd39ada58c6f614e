/// <reference path="./platform.d.ts" />
import { describe } from './bytes.js';
import { die, errorMessage, fatalError, isFatal } from './handler.js';

/**
 * An HTTP function: the default export of a project whose `tally.toml` says
 * `world = "http-function"`, in the shape Cloudflare Workers, Deno and Bun take.
 *
 * ```ts
 * export default {
 *   async fetch(request: Request): Promise<Response> {
 *     const { pathname } = new URL(request.url);
 *     return new Response(`${request.method} ${pathname}`, { headers: { 'content-type': 'text/plain' } });
 *   },
 * } satisfies HttpHandler;
 * ```
 *
 * `request.url` is `http://<host>/<path below /fn/NAME>?<query>`; the body is read with
 * the web's `arrayBuffer()`, `text()` or `json()`, which collect it whole (the gateway's
 * `request_bytes_max` bounds it). The platform's calls (`state`, `log`, `config`, ...)
 * work inside `fetch`, and {@link http.fetch} sends requests out. When `fetch` throws
 * (or its promise rejects), the response is a 500 whose text body is the error's
 * message, as a plain function's caller gets it. {@link trap} cannot trap the instance
 * here (StarlingMonkey answers a failed `fetch` event itself): it answers a 500 whose
 * body is `trap: <message>`, and the platform does not run the request again.
 */
export interface HttpHandler {
  fetch(request: Request): Response | Promise<Response>;
}

/** The part of StarlingMonkey's `FetchEvent` that the SDK uses. */
interface FetchEvent {
  readonly request: Request;
  respondWith(response: Response | Promise<Response>): void;
}

type AddListener = (type: 'fetch', listener: (event: FetchEvent) => void) => void;

/**
 * Serves the entry module's default export on the engine's `fetch` event. A module
 * without one is taken to add its own `fetch` listener, as a plain StarlingMonkey
 * component does. Used by the build's `entry-http.js`; internal.
 */
export function serve(app: Record<string, unknown>, addListener: AddListener): void {
  const handler = app.default as Partial<HttpHandler> | undefined;
  if (typeof handler?.fetch === 'function') {
    addListener('fetch', (event) => event.respondWith(respond(handler as HttpHandler, event.request)));
    return;
  }
  if (typeof app.handle === 'function') {
    throw new TypeError(
      'an HTTP function exports `default { fetch(request) }` (or adds a `fetch` event listener), ' +
        'but this entry module exports `handle`, the entry point of world `function`: ' +
        'drop `world = "http-function"` from tally.toml, or export a default `{ fetch }`',
    );
  }
}

/** The handler's response, or the 500 for what it threw. Internal; exported for tests. */
export async function respond(handler: HttpHandler, request: Request): Promise<Response> {
  let response: unknown;
  try {
    response = await handler.fetch(request);
  } catch (thrown) {
    if (fatalError() !== undefined || isFatal(thrown)) {
      die(thrown);
      return trapped();
    }
    return failure(errorMessage(thrown));
  }
  if (fatalError() !== undefined) {
    return trapped();
  }
  if (!(response instanceof Response)) {
    return failure(`fetch returned ${describe(response)}, expected a Response`);
  }
  return response;
}

/**
 * The answer once something asked for a trap. StarlingMonkey answers the `fetch` event
 * itself when its handler fails (an empty 500, or `no fetch-event handler triggered`),
 * so the instance cannot trap as a plain function's does; this says why it failed.
 */
function trapped(): Response {
  return failure(`trap: ${errorMessage(fatalError())}`);
}

function failure(message: string): Response {
  return new Response(message, { status: 500, headers: { 'content-type': 'text/plain; charset=utf-8' } });
}
