import { Piscina } from 'piscina';
// The native addons the parsing threads use, loaded once by the main thread too: an addon loaded
// by worker threads alone is unloaded when the last of them ends, and code of it still running
// (a thread ended mid-render, the addon's own helper threads) then crashes the whole process at
// random, with no message. Loaded here, the library stays for the process's life. Both projects
// document this for worker threads; it costs about 60 ms once at start.
import '@napi-rs/canvas';
import 'sharp';
import { MessageChannel } from 'node:worker_threads';
import type { ParseProgress, ParseTask, ParseTaskResult } from './parse-task.js';

export type ParsePool = {
  /**
   * Parses and chunks in a worker thread. Rejects with ParseLimitError when the parse needs more
   * memory than the pool allows (the thread is ended and its memory returned), and with the
   * signal's reason when `signal` aborts (the thread is ended at once). `onProgress` hears what
   * the parse reports as it goes (a page about to be read by OCR).
   */
  parse(task: Omit<ParseTask, 'progress'>, signal?: AbortSignal, onProgress?: (progress: ParseProgress) => void): Promise<ParseTaskResult>;
  /** Threads running now (started, not yet ended). */
  readonly threads: number;
  /** Settles when the threads a warm pool starts have loaded the parsers (at once for a pool that does not warm). */
  readonly warmed: Promise<void>;
  close(): Promise<void>;
};

/** A parse stopped by a limit of the pool; retrying would stop it again. */
export class ParseLimitError extends Error {
  override name = 'ParseLimitError';
}

export type ParsePoolOptions = {
  /** Heap limit of each thread. */
  memoryMb: number;
  /**
   * How long a thread with nothing to do is kept (KB_PARSE_THREAD_IDLE_SECONDS, 300 by default).
   * Starting one (loading the parsers) took 0.3 s alone and up to 2.2 s beside a bulk upload; a
   * client uploading in rounds should not pay it every round.
   */
  idleSeconds: number;
  /**
   * Starts every thread now rather than on the first document, so a server's first upload is
   * parsed at once; unused, they end after `idleSeconds` like any idle thread.
   */
  warm?: boolean;
};

/** Worker threads for parsing and chunking, so no document ever blocks the HTTP event loop. */
export function createParsePool(threads: number, { memoryMb, idleSeconds, warm = false }: ParsePoolOptions): ParsePool {
  const pool = new Piscina({
    // Compiled (dist/): the task module itself. Sources run by tsx or vitest: a shim that registers tsx in the thread.
    filename: new URL(import.meta.url.endsWith('.ts') ? './parse-worker.mjs' : './parse-task.js', import.meta.url).href,
    minThreads: 0,
    maxThreads: threads,
    idleTimeout: idleSeconds * 1000,
    resourceLimits: { maxOldGenerationSizeMb: memoryMb, maxYoungGenerationSizeMb: Math.min(64, Math.max(16, memoryMb / 16)) },
  });
  // One task per thread, all at once: the pool starts a thread for each. A thread that fails to
  // start is started again by the first parse, which then reports the failure.
  const warmed = warm
    ? Promise.all(Array.from({ length: threads }, () => pool.run(undefined, { name: 'warm' }))).then(
        () => undefined,
        () => undefined,
      )
    : Promise.resolve();
  return {
    warmed,
    async parse(task, signal, onProgress) {
      const channel = onProgress ? new MessageChannel() : undefined;
      channel?.port1.on('message', (message: ParseProgress) => onProgress!(message));
      try {
        return (await pool.run(channel ? { ...task, progress: channel.port2 } : task, { signal, ...(channel && { transferList: [channel.port2] }) })) as ParseTaskResult;
      } catch (error) {
        if (signal?.aborted) throw signal.reason;
        if ((error as { code?: string }).code === 'ERR_WORKER_OUT_OF_MEMORY') {
          throw new ParseLimitError(`parsing needed more than the memory limit of ${memoryMb} MB`);
        }
        throw error;
      } finally {
        channel?.port1.close();
      }
    },
    get threads() {
      return pool.threads.length;
    },
    close: () => pool.destroy(),
  };
}
