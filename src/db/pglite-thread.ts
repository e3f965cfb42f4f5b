// The embedded store's own thread: it owns the PGlite instance and answers raw PostgreSQL wire
// protocol messages, so that running a query never occupies the HTTP event loop. See
// embedded-store-thread.ts for the other side.
import { parentPort, workerData } from 'node:worker_threads';
import { PGlite } from '@electric-sql/pglite';
import { pageinspect } from '@electric-sql/pglite/contrib/pageinspect';
import { vector } from '@electric-sql/pglite-pgvector';
import { placeThisThread } from '../thread-placement.js';

export type StoreThreadRequest = { id: number; kind: 'exec'; message: Uint8Array } | { id: number; kind: 'close' };

export type StoreThreadReply =
  | { kind: 'ready'; /** Why the thread could not be kept on `cpus`, when it could not. */ placementProblem?: string }
  | { kind: 'failed'; message: string }
  | { id: number; kind: 'result'; bytes: Uint8Array }
  | { id: number; kind: 'error'; message: string };

/** `cpus`: the CPUs the thread keeps to (thread-placement.ts); any, when not given. */
export type StoreThreadOptions = { directory: string; cacheMb: number; cpus?: number[] };

const port = parentPort;
if (!port) throw new Error('pglite-thread must run in a worker thread');
const { directory, cacheMb, cpus } = workerData as StoreThreadOptions;
const placementProblem = cpus ? await placeThisThread(cpus) : undefined;

let pglite: PGlite;
try {
  // pgvector is loaded into every embedded store; the vector index creates the extension in SQL.
  // PostgreSQL's default page cache (128 MB) holds about half the HNSW graph of 100,000 chunks;
  // a page missed there is read through the WebAssembly file system, and a vector search took
  // twice as long (docs/retrieval.md). The whole cache is taken at start, so its size is chosen
  // by the caller (embedded-store.ts: from the store's size, or KB_STORE_CACHE_MB).
  pglite = await PGlite.create(directory, {
    // pageinspect reads pages into the cache after a start (embedded-cache-warm.ts).
    extensions: { vector, pageinspect },
    startParams: [...PGlite.defaultStartParams, '-c', `shared_buffers=${cacheMb}MB`],
  });
} catch (error) {
  port.postMessage({ kind: 'failed', message: (error as Error).message } satisfies StoreThreadReply);
  process.exit(1);
}

function concatenate(parts: readonly Uint8Array[]): Uint8Array {
  const joined = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
  let offset = 0;
  for (const part of parts) {
    joined.set(part, offset);
    offset += part.length;
  }
  return joined;
}

// The connection sends one message at a time; the chain keeps that order even if it did not.
let previous: Promise<unknown> = Promise.resolve();
port.on('message', (request: StoreThreadRequest) => {
  previous = previous.then(async () => {
    try {
      if (request.kind === 'close') {
        await pglite.close();
        port.postMessage({ id: request.id, kind: 'result', bytes: new Uint8Array(0) } satisfies StoreThreadReply);
        port.close();
        return;
      }
      // Not execProtocolRaw: in PGlite 0.5.14-0.5.16 it also parses every reply and keeps the
      // parsed messages in an array that only execProtocol empties, so every row ever read or
      // written stayed on this thread's heap (330 MB per 238-page PDF ingested). With a reader of
      // its own, the bytes are passed on unparsed and nothing is kept.
      const parts: Uint8Array[] = [];
      await pglite.execProtocolRawStream(request.message, { onRawData: (data) => void parts.push(data.slice()) });
      const bytes = parts.length === 1 ? parts[0]! : concatenate(parts);
      port.postMessage({ id: request.id, kind: 'result', bytes } satisfies StoreThreadReply, [bytes.buffer as ArrayBuffer]);
    } catch (error) {
      port.postMessage({ id: request.id, kind: 'error', message: (error as Error).message } satisfies StoreThreadReply);
    }
  });
});
port.postMessage({ kind: 'ready', ...(placementProblem ? { placementProblem } : {}) } satisfies StoreThreadReply);
