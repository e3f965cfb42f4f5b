// Entry point of the parsing worker threads when the TypeScript sources run directly (vitest,
// tsx scripts, the benchmark): a worker thread does not inherit the loader registered in the main
// thread. The compiled service (dist/) loads parse-task.js instead; see parse-pool.ts.
import { register } from 'tsx/esm/api';

register();
const { default: runParseTask, warm } = await import('./parse-task.ts');

export default runParseTask;
export { warm };
