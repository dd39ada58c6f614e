// The imports of the WIT world `tally:platform/function` (`wit/platform.wit`) as
// componentize-js provides them to the component's JavaScript: one ES module per WIT
// interface, with the functions in camelCase. The SDK wraps these; a function's code
// uses the SDK instead.
//
// A u64 is a `bigint`, a `list<u8>` a `Uint8Array`, an `option` is `undefined` when
// absent. A call that returns the WIT `err` throws an error whose own `payload` property
// is the `error` variant below.

declare module 'tally:platform/types' {
  /** The WIT `error` variant of `tally:platform/types`, as `{ tag, val }`. */
  export type Error =
    | { tag: 'invalid-argument'; val: string }
    | { tag: 'not-found'; val: string }
    | { tag: 'conflict'; val: bigint | undefined }
    | { tag: 'unavailable'; val: string }
    | { tag: 'too-large'; val: string }
    | { tag: 'timeout'; val: string }
    | { tag: 'failed'; val: string };
}

declare module 'tally:platform/log' {
  /** The WIT `log-record`. */
  export interface LogRecord {
    seqnum: bigint;
    tags: BigUint64Array;
    data: Uint8Array;
    auxData: Uint8Array | undefined;
  }
  export function append(tags: bigint[], data: Uint8Array): bigint;
  export function condAppend(tags: bigint[], data: Uint8Array, condTag: bigint, condPos: bigint): bigint;
  export function readNext(tag: bigint, minSeqnum: bigint): LogRecord | undefined;
  export function readPrev(tag: bigint, maxSeqnum: bigint): LogRecord | undefined;
  export function checkTail(tag: bigint): LogRecord | undefined;
  export function trim(tag: bigint, seqnum: bigint): void;
  export function setAuxData(seqnum: bigint, data: Uint8Array): void;
}

declare module 'tally:platform/invoke' {
  export function call(func: string, input: Uint8Array): Uint8Array;
}

declare module 'tally:platform/state' {
  export function get(table: string, key: Uint8Array): Uint8Array | undefined;
  export function put(table: string, key: Uint8Array, value: Uint8Array): void;
  function remove(table: string, key: Uint8Array): void;
  export { remove as delete };
}

declare module 'tally:platform/objects' {
  export function get(object: string, path: string): string | undefined;
  export function set(object: string, path: string, json: string): void;
  export function increment(object: string, path: string, by: bigint): void;
  export function push(object: string, path: string, json: string): void;
  export function remove(object: string, path: string): void;
  export function begin(readOnly: boolean): void;
  export function commit(): boolean;
  export function abort(): void;
}

declare module 'tally:platform/queues' {
  export function push(queue: string, message: Uint8Array): void;
  export function pop(queue: string, timeoutMs: bigint): Uint8Array | undefined;
  export function popMany(queue: string, max: number, timeoutMs: bigint): Uint8Array[];
}

declare module 'tally:platform/locks' {
  export function acquire(lock: string, timeoutMs: bigint): boolean;
  export function release(lock: string): void;
}

declare module 'tally:platform/context' {
  export function invocationId(): string;
  export function bookId(): bigint;
  export function attempt(): number;
  export function functionName(): string;
  export function key(): string | undefined;
  export function sleep(ms: bigint): void;
  export function sleepUntil(unixMs: bigint): void;
  export function promiseCreate(): string;
  export function promiseAwait(id: string, timeoutMs: bigint | undefined): Uint8Array;
}

// The settings (`tally deploy --config/--secret`, `tally config set`), in every world.
declare module 'wasi:config/store@0.2.0-rc.1' {
  /** The WIT `error` variant of `wasi:config/store`, as `{ tag, val }`. */
  export type Error = { tag: 'upstream'; val: string } | { tag: 'io'; val: string };
  export function get(key: string): string | undefined;
  export function getAll(): [string, string][];
}

// The parts of `wasi:http` (world `http-function` only) that `src/http.ts` uses. A
// resource is a class whose `Symbol.dispose` method drops the handle; a method that returns the
// WIT `err` throws an error whose own `payload` is the error value.
declare module 'wasi:http/types@0.2.10' {
  /** The WIT `error-code`: a case name, with a payload for some cases. */
  export type ErrorCode = { tag: string; val?: unknown };
  export type Method = { tag: 'get' | 'head' | 'post' | 'put' | 'delete' | 'connect' | 'options' | 'trace' | 'patch' } | { tag: 'other'; val: string };
  export type Scheme = { tag: 'HTTP' } | { tag: 'HTTPS' } | { tag: 'other'; val: string };
  export type Result<T, E> = { tag: 'ok'; val: T } | { tag: 'err'; val: E };

  export class Fields {
    static fromList(entries: [string, Uint8Array][]): Fields;
    entries(): [string, Uint8Array][];
  }
  export class OutputStream {
    blockingWriteAndFlush(contents: Uint8Array): void;
  }
  export class InputStream {
    blockingRead(len: bigint): Uint8Array;
  }
  export class Pollable {
    block(): void;
  }
  export class OutgoingBody {
    write(): OutputStream;
    static finish(body: OutgoingBody, trailers: Fields | undefined): void;
  }
  export class OutgoingRequest {
    constructor(headers: Fields);
    setMethod(method: Method): void;
    setScheme(scheme: Scheme | undefined): void;
    setAuthority(authority: string | undefined): void;
    setPathWithQuery(path: string | undefined): void;
    body(): OutgoingBody;
  }
  export class IncomingBody {
    stream(): InputStream;
  }
  export class IncomingResponse {
    status(): number;
    headers(): Fields;
    consume(): IncomingBody;
  }
  /** The `error-code` a stream's error stands for, if it stands for one. */
  export function httpErrorCode(error: unknown): ErrorCode | undefined;
  export class FutureIncomingResponse {
    subscribe(): Pollable;
    get(): Result<Result<IncomingResponse, ErrorCode>, void> | undefined;
  }
}

declare module 'wasi:http/outgoing-handler@0.2.10' {
  import type { FutureIncomingResponse, OutgoingRequest } from 'wasi:http/types@0.2.10';
  export function handle(request: OutgoingRequest, options: undefined): FutureIncomingResponse;
}
