import type { Prisma, PrismaClient } from '../../generated/prisma/client.js';
import type { Logger } from '../../logger.js';
import type { AgentEvent } from './events.js';
import { eventOfLogged, loggedForm } from './logged-form.js';

/**
 * The durable log of an agent run's events (`agent_events`, docs/agent.md "Resuming a stream").
 * Every event of every run is kept, numbered 1, 2, ... as it was sent; the SSE `id` of event
 * `seq` of job `jobId` is `<jobId>:<seq>`. Each event is stored as the REST stream's `data:` line
 * shows it (snake_case inside `sources` and `steps`, the specification's camelCase at the top).
 */

/** An event with its place in its run. */
export type SequencedEvent = AgentEvent & { jobId: string; seq: number };

/** The SSE `id` of an event. */
export const eventIdOf = (jobId: string, seq: number) => `${jobId}:${seq}`;

/** The largest `seq` a client may name: GraphQL's Int. */
export const maxSeq = 2_147_483_647;

/**
 * `<jobId>:<seq>` as a client sends it back in `Last-Event-ID`; null when it is not one (`seq`
 * from 0, which names the point before the first event, to maxSeq; the job id a UUID).
 */
export function parseEventId(value: string): { jobId: string; seq: number } | null {
  const match = eventIdPattern.exec(value.trim());
  if (!match) return null;
  const seq = Number(match[2]);
  return seq <= maxSeq ? { jobId: match[1]!.toLowerCase(), seq } : null;
}

/** An event id's shape; `seq` up to nine digits, far beyond any run's events (and below maxSeq). */
export const eventIdPattern = /^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}):(0|[1-9][0-9]{0,8})$/;

export const isTerminal = (event: AgentEvent) => event.type === 'done' || event.type === 'error';

/**
 * Whether a logged event is served to a reader, given its job's status. A run that ended without
 * its charge (cancelled, failed) keeps its answer's events in the log, but they are not given out
 * afterwards: an answer is read either live or paid for. Its start and its error stay readable.
 */
export const servedAfterEnd = (status: string, event: Pick<AgentEvent, 'type'>) =>
  status === 'running' || status === 'done' || event.type === 'job_started' || event.type === 'error';

/** An event as the log holds it. */
export type WrittenEvent = { seq: number; data: Prisma.InputJsonObject };
type PendingEvent = WrittenEvent & { onWritten: (seq: number) => void };

/**
 * A run's writer to its log. Every event is in the store before anyone is sent it: an event is
 * numbered when the run makes it, and `onWritten` (which sends it) is called once the batch
 * holding it has committed. So a client is never given an event id that a process taking over
 * (the lease sweep, after this one died) could give to another event. Writes are group commits:
 * the first event is written at once, and events made while a write is in flight go together in
 * the next one, so a fast run costs few statements and a slow one waits one write per event.
 * A batch that fails stays pending and is tried again after `retryMs` (doubling up to 2 s), or
 * by the next `flush`. `flush` writes what is pending (the run calls it before its terminal
 * event, which the transaction that ends the job writes itself, so that the log never shows a
 * terminal event with a gap before it). What is written is also kept here while the run goes on:
 * readers on this server take it from memory (`written`) rather than asking the store each time.
 */
export class RunEventLog {
  #seq = 0;
  #pending: PendingEvent[] = [];
  /** Written to the store, in order. */
  readonly #written: WrittenEvent[] = [];
  #timer: NodeJS.Timeout | undefined;
  #writing: Promise<void> = Promise.resolve();
  #busy = false;
  #failures = 0;
  /** The job was ended by someone else (a lease sweep): events are no longer stored or sent. */
  #ended = false;
  /** The number reserved for the terminal event and not yet used by a committed one. */
  #terminal: number | undefined;

  /** A run taken over: the events its earlier process logged, which the run makes again before any new one. */
  readonly #replay: readonly WrittenEvent[];

  constructor(
    private readonly prisma: PrismaClient,
    readonly jobId: string,
    private readonly options: { retryMs: number; log: Pick<Logger, 'error'>; flushed: () => void; replay?: readonly WrittenEvent[] },
  ) {
    this.#replay = options.replay ?? [];
  }

  /** Whether the run is still making again what its earlier process logged. */
  get replaying() {
    return this.#seq < this.#replay.length;
  }

  /** The number of the last event in the store as far as this process wrote it (0: none). */
  get lastWrittenSeq() {
    return this.#written.at(-1)?.seq ?? 0;
  }

  /**
   * The number of the last event a reader may have been given: the last made (or reserved for the
   * terminal event), or, while a run taken over makes its log again, the last its earlier process logged.
   */
  get lastSeq() {
    return Math.max(this.#seq, this.#replay.length);
  }

  /** Numbers the event and queues it for the store; `onWritten` runs once it is there. Returns its number. */
  append(event: AgentEvent, onWritten: (seq: number) => void): number {
    if (this.#seq < this.#replay.length) {
      const seq = this.#seq + 1;
      const logged = this.#replay[seq - 1]!;
      if (JSON.stringify(loggedForm(event)) !== JSON.stringify(logged.data)) {
        // What follows would not continue what readers were given: the run ends after the log.
        this.#seq = this.#replay.length;
        throw new RunDiverged(seq);
      }
      this.#seq = seq;
      this.#written.push(logged);
      return seq;
    }
    const seq = ++this.#seq;
    this.#pending.push({ seq, data: loggedForm(event), onWritten });
    this.#schedule(0);
    return seq;
  }

  /** A write soon, unless one is in flight (it takes what is pending when it ends) or due. */
  #schedule(delayMs: number) {
    if (this.#busy || this.#timer) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.flush().catch((error: unknown) => {
        this.#failures += 1;
        if (this.#failures === 1) this.options.log.error(`agent run ${this.jobId}: writing its events failed; they wait and are tried again`, error);
        this.#schedule(Math.min(2_000, this.options.retryMs * 2 ** (this.#failures - 1)));
      });
    }, delayMs);
  }

  /**
   * The number of the terminal event, which the transaction ending the job writes (not queued
   * here). A transaction that failed (a `done` that could not be charged) leaves its number to
   * the `error` that follows, so the numbers have no gap. A run taken over that ends before it has
   * made its log again ends after the log.
   */
  terminalSeq(): number {
    this.#terminal ??= this.#seq = this.lastSeq + 1;
    return this.#terminal;
  }

  /** The terminal event's transaction committed. */
  terminalWritten(event: WrittenEvent) {
    this.#terminal = undefined;
    this.#written.push(event);
    this.options.flushed();
  }

  /** Writes every event queued so far; settles once they are in the store (and sent). */
  flush(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#writing = this.#writing.catch(() => undefined).then(() => this.#write());
    return this.#writing;
  }

  async #write() {
    this.#busy = true;
    try {
      while (this.#pending.length > 0) {
        const batch = this.#pending.splice(0);
        if (this.#ended) continue;
        let stored: { seq: number }[];
        try {
          // Only while the job runs, its row share-locked: a lease sweep of another process (which
          // ends the job and logs its `error` after the last event logged) comes before or after
          // the whole batch, never inside it.
          stored = await this.prisma.$queryRaw<{ seq: number }[]>`
            INSERT INTO agent_events (job_id, seq, data)
            SELECT ${this.jobId}::uuid, e.seq, e.data::jsonb
              FROM unnest(${batch.map(({ seq }) => seq)}::integer[], ${batch.map(({ data }) => JSON.stringify(data))}::text[]) AS e(seq, data)
             WHERE EXISTS (SELECT 1 FROM agent_jobs WHERE id = ${this.jobId}::uuid AND status = 'running' FOR SHARE)
            ON CONFLICT DO NOTHING
            RETURNING seq`;
        } catch (error) {
          this.#pending.unshift(...batch);
          throw error;
        }
        this.#failures = 0;
        const kept = new Set(stored.map((row) => row.seq));
        for (const { seq, data, onWritten } of batch) {
          // Not stored: the job was ended meanwhile (by a sweep that thought this process dead),
          // and its terminal event is the last one; nothing more is sent.
          if (!kept.has(seq)) {
            this.#ended = true;
            break;
          }
          this.#written.push({ seq, data });
          onWritten(seq);
        }
        this.options.flushed();
      }
    } finally {
      this.#busy = false;
    }
  }

  /** The events in the store after `after`, in order (as far as this process wrote them). */
  written(after: number): WrittenEvent[] {
    // Numbers rise with the position; few readers ask from far back.
    let index = this.#written.length;
    while (index > 0 && this.#written[index - 1]!.seq > after) index -= 1;
    return this.#written.slice(index);
  }

  /** Drops what is pending (the run is over and its log could not be written). */
  discard() {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#pending = [];
  }
}

/** A run taken over made another event than its log holds at `seq` (a model that samples, an index that changed). */
export class RunDiverged extends Error {
  override name = 'RunDiverged';
  constructor(readonly seq: number) {
    super(`the run was taken over by another server after its own stopped, and could not be continued the same way from event ${seq}; nothing was charged`);
  }
}

/** A logged event as `Query.agentJob.events` lists it. */
export type LoggedEvent = { jobId: string; seq: number; createdAt: Date; data: Prisma.InputJsonObject };

/**
 * A job's logged events after `after`, oldest first, at most `limit`. `data` is given in the
 * stream's field order (the store keeps JSON objects in an order of its own).
 */
export async function loggedEvents(prisma: PrismaClient, jobId: string, after: number, limit: number): Promise<LoggedEvent[]> {
  const rows = await prisma.agentEvent.findMany({
    where: { jobId, seq: { gt: after } },
    orderBy: { seq: 'asc' },
    take: limit,
    select: { seq: true, data: true, createdAt: true },
  });
  return rows.map((row) => ({ jobId, seq: row.seq, createdAt: row.createdAt, data: loggedForm(eventOfLogged(row.data)) }));
}
