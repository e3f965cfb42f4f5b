import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../config.js';
import { openDatabase, type Database } from '../../db/database.js';
import { createLogger } from '../../logger.js';
import { createOwnDatabase } from '../../../test/support/server.js';
import { createUser } from '../user/service.js';
import { LeaseLostError, type JobHandler } from './job-handler.js';
import { startJobQueue, type JobQueue } from './queue.js';

// The queue's leases against a real store: what a worker does once another holds its job.
let dataDir: string;
let db: Database;
let queue: JobQueue | undefined;
const queues: JobQueue[] = [];
// On PostgreSQL a database of its own: the queue must find no other file's jobs.
let ownDatabase: Awaited<ReturnType<typeof createOwnDatabase>> | undefined;

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), 'kb-queue-'));
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
    queue = startJobQueue(
      db.prisma,
      { parse: blocking, embed: blocking, index_delete: blocking },
      { concurrency: 1, leaseMs: 600, pollMs: 50, releaseStaleClaims: false },
      createLogger('error'),
    );
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
    for (let n = 0; n < 6; n++) await db.prisma.job.create({ data: { kind: 'index_delete', userId: heavy, payload: { n } } });
    await db.prisma.job.create({ data: { kind: 'index_delete', userId: light, payload: { n: 0 } } });
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
      const started = startJobQueue(
        db.prisma,
        { parse: holding, embed: holding, index_delete: holding },
        { concurrency: 1, leaseMs: 30_000, pollMs: 50, releaseStaleClaims: false },
        createLogger('error'),
      );
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
    for (let n = 0; n < 4; n++) await db.prisma.job.create({ data: { kind: 'index_delete', userId: user.id, payload: { n } } });
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
    queues.push(
      startJobQueue(
        db.prisma,
        { parse: batching, embed: batching, index_delete: batching },
        { concurrency: 1, leaseMs: 30_000, pollMs: 50, releaseStaleClaims: false },
        createLogger('error'),
      ),
    );
    await expect.poll(() => batches, { timeout: 10_000 }).toEqual([4]);
    expect(await db.prisma.jobTurn.count({ where: { userId: user.id } })).toBe(1);
  }, 30_000);
});

