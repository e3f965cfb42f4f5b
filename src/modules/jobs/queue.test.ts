import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../config.js';
import { openDatabase, type Database } from '../../db/database.js';
import { createLogger } from '../../logger.js';
import { createOwnDatabase } from '../../../test/support/server.js';
import { LeaseLostError, startJobQueue, type JobHandler, type JobQueue } from './queue.js';

// The queue's leases against a real store: what a worker does once another holds its job.
let dataDir: string;
let db: Database;
let queue: JobQueue | undefined;
// On PostgreSQL a database of its own: the queue must find no other file's jobs.
let ownDatabase: Awaited<ReturnType<typeof createOwnDatabase>> | undefined;

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), 'kb-queue-'));
  ownDatabase = process.env.DATABASE_URL ? await createOwnDatabase(process.env.DATABASE_URL) : undefined;
  db = await openDatabase(loadConfig({ ...process.env, KB_DATA_DIR: dataDir, ...(ownDatabase && { DATABASE_URL: ownDatabase.url }) }));
}, 60_000);

afterAll(async () => {
  await queue?.stop();
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
});
