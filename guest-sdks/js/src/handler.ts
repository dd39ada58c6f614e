import { describe, fromHost, viewOf } from './bytes.js';

const encoder = new TextEncoder();

/** What a handler may return: bytes, or text that is returned as UTF-8. */
export type Output = Uint8Array | string;

/**
 * A function's entry point: the invocation's input in, the output out. A project's
 * entry module (`app.ts`, `app.js` or the `main` of its `package.json`) exports one as
 * `handle`:
 *
 * ```ts
 * export function handle(input: Uint8Array): string {
 *   return `${input.length} bytes`;
 * }
 * ```
 *
 * It may be `async`: the component runs the event loop until the promise settles, so
 * `await` on timers works (the platform's calls are synchronous).
 *
 * When the handler throws (or its promise rejects), the invocation fails with the
 * error's message, which reaches the caller (HTTP 500, `function_error`). The message
 * of an `Error` with a `cause` is followed by the cause's, joined by `: ` (so
 * `new Error('reading the order', { cause })` reads `reading the order: <cause>`);
 * any other thrown value is converted with `String`. To trap the invocation instead,
 * call {@link trap}.
 */
export type Handler = (input: Uint8Array) => Output | Promise<Output>;

/** The WIT export's result, in the shape the componentize-js bindings take. */
type Result = { tag: 'ok'; val: Uint8Array } | { tag: 'err'; val: string };

/** Thrown by {@link trap}: the handler wrapper lets it kill the instance. */
class Trap extends Error {}
Trap.prototype.name = 'Trap';

/** The error the instance dies of, once something asked for a trap. */
let fatal: unknown = undefined;
let dying = false;

/** What the instance dies of, or `undefined` while nothing asked it to die. Internal. */
export function fatalError(): unknown {
  return fatal;
}

/**
 * Traps the invocation: the instance dies, the caller gets HTTP 500 `trap` (not
 * `function_error`), and `message` is written to the function's stderr, whose last lines
 * the node puts in the trap's message. This is the equivalent of a Rust panic, for a
 * broken invariant rather than bad input: when the platform runs an invocation again
 * after a trap, it runs the same code on the same input.
 *
 * It throws to unwind the handler, and the trap happens even if the handler catches
 * that: it is also scheduled on the event loop, and the handler's result is not
 * returned. An error thrown from a timer or other event-loop callback and not caught
 * traps the instance the same way. The engine running out of stack (`InternalError:
 * too much recursion`) or memory (`out of memory`) in a handler traps too.
 */
export function trap(message: string): never {
  const error = new Trap(message);
  die(error);
  throw error;
}

/** Makes the instance die of `error` when the event loop next runs. Internal. */
export function die(error: unknown): void {
  if (fatal === undefined) {
    fatal = error;
  }
  if (!dying) {
    dying = true;
    // An exception a timer callback leaves uncaught aborts the component (a wasm
    // `unreachable`, a trap for the host), after StarlingMonkey prints it to stderr. An
    // exception out of the export itself traps too, but with the bindings' message
    // instead of this one.
    setTimeout(() => {
      throw fatal;
    }, 0);
  }
}

/** Whether a thrown value is one the instance cannot go on after. Internal. */
export function isFatal(thrown: unknown): boolean {
  if (thrown instanceof Trap || thrown === 'out of memory') {
    return true;
  }
  // SpiderMonkey's error for a stack overflow.
  return typeof thrown === 'object' && thrown !== null && (thrown as { name?: unknown }).name === 'InternalError';
}

/** A promise that never settles: what the export returns while the instance dies. */
function never(): Promise<never> {
  return new Promise<never>(() => {});
}

/**
 * Wraps the project's `handle` as the component's export. Used by the build's entry
 * module (`entry.js`); a function's code does not call it.
 */
export function exportHandle(handle: Handler): (input: Uint8Array) => Result | Promise<Result> {
  if (typeof handle !== 'function') {
    throw new TypeError(`the entry module must export a function \`handle(input)\`, but its \`handle\` is ${describe(handle)}`);
  }
  return (input) => {
    let output: Output | Promise<Output>;
    try {
      output = handle(fromHost(input));
    } catch (thrown) {
      return failure(thrown);
    }
    if (typeof output === 'object' && output !== null && typeof (output as Promise<Output>).then === 'function') {
      return Promise.resolve(output).then(success, failure);
    }
    return success(output as Output);
  };
}

function success(output: Output): Result | Promise<never> {
  if (fatal !== undefined) {
    return never();
  }
  let val: Uint8Array;
  if (typeof output === 'string') {
    val = encoder.encode(output);
  } else if (ArrayBuffer.isView(output)) {
    val = viewOf(output);
  } else {
    return { tag: 'err', val: `handle returned ${describe(output)}, expected a Uint8Array or a string` };
  }
  return { tag: 'ok', val };
}

function failure(thrown: unknown): Result | Promise<never> {
  if (fatal !== undefined || isFatal(thrown)) {
    die(thrown);
    return never();
  }
  return { tag: 'err', val: errorMessage(thrown) };
}

/**
 * The message a thrown value fails the invocation with: an error's `message`, followed
 * by its chain of `cause`s joined by `: `; `String(thrown)` for anything else.
 * Internal; exported for tests.
 */
export function errorMessage(thrown: unknown): string {
  const parts: string[] = [];
  let current: unknown = thrown;
  // The bound stops a cycle of causes.
  for (let depth = 0; depth < 32; depth++) {
    if (typeof current === 'object' && current !== null && typeof (current as Error).message === 'string') {
      parts.push((current as Error).message);
      if (!('cause' in current) || current.cause === undefined) {
        break;
      }
      current = current.cause;
    } else {
      parts.push(stringOf(current));
      break;
    }
  }
  return parts.join(': ');
}

function stringOf(value: unknown): string {
  try {
    return String(value);
  } catch {
    return Object.prototype.toString.call(value);
  }
}
