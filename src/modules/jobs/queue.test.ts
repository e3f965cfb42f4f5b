import { randomUUID } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../config.js';
import { openDatabase, type Database } from '../../db/database.js';
import { createLogger } from '../../logger.js';
import { createOwnDatabase, migratedDataDir } from '../../../test/support/server.js';
import { createUser } from '../user/service.js';
import { advance } from './advance.js';
import { LeaseLostError, type ClaimedJob, type JobHandler } from './job-handler.js';
import { startJobQueue, type JobQueue } from './queue.js';

// The queue's leases against a real store: what a worker does once another holds its job.
let dataDir: string;
let db: Database;
let queue: JobQueue | undefined;
const queues: JobQueue[] = [];
// On PostgreSQL a database of its own: the queue must find no other file's jobs.
let ownDatabase: Awaited<ReturnType<typeof createOwnDatabase>> | undefined;

beforeAll(async () => {
  dataDir = await migratedDataDir('kb-queue-');
  ownDatabase = process.env.DATABASE_URL ? await createOwnDatabase(process.env.DATABASE_URL) : undefined;
  db = await openDatabase(loadConfig({ ...process.env, KB_DATA_DIR: dataDir, ...(ownDatabase && { DATABASE_URL: ownDatabase.url }) }));
}, 60_000);

afterAll(async () => {
  await queue?.stop();
  for (const other of queues) await other.stop();
  await db?.close();
  await ownDatabase?.drop();
  await rm(dataDir, { recursive: true, force: true });
});

/** A queue of one worker that runs `handler` for every kind of job. */
const queueRunning = (handler: JobHandler, leaseMs = 30_000) =>
  startJobQueue(db.prisma, { parse: handler, embed: handler, index_delete: handler }, { concurrency: 1, leaseMs, turnMs: 1_000, pollMs: 50, releaseStaleClaims: false }, createLogger('error'));

describe('job leases', () => {
  it('stops a worker whose lease another worker took over, and lets it write nothing more', async () => {
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    let reason: unknown;
    // Runs until its signal aborts, then throws what aborted it, as a handler cut short does.
    const blocking: JobHandler = {
      maxAttempts: 3,
      backoffMs: () => 0,
      fail: async (job, why) => {
        await db.prisma.job.updateMany({ where: { id: job.id, claim: job.claim }, data: { status: 'failed', lastError: why } });
      },
      run: (_jobs, { signal }) =>
        new Promise((_resolve, reject) => {
          started();
          signal.addEventListener('abort', () => {
            reason = signal.reason;
            reject(signal.reason);
          });
        }),
    };
    const job = await db.prisma.job.create({ data: { kind: 'index_delete', payload: { documentId: '00000000-0000-4000-8000-000000000000' } } });
    queue = queueRunning(blocking, 600);
    await running;
    const claimed = await db.prisma.job.findUniqueOrThrow({ where: { id: job.id } });
    expect(claimed).toMatchObject({ status: 'running', attempts: 1 });
    expect(claimed.claim).toBeTruthy();

    // What another process's claim leaves once this worker's lease has run out (a long pause,
    // say): a new claim, one more attempt, its own lease.
    const takenOver = await db.prisma.job.update({
      where: { id: job.id },
      data: { claim: '11111111-1111-4111-8111-111111111111', attempts: 2, leaseExpires: new Date(Date.now() + 3_600_000) },
    });

    // The next renewal (a third of the lease) finds the claim gone and stops the work.
    await expect.poll(() => reason, { timeout: 5_000, interval: 50 }).toBeInstanceOf(LeaseLostError);
    // Nothing this worker does afterwards touches the row: not a retry, not a failure, not a renewal.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(await db.prisma.job.findUniqueOrThrow({ where: { id: job.id } })).toEqual(takenOver);
  }, 30_000);

  it('gives users turns across processes: a second process serves the user the first has not', async () => {
    await queue?.stop();
    await db.prisma.job.deleteMany();
    const [heavy, light] = await Promise.all(
      ['heavy', 'light'].map(async (name) => (await createUser(db.prisma, { email: `${name}-${Date.now()}@example.com`, name, credits: 0 })).user.id),
    );
    // The heavy user's six jobs were queued first, the light user's one after them.
    for (let n = 0; n < 6; n++) await db.prisma.job.create({ data: { kind: 'index_delete', userId: heavy, payload: { workspaceId: randomUUID() } } });
    await db.prisma.job.create({ data: { kind: 'index_delete', userId: light, payload: { workspaceId: randomUUID() } } });
    const served: string[] = [];
    const running = new Set<() => void>();
    // Each job runs until the test lets it end.
    const holding: JobHandler = {
      maxAttempts: 1,
      backoffMs: () => 0,
      fail: async () => {},
      run: ([job], { signal }) =>
        new Promise<void>((resolve) => {
          served.push(job!.user_id === heavy ? 'heavy' : 'light');
          const done = () => {
            running.delete(done);
            resolve();
          };
          running.add(done);
          signal.addEventListener('abort', done);
        }),
    };
    const start = () => {
      const started = queueRunning(holding);
      queues.push(started);
      return started;
    };
    // One process takes the heavy user's first job; a second process, started next, must not take
    // the heavy user's second while the light user waits.
    start();
    await expect.poll(() => served.length, { timeout: 10_000 }).toBe(1);
    start();
    await expect.poll(() => served.length, { timeout: 10_000 }).toBe(2);
    expect(served).toEqual(['heavy', 'light']);
  }, 30_000);

  it("claims a job with companions of the same user in one claim, and records the user's turn once", async () => {
    for (const other of queues.splice(0)) await other.stop();
    await db.prisma.job.deleteMany();
    const { user } = await createUser(db.prisma, { email: `batch-${Date.now()}@example.com`, name: 'batch', credits: 0 });
    for (let n = 0; n < 4; n++) await db.prisma.job.create({ data: { kind: 'index_delete', userId: user.id, payload: { workspaceId: randomUUID() } } });
    const batches: number[] = [];
    const batching: JobHandler = {
      maxAttempts: 1,
      backoffMs: () => 0,
      fail: async () => {},
      companions: async (first) =>
        (await db.prisma.job.findMany({ where: { userId: first.user_id, status: 'queued', id: { not: first.id } }, select: { id: true } })).map((job) => job.id),
      run: async (jobs) => {
        batches.push(jobs.length);
        await db.prisma.job.updateMany({ where: { id: { in: jobs.map((job) => job.id) } }, data: { status: 'done' } });
      },
    };
    queues.push(queueRunning(batching));
    await expect.poll(() => batches, { timeout: 10_000 }).toEqual([4]);
    expect(await db.prisma.jobTurn.count({ where: { userId: user.id } })).toBe(1);
  }, 30_000);

  it('fails a job whose payload this version cannot read, with the reason, and never runs it', async () => {
    for (const other of queues.splice(0)) await other.stop();
    await db.prisma.job.deleteMany();
    const malformed = await db.prisma.job.create({ data: { kind: 'index_delete', payload: { documentId: 'not an id' } } });
    const wellFormed = await db.prisma.job.create({ data: { kind: 'index_delete', payload: { workspaceId: randomUUID() } } });
    const ran: string[] = [];
    const failed = new Map<string, string>();
    const recording: JobHandler = {
      maxAttempts: 3,
      backoffMs: () => 0,
      fail: async (job, reason) => {
        failed.set(job.id, reason);
        await advance(db.prisma, [job], { step: 'failed', reason });
      },
      run: async ([job]) => {
        ran.push(job!.id);
        await advance(db.prisma, [job!], { step: 'done' });
      },
    };
    queues.push(queueRunning(recording));
    await expect.poll(async () => (await db.prisma.job.findMany({ where: { status: { in: ['queued', 'running'] } } })).length, { timeout: 10_000 }).toBe(0);
    expect(ran).toEqual([wellFormed.id]);
    expect(failed.get(malformed.id)).toMatch(/^index_delete job .* cannot run: its payload is not one this version reads: /);
    expect(await db.prisma.job.findUniqueOrThrow({ where: { id: malformed.id } })).toMatchObject({ status: 'failed', claim: null, lastError: failed.get(malformed.id) });
    expect(await db.prisma.job.findUniqueOrThrow({ where: { id: wellFormed.id } })).toMatchObject({ status: 'done', claim: null, lastError: null });
  }, 30_000);

  it('moves only the jobs a worker still holds, each step writing what it says', async () => {
    for (const other of queues.splice(0)) await other.stop();
    await db.prisma.job.deleteMany();
    const held = async (payload: object = { workspaceId: randomUUID() }): Promise<ClaimedJob<'index_delete'>> => {
      const claim = randomUUID();
      const row = await db.prisma.job.create({ data: { kind: 'index_delete', payload, status: 'running', attempts: 2, claim, leaseExpires: new Date(Date.now() + 60_000) } });
      return { id: row.id, kind: 'index_delete', document_id: null, user_id: null, attempts: 2, claim, payload: { workspaceId: randomUUID() }, last_error: null };
    };
    const row = (job: ClaimedJob) => db.prisma.job.findUniqueOrThrow({ where: { id: job.id } });

    const retried = await held();
    expect(await advance(db.prisma, [retried], { step: 'retry', error: 'the index did not answer', afterMs: 60_000 })).toBe(1);
    const retriedRow = await row(retried);
    expect(retriedRow).toMatchObject({ status: 'queued', attempts: 2, claim: null, leaseExpires: null, lastError: 'the index did not answer' });
    expect(retriedRow.runAfter.getTime()).toBeGreaterThan(Date.now() + 50_000);
    // Its claim is gone: a second write by the same worker changes nothing.
    expect(await advance(db.prisma, [retried], { step: 'done' })).toBe(0);
    expect((await row(retried)).status).toBe('queued');

    const released = await held({ workspaceId: randomUUID(), extra: 'kept' });
    await advance(db.prisma, [released], { step: 'release', solo: true });
    expect(await row(released)).toMatchObject({ status: 'queued', attempts: 1, claim: null, payload: expect.objectContaining({ solo: true, extra: 'kept' }) });

    const moved = await held();
    await advance(db.prisma, [moved], { step: 'next', kind: 'embed', payload: {} });
    expect(await row(moved)).toMatchObject({ kind: 'embed', status: 'queued', attempts: 0, claim: null, payload: {}, lastError: null });

    // Taken over by another worker (a new claim): this worker's step changes nothing.
    const lost = await held();
    await db.prisma.job.update({ where: { id: lost.id }, data: { claim: randomUUID() } });
    expect(await advance(db.prisma, [lost], { step: 'failed', reason: 'too late' })).toBe(0);
    expect(await row(lost)).toMatchObject({ status: 'running', lastError: null });
  }, 30_000);
});
