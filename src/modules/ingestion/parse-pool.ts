import { Piscina } from 'piscina';
import type { ParseTask, ParseTaskResult } from './parse-task.js';

export type ParsePool = {
  /**
   * Parses and chunks in a worker thread. Rejects with ParseLimitError when the parse needs more
   * memory than the pool allows (the thread is ended and its memory returned), and with the
   * signal's reason when `signal` aborts (the thread is ended at once).
   */
  parse(task: ParseTask, signal?: AbortSignal): Promise<ParseTaskResult>;
  close(): Promise<void>;
};

/** A parse stopped by a limit of the pool; retrying would stop it again. */
export class ParseLimitError extends Error {
  override name = 'ParseLimitError';
}

/** Worker threads for parsing and chunking, so no document ever blocks the HTTP event loop. */
export function createParsePool(threads: number, { memoryMb }: { memoryMb: number }): ParsePool {
  const pool = new Piscina({
    // Compiled (dist/): the task module itself. Sources run by tsx or vitest: a shim that registers tsx in the thread.
    filename: new URL(import.meta.url.endsWith('.ts') ? './parse-worker.mjs' : './parse-task.js', import.meta.url).href,
    minThreads: 0,
    maxThreads: threads,
    idleTimeout: 30_000,
    resourceLimits: { maxOldGenerationSizeMb: memoryMb, maxYoungGenerationSizeMb: Math.min(64, Math.max(16, memoryMb / 16)) },
  });
  return {
    async parse(task, signal) {
      try {
        return (await pool.run(task, { signal })) as ParseTaskResult;
      } catch (error) {
        if (signal?.aborted) throw signal.reason;
        if ((error as { code?: string }).code === 'ERR_WORKER_OUT_OF_MEMORY') {
          throw new ParseLimitError(`parsing needed more than the memory limit of ${memoryMb} MB`);
        }
        throw error;
      }
    },
    close: () => pool.destroy(),
  };
}
