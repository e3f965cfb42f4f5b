import { randomUUID } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readBenchPdf } from '../../../test/support/documents.js';
import { loadConfig, type Config } from '../../config.js';
import { openDatabase, type Database } from '../../db/database.js';
import { uploadDocuments } from '../documents/upload.js';
import { PermanentJobError, type ClaimedJob, type JobContext, type JobHandler } from '../jobs/job-handler.js';
import { jobPayloads } from '../jobs/payloads.js';
import { createUser } from '../user/service.js';
import { createWorkspace } from '../workspaces/service.js';
import { ingestionSettings } from './handlers.js';
import { parseJob } from './parse-job.js';
import { createParsePool, ParserCrashError, type ParsePool } from './parse-pool.js';
import { openVectorIndex } from '../retrieval/select.js';
import type { VectorIndex } from '../retrieval/vector-index.js';
import { migratedDataDir } from '../../../test/support/server.js';

// The parse stage on its own, against a real store and real parsing processes, with no queue
// around it: which jobs a claim takes together, and what running them together writes.
let dataDir: string;
let config: Config;
let db: Database;
let parsePool: ParsePool;
let handler: JobHandler<'parse'>;
let index: VectorIndex;
let userId: string;
let workspaceId: string;
let wakes = 0;

beforeAll(async () => {
  dataDir = await migratedDataDir('kb-parse-job-');
  config = loadConfig({ ...process.env, KB_DATA_DIR: dataDir });
  db = await openDatabase(config);
  parsePool = createParsePool(2, { memoryMb: config.ingestion.parseMemoryMb, idleSeconds: config.ingestion.parseIdleSeconds });
  index = await openVectorIndex(config, db, { modelId: 'bge-small-en-v1.5-q', dimensions: 384 });
  handler = parseJob({ prisma: db.prisma, parsePool, index, wake: () => (wakes += 1) }, ingestionSettings(config));
  const { user } = await createUser(db.prisma, { email: `parse-${Date.now()}@example.com`, name: 'Parse', credits: 0 });
  userId = user.id;
  workspaceId = (await createWorkspace({ prisma: db.prisma }, { userId, workspaceIds: null }, 'parse batches')).id;
}, 60_000);

afterAll(async () => {
  await index?.close();
  await parsePool?.close();
  await db?.close();
  await rm(dataDir, { recursive: true, force: true });
});

/** A run's context as the queue gives it, with no other user ever waiting. */
const runContext = (): JobContext => ({ signal: new AbortController().signal, turnOver: async () => false });

const upload = (files: { name: string; bytes: Uint8Array | string }[]) =>
  uploadDocuments(
    { prisma: db.prisma, config },
    { userId, workspaceIds: null },
    workspaceId,
    files.map((file) => ({ filename: file.name, bytes: typeof file.bytes === 'string' ? new TextEncoder().encode(file.bytes) : file.bytes })),
    undefined,
  );

const jobOf = async (documentId: string): Promise<ClaimedJob<'parse'>> => {
  const job = await db.prisma.job.findUniqueOrThrow({ where: { documentId, kind: 'parse' } });
  return { id: job.id, kind: 'parse', document_id: job.documentId, user_id: job.userId, attempts: 1, claim: randomUUID(), payload: jobPayloads.parse.parse(job.payload), last_error: null };
};

/** What the queue's claim leaves on the rows of `jobs`: running, under each one's claim. */
const hold = async (jobs: ClaimedJob<'parse'>[]) => {
  for (const job of jobs) await db.prisma.job.update({ where: { id: job.id }, data: { status: 'running', claim: job.claim } });
  return jobs;
};

describe('the parse stage', () => {
  it('claims small documents together and writes them together; a file that cannot be parsed fails alone', async () => {
    const pdf = await readBenchPdf('sample_pdf_1.pdf');
    const small = await upload([
      ...Array.from({ length: 6 }, (_, n) => ({ name: `note-${n}.txt`, bytes: `Note ${n}: the heron waits at the edge of the pond number ${n}.` })),
      { name: 'truncated.pdf', bytes: pdf.subarray(0, 2000) },
    ]);
    const [large] = await upload([{ name: 'large.txt', bytes: 'A long line of words about ponds and herons. '.repeat(8_000) }]);
    const [first, ...others] = await Promise.all(small.map((document) => jobOf(document.id)));
    const largeJob = await jobOf(large!.id);

    // Another user's small document waits for that user's turn.
    const { user: neighbour } = await createUser(db.prisma, { email: `neighbour-${Date.now()}@example.com`, name: 'Neighbour', credits: 0 });
    const neighbourViewer = { userId: neighbour.id, workspaceIds: null };
    const neighbourWorkspace = await createWorkspace({ prisma: db.prisma }, neighbourViewer, 'next door');
    await uploadDocuments({ prisma: db.prisma, config }, neighbourViewer, neighbourWorkspace.id, [{ filename: 'theirs.txt', bytes: new TextEncoder().encode('Their note.') }], undefined);

    // The other small ones come with the first; the document over 256 KB and the neighbour's do not.
    expect(new Set(await handler.companions!(first!))).toEqual(new Set(others.map((job) => job.id)));
    expect(await handler.companions!(largeJob)).toEqual([]);

    await handler.run(await hold([first!, ...others]), runContext());
    const documents = await db.prisma.document.findMany({ where: { id: { in: small.map((document) => document.id) } }, include: { job: true } });
    for (const document of documents) {
      if (document.filename === 'truncated.pdf') {
        expect(document).toMatchObject({ status: 'failed', chunkCount: 0 });
        expect(document.error).toBeTruthy();
        expect(document.job).toMatchObject({ status: 'failed', lastError: document.error });
        continue;
      }
      expect(document).toMatchObject({ status: 'processing', chunkCount: 1, embeddedChunks: 0, error: null });
      expect(document.text).toContain(`pond number ${document.filename.slice(5, 6)}`);
      expect(document.job).toMatchObject({ kind: 'embed', status: 'queued', attempts: 0 });
    }
    // One transaction wrote the chunks of all six: they share the inserting transaction's id.
    const [written] = await db.prisma.$queryRaw<{ chunks: number; transactions: number }[]>`
      SELECT count(*)::int AS chunks, count(DISTINCT xmin::text)::int AS transactions FROM chunks
       WHERE document_id = ANY(${small.map((document) => document.id)}::uuid[])`;
    expect(written).toEqual({ chunks: 6, transactions: 1 });
    const chunk = await db.prisma.chunk.findFirstOrThrow({ where: { document: { filename: 'note-3.txt', workspaceId } } });
    expect(chunk).toMatchObject({ chunkIndex: 0, content: 'Note 3: the heron waits at the edge of the pond number 3.', embeddedAt: null });
    expect(wakes).toBeGreaterThan(0);

    // The large one alone, as before.
    await handler.run(await hold([largeJob]), runContext());
    const parsedLarge = await db.prisma.document.findUniqueOrThrow({ where: { id: large!.id } });
    expect(parsedLarge.status).toBe('processing');
    expect(parsedLarge.chunkCount).toBeGreaterThan(100);
    expect(await db.prisma.chunk.count({ where: { documentId: large!.id } })).toBe(parsedLarge.chunkCount);
  }, 120_000);

  it('skips a document deleted before its turn, and runs again without duplicating chunks', async () => {
    const documents = await upload([
      { name: 'kept.txt', bytes: 'The kept document about otters.' },
      { name: 'gone.txt', bytes: 'The deleted document about beavers.' },
    ]);
    const jobs = await hold(await Promise.all(documents.map((document) => jobOf(document.id))));
    await db.prisma.document.delete({ where: { id: documents[1]!.id } });
    await handler.run(jobs, runContext());
    // A retry after a failure later in the attempt writes the chunks again, not twice.
    await handler.run(await hold([{ ...jobs[0]!, claim: randomUUID() }]), runContext());
    expect(await db.prisma.chunk.count({ where: { documentId: documents[0]!.id } })).toBe(1);
    expect(await db.prisma.chunk.count({ where: { documentId: documents[1]!.id } })).toBe(0);
    expect(await db.prisma.document.findUnique({ where: { id: documents[0]!.id } })).toMatchObject({ status: 'processing', chunkCount: 1 });
  }, 60_000);

  it('writes nothing for a document whose job another worker took over', async () => {
    const [document] = await upload([{ name: 'taken.txt', bytes: 'A document about cormorants, claimed twice.' }]);
    const [stale] = await hold([await jobOf(document!.id)]);
    // Another worker claimed it after this one's lease ran out.
    await db.prisma.job.update({ where: { id: stale!.id }, data: { claim: randomUUID(), attempts: 2 } });
    const before = await db.prisma.document.findUniqueOrThrow({ where: { id: document!.id }, include: { job: true } });
    await handler.run([stale!], runContext());
    expect(await db.prisma.document.findUniqueOrThrow({ where: { id: document!.id }, include: { job: true } })).toEqual(before);
    expect(await db.prisma.chunk.count({ where: { documentId: document!.id } })).toBe(0);
    // Failing it is refused the same way.
    await handler.fail(stale!, 'a stale failure');
    expect(await db.prisma.document.findUniqueOrThrow({ where: { id: document!.id }, include: { job: true } })).toEqual(before);
  }, 60_000);

  it('runs each document of a batch alone when the batch fails in a way no document can be blamed for', async () => {
    // The real parsing processes, except that a document holding "crash" fails as one whose
    // process ended mid-parse does.
    const crashing = parseJob(
      {
        prisma: db.prisma,
        index,
        parsePool: { parse: (task, signal) => (new TextDecoder().decode(task.bytes).includes('crash') ? Promise.reject(new ParserCrashError('the parsing process ended while it read the file (signal SIGSEGV)')) : parsePool.parse(task, signal)), processes: 2, warmed: Promise.resolve(), close: async () => {} },
        wake: () => undefined,
      },
      ingestionSettings(config),
    );
    const documents = await upload([
      { name: 'calm.txt', bytes: 'A calm document about kingfishers.' },
      { name: 'crash.txt', bytes: 'This one will crash the parser.' },
    ]);
    const jobs = await Promise.all(documents.map((document) => jobOf(document.id)));
    const together = crashing.run(await hold(jobs), runContext());
    await expect(together).rejects.toBeInstanceOf(PermanentJobError);
    await expect(together).rejects.toThrow('parsing 2 documents together failed; each runs again alone: the parsing process ended while it read the file (signal SIGSEGV)');
    // Alone, the calm one is parsed; the other fails as itself, an ordinary error to retry.
    await crashing.run(await hold([jobs[0]!]), runContext());
    expect(await db.prisma.document.findUnique({ where: { id: documents[0]!.id } })).toMatchObject({ status: 'processing', chunkCount: 1 });
    const alone = crashing.run([jobs[1]!], runContext());
    await expect(alone).rejects.toThrow('the parsing process ended while it read the file (signal SIGSEGV)');
    await expect(alone).rejects.not.toBeInstanceOf(PermanentJobError);
  }, 60_000);
});
