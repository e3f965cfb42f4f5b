// Entry point of the parsing worker threads. The sources are TypeScript run without a build
// step, and a worker thread does not inherit the loader registered in the main thread.
import { register } from 'tsx/esm/api';

register();
const { default: runParseTask } = await import('./parse-task.ts');

export default runParseTask;
