// The component's entry module: `tally build` bundles it with esbuild, with the import
// `tally-app` aliased to the project's entry module and `@tally/sdk` to this directory,
// and componentize-js exports its `handle` as the WIT export `handle`.
import { handle as app } from 'tally-app';
import { exportHandle } from './src/handler.js';

export const handle = exportHandle(app);
