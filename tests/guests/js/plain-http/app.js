// A wasi:http component as componentize-js builds one for `wasmtime serve`: the web's
// fetch event, nothing of Tally's. It answers every request with its body, its content
// type, `x-method` and `x-path` (the path with the query); `/status/N` answers status N
// with no body, `/big/N` N bytes (byte i is i % 251), `/trap` throws.
addEventListener('fetch', (event) =>
  event.respondWith(
    (async () => {
      const request = event.request;
      const url = new URL(request.url);
      const headers = new Headers({
        'x-method': request.method,
        'x-path': url.pathname + url.search,
        'content-type': request.headers.get('content-type') || 'application/octet-stream',
      });
      for (const value of request.headers.get('x-repeat')?.split(', ') ?? []) {
        headers.append('x-repeat', value);
      }
      if (url.pathname === '/trap') {
        throw new Error('trapped on purpose');
      }
      if (url.pathname.startsWith('/status/')) {
        return new Response(null, { status: Number(url.pathname.slice('/status/'.length)), headers });
      }
      if (url.pathname.startsWith('/big/')) {
        const body = new Uint8Array(Number(url.pathname.slice('/big/'.length)));
        for (let i = 0; i < body.length; i++) body[i] = i % 251;
        return new Response(body, { headers });
      }
      return new Response(new Uint8Array(await request.arrayBuffer()), { headers });
    })(),
  ),
);
