// The entry module of an HTTP function (`world = "http-function"` in tally.toml):
// `tally build` bundles it as `entry.js`, with `tally-app` aliased to the project's
// entry module, and componentize-js keeps StarlingMonkey's `fetch` event, which exports
// `wasi:http/incoming-handler`. The project's default `{ fetch }` answers the events; a
// project without one adds its own `fetch` listener.
import * as app from 'tally-app';
import { serve } from './src/serve.js';

serve(app, (type, listener) => addEventListener(type, listener));
