// Entry point of the parsing worker threads when the TypeScript sources run directly (vitest,
// tsx scripts, the benchmark): see src/thread-module.mjs. The compiled service (dist/) loads
// parse-task.js instead; see parse-pool.ts.
import { importThreadModule } from '../../thread-module.mjs';

const { default: runParseTask, warm } = await importThreadModule(new URL('./parse-task.ts', import.meta.url).href);

export default runParseTask;
export { warm };
