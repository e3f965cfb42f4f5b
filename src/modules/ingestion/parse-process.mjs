// Entry point of the parsing processes when the TypeScript sources run directly (vitest, tsx
// scripts, the benchmark): see src/thread-module.mjs. The compiled service (dist/) starts
// parse-process.js instead; see parse-pool.ts.
import { importThreadModule } from '../../thread-module.mjs';

await importThreadModule(new URL('./parse-process.ts', import.meta.url).href);
