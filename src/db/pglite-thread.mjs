// Entry point of the embedded store's thread when the TypeScript sources run directly (vitest,
// tsx scripts): see src/thread-module.mjs. The compiled service (dist/) loads pglite-thread.js
// instead; see embedded-store-thread.ts.
import { importThreadModule } from '../thread-module.mjs';

await importThreadModule(new URL('./pglite-thread.ts', import.meta.url).href);
