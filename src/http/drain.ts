import type { Server } from 'node:http';

/**
 * A server's way out on SIGTERM (docs/deployment.md, "Stopping a process"): `/readyz` answers 503
 * so that a load balancer stops sending requests, responses ask their clients to close the
 * connection, and the requests in flight (uploads still being received, streams) are counted so
 * that the process waits for them, up to its grace period.
 */
export class Drain {
  #draining = false;
  #open = 0;
  readonly #settled = new Set<() => void>();

  /** Counts the server's requests from their headers to the end of their responses. */
  track(server: Server) {
    server.on('request', (_request, response) => {
      this.#open += 1;
      response.once('close', () => {
        this.#open -= 1;
        if (this.#open === 0) for (const settle of this.#settled) settle();
      });
    });
  }

  get draining() {
    return this.#draining;
  }

  /** Requests whose response has not ended. */
  get inFlight() {
    return this.#open;
  }

  start() {
    this.#draining = true;
  }

  /** Resolves true once no request is in flight, or false when `ms` pass first. */
  settled(ms: number): Promise<boolean> {
    if (this.#open === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = (value: boolean) => {
        clearTimeout(timer);
        this.#settled.delete(settle);
        resolve(value);
      };
      const settle = () => done(true);
      const timer = setTimeout(() => done(false), Math.max(0, ms));
      this.#settled.add(settle);
    });
  }
}
