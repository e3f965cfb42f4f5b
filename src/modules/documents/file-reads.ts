/**
 * Turns for reading stored files (a slice of a download, a file's base64): at most `perUser`
 * reads of one user at a time, the others wait in order. One user's many downloads then share
 * the store with other users' work instead of queueing dozens of reads ahead of it, and many
 * base64 reads of one user are never all in memory at once.
 */
export class FileReadTurns {
  readonly #running = new Map<string, number>();
  readonly #waiting = new Map<string, (() => void)[]>();

  constructor(readonly perUser: number) {}

  async run<T>(userId: string, work: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    await this.#enter(userId, signal);
    try {
      return await work();
    } finally {
      this.#leave(userId);
    }
  }

  async #enter(userId: string, signal: AbortSignal | undefined) {
    signal?.throwIfAborted();
    const running = this.#running.get(userId) ?? 0;
    if (running < this.perUser) {
      this.#running.set(userId, running + 1);
      return;
    }
    const queue = this.#waiting.get(userId) ?? [];
    this.#waiting.set(userId, queue);
    await new Promise<void>((resolve, reject) => {
      const turn = () => {
        signal?.removeEventListener('abort', abandon);
        resolve();
      };
      const abandon = () => {
        queue.splice(queue.indexOf(turn), 1);
        if (queue.length === 0 && this.#waiting.get(userId) === queue) this.#waiting.delete(userId);
        reject(signal!.reason);
      };
      queue.push(turn);
      signal?.addEventListener('abort', abandon, { once: true });
    });
  }

  #leave(userId: string) {
    const queue = this.#waiting.get(userId);
    const next = queue?.shift();
    if (queue?.length === 0) this.#waiting.delete(userId);
    // The turn passes straight to the next reader: the count of those running stays the same.
    if (next) return next();
    const running = (this.#running.get(userId) ?? 1) - 1;
    if (running > 0) this.#running.set(userId, running);
    else this.#running.delete(userId);
  }
}

/** Reads of one user's files at a time (see FileReadTurns). */
export const fileReadsPerUser = 2;
