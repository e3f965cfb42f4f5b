/**
 * The service started in a bench's own process, used as a client would use it: a user with
 * credits, workspaces, uploads through the API, and questions through `POST /agent/stream`.
 */
import { randomUUID } from 'node:crypto';
import type { RunningApp } from '../src/app.js';
import { adminCommands } from '../src/cli/admin-commands.js';
import { askAgent, type TextFile } from './answers-data.js';
import { elapsedSeconds, log, progressBar, ServiceClient, sleep } from './helpers.js';

const UPLOAD_FILES_PER_REQUEST = 20;
const PARALLEL_UPLOADS = 2;
/** Longest wait for the vector graph to take in the ingested chunks before the questions start. */
const MERGE_WAIT_MS = 10 * 60_000;

export type AgentMode = 'fast' | 'deep';

export class BenchClient extends ServiceClient {
  async workspace(name: string) {
    return (await this.json<{ id: string }>('POST', '/v1/kb/workspaces', { name })).id;
  }

  ask(message: string, workspaceId: string, mode: AgentMode) {
    return askAgent(this.baseUrl, this.key, { message, workspaceIds: [workspaceId], mode });
  }
}

export async function newUser(app: RunningApp, label: string) {
  const created = await adminCommands['users.create'](app.db.prisma, { email: `bench-${randomUUID()}@example.com`, name: label, credits: 1_000_000, active: true });
  return { userId: created.user.id, key: created.api_key.raw_key };
}

export type IngestResult = { documents: number; chunks: number; seconds: number; mergeSeconds: number | null };

/**
 * Uploads the files (several per request, a few requests at once) and waits until none of the
 * workspace's documents is queued or processing, then until the vector graph has taken in the
 * new chunks. Any failed document is an error.
 */
export async function ingest(
  app: RunningApp,
  client: BenchClient,
  workspaceId: string,
  files: readonly { name: string; bytes: Uint8Array | string }[],
  label: string,
  maxFiles: number,
): Promise<IngestResult> {
  const start = performance.now();
  const perRequest = Math.max(1, Math.min(UPLOAD_FILES_PER_REQUEST, maxFiles));
  const batches: (typeof files)[number][][] = [];
  for (let first = 0; first < files.length; first += perRequest) batches.push(files.slice(first, first + perRequest));
  const uploadBar = progressBar(`${label}: uploaded |{bar}| {value}/{total} files | {duration_formatted}`);
  uploadBar.start(files.length, 0);
  let next = 0;
  let uploaded = 0;
  await Promise.all(
    Array.from({ length: PARALLEL_UPLOADS }, async () => {
      while (next < batches.length) {
        const batch = batches[next++]!;
        await client.upload(workspaceId, batch);
        uploaded += batch.length;
        uploadBar.update(uploaded);
      }
    }),
  );
  uploadBar.stop();
  const readyBar = progressBar(`${label}: ready    |{bar}| {value}/{total} documents | {duration_formatted}`);
  let stats = await client.stats(workspaceId);
  readyBar.start(stats.document_count, 0);
  for (;;) {
    const { queued, processing, ready, failed } = stats.documents_by_status;
    readyBar.setTotal(stats.document_count);
    readyBar.update(ready + failed);
    if (failed > 0) {
      readyBar.stop();
      throw new Error(`${label}: ${failed} documents failed to ingest`);
    }
    if (queued + processing === 0) break;
    await sleep(1_000);
    stats = await client.stats(workspaceId);
  }
  readyBar.stop();
  const readySeconds = elapsedSeconds(start);
  const merge = await waitForGraphMerge(app);
  log(`${label}: ${stats.document_count} documents, ${stats.chunk_count} chunks ready in ${readySeconds.toFixed(1)} s${merge === null ? '' : `, merged into the vector graph ${merge.toFixed(1)} s later`}`);
  return { documents: stats.document_count, chunks: stats.chunk_count, seconds: readySeconds, mergeSeconds: merge };
}

/**
 * pgvector keeps new chunks outside its HNSW graph until ingestion is idle, and a search compares
 * them one by one meanwhile: the questions wait until none is left outside. Seconds waited, or
 * null when the store has no such table.
 */
export async function waitForGraphMerge(app: RunningApp): Promise<number | null> {
  // Whether any chunk waits, not how many: a count reads every page of the table (about 150 ms at
  // 90,000 rows on the embedded store), and asked five times a second it held the store from the
  // merge it waited for.
  const waiting = async () => (await app.db.prisma.$queryRaw<{ waiting: boolean }[]>`SELECT EXISTS (SELECT 1 FROM chunk_index_fresh) AS waiting`)[0]!.waiting;
  const start = performance.now();
  try {
    while (await waiting()) {
      if (performance.now() - start > MERGE_WAIT_MS) {
        log(`WARNING: chunks still wait outside the vector graph after ${MERGE_WAIT_MS / 1000} s; going on`);
        break;
      }
      await sleep(1_000);
    }
  } catch {
    return null;
  }
  return elapsedSeconds(start);
}

/**
 * On the embedded store each held workspace's vectors also go into a graph in memory, built in
 * the background after the workspace's keyword postings load; searches use the store's graph
 * until then. Waits until no such build is in progress; seconds waited.
 */
export async function waitForVectorGraphs(app: RunningApp): Promise<number> {
  const building = () => app.db.backgroundWork.states().find((state) => state.task === 'vector_graph_build')?.running ?? 0;
  const start = performance.now();
  while (building() > 0) await sleep(1_000);
  return elapsedSeconds(start);
}

export type { TextFile };
