/**
 * The function's settings: the values given at deploy (`tally deploy --config K=V
 * --secret K=V`) or later (`tally config set F K=V`), read through `wasi:config/store`.
 * Secrets are read like any other value; keep them out of logs and error messages.
 *
 * A re-execution of the invocation reads what its first execution read, so a setting
 * changed meanwhile does not make an invocation take two paths.
 *
 * ```ts
 * const upstream = config.get('upstream') ?? 'http://127.0.0.1:9000';
 * ```
 *
 * @module
 */

/// <reference path="./platform.d.ts" />
import * as wit from 'wasi:config/store@0.2.0-rc.1';
import type { Error as WitError } from 'wasi:config/store@0.2.0-rc.1';

/** The settings could not be read: the WIT `error` of `wasi:config/store`. */
export class ConfigError extends Error {
  /** The WIT case: `upstream` (the store failed) or `io` (reading it failed). */
  readonly kind: WitError['tag'];

  /** @param error the WIT error value */
  constructor(error: WitError) {
    super(`config ${error.tag} error: ${error.val}`);
    this.kind = error.tag;
  }
}
ConfigError.prototype.name = 'ConfigError';

/** The value of setting `key`, or `undefined` if the function has no such setting. */
export function get(key: string): string | undefined {
  if (typeof key !== 'string') {
    throw new TypeError(`a setting's key must be a string, not ${typeof key}`);
  }
  try {
    return wit.get(key);
  } catch (thrown) {
    throw fromHostError(thrown);
  }
}

/** Every setting of the function, by key. */
export function getAll(): Map<string, string> {
  try {
    return new Map(wit.getAll());
  } catch (thrown) {
    throw fromHostError(thrown);
  }
}

/** A `ConfigError` for the WIT `err` the bindings throw; anything else unchanged. */
function fromHostError(thrown: unknown): unknown {
  if (typeof thrown === 'object' && thrown !== null && Object.prototype.hasOwnProperty.call(thrown, 'payload')) {
    const payload = (thrown as { payload: { tag?: unknown; val?: unknown } }).payload;
    if ((payload?.tag === 'upstream' || payload?.tag === 'io') && typeof payload.val === 'string') {
      return new ConfigError(payload as WitError);
    }
  }
  return thrown;
}
