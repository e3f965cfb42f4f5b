import { loadModels, openBackends, startIngestionQueue } from '../backends.js';
import type { Config } from '../config.js';
import type { Database } from '../db/database.js';
import { Prisma } from '../generated/prisma/client.js';
import type { Logger } from '../logger.js';
import type { Embedder } from '../modules/embeddings/embedder.js';
import { chunksToIndex, indexedChunk } from '../modules/ingestion/embed-job.js';
import { ingestionSettings } from '../modules/ingestion/handlers.js';
import { queueEmbedding, type JobQueue } from '../modules/jobs/queue.js';
import { modelWatchIntervalMs } from '../modules/retrieval/model-watch.js';
import type { IndexRebuild, VectorIndex } from '../modules/retrieval/vector-index.js';

export type ReindexProgress = { embeddedChunks: number; totalChunks: number; documentsLeft: number };

export type ReindexSummary = {
  model: string;
  dimensions: number;
  previousModel: string;
  previousDimensions: number;
  /** `beside`: a new index was filled while the old one served, then put in its place (Elasticsearch); `in place`: the index was emptied and filled again (pgvector). */
  rebuilt: 'beside' | 'in place';
  /** The index now in service, when it has a name of its own (Elasticsearch). */
  indexName: string | null;
  documents: number;
  chunks: number;
  failed: { document_id: string; filename: string; error: string | null }[];
  seconds: number;
};

/**
 * `kb reindex`: re-embeds every document's chunks with the configured model into the index.
 *
 * Elasticsearch: a new index is filled beside the one in service, which every process goes on
 * searching and writing; what changed meanwhile is copied again, and the alias is swapped to the
 * new index in one step (docs/retrieval.md, "Rebuilding the index"). pgvector: the index is
 * emptied, the configured model recorded in it, and every document re-embedded through the same
 * embed jobs as ingestion (so a crash midway loses nothing: run it again, or let a server finish
 * the queued jobs); documents are not searchable until their chunks are embedded again.
 */
export async function reindex(
  config: Config,
  db: Database,
  log: Logger,
  onProgress: (progress: ReindexProgress) => void,
): Promise<ReindexSummary> {
  const started = Date.now();
  const backends = await openBackends(config, db, loadModels(config, { parseProcesses: 1, warmParsers: false }), { loadAhead: false });
  const { embedder, index } = backends;
  let queue: JobQueue | undefined;
  try {
    const previous = index.builtWith;
    const prisma = db.prisma;
    const model = { model: embedder.modelId, dimensions: embedder.dimensions };
    const runQueue = () => {
      queue = startIngestionQueue(config, db, backends, { concurrency: config.ingestion.concurrency, pollMs: 500, releaseStaleClaims: false }, log);
      queue.setClaimable(['embed']);
    };
    let indexName: string | null = null;
    if (index.rebuild) {
      const unlock = await reindexLock(db);
      try {
        const rebuild = await index.rebuild(model);
        indexName = await rebuildBeside({ db, log, embedder, index, rebuild, embedBatchSize: ingestionSettings(config).embedBatchSize, onProgress, runQueue });
      } finally {
        await queue?.stop();
        queue = undefined;
        await unlock();
      }
    } else {
      await index.reset(model);
      await prisma.$transaction([
        prisma.$executeRaw`UPDATE chunks SET embedded_at = NULL WHERE embedded_at IS NOT NULL`,
        prisma.$executeRaw`UPDATE documents SET embedded_chunks = 0, status = 'processing' WHERE status IN ('ready', 'processing') AND chunk_count > 0`,
        // A document still being parsed keeps its parse job, which becomes its embed job.
        queueEmbedding(
          prisma,
          Prisma.sql`SELECT d.id, w.user_id FROM documents d JOIN workspaces w ON w.id = d.workspace_id WHERE d.status = 'processing' AND d.chunk_count > 0`,
        ),
      ]);
      runQueue();
      for (;;) {
        const [row] = await prisma.$queryRaw<{ embedded: bigint; total: bigint; left: bigint }[]>`
          SELECT (SELECT coalesce(sum(embedded_chunks), 0) FROM documents WHERE chunk_count > 0) AS embedded,
                 (SELECT coalesce(sum(chunk_count), 0) FROM documents WHERE status <> 'failed') AS total,
                 (SELECT count(*) FROM jobs WHERE kind = 'embed' AND status IN ('queued', 'running')) AS left`;
        onProgress({ embeddedChunks: Number(row!.embedded), totalChunks: Number(row!.total), documentsLeft: Number(row!.left) });
        if (Number(row!.left) === 0) break;
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
      await queue?.stop();
      queue = undefined;
      // A server merges new chunks into the vector graph when idle; merged here, the first searches
      // after a reindex find every chunk in the graph.
      const backlog = (await index.graphBacklog?.()) ?? 0;
      if (backlog > 0) {
        log.info(`merging ${backlog} chunks into the vector graph`);
        while (((await index.mergeIntoGraph?.(500)) ?? 0) > 0);
      }
    }
    const [totals] = await prisma.$queryRaw<{ documents: bigint; chunks: bigint }[]>`
      SELECT count(*) AS documents, coalesce(sum(chunk_count), 0) AS chunks FROM documents WHERE status = 'ready'`;
    const failed = await prisma.document.findMany({ where: { status: 'failed' }, select: { id: true, filename: true, error: true } });
    return {
      model: embedder.modelId,
      dimensions: embedder.dimensions,
      previousModel: previous.model,
      previousDimensions: previous.dimensions,
      rebuilt: index.rebuild ? 'beside' : 'in place',
      indexName,
      documents: Number(totals!.documents),
      chunks: Number(totals!.chunks),
      failed: failed.map((document) => ({ document_id: document.id, filename: document.filename, error: document.error })),
      seconds: Math.round((Date.now() - started) / 100) / 10,
    };
  } finally {
    await queue?.stop();
    await backends.close();
  }
}

/**
 * Takes the store's reindex lock, so that two `kb reindex` on one PostgreSQL never build at once
 * (a rebuild deletes the unfinished builds it finds); returns its release. The embedded store is
 * held by this process alone already.
 */
async function reindexLock(db: Database): Promise<() => Promise<void>> {
  if (!db.sharedPool) return async () => {};
  const client = await db.sharedPool.connect();
  const { rows } = await client.query<{ locked: boolean }>('SELECT pg_try_advisory_lock(7241600) AS locked');
  if (!rows[0]!.locked) {
    client.release();
    throw new Error('another kb reindex is running on this database; wait for it to end');
  }
  return async () => {
    await client.query('SELECT pg_advisory_unlock(7241600)').catch(() => {});
    client.release();
  };
}

type RebuildContext = {
  db: Database;
  log: Logger;
  embedder: Embedder;
  index: VectorIndex;
  rebuild: IndexRebuild;
  embedBatchSize: number;
  onProgress: (progress: ReindexProgress) => void;
  /** Starts this process's embed workers (for documents whose embedding waited for the new index's model). */
  runQueue: () => void;
};

/**
 * Fills `rebuild` while the index it replaces stays in service, then swaps them:
 * 1. every ready document's chunks are embedded into the new index;
 * 2. what changed meanwhile is made good (documents embedded since the build began are copied
 *    again, deleted ones removed);
 * 3. the swap; documents still being embedded then (by any process) are waited for, and this
 *    process embeds those that waited for a model the old index did not hold;
 * 4. once every process has seen the swap (`modelWatchIntervalMs`), step 2 again for what changed
 *    since it last ran.
 * Returns the new index's name.
 */
async function rebuildBeside(context: RebuildContext): Promise<string> {
  const { db, rebuild, onProgress } = context;
  const prisma = db.prisma;
  const now = async () => (await prisma.$queryRaw<{ now: Date }[]>`SELECT now() AS now`)[0]!.now;
  const progress = { embeddedChunks: 0, totalChunks: 0, documentsLeft: 0 };
  let swapped = false;
  try {
    const buildStarted = await now();
    const ready = await prisma.$queryRaw<{ id: string; chunk_count: number }[]>`
      SELECT id, chunk_count FROM documents WHERE status = 'ready' AND chunk_count > 0 ORDER BY id`;
    progress.totalChunks = ready.reduce((sum, document) => sum + document.chunk_count, 0);
    progress.documentsLeft = ready.length;
    onProgress(progress);
    await copyDocuments(context, ready.map((document) => document.id), { replace: false }, progress);
    const caughtUpFrom = await now();
    await catchUp(context, buildStarted, progress);

    // Documents being embedded now write to the old index until the swap, or wait for the new
    // index's model: each is copied again (or embedded here) once its embedding is over.
    const embedding = (
      await prisma.$queryRaw<{ document_id: string }[]>`SELECT document_id FROM jobs WHERE kind = 'embed' AND status IN ('queued', 'running')`
    ).map((job) => job.document_id);
    await rebuild.swap();
    swapped = true;
    context.log.info(`the index ${rebuild.name} is in service`);
    context.runQueue();
    for (;;) {
      const [row] = await prisma.$queryRaw<{ left: bigint }[]>`
        SELECT count(*) AS left FROM jobs WHERE document_id = ANY(${embedding}::uuid[]) AND kind = 'embed' AND status IN ('queued', 'running')`;
      progress.documentsLeft = Number(row!.left);
      onProgress(progress);
      if (progress.documentsLeft === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    await new Promise((resolve) => setTimeout(resolve, modelWatchIntervalMs + 1_000));
    await catchUp(context, caughtUpFrom, progress);
    return rebuild.name;
  } catch (error) {
    if (!swapped) await rebuild.abandon().catch(() => {});
    throw error;
  }
}

/**
 * Makes the new index agree with the store: removes the chunks of documents that are gone, and
 * copies again every ready document embedded since `since` (by a process writing to the old
 * index) or whose chunk count differs. Returns how many documents it copied.
 */
async function catchUp(context: RebuildContext, since: Date, progress: ReindexProgress): Promise<number> {
  const { db, rebuild } = context;
  const held = await rebuild.countByDocument();
  const documents = await db.prisma.$queryRaw<{ id: string; status: string; chunk_count: number; changed: boolean }[]>`
    SELECT d.id, d.status::text AS status, d.chunk_count,
           EXISTS (SELECT 1 FROM chunks c WHERE c.document_id = d.id AND c.embedded_at >= ${since}) AS changed
      FROM documents d`;
  const stored = new Set(documents.map((document) => document.id));
  for (const documentId of held.keys()) if (!stored.has(documentId)) await rebuild.deleteDocument(documentId);
  const stale = documents.filter((document) => document.status === 'ready' && document.chunk_count > 0 && (document.changed || held.get(document.id) !== document.chunk_count));
  progress.totalChunks += stale.reduce((sum, document) => sum + document.chunk_count, 0);
  progress.documentsLeft += stale.length;
  await copyDocuments(context, stale.map((document) => document.id), { replace: true }, progress);
  return stale.length;
}

/** Embeds the documents' chunks into the new index, some documents at a time; `replace` also removes chunks of theirs that the store no longer has. */
async function copyDocuments(context: RebuildContext, documentIds: readonly string[], { replace }: { replace: boolean }, progress: ReindexProgress) {
  const { db, embedder, rebuild, embedBatchSize, onProgress } = context;
  const perRead = 32;
  for (let start = 0; start < documentIds.length; start += perRead) {
    const group = documentIds.slice(start, start + perRead);
    const chunks = await chunksToIndex(db.prisma, group, { unembeddedOnly: false });
    for (let offset = 0; offset < chunks.length; offset += embedBatchSize) {
      const batch = chunks.slice(offset, offset + embedBatchSize);
      const vectors = await embedder.embed(
        batch.map((chunk) => chunk.indexedText),
        'passage',
      );
      await rebuild.upsert(batch.map((chunk, position) => indexedChunk(chunk, vectors[position]!)));
      progress.embeddedChunks += batch.length;
      onProgress(progress);
    }
    if (replace) {
      for (const documentId of group) {
        await rebuild.deleteChunksExcept(documentId, new Set(chunks.filter((chunk) => chunk.document_id === documentId).map((chunk) => chunk.id)));
      }
    }
    // A document deleted while it was copied: its index_delete job cleaned the old index only.
    const remaining = new Set((await db.prisma.document.findMany({ where: { id: { in: group } }, select: { id: true } })).map((document) => document.id));
    for (const documentId of group) if (!remaining.has(documentId)) await rebuild.deleteDocument(documentId);
    progress.documentsLeft = Math.max(0, progress.documentsLeft - group.length);
    onProgress(progress);
  }
}
