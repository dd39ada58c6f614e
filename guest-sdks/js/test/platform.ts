// Fakes of the `tally:platform/*` imports and of `wasi:config/store`, for tests of the
// SDK modules that call the host. Importing this module registers Node module hooks that resolve each interface
// to a module whose functions call the ones set in `host`, so a test sets what the host
// does and then imports the SDK module dynamically (a static import would be resolved
// before the hooks exist):
//
//   import { ComponentError, host } from './platform.js';
//   const context = await import('../src/context.js');
//   host.context.sleep = (ms) => { ... };
//
// A function a test has not set throws when it is called.

import { register } from 'node:module';

/** The functions of each interface, as `src/platform.d.ts` declares them. */
const INTERFACES: Record<string, readonly string[]> = {
  types: [],
  log: ['append', 'condAppend', 'readNext', 'readPrev', 'checkTail', 'trim', 'setAuxData'],
  invoke: ['call'],
  state: ['get', 'put', 'delete'],
  objects: ['get', 'set', 'increment', 'push', 'remove', 'begin', 'commit', 'abort'],
  queues: ['push', 'pop', 'popMany'],
  locks: ['acquire', 'release'],
  context: ['invocationId', 'bookId', 'attempt', 'functionName', 'key', 'sleep', 'sleepUntil', 'promiseCreate', 'promiseAwait'],
  // `wasi:config/store@0.2.0-rc.1`, the settings.
  config: ['get', 'getAll'],
};

/** The module specifier of each faked interface. */
function specifier(name: string): string {
  return name === 'config' ? 'wasi:config/store@0.2.0-rc.1' : `tally:platform/${name}`;
}

type Fake = (...args: any[]) => unknown;

/** What each faked host function does, by interface and name: set by the tests. */
export const host: Record<string, Record<string, Fake | undefined>> = Object.fromEntries(
  Object.keys(INTERFACES).map((name) => [name, {}]),
);

const KEY = 'tally.test.host';
(globalThis as Record<symbol, unknown>)[Symbol.for(KEY)] = host;

/** The source of the fake module of interface `name`. */
function moduleSource(name: string): string {
  const functions = INTERFACES[name] ?? [];
  const lines = [`const host = globalThis[Symbol.for(${JSON.stringify(KEY)})][${JSON.stringify(name)}];`];
  functions.forEach((fn, i) => {
    const id = JSON.stringify(fn);
    lines.push(
      `function f${i}(...args) {`,
      `  const fake = host[${id}];`,
      `  if (typeof fake !== 'function') throw new Error('${specifier(name)}#${fn} is not faked');`,
      `  return fake(...args);`,
      `}`,
      `export { f${i} as ${fn} };`,
    );
  });
  return lines.join('\n');
}

const sources = Object.fromEntries(Object.keys(INTERFACES).map((name) => [specifier(name), moduleSource(name)]));

// The hooks run on a thread of their own, so they get the modules' sources as data.
const HOOKS = `
let sources;
export function initialize(data) { sources = data; }
export function resolve(specifier, context, next) {
  return Object.hasOwn(sources, specifier) ? { url: specifier, shortCircuit: true } : next(specifier, context);
}
export function load(url, context, next) {
  return Object.hasOwn(sources, url) ? { format: 'module', source: sources[url], shortCircuit: true } : next(url, context);
}
`;
register(`data:text/javascript,${encodeURIComponent(HOOKS)}`, import.meta.url, { data: sources });

/**
 * What the componentize-js bindings throw when a host call returns the WIT `err`: an
 * error whose own `payload` is the `error` variant.
 */
export class ComponentError extends Error {
  payload: unknown;
  constructor(payload: unknown) {
    super('(see error.payload)');
    this.payload = payload;
  }
}
