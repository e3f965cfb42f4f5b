import type { Viewer } from '../auth/authenticate.js';
import type { Scope } from '../auth/scopes.js';
import type { StoreSignals } from '../db/database.js';
import type { PrismaClient } from '../generated/prisma/client.js';
import type { Logger } from '../logger.js';

const channel = 'kb_graphql_streams';

/** How long a process that received an operation waits for the stream's holder to take it before it answers 404. */
const pickupMs = 5_000;
/** How often waits poll the store as well, for a signal lost on a connection that dropped. */
const pollMs = 250;
/** Forwarded requests and stream rows left by processes that died are deleted after this long. */
const staleMs = 24 * 3_600_000;

type Signal =
  | { kind: 'opened'; token: string; holder: string }
  | { kind: 'request'; id: string; holder: string }
  | { kind: 'answered'; id: string };

type StoredViewer = { userId: string; scopes: string[]; workspaceIds: string[] | null; credential: Viewer['credential'] };

const storedViewer = (viewer: Viewer): StoredViewer => ({
  userId: viewer.userId,
  scopes: [...viewer.scopes],
  workspaceIds: viewer.workspaceIds === null ? null : [...viewer.workspaceIds],
  credential: viewer.credential,
});

const viewerOf = (stored: StoredViewer): Viewer => ({
  userId: stored.userId,
  scopes: new Set(stored.scopes as Scope[]),
  workspaceIds: stored.workspaceIds === null ? null : new Set(stored.workspaceIds),
  credential: stored.credential,
});

/** A request as it is forwarded to the stream's holder: what graphql-sse reads of it. */
export type ForwardedRequest = { method: string; url: string; headers: Record<string, string>; body: string };
export type ForwardedAnswer = { status: number; headers: Record<string, string>; body: string };

/**
 * Where each graphql-sse stream of a fleet is open, shared through the store, so that the
 * requests of a stream may reach any process (no sticky sessions): a reservation (PUT) is
 * recorded; the process where the stream is then opened (GET) becomes its holder and tells the
 * others; an operation or a stop (POST, DELETE) that reaches another process is written to the
 * store, signalled to the holder, run there through its own GraphQL pipeline as the credential
 * that sent it, and its answer written back and returned by the process that received it.
 */
export class StreamRouting {
  readonly #prisma: PrismaClient;
  readonly #signals: StoreSignals;
  readonly #log: Logger;
  /** KB_INSTANCE: the name other processes address this one by. */
  readonly instance: string;
  /** Woken when a stream opens elsewhere or a forwarded answer arrives. */
  readonly #waiters = new Set<() => void>();
  #onOpenedElsewhere: (token: string) => void = () => {};
  #serve: (request: ForwardedRequest, viewer: Viewer) => Promise<ForwardedAnswer> = async () => ({ status: 404, headers: {}, body: '' });

  constructor(options: { prisma: PrismaClient; signals: StoreSignals; instance: string; log: Logger }) {
    this.#prisma = options.prisma;
    this.#signals = options.signals;
    this.#log = options.log;
    this.instance = options.instance;
  }

  /**
   * `serve` runs a request forwarded to a stream of this process; `openedElsewhere` lets go of a
   * local reservation whose stream another process opened.
   */
  handle(handlers: { serve: (request: ForwardedRequest, viewer: Viewer) => Promise<ForwardedAnswer>; openedElsewhere: (token: string) => void }) {
    this.#serve = handlers.serve;
    this.#onOpenedElsewhere = handlers.openedElsewhere;
  }

  /** Forgets what a previous life of this process held, and listens for the fleet's signals. */
  async start() {
    // A previous life of this process held these streams; their connections are gone.
    await this.#prisma.$executeRaw`DELETE FROM graphql_streams WHERE holder = ${this.instance} OR created_at < now() - make_interval(secs => ${staleMs / 1000})`;
    await this.#prisma.$executeRaw`DELETE FROM graphql_stream_requests WHERE created_at < now() - make_interval(secs => ${staleMs / 1000})`;
    await this.#signals.listen(channel, (message) => {
      if (message === undefined) return this.#wakeAll();
      let signal: Signal;
      try {
        signal = JSON.parse(message) as Signal;
      } catch {
        return;
      }
      if (signal.kind === 'opened' && signal.holder !== this.instance) this.#onOpenedElsewhere(signal.token);
      if (signal.kind === 'request' && signal.holder === this.instance) void this.#run(signal.id);
      this.#wakeAll();
    });
  }

  #wakeAll() {
    for (const wake of this.#waiters) wake();
    this.#waiters.clear();
  }

  /** Resolves at the next signal, or after `pollMs`, or when `signal` aborts. */
  #pause(signal: AbortSignal | undefined) {
    return new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#waiters.delete(done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, pollMs);
      this.#waiters.add(done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  /**
   * Records a reservation made here. The token is taken only when no live stream holds it: a new
   * token, or one whose reservation expired unopened. `adopt` also takes the same user's unopened
   * reservation from another process, for a stream reserved there and opened here. False when the
   * token stays another's.
   */
  async reserved(token: string, viewer: Viewer, unopenedSeconds: number, { adopt }: { adopt: boolean }): Promise<boolean> {
    const taken = await this.#prisma.$executeRaw`
      INSERT INTO graphql_streams (token, user_id, viewer, expires_at)
      VALUES (${token}::uuid, ${viewer.userId}::uuid, ${JSON.stringify(storedViewer(viewer))}::jsonb, now() + make_interval(secs => ${unopenedSeconds}))
      ON CONFLICT (token) DO UPDATE SET user_id = EXCLUDED.user_id, viewer = EXCLUDED.viewer, holder = NULL, expires_at = EXCLUDED.expires_at
        WHERE graphql_streams.holder IS NULL
          AND (graphql_streams.expires_at <= now() OR (${adopt} AND graphql_streams.user_id = EXCLUDED.user_id))`;
    return taken > 0;
  }

  /** The stream's credential and holder, if it is reserved anywhere and not expired unopened. */
  async find(token: string): Promise<{ viewer: Viewer; holder: string | null } | null> {
    const [row] = await this.#prisma.$queryRaw<{ viewer: StoredViewer; holder: string | null }[]>`
      SELECT viewer, holder FROM graphql_streams WHERE token = ${token}::uuid AND (holder IS NOT NULL OR expires_at > now())`;
    return row ? { viewer: viewerOf(row.viewer), holder: row.holder } : null;
  }

  /** Records this process as the holder of the opened stream; false when another opened it first. */
  async opened(token: string): Promise<boolean> {
    const taken = await this.#prisma.$executeRaw`
      UPDATE graphql_streams SET holder = ${this.instance} WHERE token = ${token}::uuid AND (holder IS NULL OR holder = ${this.instance})`;
    if (taken === 0) return false;
    this.#signals.send(channel, JSON.stringify({ kind: 'opened', token, holder: this.instance } satisfies Signal));
    return true;
  }

  /** The stream ended here (or was dropped unopened): forgotten, unless another process holds it. */
  async ended(token: string) {
    await this.#prisma.$executeRaw`DELETE FROM graphql_streams WHERE token = ${token}::uuid AND (holder IS NULL OR holder = ${this.instance})`;
  }

  /**
   * Waits until the reserved stream is opened somewhere and returns its holder; null when its
   * reservation ends (dropped, expired) or `signal` aborts first.
   */
  async holderOf(token: string, signal?: AbortSignal): Promise<string | null> {
    for (;;) {
      const found = await this.find(token);
      if (!found) return null;
      if (found.holder) return found.holder;
      if (signal?.aborted) return null;
      await this.#pause(signal);
    }
  }

  /**
   * Sends a request to the holder of its stream and returns the holder's answer; 404 when the
   * holder does not take it within `pickupMs` (it died) or the stream is gone.
   */
  async forward(holder: string, token: string, request: ForwardedRequest, viewer: Viewer, signal?: AbortSignal): Promise<ForwardedAnswer | null> {
    const [row] = await this.#prisma.$queryRaw<{ id: string }[]>`
      INSERT INTO graphql_stream_requests (id, token, holder, method, url, headers, body, viewer)
      VALUES (gen_random_uuid(), ${token}::uuid, ${holder}, ${request.method}, ${request.url}, ${JSON.stringify(request.headers)}::jsonb, ${request.body},
              ${JSON.stringify(storedViewer(viewer))}::jsonb)
      RETURNING id`;
    const id = row!.id;
    this.#signals.send(channel, JSON.stringify({ kind: 'request', id, holder } satisfies Signal));
    const sent = performance.now();
    try {
      for (;;) {
        const [state] = await this.#prisma.$queryRaw<{ status: number | null; answer: ForwardedAnswer | null; taken: boolean }[]>`
          SELECT status, answer, taken FROM graphql_stream_requests WHERE id = ${id}::uuid`;
        if (state?.status != null && state.answer) return state.answer;
        if (!state?.taken && performance.now() - sent > pickupMs) return null;
        if (signal?.aborted) return null;
        await this.#pause(signal);
      }
    } finally {
      await this.#prisma.$executeRaw`DELETE FROM graphql_stream_requests WHERE id = ${id}::uuid`.catch(() => {});
    }
  }

  /** Runs a request forwarded to this process: taken (so its sender waits on), run, answered. */
  async #run(id: string) {
    try {
      const [request] = await this.#prisma.$queryRaw<(ForwardedRequest & { viewer: StoredViewer })[]>`
        UPDATE graphql_stream_requests SET taken = true WHERE id = ${id}::uuid AND holder = ${this.instance} AND NOT taken
        RETURNING method, url, headers, body, viewer`;
      if (!request) return;
      const answer = await this.#serve(request, viewerOf(request.viewer));
      await this.#prisma.$executeRaw`
        UPDATE graphql_stream_requests SET status = ${answer.status}, answer = ${JSON.stringify(answer)}::jsonb WHERE id = ${id}::uuid`;
      this.#signals.send(channel, JSON.stringify({ kind: 'answered', id } satisfies Signal));
    } catch (error) {
      this.#log.error(`graphql-sse: a request forwarded to this process failed`, error);
    }
  }
}
