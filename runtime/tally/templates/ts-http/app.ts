// {{name}}: a Tally HTTP function. It answers every request with its method and path.
import type { HttpHandler } from '@tally/sdk';
// import { config, http, state } from '@tally/sdk';

export default {
  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    // State is exactly-once per request, as in any function:
    //   const visits = (state.getI64('visits', url.pathname) ?? 0n) + 1n;
    //   state.putI64('visits', url.pathname, visits);
    // Calls out go to destinations allowed at deploy (--outbound http://127.0.0.1:9000):
    //   const answer = await http.fetch(config.get('upstream')!, { method: 'POST', body: await request.text() });
    return new Response(`hello from {{name}}: ${request.method} ${url.pathname}${url.search}`, {
      status: 200,
      headers: { 'content-type': 'text/plain' },
    });
  },
} satisfies HttpHandler;
