import { Duplex } from 'node:stream';
import { Worker } from 'node:worker_threads';
import type { StoreThreadOptions, StoreThreadReply, StoreThreadRequest } from './pglite-thread.js';

export class StoreThreadStoppedError extends Error {
  override name = 'StoreThreadStoppedError';
}

/**
 * PGlite running in a worker thread, seen from the main thread. `socket()` gives `pg` a stream
 * that carries the wire protocol to the thread and back, so `pg` and Prisma's PostgreSQL adapter
 * drive the embedded store exactly as they drive a server (pg's own serializer and parser, the
 * same error mapping), while the WASM work of every statement happens off the HTTP event loop.
 */
export class EmbeddedStoreThread {
  readonly waitReady: Promise<void>;
  /** Why the thread runs outside the CPUs it was given, once ready; undefined when it keeps to them or was given none. */
  placementProblem: string | undefined;
  #worker: Worker;
  #pending = new Map<number, { resolve: (bytes: Uint8Array) => void; reject: (error: Error) => void }>();
  #nextId = 1;
  #stopped: Error | undefined;

  /** `heapLimitMb` caps the thread's JavaScript heap (PGlite's WebAssembly memory is apart from it); a thread past it stops. */
  constructor(options: StoreThreadOptions, { heapLimitMb }: { heapLimitMb?: number } = {}) {
    const compiled = !import.meta.url.endsWith('.ts');
    // Compiled (dist/): the thread module itself. Sources run by tsx or vitest: a shim that registers tsx in the thread.
    this.#worker = new Worker(new URL(compiled ? './pglite-thread.js' : './pglite-thread.mjs', import.meta.url), {
      workerData: options,
      ...(heapLimitMb === undefined ? {} : { resourceLimits: { maxOldGenerationSizeMb: heapLimitMb } }),
    });
    this.waitReady = new Promise<void>((resolve, reject) => {
      this.#worker.on('message', (reply: StoreThreadReply) => {
        if (reply.kind === 'ready') {
          this.placementProblem = reply.placementProblem;
          return resolve();
        }
        if (reply.kind === 'failed') return reject(new Error(reply.message));
        const waiting = this.#pending.get(reply.id);
        if (!waiting) return;
        this.#pending.delete(reply.id);
        if (reply.kind === 'result') waiting.resolve(reply.bytes);
        else waiting.reject(new Error(reply.message));
      });
      const stop = (error: Error) => {
        this.#stopped ??= error;
        reject(error);
        for (const waiting of this.#pending.values()) waiting.reject(this.#stopped);
        this.#pending.clear();
      };
      this.#worker.on('error', (error) => stop(new StoreThreadStoppedError(`the embedded store stopped: ${error.message}`)));
      this.#worker.on('exit', (code) => stop(new StoreThreadStoppedError(`the embedded store stopped (exit code ${code})`)));
    });
    // Callers see the failure through the promises they await; this keeps it from being unhandled meanwhile.
    this.waitReady.catch(() => {});
  }

  #request(request: { kind: 'exec'; message: Uint8Array } | { kind: 'close' }, transfer: ArrayBuffer[] = []): Promise<Uint8Array> {
    if (this.#stopped) return Promise.reject(this.#stopped);
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.#worker.postMessage({ ...request, id } as StoreThreadRequest, transfer);
    });
  }

  /** Runs wire protocol messages and answers PostgreSQL's reply bytes. */
  exec(message: Uint8Array): Promise<Uint8Array> {
    // A copy of exactly these bytes: the caller's buffer may be a view into a larger, shared one.
    const copy = new Uint8Array(message);
    return this.#request({ kind: 'exec', message: copy }, [copy.buffer]);
  }

  /** Whether the thread keeps the process running, like a socket's ref and unref. */
  keepProcessAlive(keep: boolean) {
    if (keep) this.#worker.ref();
    else this.#worker.unref();
  }

  /** A connection for `pg` (its `stream` option). */
  socket(): Duplex {
    return new StoreThreadSocket(this);
  }

  /** Closes PGlite (flushing its files) and ends the thread. */
  async close(): Promise<void> {
    if (!this.#stopped) await this.#request({ kind: 'close' }).catch(() => {});
    await this.#worker.terminate();
  }
}

/** The part of a net.Socket that pg's Connection uses, carried by the store thread. */
class StoreThreadSocket extends Duplex {
  constructor(private readonly thread: EmbeddedStoreThread) {
    super();
  }

  connect() {
    process.nextTick(() => this.emit('connect'));
    return this;
  }

  setNoDelay() {
    return this;
  }

  setKeepAlive() {
    return this;
  }

  ref() {
    this.thread.keepProcessAlive(true);
    return this;
  }

  unref() {
    this.thread.keepProcessAlive(false);
    return this;
  }

  override _read() {}

  // Messages written while the previous ones were running go to the thread together.
  override _writev(chunks: Array<{ chunk: Buffer }>, callback: (error?: Error | null) => void) {
    const message = chunks.length === 1 ? chunks[0]!.chunk : Buffer.concat(chunks.map(({ chunk }) => chunk));
    this.thread.exec(message).then(
      (reply) => {
        if (reply.byteLength > 0) this.push(Buffer.from(reply.buffer, reply.byteOffset, reply.byteLength));
        callback();
      },
      // A connection's goodbye that reaches a thread already stopped (a pool that ends its clients
      // without waiting for them, then the store closing) has nothing left to say goodbye to: as
      // an error it reached a client the pool no longer listened to, and stopped the process.
      (error: Error) => callback(isTerminate(message) ? null : error),
    );
  }

  override _final(callback: (error?: Error | null) => void) {
    this.push(null);
    callback();
  }
}

/** Whether the bytes are exactly the wire protocol's Terminate message ('X', length 4). */
function isTerminate(message: Uint8Array) {
  return message.byteLength === 5 && message[0] === 0x58 && message[1] === 0 && message[2] === 0 && message[3] === 0 && message[4] === 4;
}
