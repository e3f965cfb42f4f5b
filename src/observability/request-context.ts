import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';

/**
 * Milliseconds a request spent in named parts of its work, sent back as `Server-Timing`
 * (docs/observability.md). Parts may overlap (the query is embedded while the store is asked);
 * a part recorded twice adds up.
 */
export class ServerTimings {
  readonly #parts = new Map<string, number>();

  add(part: string, ms: number) {
    this.#parts.set(part, (this.#parts.get(part) ?? 0) + ms);
  }

  /** The header's value with `total` last, or undefined when no part was recorded. */
  header(totalMs: number): string | undefined {
    if (this.#parts.size === 0) return undefined;
    return [...this.#parts, ['total', totalMs] as const].map(([part, ms]) => `${part};dur=${ms.toFixed(2)}`).join(', ');
  }
}

/** What every log line written while serving a request carries, and the request's timings. */
export type RequestContext = { requestId: string; timings?: ServerTimings };

/** Holds the request being served along its asynchronous work, so log lines can name it. */
export const requestContext = new AsyncLocalStorage<RequestContext>();

/** A caller's X-Request-Id is kept when it is a plain token of at most 128 characters; else one is made. */
export function requestIdOf(request: Request): string {
  const given = request.headers.get('x-request-id');
  return given && /^[A-Za-z0-9._:-]{1,128}$/.test(given) ? given : randomUUID();
}

/** Adds `ms` to the part of the request being served; nothing outside a request. */
export function recordTiming(part: string, ms: number) {
  requestContext.getStore()?.timings?.add(part, ms);
}

/** Awaits `work`, recording the time from now until it settles as `part` of the request being served. */
export async function timedPart<T>(part: string, work: Promise<T>): Promise<T> {
  const started = performance.now();
  try {
    return await work;
  } finally {
    recordTiming(part, performance.now() - started);
  }
}

/** Runs `work` now, recording its time as `part` of the request being served. */
export function timedNow<T>(part: string, work: () => T): T {
  const started = performance.now();
  try {
    return work();
  } finally {
    recordTiming(part, performance.now() - started);
  }
}
