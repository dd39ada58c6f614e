import assert from 'node:assert/strict';
import { test } from 'node:test';
import { respond, serve } from '../src/serve.js';

const REQUEST = () => new Request('http://localhost/orders/17?expand=items', { method: 'POST', body: 'order' });

test('a default `{ fetch }` answers the fetch event, with its own `this`', async () => {
  const listeners: [string, (event: unknown) => void][] = [];
  const app = {
    prefix: 'got',
    async fetch(this: { prefix: string }, request: Request): Promise<Response> {
      return new Response(`${this.prefix} ${request.method} ${await request.text()}`, { status: 201 });
    },
  };
  serve({ default: app }, (type, listener) => listeners.push([type, listener as (event: unknown) => void]));
  assert.equal(listeners.length, 1);
  assert.equal(listeners[0]![0], 'fetch');
  let answer: Promise<Response> | Response | undefined;
  listeners[0]![1]({ request: REQUEST(), respondWith: (response: Promise<Response>) => (answer = response) });
  const response = await answer!;
  assert.equal(response.status, 201);
  assert.equal(await response.text(), 'got POST order');
});

test('a module without a default `{ fetch }` keeps its own listener', () => {
  serve({ default: undefined }, () => assert.fail('a listener was added'));
  serve({ default: { other: 1 } }, () => assert.fail('a listener was added'));
});

test('a module that exports `handle` is refused, naming the world', () => {
  assert.throws(
    () => serve({ handle: () => 'x' }, () => {}),
    (error: unknown) => error instanceof TypeError && /world `function`/.test(error.message),
  );
});

test('what the handler throws is a 500 with the message and its causes', async () => {
  const response = await respond(
    {
      fetch() {
        throw new Error('reading the order', { cause: new Error('bad JSON') });
      },
    },
    REQUEST(),
  );
  assert.equal(response.status, 500);
  assert.equal(response.headers.get('content-type'), 'text/plain; charset=utf-8');
  assert.equal(await response.text(), 'reading the order: bad JSON');
});

test('a rejected promise is a 500 too', async () => {
  const response = await respond({ fetch: () => Promise.reject('plain text') }, REQUEST());
  assert.equal(response.status, 500);
  assert.equal(await response.text(), 'plain text');
});

test('something other than a Response is a 500 naming it', async () => {
  const response = await respond({ fetch: () => 'text' as unknown as Response }, REQUEST());
  assert.equal(response.status, 500);
  assert.equal(await response.text(), 'fetch returned a string, expected a Response');
});

test('a response passes unchanged, repeated headers kept', async () => {
  const sent = new Response(new Uint8Array([0, 1, 2]), {
    status: 202,
    headers: [
      ['set-cookie', 'a=1'],
      ['set-cookie', 'b=2'],
    ],
  });
  const response = await respond({ fetch: () => sent }, REQUEST());
  assert.equal(response, sent);
  assert.deepEqual(response.headers.getSetCookie(), ['a=1', 'b=2']);
});
