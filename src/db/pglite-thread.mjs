// Entry point of the embedded store's thread when the TypeScript sources run directly (vitest,
// tsx scripts): a worker thread does not inherit the loader registered in the main thread. The
// compiled service (dist/) loads pglite-thread.js instead; see embedded-store-thread.ts.
import { register } from 'tsx/esm/api';

register();
await import('./pglite-thread.ts');
