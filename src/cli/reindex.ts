import type { Config } from '../config.js';
import type { Database } from '../db/database.js';
import type { Logger } from '../logger.js';
import { createEmbedder } from '../modules/embeddings/select.js';
import { ingestionHandlers, ingestionSettings } from '../modules/ingestion/jobs.js';
import { createParsePool } from '../modules/ingestion/parse-pool.js';
import { startJobQueue, type JobQueue } from '../modules/jobs/queue.js';
import { openVectorIndex } from '../modules/retrieval/select.js';

export type ReindexProgress = { embeddedChunks: number; totalChunks: number; documentsLeft: number };

export type ReindexSummary = {
  model: string;
  dimensions: number;
  previousModel: string;
  previousDimensions: number;
  documents: number;
  chunks: number;
  failed: { document_id: string; filename: string; error: string | null }[];
  seconds: number;
};

/**
 * `kb reindex`: empties the index, records the configured model in it, and re-embeds every
 * document's chunks with that model through the same embed jobs as ingestion (so a crash midway
 * loses nothing: run it again, or let a server finish the queued jobs). Documents are not
 * searchable until their chunks are embedded again.
 */
export async function reindex(
  config: Config,
  db: Database,
  log: Logger,
  onProgress: (progress: ReindexProgress) => void,
): Promise<ReindexSummary> {
  const started = Date.now();
  const embedder = await createEmbedder(config);
  const parsePool = createParsePool(1, { memoryMb: config.ingestion.parseMemoryMb, idleSeconds: config.ingestion.parseThreadIdleSeconds });
  let queue: JobQueue | undefined;
  try {
    const index = await openVectorIndex(config, db, embedder, { loadAhead: false });
    const previous = index.builtWith;
    await index.reset({ model: embedder.modelId, dimensions: embedder.dimensions });
    const prisma = db.prisma;
    await prisma.$transaction([
      prisma.$executeRaw`UPDATE chunks SET embedded_at = NULL WHERE embedded_at IS NOT NULL`,
      prisma.$executeRaw`UPDATE documents SET embedded_chunks = 0, status = 'processing' WHERE status IN ('ready', 'processing') AND chunk_count > 0`,
      // A document still being parsed keeps its parse job, which becomes its embed job.
      prisma.$executeRaw`
        INSERT INTO jobs (id, kind, document_id, user_id, status, updated_at)
        SELECT gen_random_uuid(), 'embed', d.id, w.user_id, 'queued', now()
          FROM documents d JOIN workspaces w ON w.id = d.workspace_id
         WHERE d.status = 'processing' AND d.chunk_count > 0
        ON CONFLICT (document_id) DO UPDATE
          SET kind = 'embed', status = 'queued', attempts = 0, run_after = now(), lease_expires = NULL, last_error = NULL, payload = jobs.payload - 'solo'
          WHERE jobs.kind <> 'parse'`,
    ]);
        const dependencies = { prisma, parsePool, embedder, index, wake: () => queue?.wake() };
    queue = startJobQueue(
      prisma,
      ingestionHandlers(dependencies, ingestionSettings(config)),
      { concurrency: config.ingestion.concurrency, leaseMs: config.ingestion.leaseSeconds * 1000, pollMs: 500, releaseStaleClaims: false },
      log,
    );
    queue.setClaimable(['embed']);
    for (;;) {
      const [row] = await prisma.$queryRaw<{ embedded: bigint; total: bigint; left: bigint }[]>`
        SELECT (SELECT coalesce(sum(embedded_chunks), 0) FROM documents WHERE chunk_count > 0) AS embedded,
               (SELECT coalesce(sum(chunk_count), 0) FROM documents WHERE status <> 'failed') AS total,
               (SELECT count(*) FROM jobs WHERE kind = 'embed' AND status IN ('queued', 'running')) AS left`;
      onProgress({ embeddedChunks: Number(row!.embedded), totalChunks: Number(row!.total), documentsLeft: Number(row!.left) });
      if (Number(row!.left) === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    await queue.stop();
    queue = undefined;
    // A server merges new chunks into the vector graph when idle; merged here, the first searches
    // after a reindex find every chunk in the graph.
    const backlog = (await index.graphBacklog?.()) ?? 0;
    if (backlog > 0) {
      log.info(`merging ${backlog} chunks into the vector graph`);
      while (((await index.mergeIntoGraph?.(500)) ?? 0) > 0);
    }
    const [totals] = await prisma.$queryRaw<{ documents: bigint; chunks: bigint }[]>`
      SELECT count(*) AS documents, coalesce(sum(chunk_count), 0) AS chunks FROM documents WHERE status = 'ready'`;
    const failed = await prisma.document.findMany({ where: { status: 'failed' }, select: { id: true, filename: true, error: true } });
    return {
      model: embedder.modelId,
      dimensions: embedder.dimensions,
      previousModel: previous.model,
      previousDimensions: previous.dimensions,
      documents: Number(totals!.documents),
      chunks: Number(totals!.chunks),
      failed: failed.map((document) => ({ document_id: document.id, filename: document.filename, error: document.error })),
      seconds: Math.round((Date.now() - started) / 100) / 10,
    };
  } finally {
    await queue?.stop();
    await parsePool.close();
    await embedder.close();
  }
}
