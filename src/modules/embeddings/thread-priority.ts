import { getPriority, setPriority } from 'node:os';
import { isMainThread } from 'node:worker_threads';

/**
 * Lowers the CPU priority of the calling worker thread by `niceness`, so that it yields the cores
 * to the HTTP thread, the embedded store's thread and the embedder's query thread whenever they
 * want them, and runs at full speed otherwise. Linux keeps a nice value per thread, and `setpriority` on the calling
 * "process" sets only the calling thread's. Elsewhere it would lower the whole process, HTTP
 * thread included, so other platforms, and the main thread, are left as they are.
 *
 * Threads started later by this thread inherit its value. libuv's pool threads are shared by the
 * process and started by the first thread that needs one: createOnnxEmbedder reads the model's
 * files on the main thread before it starts the workers.
 */
export function lowerThreadPriority(niceness: number) {
  if (niceness <= 0 || isMainThread || process.platform !== 'linux') return;
  try {
    setPriority(Math.min(19, getPriority() + niceness));
  } catch {
    // Not allowed here (a sandbox forbidding setpriority): the thread keeps the process's priority.
  }
}
