/// <reference path="./platform.d.ts" />
import type { Error as WitError } from 'tally:platform/types';

/**
 * Why a call to the platform failed: the WIT `error` variant of `tally:platform/types`,
 * one subclass per case. Catch a case with `instanceof`:
 *
 * ```ts
 * try {
 *   log.condAppend([LOCK], owner, LOCK, 0n);
 * } catch (error) {
 *   if (error instanceof Conflict) return `held by record ${error.holder}`;
 *   throw error;
 * }
 * ```
 *
 * One more subclass is the SDK's own: {@link TransactionConflict}, for a transaction
 * that kept conflicting.
 *
 * The messages are the Rust SDK's (`invalid argument: ...`, `conflict: the position is
 * held by record 7`), so a handler that lets one escape fails the invocation with the
 * same text in every language. A broken guest or a host bug traps the invocation instead
 * of throwing one of these.
 */
export class TallyError extends Error {}
TallyError.prototype.name = 'TallyError';

/** A `TallyError` that carries the host's text: every case but {@link Conflict}. */
abstract class Described extends TallyError {
  /** What the host said, without the case's prefix. */
  readonly detail: string;

  constructor(prefix: string, detail: string) {
    super(`${prefix}: ${detail}`);
    this.detail = detail;
  }
}

/**
 * The arguments were refused: a tag with the top bit set, tag 0 as the condition of
 * {@link log.condAppend}, a malformed table name, ... Also a stored value that is not
 * what the SDK reads it as, such as one that is not a decimal i64 for
 * {@link state.getI64}.
 */
export class InvalidArgument extends Described {
  /** @param detail what was refused */
  constructor(detail: string) {
    super('invalid argument', detail);
  }
}
InvalidArgument.prototype.name = 'InvalidArgument';

/** A named thing does not exist, such as an unknown function for {@link invoke.call}. */
export class NotFound extends Described {
  /** @param detail what was not found */
  constructor(detail: string) {
    super('not found', detail);
  }
}
NotFound.prototype.name = 'NotFound';

/**
 * A conditional append lost: its position in the condition tag's stream is held by
 * another record.
 */
export class Conflict extends TallyError {
  /** The record that holds the position, or `undefined` if it has since been trimmed. */
  readonly holder: bigint | undefined;

  /** @param holder the seqnum of the record that holds the position, if known */
  constructor(holder: bigint | undefined) {
    super(`conflict: the position is held by ${holder === undefined ? 'a trimmed record' : `record ${holder}`}`);
    this.holder = holder;
  }
}
Conflict.prototype.name = 'Conflict';

/** The log or a node is unavailable right now; retrying later may succeed. */
export class Unavailable extends Described {
  /** @param detail what is unavailable */
  constructor(detail: string) {
    super('unavailable', detail);
  }
}
Unavailable.prototype.name = 'Unavailable';

/** A record, payload or result is larger than its limit. */
export class TooLarge extends Described {
  /** @param detail what is too large */
  constructor(detail: string) {
    super('too large', detail);
  }
}
TooLarge.prototype.name = 'TooLarge';

/** The operation did not finish in time; it may still have taken effect. */
export class Timeout extends Described {
  /** @param detail what timed out */
  constructor(detail: string) {
    super('timeout', detail);
  }
}
Timeout.prototype.name = 'Timeout';

/** A child invocation failed: its handler threw, or it trapped. */
export class Failed extends Described {
  /** @param detail how the child failed */
  constructor(detail: string) {
    super('failed', detail);
  }
}
Failed.prototype.name = 'Failed';

/**
 * A transaction run by {@link objects.transaction} conflicted on every attempt it was
 * allowed: each time, an object it read was written by someone else before it committed,
 * so none of its writes took effect. Not a WIT case: the host's `commit` returns false
 * for each conflict, and the SDK throws this once its retries are spent.
 */
export class TransactionConflict extends TallyError {
  /** How many times the transaction ran, each ending in a conflict. */
  readonly attempts: number;

  /** @param attempts how many times the transaction ran */
  constructor(attempts: number) {
    super(`transaction conflict: no commit in ${attempts} ${attempts === 1 ? 'attempt' : 'attempts'}`);
    this.attempts = attempts;
  }
}
TransactionConflict.prototype.name = 'TransactionConflict';

/** The `TallyError` for a WIT `error` value. Internal; exported for tests. */
export function fromWit(error: WitError): TallyError {
  switch (error.tag) {
    case 'invalid-argument':
      return new InvalidArgument(error.val);
    case 'not-found':
      return new NotFound(error.val);
    case 'conflict':
      return new Conflict(error.val);
    case 'unavailable':
      return new Unavailable(error.val);
    case 'too-large':
      return new TooLarge(error.val);
    case 'timeout':
      return new Timeout(error.val);
    case 'failed':
      return new Failed(error.val);
  }
}

const WIT_CASES = new Set(['invalid-argument', 'not-found', 'conflict', 'unavailable', 'too-large', 'timeout', 'failed']);

/**
 * What a host call threw, as the SDK rethrows it: the bindings throw an error whose own
 * `payload` is the WIT `error` variant when the call returns `err`, which becomes its
 * `TallyError`; anything else (a `TypeError` for an argument of the wrong type) passes
 * unchanged. Internal; exported for tests.
 */
export function fromHostError(thrown: unknown): unknown {
  if (typeof thrown === 'object' && thrown !== null && Object.prototype.hasOwnProperty.call(thrown, 'payload')) {
    const payload = (thrown as { payload: unknown }).payload;
    if (typeof payload === 'object' && payload !== null && WIT_CASES.has((payload as { tag: string }).tag)) {
      return fromWit(payload as WitError);
    }
  }
  return thrown;
}
