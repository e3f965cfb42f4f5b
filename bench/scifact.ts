/**
 * `npm run bench:scifact [-- --index elasticsearch]`: retrieval quality and ingestion speed on
 * BEIR SciFact, through the service's HTTP API, in one run.
 *
 *   1. Ingest: starts the service in this process (`startApp`, embedded store in a fresh
 *      temporary KB_DATA_DIR), uploads the 5,183 abstracts (`title + "\n\n" + text` as
 *      `<_id>.txt`) over HTTP, several files per request and a few requests at once, and times
 *      the first upload until every document is ready: ingest chunks/s.
 *   2. Raw embedder: the SAME chunk texts, read back from the store, through an embedder made
 *      here with `createEmbedder(config)` (same model, threads and worker layout as the
 *      service's), in batches of config.embeddings.batchSize with KB_INGEST_CONCURRENCY calls in
 *      flight, each lane waiting for its batch before sending the next (as the ingestion jobs
 *      do). Raw chunks/s, and the ratio ingest / raw (target >= 0.85). A second pass sends the
 *      batches ingestion really forms (one document's chunks per call) to tell the cost of small
 *      per-document batches from the cost of everything else.
 *   3. Quality: the 300 test queries through `POST /v1/kb/query` with top_k 100 in each mode
 *      (keyword, vector, hybrid), interleaved per query; chunks are mapped to SciFact ids (a
 *      document's rank is its best chunk's), nDCG@10 (binary gains, log2 discount, ideal from the
 *      qrels) and Recall@100, client-side latency p50/p95 per mode. Reciprocal-rank fusion (k 60,
 *      fusion.ts) and the convex fusion are also computed offline from the keyword and vector
 *      lists of the same run, so RRF and the service's fusion are compared on the same hits.
 *
 * Prints tables on stdout (progress on stderr, with the published baselines beside) and writes
 * bench/results/scifact[-elasticsearch].json and .html, and every query's three result lists to
 * scifact[-elasticsearch]-lists.json.
 *
 * `--index elasticsearch` keeps the index in ELASTICSEARCH_URL (required then) and the store in
 * DATABASE_URL when that is set (else the embedded store); without it the embedded store and its
 * pgvector index are used whatever DATABASE_URL and ELASTICSEARCH_URL say.
 *
 * Knobs: BENCH_SCIFACT_DOCS (all 5,183; a smaller corpus keeps the relevant abstracts of the
 * queries asked and fills up with others, so its scores are NOT comparable with published
 * ones), BENCH_SCIFACT_QUERIES (all 300), BENCH_BATCH_FILES (20 files per upload request),
 * BENCH_PARALLEL_UPLOADS (4), BENCH_SCIFACT_PER_DOC_PASS (1; 0 skips the second raw pass).
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import cliProgress from 'cli-progress';
import { startApp } from '../src/app.js';
import { adminCommands } from '../src/cli/admin-commands.js';
import { loadConfig, type Config } from '../src/config.js';
import type { Embedder } from '../src/modules/embeddings/embedder.js';
import { createEmbedder } from '../src/modules/embeddings/select.js';
import { fuseConvex, fuseReciprocalRank, fusionDepth, vectorWeight } from '../src/modules/retrieval/fusion.js';
import type { IndexHit } from '../src/modules/retrieval/vector-index.js';
import {
  elapsedSeconds,
  escapeHtml,
  htmlTable,
  indexKindFromArgs,
  intFromEnv,
  loadNow,
  log,
  machineDescription,
  mean,
  percentile,
  progressBar,
  resultPage,
  resultsDir,
  runBenchmark,
  cleanUpOnInterrupt,
  ServiceClient,
  sleep,
  textTable,
  writeResults,
} from './helpers.js';
import { PeakRss } from './memory.js';

const benchData = path.resolve(import.meta.dirname, '../../shared/bench-data');
const scifactDir = path.join(benchData, 'scifact');
const baselinesPath = path.join(benchData, 'baselines/beir_ndcg10_baselines.csv');

const TARGET_HYBRID_NDCG = 0.73;
const TARGET_INGEST_RATIO = 0.85;
const TOP_K = 100;
const WARMUP_QUERIES = 5;

// ---------------------------------------------------------------------------------------------
// Data

type Abstract = { id: string; title: string; text: string };
type Query = { id: string; text: string };

async function jsonLines<T>(file: string): Promise<T[]> {
  return (await readFile(file, 'utf8'))
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as T);
}

/** query id -> relevant corpus ids (all SciFact test judgements are 1). */
async function readQrels(): Promise<Map<string, Set<string>>> {
  const qrels = new Map<string, Set<string>>();
  const lines = (await readFile(path.join(scifactDir, 'qrels/test.tsv'), 'utf8')).split('\n').slice(1);
  for (const line of lines) {
    const [queryId, corpusId, score] = line.trim().split('\t');
    if (!queryId || !corpusId || Number(score) <= 0) continue;
    if (!qrels.has(queryId)) qrels.set(queryId, new Set());
    qrels.get(queryId)!.add(corpusId);
  }
  return qrels;
}

type Baseline = { method: string; ndcg10: number; source: string };

async function readBaselines(): Promise<Baseline[]> {
  const lines = (await readFile(baselinesPath, 'utf8')).split('\n').slice(1);
  return lines
    .map((line) => line.split(','))
    .filter(([dataset]) => dataset === 'scifact')
    .map(([, method, ndcg, ...source]) => ({ method: method!, ndcg10: Number(ndcg), source: source.join(',') }));
}

// ---------------------------------------------------------------------------------------------
// HTTP client

type SearchResultBody = { document_id: string; filename: string; chunk_index: number; content: string; score: number; metadata: unknown };
/** The service's API, with the two calls this benchmark makes most. */
class Client extends ServiceClient {
  /** One search; the latency is the client's: request sent until the whole body is read and parsed. */
  async query(body: { query: string; workspace_id: string; top_k: number; mode: Mode }): Promise<{ results: SearchResultBody[]; ms: number }> {
    const started = performance.now();
    const { results } = await this.json<{ results: SearchResultBody[] }>('POST', '/v1/kb/query', body);
    return { results, ms: performance.now() - started };
  }
}

// ---------------------------------------------------------------------------------------------
// Metrics

/** Distinct SciFact ids in the order of their best chunk. */
function documentRanking(chunkKeys: readonly string[], scifactIdOf: (chunkKey: string) => string): string[] {
  const seen = new Set<string>();
  const ranking: string[] = [];
  for (const key of chunkKeys) {
    const id = scifactIdOf(key);
    if (seen.has(id)) continue;
    seen.add(id);
    ranking.push(id);
  }
  return ranking;
}

/** nDCG@k with binary gains and the log2(rank + 1) discount; the ideal ranking puts every relevant document first. */
function ndcgAt(ranking: readonly string[], relevant: ReadonlySet<string>, k: number): number {
  let dcg = 0;
  for (let rank = 0; rank < Math.min(k, ranking.length); rank++) if (relevant.has(ranking[rank]!)) dcg += 1 / Math.log2(rank + 2);
  let ideal = 0;
  for (let rank = 0; rank < Math.min(k, relevant.size); rank++) ideal += 1 / Math.log2(rank + 2);
  return ideal === 0 ? 0 : dcg / ideal;
}

function recallAt(ranking: readonly string[], relevant: ReadonlySet<string>, k: number): number {
  if (relevant.size === 0) return 0;
  let found = 0;
  for (const id of ranking.slice(0, k)) if (relevant.has(id)) found++;
  return found / relevant.size;
}

// ---------------------------------------------------------------------------------------------
// Raw embedder

type RawPass = { label: string; batches: number; chunks: number; seconds: number; chunksPerSecond: number; loadBefore: string; loadAfter: string };

/**
 * `lanes` concurrent callers, each taking the next batch and waiting for its vectors before it
 * takes another: what KB_INGEST_CONCURRENCY embed jobs do (each job embeds its document's next
 * batch while the previous one is written; here nothing is written, so a lane waits only on the
 * embedder).
 */
async function rawPass(embedder: Embedder, label: string, batches: string[][], lanes: number): Promise<RawPass> {
  const chunks = batches.reduce((sum, batch) => sum + batch.length, 0);
  const bar = progressBar(`raw embedder, ${label} |{bar}| {value}/{total} chunks | {duration_formatted}`);
  bar.start(chunks, 0);
  const loadBefore = loadNow();
  let next = 0;
  let done = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: lanes }, async () => {
      while (next < batches.length) {
        const batch = batches[next++]!;
        const vectors = await embedder.embed(batch, 'passage');
        if (vectors.length !== batch.length) throw new Error(`the embedder answered ${vectors.length} vectors for ${batch.length} texts`);
        done += batch.length;
        bar.update(done);
      }
    }),
  );
  const seconds = elapsedSeconds(start);
  bar.stop();
  return { label, batches: batches.length, chunks, seconds, chunksPerSecond: chunks / seconds, loadBefore, loadAfter: loadNow() };
}

function inBatches<T>(items: readonly T[], size: number): T[][] {
  const batches: T[][] = [];
  for (let start = 0; start < items.length; start += size) batches.push(items.slice(start, start + size));
  return batches;
}

// ---------------------------------------------------------------------------------------------
// Report

const modes = ['keyword', 'vector', 'hybrid'] as const;
type Mode = (typeof modes)[number];

type MethodResult = { method: string; ndcg10: number; recall100: number; p50Ms: number | null; p95Ms: number | null; published: string };

/** Horizontal bars of nDCG@10, measured and published, with the hybrid target as a dashed line. */
function ndcgChart(bars: { label: string; value: number; kind: 'measured' | 'published' }[], target: number): string {
  const width = 640;
  const labelWidth = 250;
  const valueWidth = 56;
  const barHeight = 20;
  const gap = 8;
  const top = 30;
  const plotWidth = width - labelWidth - valueWidth;
  const height = top + bars.length * (barHeight + gap) + 20;
  const maximum = 0.8;
  const x = (value: number) => labelWidth + (Math.min(value, maximum) / maximum) * plotWidth;
  const color = { measured: '#4e79a7', published: '#bab0ac' };
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-label="nDCG@10 on SciFact">`,
    `<text x="0" y="16" font-size="13" font-weight="600">nDCG@10 on SciFact test (300 queries); grey: published</text>`,
  ];
  bars.forEach((bar, index) => {
    const y = top + index * (barHeight + gap);
    parts.push(
      `<text x="${labelWidth - 6}" y="${y + barHeight / 2 + 4}" font-size="12" text-anchor="end">${escapeHtml(bar.label)}</text>`,
      `<rect x="${labelWidth}" y="${y}" width="${(x(bar.value) - labelWidth).toFixed(1)}" height="${barHeight}" fill="${color[bar.kind]}" rx="2"><title>${escapeHtml(`${bar.label}: ${bar.value.toFixed(4)}`)}</title></rect>`,
      `<text x="${(x(bar.value) + 4).toFixed(1)}" y="${y + barHeight / 2 + 4}" font-size="12">${bar.value.toFixed(3)}</text>`,
    );
  });
  const lineX = x(target).toFixed(1);
  const bottom = top + bars.length * (barHeight + gap) - gap / 2;
  parts.push(
    `<line x1="${lineX}" y1="${top - 4}" x2="${lineX}" y2="${bottom}" stroke="#c0392b" stroke-width="1.5" stroke-dasharray="4 3"/>`,
    `<text x="${lineX}" y="${bottom + 14}" font-size="11" fill="#c0392b" text-anchor="middle">hybrid target ${target}</text>`,
    '</svg>',
  );
  return parts.join('\n');
}

// ---------------------------------------------------------------------------------------------

async function main() {
  const indexKind = indexKindFromArgs(process.argv.slice(2), 'bench/scifact.ts');
  const { DATABASE_URL: databaseUrl, ELASTICSEARCH_URL: elasticsearchUrl, ...environment } = process.env;
  if (indexKind === 'elasticsearch' && !elasticsearchUrl) {
    throw new Error('--index elasticsearch needs ELASTICSEARCH_URL (for instance the URL that .ci/start-elasticsearch.sh prints on its last line)');
  }
  const docLimit = intFromEnv('BENCH_SCIFACT_DOCS', 0, 0);
  const queryLimit = intFromEnv('BENCH_SCIFACT_QUERIES', 0, 0);
  const parallelUploads = Math.max(1, intFromEnv('BENCH_PARALLEL_UPLOADS', 4, 0));
  const perDocPass = intFromEnv('BENCH_SCIFACT_PER_DOC_PASS', 1, 0) > 0;

  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'kb-bench-scifact-'));
  const config: Config = loadConfig({
    ...environment,
    ...(indexKind === 'elasticsearch' ? { ELASTICSEARCH_URL: elasticsearchUrl, ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}) } : {}),
    HOST: '127.0.0.1',
    PORT: '0',
    KB_DATA_DIR: dataDir,
    KB_LOG_LEVEL: 'silent',
    // Timings, not the limiter: the queries would otherwise meet the per-user search limit.
    KB_SEARCH_RATE_PER_MINUTE: String(1_000_000),
  });
  const batchFiles = Math.max(1, Math.min(intFromEnv('BENCH_BATCH_FILES', 20, 0), config.uploads.maxFiles));
  const storeLabel = config.databaseUrl ? 'PostgreSQL (DATABASE_URL)' : 'embedded store (PGlite)';
  const indexLabel = indexKind === 'elasticsearch' ? 'Elasticsearch' : config.databaseUrl ? 'pgvector' : 'pgvector in PGlite';

  // ----- data
  const allAbstracts = await jsonLines<{ _id: string; title: string; text: string }>(path.join(scifactDir, 'corpus.jsonl'));
  const allQueries = (await jsonLines<{ _id: string; text: string }>(path.join(scifactDir, 'queries_test.jsonl'))).map((q): Query => ({ id: q._id, text: q.text }));
  const qrels = await readQrels();
  const queries = (queryLimit > 0 ? allQueries.slice(0, queryLimit) : allQueries).filter((query) => qrels.has(query.id));
  let abstracts: Abstract[] = allAbstracts.map((record) => ({ id: record._id, title: record.title, text: record.text }));
  const subset = docLimit > 0 && docLimit < abstracts.length;
  if (subset) {
    // The relevant abstracts of the queries asked first, then others in file order.
    const wanted = new Set(queries.flatMap((query) => [...qrels.get(query.id)!]));
    const relevant = abstracts.filter((abstract) => wanted.has(abstract.id));
    const others = abstracts.filter((abstract) => !wanted.has(abstract.id));
    abstracts = [...relevant, ...others].slice(0, Math.max(docLimit, 1));
  }
  const corpusIds = new Set(abstracts.map((abstract) => abstract.id));
  const judged = new Map(queries.map((query) => [query.id, new Set([...qrels.get(query.id)!].filter((id) => corpusIds.has(id)))]));
  const evaluated = queries.filter((query) => judged.get(query.id)!.size > 0);
  const baselines = await readBaselines();

  const cores = os.availableParallelism();
  const machine = machineDescription();
  const loadAtStart = loadNow();
  log(`SciFact benchmark on ${machine}; load average ${loadAtStart}`);
  log(`store: ${storeLabel}; index: ${indexLabel}; ${abstracts.length} abstracts${subset ? ' (SUBSET)' : ''}; ${evaluated.length} queries evaluated`);

  if (indexKind === 'elasticsearch') {
    // The service's index name is fixed (kb_chunks); its BM25 statistics (N, df, average length)
    // span every chunk in it, other workspaces' included.
    const { Client: EsClient } = await import('@elastic/elasticsearch');
    const es = new EsClient({ node: elasticsearchUrl! });
    try {
      const { count } = await es.count({ index: 'kb_chunks' }).catch(() => ({ count: 0 }));
      if (count > 0) log(`WARNING: the Elasticsearch index kb_chunks already holds ${count} chunks; its BM25 statistics include them`);
    } finally {
      await es.close();
    }
  }

  log(`starting the service (${dataDir})`);
  const app = await startApp(config);
  const created = await adminCommands['users.create'](app.db.prisma, { email: `bench-scifact-${randomUUID()}@example.com`, name: 'SciFact benchmark', credits: 0, active: true });
  const client = new Client(app.url, created.api_key.raw_key);
  let rawEmbedder: Embedder | undefined;
  let workspaceId: string | undefined;
  const cleanUp = async () => {
    if (workspaceId && (config.databaseUrl || indexKind === 'elasticsearch')) {
      // An external store or index outlives this run: remove what it added.
      await client.json('DELETE', `/v1/kb/workspaces/${workspaceId}`).catch(() => {});
      if (indexKind === 'elasticsearch') {
        const { openElasticsearchIndex } = await import('../src/modules/retrieval/elasticsearch-index.js');
        const embedderModel = rawEmbedder ? { model: rawEmbedder.modelId, dimensions: rawEmbedder.dimensions } : { model: 'unknown', dimensions: 384 };
        const index = await openElasticsearchIndex(config.elasticsearch!, embedderModel, { timeoutMs: 30_000 }).catch(() => undefined);
        await index?.deleteWorkspace(workspaceId).catch((error: unknown) => log(`could not remove the benchmark's chunks from Elasticsearch: ${String(error)}`));
        await index?.close();
      }
    }
    await rawEmbedder?.close().catch(() => {});
    await app.close().catch((error: unknown) => log(`could not close the service: ${String(error)}`));
    await rm(dataDir, { recursive: true, force: true });
  };
  const stopListening = cleanUpOnInterrupt(cleanUp);

  try {
    workspaceId = (await client.json<{ id: string }>('POST', '/v1/kb/workspaces', { name: `scifact ${new Date().toISOString()}` })).id;
    const wsId = workspaceId;

    // ----- 1. ingest through the API
    const encoder = new TextEncoder();
    const files = abstracts.map((abstract) => ({ id: abstract.id, name: `${abstract.id}.txt`, bytes: encoder.encode(`${abstract.title}\n\n${abstract.text}`) }));
    const uploadBatches = inBatches(files, batchFiles);
    const bars = new cliProgress.MultiBar(
      { format: 'ingest {phase} |{bar}| {value}/{total} docs | {duration_formatted}', stream: process.stderr, hideCursor: true, noTTYOutput: true, notTTYSchedule: 5_000, fps: 5 },
      cliProgress.Presets.shades_classic,
    );
    const uploadedBar = bars.create(files.length, 0, { phase: 'uploaded' });
    const readyBar = bars.create(files.length, 0, { phase: 'ready   ' });
    const documentIdOf = new Map<string, string>();
    const memory = new PeakRss();
    const loadBeforeIngest = loadNow();
    const start = performance.now();
    let uploaded = 0;
    let nextBatch = 0;
    let uploadSeconds = 0;
    let uploadsDone = false;
    let uploadError: unknown;
    const uploads = Promise.all(
      Array.from({ length: parallelUploads }, async () => {
        while (nextBatch < uploadBatches.length) {
          const batch = uploadBatches[nextBatch++]!;
          // The metadata part applies to every file of a request: a per-document id only with one file per request.
          const metadata = batch.length === 1 ? { scifact_id: batch[0]!.id } : undefined;
          for (const document of await client.upload(wsId, batch, metadata)) documentIdOf.set(document.filename, document.id);
          uploaded += batch.length;
          uploadedBar.update(uploaded);
        }
      }),
    ).then(
      () => {
        uploadSeconds = elapsedSeconds(start);
        uploadsDone = true;
      },
      (error: unknown) => {
        uploadError = error ?? new Error('an upload failed');
      },
    );
    // Readiness is polled with one aggregate query on the store every 500 ms: the API's stats
    // (several aggregates through GraphQL) cost the single-connection embedded store enough to
    // slow down what is measured. The API's stats are read once the clock has stopped.
    let ingestSeconds: number;
    const pollMs: number[] = [];
    const jobSamples: { parse: number; embed: number }[] = [];
    for (;;) {
      await sleep(500);
      if (uploadError !== undefined) {
        bars.stop();
        throw uploadError;
      }
      const polled = performance.now();
      const settled = await app.db.prisma.document.count({ where: { workspaceId: wsId, status: { in: ['ready', 'failed'] } } });
      pollMs.push(performance.now() - polled);
      // Jobs claimed, by kind (a diagnostic; embed jobs are claimed several at a time, so they are not slots).
      const [running] = await app.db.prisma.$queryRaw<{ parse: bigint; embed: bigint; queued: bigint }[]>`
        SELECT count(*) FILTER (WHERE status = 'running' AND kind = 'parse') AS parse,
               count(*) FILTER (WHERE status = 'running' AND kind = 'embed') AS embed,
               count(*) FILTER (WHERE status = 'queued') AS queued
          FROM jobs`;
      if (running && Number(running.queued) > 0) jobSamples.push({ parse: Number(running.parse), embed: Number(running.embed) });
      readyBar.update(settled);
      if (uploadsDone && settled >= files.length) {
        ingestSeconds = elapsedSeconds(start);
        break;
      }
    }
    await uploads;
    const ingestPeakRss = memory.stop();
    bars.stop();
    const loadAfterIngest = loadNow();
    const stats = await client.stats(wsId);
    if (stats.documents_by_status.failed > 0) throw new Error(`${stats.documents_by_status.failed} documents failed to ingest`);
    if (stats.document_count !== files.length) throw new Error(`uploaded ${files.length} files but the workspace holds ${stats.document_count} documents`);
    const ingestChunks = stats.chunk_count;
    const busySlots = {
      samples: jobSamples.length,
      parse: mean(jobSamples.map((sample) => sample.parse)),
      embed: mean(jobSamples.map((sample) => sample.embed)),
    };
    const ingest = { busySlots, documents: files.length, chunks: ingestChunks, seconds: ingestSeconds, uploadSeconds, chunksPerSecond: ingestChunks / ingestSeconds, peakRssBytes: ingestPeakRss, loadBefore: loadBeforeIngest, loadAfter: loadAfterIngest };
    log(`ingested ${files.length} documents, ${ingestChunks} chunks in ${ingestSeconds.toFixed(1)} s (${ingest.chunksPerSecond.toFixed(1)} chunks/s); poll p50 ${percentile(pollMs, 50).toFixed(1)} ms`);

    // ----- 1b. pgvector: the chunks are searchable once ready, but outside the HNSW graph until
    // the server merges them in, which it does once ingestion is idle. Timed from the last
    // document ready until none is left outside, and reported beside the ingest.
    let merge: { seconds: number; chunks: number } | undefined;
    if (indexKind !== 'elasticsearch') {
      const backlog = async () => Number((await app.db.prisma.$queryRaw<{ count: bigint }[]>`SELECT count(*) AS count FROM chunk_index_fresh`)[0]!.count);
      const waiting = await backlog();
      const mergeStart = performance.now();
      while ((await backlog()) > 0) await sleep(100);
      merge = { seconds: elapsedSeconds(mergeStart), chunks: waiting };
      log(`merged ${waiting} chunks into the vector graph ${merge.seconds.toFixed(1)} s after the last document was ready`);
    }

    // ----- 2. raw embedder on the same chunks
    const chunkRows = await app.db.prisma.chunk.findMany({
      where: { document: { workspaceId: wsId } },
      select: { documentId: true, chunkIndex: true, content: true },
      orderBy: [{ document: { createdAt: 'asc' } }, { documentId: 'asc' }, { chunkIndex: 'asc' }],
    });
    if (chunkRows.length !== ingestChunks) throw new Error(`the store holds ${chunkRows.length} chunks, the stats say ${ingestChunks}`);
    log(`raw embedder: ${chunkRows.length} chunks read back from the store; load average ${loadNow()}`);
    rawEmbedder = await createEmbedder(config);
    const lanes = config.ingestion.concurrency;
    const batchSize = config.embeddings.batchSize;
    const rawPasses: RawPass[] = [];
    rawPasses.push(await rawPass(rawEmbedder, `batches of ${batchSize}, ${lanes} in flight`, inBatches(chunkRows.map((row) => row.content), batchSize), lanes));
    if (perDocPass) {
      const byDocument = new Map<string, string[]>();
      for (const row of chunkRows) {
        if (!byDocument.has(row.documentId)) byDocument.set(row.documentId, []);
        byDocument.get(row.documentId)!.push(row.content);
      }
      const perDocument = [...byDocument.values()].flatMap((texts) => inBatches(texts, batchSize));
      rawPasses.push(await rawPass(rawEmbedder, `per-document batches (as ingestion forms them), ${lanes} in flight`, perDocument, lanes));
    }
    const embedderModel = rawEmbedder.modelId;
    await rawEmbedder.close();
    rawEmbedder = undefined;
    const raw = rawPasses[0]!;
    const ingestRatio = ingest.chunksPerSecond / raw.chunksPerSecond;
    const withMerge = merge && { seconds: ingest.seconds + merge.seconds, chunksPerSecond: ingest.chunks / (ingest.seconds + merge.seconds) };

    // ----- 3. quality through the API
    const filenameIds = new Map([...documentIdOf].map(([filename, documentId]) => [documentId, filename.replace(/\.txt$/, '')]));
    const keyOf = (result: SearchResultBody) => `${result.document_id}#${result.chunk_index}`;
    const scifactIdOf = (key: string) => {
      const id = filenameIds.get(key.slice(0, key.indexOf('#')));
      if (!id) throw new Error(`a result names document ${key}, not one of the uploaded ones`);
      return id;
    };
    log(`queries: ${WARMUP_QUERIES} warm-up per mode, then ${queries.length} x ${modes.length} modes, top_k ${TOP_K}, interleaved; load average ${loadNow()}`);
    for (const query of queries.slice(0, WARMUP_QUERIES)) {
      for (const mode of modes) await client.query({ query: query.text, workspace_id: wsId, top_k: TOP_K, mode });
    }
    const latencies: Record<Mode, number[]> = { keyword: [], vector: [], hybrid: [] };
    const lists = new Map<string, Record<Mode, IndexHit[]>>();
    const resultCounts: Record<Mode, number[]> = { keyword: [], vector: [], hybrid: [] };
    const bar = progressBar('queries |{bar}| {value}/{total} | {duration_formatted}');
    bar.start(queries.length, 0);
    const loadBeforeQueries = loadNow();
    for (const [position, query] of queries.entries()) {
      const perMode = {} as Record<Mode, IndexHit[]>;
      // A different mode goes first for each query: none profits more than another from what the one before left in caches.
      for (let step = 0; step < modes.length; step++) {
        const mode = modes[(position + step) % modes.length]!;
        const { results, ms } = await client.query({ query: query.text, workspace_id: wsId, top_k: TOP_K, mode });
        latencies[mode].push(ms);
        resultCounts[mode].push(results.length);
        perMode[mode] = results.map((result) => ({ chunkId: keyOf(result), score: result.score }));
      }
      lists.set(query.id, perMode);
      bar.update(position + 1);
    }
    bar.stop();
    const loadAfterQueries = loadNow();

    type Ranker = { method: string; lists: (query: Query) => IndexHit[]; mode?: Mode; published: string };
    const bm25Flat = baselines.find((b) => b.method === 'pyserini:bm25-flat');
    const bm25Multi = baselines.find((b) => b.method === 'pyserini:bm25-multifield');
    const bgeSmall = baselines.find((b) => b.method === 'bge-small-en-v1.5');
    const fmt3 = (value: number | undefined) => (value === undefined ? '?' : value.toFixed(3));
    const rankers: Ranker[] = [
      { method: 'keyword: BM25 (service)', mode: 'keyword', lists: (q) => lists.get(q.id)!.keyword, published: `BM25 flat ${fmt3(bm25Flat?.ndcg10)}, multifield ${fmt3(bm25Multi?.ndcg10)} (Pyserini)` },
      { method: `vector: ${embedderModel}`, mode: 'vector', lists: (q) => lists.get(q.id)!.vector, published: `bge-small-en-v1.5 ${fmt3(bgeSmall?.ndcg10)} (MTEB, fp32)` },
      { method: `hybrid: convex ${vectorWeight}/${1 - vectorWeight} (service)`, mode: 'hybrid', lists: (q) => lists.get(q.id)!.hybrid, published: `target >= ${TARGET_HYBRID_NDCG}` },
      { method: 'RRF k=60 (offline, same lists)', lists: (q) => fuseReciprocalRank(lists.get(q.id)!.vector, lists.get(q.id)!.keyword, 60), published: '' },
      { method: 'convex (offline, same lists)', lists: (q) => fuseConvex(lists.get(q.id)!.vector, lists.get(q.id)!.keyword), published: 'check: equals hybrid' },
    ];
    const perQuery: Record<string, Record<string, { ndcg10: number; recall100: number }>> = {};
    const methodResults: MethodResult[] = rankers.map((ranker) => {
      const ndcgs: number[] = [];
      const recalls: number[] = [];
      for (const query of evaluated) {
        const ranking = documentRanking(
          ranker.lists(query).map((hit) => hit.chunkId),
          scifactIdOf,
        );
        const relevant = judged.get(query.id)!;
        const ndcg10 = ndcgAt(ranking, relevant, 10);
        const recall100 = recallAt(ranking, relevant, 100);
        ndcgs.push(ndcg10);
        recalls.push(recall100);
        (perQuery[query.id] ??= {})[ranker.method] = { ndcg10, recall100 };
      }
      return {
        method: ranker.method,
        ndcg10: mean(ndcgs),
        recall100: mean(recalls),
        p50Ms: ranker.mode ? percentile(latencies[ranker.mode], 50) : null,
        p95Ms: ranker.mode ? percentile(latencies[ranker.mode], 95) : null,
        published: ranker.published,
      };
    });
    // Does the offline convex fusion reproduce the service's hybrid order? (Ties may be ordered differently.)
    let sameTop10 = 0;
    for (const query of queries) {
      const service = lists.get(query.id)!.hybrid.slice(0, 10).map((hit) => hit.chunkId);
      const offline = fuseConvex(lists.get(query.id)!.vector, lists.get(query.id)!.keyword)
        .slice(0, 10)
        .map((hit) => hit.chunkId);
      if (service.join() === offline.join()) sameTop10++;
    }

    // ----- report
    const hybrid = methodResults[2]!;
    const rrf = methodResults[3]!;
    const hybridVerdict = hybrid.ndcg10 >= TARGET_HYBRID_NDCG ? 'PASS' : 'MISS';
    const ratioVerdict = ingestRatio >= TARGET_INGEST_RATIO ? 'PASS' : 'MISS';
    const qualityHeaders = ['method', 'nDCG@10', 'Recall@100', 'p50 ms', 'p95 ms', 'published nDCG@10 beside'];
    const qualityRows = methodResults.map((m) => [
      m.method,
      m.ndcg10.toFixed(4),
      m.recall100.toFixed(4),
      m.p50Ms === null ? '-' : m.p50Ms.toFixed(1),
      m.p95Ms === null ? '-' : m.p95Ms.toFixed(1),
      m.published,
    ]);
    const ingestHeaders = ['what', 'chunks', 'seconds', 'chunks/s', 'load avg before -> after'];
    const ingestRows = [
      [`ingest end to end: HTTP upload until all ready (${files.length} docs)`, String(ingest.chunks), ingest.seconds.toFixed(2), ingest.chunksPerSecond.toFixed(1), `${ingest.loadBefore} -> ${ingest.loadAfter}`],
      ...(merge && withMerge
        ? [[`... and until all ${merge.chunks} merged into the vector graph (+${merge.seconds.toFixed(2)} s)`, String(ingest.chunks), withMerge.seconds.toFixed(2), withMerge.chunksPerSecond.toFixed(1), '']]
        : []),
      ...rawPasses.map((pass) => [`raw embedder: ${pass.label}`, String(pass.chunks), pass.seconds.toFixed(2), pass.chunksPerSecond.toFixed(1), `${pass.loadBefore} -> ${pass.loadAfter}`]),
    ];
    const fairness =
      `Raw embedder: the same ${chunkRows.length} chunk texts read back from the store, in ingestion order, through a second embedder made here with createEmbedder(config) ` +
      `(${embedderModel}, KB_EMBED_THREADS ${config.embeddings.threads}: the same model, threads and worker layout as the service's, whose own embedder sat idle meanwhile), ` +
      `in batches of KB_EMBED_BATCH_SIZE ${batchSize} with KB_INGEST_CONCURRENCY ${lanes} calls in flight, each lane sending its next batch when the last one's vectors came back, ` +
      'timed from the first call to the last vector. It leaves out what ingestion adds: upload, parsing and chunking, store writes, index writes, job claims.';
    const notes = [
      `${hybridVerdict}: hybrid nDCG@10 ${hybrid.ndcg10.toFixed(4)} against the target >= ${TARGET_HYBRID_NDCG}${subset ? ' (on a SUBSET of the corpus: not comparable)' : ''}. RRF (k 60) on the same lists: ${rrf.ndcg10.toFixed(4)}.`,
      `${ratioVerdict}: ingest / raw embedder = ${ingest.chunksPerSecond.toFixed(1)} / ${raw.chunksPerSecond.toFixed(1)} chunks/s = ${ingestRatio.toFixed(3)} against the target >= ${TARGET_INGEST_RATIO}.` +
        (rawPasses[1] ? ` Against per-document batches (${rawPasses[1].chunksPerSecond.toFixed(1)} chunks/s): ${(ingest.chunksPerSecond / rawPasses[1].chunksPerSecond).toFixed(3)}.` : '') +
        (merge && withMerge
          ? ` Until the last chunk was also merged into the HNSW graph (${merge.seconds.toFixed(1)} s after the last document was ready; searches compare unmerged chunks one by one, so they are found meanwhile): ${(withMerge.chunksPerSecond / raw.chunksPerSecond).toFixed(3)}.`
          : ''),
      fairness,
      `Ingest: ${files.length} files uploaded ${batchFiles} per request, ${parallelUploads} requests at once, all sent after ${uploadSeconds.toFixed(2)} s; readiness polled with a count of ready documents on the store every 500 ms (p50 ${percentile(pollMs, 50).toFixed(1)} ms a poll), chunk counts read from GET /v1/kb/workspaces/{id}/stats afterwards. Peak RSS of the whole process and its parsing processes while ingesting: ${Math.round(ingestPeakRss / 2 ** 20)} MB.`,
      `Jobs running while others waited (sampled with each poll, ${busySlots.samples} samples), on average: parse ${busySlots.parse.toFixed(2)}, embed ${busySlots.embed.toFixed(2)} (KB_INGEST_CONCURRENCY ${lanes} workers; an embed claim takes waiting documents together, up to ${2 * batchSize} chunks).`,
      batchFiles === 1
        ? 'Metadata: each document was uploaded alone with {"scifact_id": _id}; results are mapped to SciFact ids by file name (<_id>.txt).'
        : `Metadata: the upload API takes one metadata part per request, applied to all its files, so with ${batchFiles} files per request no metadata part is sent (20 files plus a metadata part is refused: "too many parts") and results are mapped to SciFact ids by file name (<_id>.txt); BENCH_BATCH_FILES=1 sends {"scifact_id": _id} with each document.`,
      `Queries: ${queries.length} test queries (${evaluated.length} with judgements in the corpus), each in the three modes with top_k ${TOP_K}, one request at a time, the mode order rotating per query, after ${WARMUP_QUERIES} warm-up queries per mode; latency is the client's (loopback HTTP, body read and parsed; top_k ${TOP_K} returns 100 chunk texts). Load average ${loadBeforeQueries} before, ${loadAfterQueries} after.`,
      `Documents are ranked by their best chunk (duplicates of a document removed); ${methodResults.length} rankings come from the same keyword and vector lists of ${TOP_K} chunks (the service's fusion depth is ${fusionDepth}). Mean results per query: keyword ${mean(resultCounts.keyword).toFixed(1)}, vector ${mean(resultCounts.vector).toFixed(1)}, hybrid ${mean(resultCounts.hybrid).toFixed(1)}.`,
      `Offline convex fusion has the same top 10 as the service's hybrid for ${sameTop10} of ${queries.length} queries (a difference comes from tied scores, or from the approximate vector search answering a little differently from one call to the next).`,
      `Store: ${storeLabel}; index: ${indexLabel}; chunks of ${config.ingestion.chunkTokens} tokens, ${config.ingestion.overlapTokens} overlap. Load average at start ${loadAtStart}.`,
    ];

    process.stdout.write(`\nSciFact retrieval (${indexLabel}, ${embedderModel}${subset ? `, SUBSET of ${abstracts.length} abstracts` : ''})\n\n`);
    process.stdout.write(`${textTable(qualityHeaders, qualityRows, (column) => column > 0 && column < 5)}\n\n`);
    process.stdout.write(`${textTable(ingestHeaders, ingestRows, (column) => column > 0 && column < 4)}\n\n`);
    process.stdout.write(`${notes.map((note) => `- ${note}`).join('\n')}\n`);

    const suffix = indexKind === 'elasticsearch' ? '-elasticsearch' : '';
    const date = new Date().toISOString().slice(0, 10);
    const json = {
      date,
      machine,
      store: storeLabel,
      index: indexLabel,
      embedder: embedderModel,
      subset,
      corpusSize: abstracts.length,
      queries: queries.length,
      evaluatedQueries: evaluated.length,
      settings: { chunkTokens: config.ingestion.chunkTokens, overlapTokens: config.ingestion.overlapTokens, embedBatchSize: batchSize, ingestConcurrency: lanes, embedThreads: config.embeddings.threads, batchFiles, parallelUploads, topK: TOP_K },
      load: { start: loadAtStart, ingest: [ingest.loadBefore, ingest.loadAfter], queries: [loadBeforeQueries, loadAfterQueries] },
      ingest,
      graphMerge: merge ?? null,
      raw: rawPasses,
      ingestRatio,
      ingestRatioWithMerge: withMerge ? withMerge.chunksPerSecond / raw.chunksPerSecond : null,
      targets: { hybridNdcg10: TARGET_HYBRID_NDCG, ingestRatio: TARGET_INGEST_RATIO },
      verdicts: { hybridNdcg10: hybridVerdict, ingestRatio: ratioVerdict },
      methods: methodResults,
      offlineConvexSameTop10: sameTop10,
      baselines,
      latenciesMs: latencies,
      perQuery,
      notes,
    };
    const bars2 = [
      ...methodResults.map((m) => ({ label: m.method, value: m.ndcg10, kind: 'measured' as const })),
      ...[bm25Flat, bm25Multi, bgeSmall]
        .filter((b): b is Baseline => b !== undefined)
        .map((b) => ({ label: `published: ${b.method}`, value: b.ndcg10, kind: 'published' as const })),
    ];
    const html = resultPage({
      title: 'SciFact benchmark',
      heading: `SciFact benchmark${subset ? ' (subset)' : ''}`,
      meta: `${date} · ${machine} · ${storeLabel} · index ${indexLabel} · ${embedderModel}`,
      body: `<figure>${ndcgChart(bars2, TARGET_HYBRID_NDCG)}</figure>
<h2>Retrieval</h2>
${htmlTable(qualityHeaders, qualityRows)}
<h2>Ingestion against the raw embedder</h2>
${htmlTable(ingestHeaders, ingestRows)}`,
      notes,
    });
    await writeResults(`scifact${suffix}`, json, html);
    // Every query's three lists as the API returned them, with each document's SciFact id and
    // chunk count: for inspection, and to try a ranking change on the same hits.
    const chunksOf = new Map<string, number>();
    for (const row of chunkRows) chunksOf.set(row.documentId, (chunksOf.get(row.documentId) ?? 0) + 1);
    const documents = Object.fromEntries([...chunksOf].map(([documentId, chunks]) => [documentId, { scifactId: filenameIds.get(documentId), chunks }]));
    await writeFile(path.join(resultsDir, `scifact${suffix}-lists.json`), `${JSON.stringify({ documents, qrels: Object.fromEntries([...judged].map(([id, relevant]) => [id, [...relevant]])), lists: Object.fromEntries(lists) })}\n`);
  } finally {
    stopListening();
    await cleanUp();
  }
}

runBenchmark(main);
