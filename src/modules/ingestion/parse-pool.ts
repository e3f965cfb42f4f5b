import { Piscina } from 'piscina';
import type { ParseTask, ParseTaskResult } from './parse-task.js';

export type ParsePool = {
  parse(task: ParseTask, signal?: AbortSignal): Promise<ParseTaskResult>;
  close(): Promise<void>;
};

/** Worker threads for parsing and chunking, so no document ever blocks the HTTP event loop. */
export function createParsePool(threads: number): ParsePool {
  const pool = new Piscina({
    // Compiled (dist/): the task module itself. Sources run by tsx or vitest: a shim that registers tsx in the thread.
    filename: new URL(import.meta.url.endsWith('.ts') ? './parse-worker.mjs' : './parse-task.js', import.meta.url).href,
    minThreads: 0,
    maxThreads: threads,
    idleTimeout: 30_000,
  });
  return {
    parse: (task, signal) => pool.run(task, { signal }) as Promise<ParseTaskResult>,
    close: () => pool.destroy(),
  };
}
