/**
 * Write Tally functions in TypeScript or JavaScript.
 *
 * A Tally function is a WebAssembly component of world `tally:platform/function`: it
 * gets the invocation's input as bytes and returns bytes or an error message. While it
 * runs it may use the shared log of the book it is bound to ({@link log}), keep
 * exactly-once key-value state in the book's tables ({@link state}), keep durable JSON
 * objects with transactions across them ({@link objects}), pass messages through durable
 * queues ({@link queues}), hold locks ({@link locks}), call other functions
 * ({@link invoke}), ask what the invocation is and sleep durably ({@link context}), and
 * read its settings ({@link config}).
 *
 * An HTTP function (world `http-function`) default-exports an {@link HttpHandler}
 * instead, a `{ fetch(request) }` on the web's `Request` and `Response`, and may send
 * requests out with {@link http.fetch}.
 *
 * A project is a directory with a `package.json` and an entry module, `app.ts` or
 * `app.js` (or the `main` of `package.json`), that exports the {@link Handler}:
 *
 * ```ts
 * import { log, Tag } from '@tally/sdk';
 *
 * // Each order is a record in the `orders` stream of the book.
 * const ORDERS = Tag.named('orders');
 *
 * // Records the order in the input and says which order came before it.
 * export function handle(order: Uint8Array): string {
 *   const seqnum = log.append([ORDERS], order);
 *   const previous = seqnum > 0n ? log.readPrev(ORDERS, seqnum - 1n) : undefined;
 *   return previous ? `order ${seqnum} follows order ${previous.seqnum}` : `order ${seqnum} is the first`;
 * }
 * ```
 *
 * `tally build DIR` makes the component. u64 values (seqnums, tags) are `bigint`s; data
 * is a `Uint8Array` or a string (UTF-8). Calls to the platform are synchronous and throw
 * a {@link TallyError} when they fail: something the function can handle (a lost
 * conditional append, an unavailable log, a failed child, a malformed value).
 *
 * @module
 */

export * as config from './config.js';
export * as context from './context.js';
export * as http from './http.js';
export * as invoke from './invoke.js';
export * as locks from './locks.js';
export * as log from './log.js';
export * as objects from './objects.js';
export * as queues from './queues.js';
export * as state from './state.js';

export type { Bytes } from './bytes.js';
export { ConfigError } from './config.js';
export {
  Conflict,
  Failed,
  InvalidArgument,
  NotFound,
  TallyError,
  Timeout,
  TooLarge,
  TransactionConflict,
  Unavailable,
} from './errors.js';
export { type Handler, type Output, trap } from './handler.js';
export { parseI64, parseU64 } from './ints.js';
export { FetchError } from './outgoing.js';
export type { HttpHandler } from './serve.js';
export type { LogRecord } from './log.js';
export type { BeginOptions, Json, TransactionOptions } from './objects.js';
export { SeqNum } from './seqnum.js';
export { Tag } from './tag.js';
