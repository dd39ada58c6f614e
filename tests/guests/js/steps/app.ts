/**
 * A function of several exactly-once steps, for the host's crash-injection tests: a
 * crash at any point and a re-execution must leave each counter incremented once.
 *
 * The TypeScript `steps` guest of `tests/guests/STEPS.md`: `run`, `child`, `read` and a
 * `script` of ops over the SDK's calls (log, state, objects, queues, locks, calls and
 * context). The host's tests give it the same inputs as the
 * Rust reference (`tests/guests/steps/src/lib.rs`) and compare the outputs byte for
 * byte, so it follows that guest to the letter, down to its error messages: words are
 * split on Unicode whitespace (Rust's `split_whitespace`), numbers parse as Rust's do
 * (`parseU64`), and strings in messages are quoted as Rust's `{:?}` quotes them.
 */

import {
  Conflict,
  context,
  Failed,
  InvalidArgument,
  invoke,
  locks,
  log,
  type LogRecord,
  NotFound,
  objects,
  parseI64,
  parseU64,
  queues,
  SeqNum,
  state,
  Tag,
  Timeout,
  TooLarge,
  trap,
  Unavailable,
} from '@tally/sdk';

export async function handle(input: Uint8Array): Promise<Uint8Array | string> {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(input);
  } catch {
    throw new Error('the input is not UTF-8');
  }
  const words = splitWhitespace(text);
  const [command, table, extra] = words;
  if (command === 'run' && words.length === 2) {
    return run(table!, undefined);
  }
  if (command === 'run' && words.length === 3) {
    let sleepMs: bigint;
    try {
      sleepMs = parseU64(extra!);
    } catch {
      throw new Error(`sleep_ms ${quoted(extra!)} is not a u64`);
    }
    return run(table!, sleepMs);
  }
  if (command === 'child' && words.length === 2) {
    return String(increment(table!, 'c'));
  }
  if (command === 'script') {
    return script(trimStart(text).slice('script'.length));
  }
  if (command === 'read' && words.length === 3) {
    return state.get(table!, extra!) ?? 'none';
  }
  throw new Error(
    `expected \`run <table> [sleep_ms]\`, \`child <table>\` or \`read <table> <key>\`, found ${quoted(text)}`,
  );
}

/** Takes the four steps of `run`, with a pause between them if `pauseMs` is given. */
async function run(table: string, pauseMs: bigint | undefined): Promise<string> {
  const pause = () => (pauseMs === undefined ? undefined : sleep(pauseMs));

  const a = increment(table, 'a');
  await pause();

  // Calling the name this function was deployed under keeps the test independent of how
  // it is deployed.
  const output = invoke.call(context.functionName(), `child ${table}`);
  let c: bigint;
  try {
    c = parseI64(new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(output));
  } catch {
    throw new Error(`the child returned ${quoted(lossy(output))}, not a decimal i64`);
  }
  await pause();

  const b = increment(table, 'b');
  await pause();

  state.put(table, 'tmp', 'x');
  state.delete(table, 'tmp');

  return `a=${a} b=${b} c=${c}`;
}

/** Runs a `;`-separated script of ops (STEPS.md). */
async function script(ops: string): Promise<string> {
  const results: string[] = [];
  for (const rawOp of ops.split(';')) {
    const op = trim(rawOp);
    if (op === '') {
      continue;
    }
    const words = splitWhitespace(op).map((word) => substitute(word, results));
    const [name, ...args] = words;
    const arity = (n: number) => args.length === n;
    let result: string;
    if (name === 'get' && arity(2)) {
      const value = state.get(args[0]!, args[1]!);
      result = value === undefined ? 'none' : lossy(value);
    } else if (name === 'put' && arity(3)) {
      state.put(args[0]!, args[1]!, args[2]!);
      result = 'ok';
    } else if (name === 'del' && arity(2)) {
      state.delete(args[0]!, args[1]!);
      result = 'ok';
    } else if (name === 'inc' && arity(2)) {
      result = String(increment(args[0]!, args[1]!));
    } else if (name === 'child' && arity(2)) {
      result = lossy(invoke.call(context.functionName(), `script inc ${args[0]} ${args[1]}`));
    } else if (name === 'call' && args.length >= 1) {
      const [func, ...input] = args as [string, ...string[]];
      result = reported(() => lossy(invoke.call(func, input.join(' '))));
    } else if (name === 'append' && arity(2)) {
      result = reported(() => String(log.append(tags(args[0]!), args[1]!)));
    } else if (name === 'rawappend' && arity(2)) {
      const tag = u64(args[0]!, (word) => `${quoted(word)} is not a tag number`);
      result = reported(() => String(log.append([tag], args[1]!)));
    } else if (name === 'cond' && arity(3)) {
      const position = u64(args[1]!, (word) => `${quoted(word)} is not a position`);
      const tag = named(args[0]!);
      result = reported(() => String(log.condAppend(tag === Tag.ALL ? [] : [tag], args[2]!, tag, position)));
    } else if (name === 'next' && arity(2)) {
      const from = seqnum(args[1]!);
      result = reported(() => shown(log.readNext(named(args[0]!), from)));
    } else if (name === 'prev' && arity(2)) {
      const upto = seqnum(args[1]!);
      result = reported(() => shown(log.readPrev(named(args[0]!), upto)));
    } else if (name === 'tail' && arity(1)) {
      result = reported(() => shown(log.checkTail(named(args[0]!))));
    } else if (name === 'tags' && arity(2)) {
      const from = seqnum(args[1]!);
      result = reported(() => {
        const record = log.readNext(named(args[0]!), from);
        if (record === undefined) {
          return 'none';
        }
        return record.tags.length === 0 ? '-' : record.tags.join('+');
      });
    } else if (name === 'aux' && arity(2)) {
      const at = seqnum(args[0]!);
      result = reported(() => (log.setAuxData(at, args[1]!), 'ok'));
    } else if (name === 'trim' && arity(2)) {
      const before = seqnum(args[1]!);
      result = reported(() => (log.trim(named(args[0]!), before), 'ok'));
    } else if (name === 'trim0' && arity(1)) {
      const before = seqnum(args[0]!);
      result = reported(() => (log.trim(Tag.ALL, before), 'ok'));
    } else if (name === 'tag' && arity(1)) {
      result = String(named(args[0]!));
    } else if (name === 'ctx' && arity(0)) {
      result = `${context.functionName()}/${context.bookId()}/${context.attempt()}`;
    } else if (name === 'id' && arity(0)) {
      result = context.invocationId();
    } else if (name === 'sleep' && arity(1)) {
      await sleep(u64(args[0]!, (word) => `sleep ${quoted(word)}: not a u64`));
      result = 'ok';
    } else if (name === 'nap' && arity(1)) {
      const ms = u64(args[0]!, (word) => `nap ${quoted(word)}: not a u64`);
      result = reported(() => {
        context.sleep(ms);
        return 'ok';
      });
    } else if (name === 'promise' && arity(0)) {
      result = reported(() => context.promiseCreate());
    } else if (name === 'await' && arity(1)) {
      result = reported(() => lossy(context.promiseAwait(args[0]!)));
    } else if (name === 'await' && arity(2)) {
      const ms = u64(args[1]!, (word) => `await ${quoted(word)}: not a u64`);
      result = reported(() => lossy(context.promiseAwait(args[0]!, ms)));
    } else if (name === 'oget' && arity(2)) {
      result = reported(() => objects.get(args[0]!, pointer(args[1]!)) ?? 'none');
    } else if (name === 'oset' && arity(3)) {
      result = reported(() => (objects.set(args[0]!, pointer(args[1]!), args[2]!), 'ok'));
    } else if (name === 'oinc' && arity(3)) {
      const by = i64(args[2]!, (word) => `oinc ${quoted(word)}: not an i64`);
      result = reported(() => (objects.increment(args[0]!, pointer(args[1]!), by), 'ok'));
    } else if (name === 'opush' && arity(3)) {
      result = reported(() => (objects.push(args[0]!, pointer(args[1]!), args[2]!), 'ok'));
    } else if (name === 'orm' && arity(2)) {
      result = reported(() => (objects.remove(args[0]!, pointer(args[1]!)), 'ok'));
    } else if (name === 'begin' && arity(0)) {
      result = reported(() => (objects.begin(), 'ok'));
    } else if (name === 'beginro' && arity(0)) {
      result = reported(() => (objects.begin({ readOnly: true }), 'ok'));
    } else if (name === 'commit' && arity(0)) {
      result = reported(() => (objects.commit() ? 'committed' : 'conflict'));
    } else if (name === 'abort' && arity(0)) {
      result = reported(() => (objects.abort(), 'ok'));
    } else if (name === 'qpush' && arity(2)) {
      result = reported(() => (queues.push(args[0]!, args[1]!), 'ok'));
    } else if (name === 'qpop' && arity(2)) {
      const ms = u64(args[1]!, (word) => `qpop ${quoted(word)}: not a u64`);
      result = reported(() => {
        const message = queues.pop(args[0]!, ms);
        return message === undefined ? 'none' : lossy(message);
      });
    } else if (name === 'qpopn' && arity(3)) {
      const n = u64(args[1]!, (word) => `qpopn ${quoted(word)}: not a u64`);
      const ms = u64(args[2]!, (word) => `qpopn ${quoted(word)}: not a u64`);
      const max = Number(n > 0xffff_ffffn ? 0xffff_ffffn : n);
      result = reported(() => queues.popMany(args[0]!, max, ms).map(lossy).join('+') || 'none');
    } else if (name === 'lock' && arity(2)) {
      const ms = u64(args[1]!, (word) => `lock ${quoted(word)}: not a u64`);
      result = reported(() => String(locks.acquire(args[0]!, ms)));
    } else if (name === 'unlock' && arity(1)) {
      result = reported(() => (locks.release(args[0]!), 'ok'));
    } else if (name === 'key' && arity(0)) {
      result = context.key() ?? 'none';
    } else if (name === 'chain' && args.length >= 1) {
      result = chain(args[0]!, args.slice(1));
    } else if (name === 'fail') {
      throw new Error(args.join(' '));
    } else if (name === 'crash' && arity(0)) {
      trap('crash requested by the script');
    } else {
      throw new Error(`unknown script op ${quoted(op)}`);
    }
    results.push(result);
  }
  return results.join(',');
}

/**
 * One link of a chain of functions on one book (STEPS.md): appends this function's name
 * to the stream of `name` once, counts itself in table `chain`, and calls the next link.
 */
function chain(name: string, rest: readonly string[]): string {
  const tag = named(name);
  const me = context.functionName();
  const before = stream(tag);
  const mine = before.indexOf(me);
  const seen = joined(mine === -1 ? before : before.slice(0, mine));
  if (mine === -1) {
    const error = reportedError(() => log.condAppend([tag], me, tag, BigInt(before.length)));
    if (error !== undefined) {
      return error;
    }
  }
  increment('chain', me);
  if (rest.length === 0) {
    return `${me}:${seen}`;
  }
  const [next, ...more] = rest as [string, ...string[]];
  const input = `script chain ${name} ${more.join(' ')}`.replace(TRAILING, '');
  let output = '';
  const error = reportedError(() => {
    output = lossy(invoke.call(next, input));
  });
  if (error !== undefined) {
    return error;
  }
  return `${me}:${seen} > ${output} < ${joined(stream(tag))}`;
}

/** The data of every record in a stream, in order. */
function stream(tag: Tag): string[] {
  const records: string[] = [];
  let next: SeqNum | undefined = SeqNum.MIN;
  while (next !== undefined) {
    const record = log.readNext(tag, next);
    if (record === undefined) {
      break;
    }
    records.push(lossy(record.data));
    next = record.seqnum < SeqNum.MAX ? record.seqnum + 1n : undefined;
  }
  return records;
}

/** Stream data joined by `+`, `-` for none. */
function joined(data: readonly string[]): string {
  return data.length === 0 ? '-' : data.join('+');
}

/** `word`, or for `$N` the result of op `N` so far. */
function substitute(word: string, results: readonly string[]): string {
  if (!word.startsWith('$')) {
    return word;
  }
  let n: bigint | undefined;
  try {
    n = parseU64(word.slice(1));
  } catch {
    n = undefined;
  }
  if (n === undefined || n < 1n || n > BigInt(results.length)) {
    throw new Error(`${word}: no such earlier op (ops count from 1)`);
  }
  return results[Number(n) - 1]!;
}

/** The tag of a name, with `*` for the whole book. */
function named(name: string): Tag {
  return name === '*' ? Tag.ALL : Tag.named(name);
}

/** The tags of a comma-separated list of names, `-` for none. */
function tags(names: string): Tag[] {
  return names === '-' ? [] : names.split(',').map(named);
}

function seqnum(word: string): SeqNum {
  return word === 'max' ? SeqNum.MAX : u64(word, (word) => `${quoted(word)} is not a seqnum`);
}

/** A JSON pointer of an op, with `.` for `""`, the whole object. */
function pointer(word: string): string {
  return word === '.' ? '' : word;
}

/** `word` as an i64, or a guest error with `message(word)`. */
function i64(word: string, message: (word: string) => string): bigint {
  try {
    return parseI64(word);
  } catch {
    throw new Error(message(word));
  }
}

/** `word` as a u64, or a guest error with `message(word)`. */
function u64(word: string, message: (word: string) => string): bigint {
  try {
    return parseU64(word);
  } catch {
    throw new Error(message(word));
  }
}

/** A record read by `next`, `prev` or `tail`: `<seqnum>:<data>:<aux or none>`. */
function shown(record: LogRecord | undefined): string {
  if (record === undefined) {
    return 'none';
  }
  return `${record.seqnum}:${lossy(record.data)}:${record.aux === undefined ? 'none' : lossy(record.aux)}`;
}

/** An op's result with a platform error as `error:<code>`. */
function reported(op: () => string): string {
  let result = '';
  return (
    reportedError(() => {
      result = op();
    }) ?? result
  );
}

/** Runs `op`: `undefined` if it succeeds, a platform error as `error:<code>`. */
function reportedError(op: () => unknown): string | undefined {
  try {
    op();
    return undefined;
  } catch (error) {
    if (error instanceof InvalidArgument) return 'error:invalid_argument';
    if (error instanceof NotFound) return 'error:not_found';
    if (error instanceof Conflict) return `error:conflict:${error.holder ?? 'none'}`;
    if (error instanceof Unavailable) return 'error:unavailable';
    if (error instanceof TooLarge) return 'error:too_large';
    if (error instanceof Timeout) return 'error:timeout';
    if (error instanceof Failed) return 'error:failed';
    throw error;
  }
}

/** Adds 1 to the counter `key` in `table` and returns its new value. */
function increment(table: string, key: string): bigint {
  const value = (state.getI64(table, key) ?? 0n) + 1n;
  if (value > (1n << 63n) - 1n) {
    throw new Error(`the counter ${quoted(key)} in table ${quoted(table)} overflows an i64`);
  }
  state.putI64(table, key, value);
  return value;
}

/** Waits `ms` milliseconds (setTimeout takes at most 2^31 - 1 at a time). */
async function sleep(ms: bigint): Promise<void> {
  for (let left = ms; left > 0n; ) {
    const step = left < 1n << 30n ? left : 1n << 30n;
    await new Promise((resolve) => setTimeout(resolve, Number(step)));
    left -= step;
  }
}

/** Bytes as UTF-8, with U+FFFD for what is not (Rust's `String::from_utf8_lossy`). */
function lossy(bytes: Uint8Array): string {
  return new TextDecoder('utf-8', { ignoreBOM: true }).decode(bytes);
}

// Rust's `char::is_whitespace`: the Unicode White_Space property. JavaScript's `\s` has
// U+FEFF instead of U+0085.
const WHITESPACE = '[\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]';
const SPLIT = new RegExp(`${WHITESPACE}+`);
const LEADING = new RegExp(`^${WHITESPACE}+`);
const TRAILING = new RegExp(`${WHITESPACE}+$`);

/** Rust's `str::split_whitespace`. */
function splitWhitespace(text: string): string[] {
  return text.split(SPLIT).filter((word) => word !== '');
}

/** Rust's `str::trim_start`. */
function trimStart(text: string): string {
  return text.replace(LEADING, '');
}

/** Rust's `str::trim`. */
function trim(text: string): string {
  return trimStart(text).replace(TRAILING, '');
}

/**
 * `text` as Rust's `{:?}` shows a string: in double quotes, with `\0 \t \r \n \\ \"`
 * escaped and other control, format and separator characters and combining marks as
 * `\u{XXXX}` (an approximation of Rust's tables, exact for what the tests send).
 */
function quoted(text: string): string {
  let out = '"';
  for (const char of text) {
    const code = char.codePointAt(0)!;
    const short = SHORT_ESCAPES[char];
    if (short !== undefined) {
      out += short;
    } else if (ESCAPED.some(([first, last]) => code >= first && code <= last)) {
      out += `\\u{${code.toString(16)}}`;
    } else {
      out += char;
    }
  }
  return out + '"';
}

const SHORT_ESCAPES: Readonly<Record<string, string>> = {
  '\0': '\\0',
  '\t': '\\t',
  '\r': '\\r',
  '\n': '\\n',
  '\\': '\\\\',
  '"': '\\"',
};

const ESCAPED: readonly (readonly [number, number])[] = [
  [0x0000, 0x001f],
  [0x007f, 0x00a0],
  [0x00ad, 0x00ad],
  [0x0300, 0x036f],
  [0x0600, 0x0605],
  [0x061c, 0x061c],
  [0x06dd, 0x06dd],
  [0x070f, 0x070f],
  [0x1680, 0x1680],
  [0x180e, 0x180e],
  [0x1ab0, 0x1aff],
  [0x1dc0, 0x1dff],
  [0x2000, 0x200f],
  [0x2028, 0x202f],
  [0x205f, 0x206f],
  [0x20d0, 0x20ff],
  [0x3000, 0x3000],
  [0xd800, 0xf8ff],
  [0xfe00, 0xfe0f],
  [0xfe20, 0xfe2f],
  [0xfeff, 0xfeff],
  [0xfff0, 0xfffb],
  [0xfffe, 0xffff],
  [0xe0000, 0xe0fff],
  [0xf0000, 0x10ffff],
];
