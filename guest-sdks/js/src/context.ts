/**
 * What the current invocation is.
 *
 * These are host calls, so they work inside a handler, not at the top level of a
 * module (which runs at build time).
 *
 * @module
 */

/// <reference path="./platform.d.ts" />
import * as wit from 'tally:platform/context';

/**
 * The invocation's ID. It stays the same when the platform runs the invocation again,
 * so it can key work that must happen once.
 */
export function invocationId(): string {
  return wit.invocationId();
}

/** The ID of the book the invocation is bound to, which every {@link log} call acts on. */
export function bookId(): bigint {
  return wit.bookId();
}

/**
 * Which execution of the invocation this is: 1 for the first, then 2, 3, ... when the
 * platform runs it again.
 */
export function attempt(): number {
  return wit.attempt();
}

/** The name the function was deployed under. */
export function functionName(): string {
  return wit.functionName();
}
