/**
 * `npm run bench:search [-- --index elasticsearch]`: where the time of one search goes, on a
 * store of 100,000 chunks in one workspace (and 4 x 5,000 in others, so that the workspace
 * filter matters), measured in one run with the service started in this process.
 *
 * Seeding bypasses HTTP: the user and workspaces are made through the API, the documents and
 * chunks are written with prisma (`createMany`, documents `ready`), and the vectors and terms go
 * in through the `VectorIndex` interface (`index.upsert` with `analyze(content)`), as the embed
 * jobs write them. The chunks are real text and their vectors are close to what the model would
 * give them, without embedding 120,000 chunks (about an hour here): the 5,183 SciFact abstracts
 * are embedded once (cached in bench/results/.cache), and each chunk is contiguous runs of
 * sentences of two or three abstracts, its vector the normalised mix of those abstracts'
 * vectors, weighted by how much of the chunk's text each gave, plus a little Gaussian noise.
 *
 * Then the 300 SciFact test queries, each through every path below in turn, the order rotating
 * from one query to the next:
 *   (a) `POST /v1/kb/query`, hybrid, top_k 10, over HTTP (client-side latency);
 *   (b) the embedder alone: `embedder.embed([query], 'query')`;
 *   (c) the backend alone: `index.search` with the arguments the service builds (the workspace,
 *       the query's vector, its analysed terms, limit = fusion depth, the chunks to read along,
 *       no excluded documents), and the same call with only the vector and with only the terms;
 *   (d) the store reads the service adds around them, through the service's own functions: the
 *       workspace's documents that are not ready, and the read-back of the fused hits' chunks
 *       (which the service needs only for hits the index did not read along).
 * p50/p95 of each; targets: API p50 <= 1.3 x (embedder p50 + backend p50), and API p50 < 50 ms
 * on the embedded store.
 *
 * Knobs: BENCH_SEARCH_CHUNKS (100000), BENCH_SEARCH_OTHER_WORKSPACES (4),
 * BENCH_SEARCH_OTHER_CHUNKS (5000 each), BENCH_SEARCH_CHUNKS_PER_DOC (10),
 * BENCH_SEARCH_QUERIES (300), BENCH_SEARCH_CACHE (1: keep the seeded embedded store in
 * bench/results/.cache keyed by these parameters and reuse it; 0: a fresh temporary store).
 * `--index elasticsearch` keeps the index in ELASTICSEARCH_URL (required then) and the store in
 * DATABASE_URL when set; no cache then.
 *
 * `--timeline` measures something else: latency minute by minute after a bulk load and during an
 * ingest, beside the service's own work on the store (bench/search-timeline.ts). `--after-start`:
 * the first minutes after a start on the store kept here, with and without the page cache
 * warm-up (bench/search-after-start.ts). `--scale`: latency, memory and disk as one workspace grows
 * to a million chunks, on PostgreSQL with pgvector or a three-node Elasticsearch cluster
 * (bench/search-scale.ts).
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startApp } from '../src/app.js';
import { loadConfig, type Config } from '../src/config.js';
import { bytesUnder, embeddedStoreDirectory } from '../src/db/embedded-store.js';
import type { Embedder } from '../src/modules/embeddings/embedder.js';
import { createEmbedder } from '../src/modules/embeddings/select.js';
import { analyze } from '../src/modules/retrieval/analyzer.js';
import { fuseConvex, fusionDepth } from '../src/modules/retrieval/fusion.js';
import { openVectorIndex } from '../src/modules/retrieval/select.js';
import { searchLimits } from '../src/modules/retrieval/input.js';
import { readBack, searchScope, sideDepths } from '../src/modules/retrieval/service.js';
import type { IndexHit, VectorIndex } from '../src/modules/retrieval/vector-index.js';
import { waitForGraphMerge, waitForVectorGraphs } from './in-process-service.js';
import { abstractVectors, cacheDir, CHUNKS_PER_UPSERT, DOCS_PER_WRITE, GENERATOR_VERSION, NOISE_SIGMA, readAbstracts, readQueries, seed, type Plan, type Seeded } from './search-seed.js';
import {
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
  runBenchmark,
  cleanUpOnInterrupt,
  ServiceClient,
  serverTimingParts,
  textTable,
  writeResults,
} from './helpers.js';

// Issue 26: the ratio at most 1.2 and the API's p50 under 20 ms on the embedded store, settled.
const TARGET_RATIO = 1.2;
const TARGET_API_P50_MS = 20;
const TOP_K = 10;
const WARMUP_QUERIES = 10;
// ---------------------------------------------------------------------------------------------
// Report

/** p50 and p95 bars per path. */
function latencyChart(rows: { label: string; p50: number; p95: number }[], limitMs: number): string {
  const width = 680;
  const labelWidth = 270;
  const valueWidth = 90;
  const barHeight = 11;
  const gap = 10;
  const top = 30;
  const plotWidth = width - labelWidth - valueWidth;
  const height = top + rows.length * (2 * barHeight + gap) + 20;
  const maximum = Math.max(limitMs, ...rows.map((row) => row.p95)) || 1;
  const x = (value: number) => labelWidth + (value / maximum) * plotWidth;
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-label="search latency">`,
    `<text x="0" y="16" font-size="13" font-weight="600">latency per path, ms (dark: p50, light: p95)</text>`,
  ];
  rows.forEach((row, index) => {
    const y = top + index * (2 * barHeight + gap);
    parts.push(
      `<text x="${labelWidth - 6}" y="${y + barHeight + 4}" font-size="12" text-anchor="end">${escapeHtml(row.label)}</text>`,
      `<rect x="${labelWidth}" y="${y}" width="${Math.max(1, x(row.p50) - labelWidth).toFixed(1)}" height="${barHeight}" fill="#4e79a7"><title>p50 ${row.p50.toFixed(2)} ms</title></rect>`,
      `<rect x="${labelWidth}" y="${y + barHeight}" width="${Math.max(1, x(row.p95) - labelWidth).toFixed(1)}" height="${barHeight}" fill="#a0cbe8"><title>p95 ${row.p95.toFixed(2)} ms</title></rect>`,
      `<text x="${(Math.max(x(row.p50), x(row.p95)) + 4).toFixed(1)}" y="${y + barHeight + 4}" font-size="11">${row.p50.toFixed(1)} / ${row.p95.toFixed(1)}</text>`,
    );
  });
  const lineX = x(limitMs).toFixed(1);
  const bottom = top + rows.length * (2 * barHeight + gap) - gap / 2;
  parts.push(
    `<line x1="${lineX}" y1="${top - 4}" x2="${lineX}" y2="${bottom}" stroke="#c0392b" stroke-width="1.5" stroke-dasharray="4 3"/>`,
    `<text x="${lineX}" y="${bottom + 14}" font-size="11" fill="#c0392b" text-anchor="middle">API p50 target ${limitMs} ms</text>`,
    '</svg>',
  );
  return parts.join('\n');
}

// ---------------------------------------------------------------------------------------------

const paths = ['api', 'embedder', 'backend', 'vectorOnly', 'keywordOnly', 'notReady', 'readBack'] as const;
type PathName = (typeof paths)[number];
const pathLabels: Record<PathName, string> = {
  api: `(a) API: POST /v1/kb/query, hybrid, top_k ${TOP_K}, over HTTP`,
  embedder: "(b) embedder alone: embed([query], 'query')",
  backend: `(c) backend alone: index.search, vector + terms, limit ${fusionDepth}`,
  vectorOnly: '    index.search, vector only',
  keywordOnly: '    index.search, terms only',
  notReady: "(d) store: the workspace check with its not-ready documents",
  readBack: `    store: read-back of the top ${TOP_K} fused chunks`,
};

async function main() {
  if (process.argv.includes('--after-start')) {
    const { afterStart } = await import('./search-after-start.js');
    return afterStart();
  }
  if (process.argv.includes('--scale')) {
    const { scale } = await import('./search-scale.js');
    return scale(process.argv.slice(2));
  }
  if (process.argv.includes('--timeline')) {
    const { timeline } = await import('./search-timeline.js');
    return timeline(process.argv.slice(2));
  }
  const indexKind = indexKindFromArgs(process.argv.slice(2), 'bench/search.ts');
  const { DATABASE_URL: databaseUrl, ELASTICSEARCH_URL: elasticsearchUrl, ...environment } = process.env;
  if (indexKind === 'elasticsearch' && !elasticsearchUrl) {
    throw new Error('--index elasticsearch needs ELASTICSEARCH_URL (for instance the URL that .ci/start-elasticsearch.sh prints on its last line)');
  }
  const plan: Plan = {
    mainChunks: intFromEnv('BENCH_SEARCH_CHUNKS', 100_000),
    otherWorkspaces: intFromEnv('BENCH_SEARCH_OTHER_WORKSPACES', 4, 0),
    otherChunks: intFromEnv('BENCH_SEARCH_OTHER_CHUNKS', 5_000),
    chunksPerDoc: intFromEnv('BENCH_SEARCH_CHUNKS_PER_DOC', 10),
  };
  const queryLimit = intFromEnv('BENCH_SEARCH_QUERIES', 300);
  // Elasticsearch keeps the vectors outside the store directory: nothing to cache then.
  const useCache = intFromEnv('BENCH_SEARCH_CACHE', 1, 0) > 0 && indexKind === 'pgvector';

  const baseEnvironment = {
    ...environment,
    ...(indexKind === 'elasticsearch' ? { ELASTICSEARCH_URL: elasticsearchUrl, ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}) } : {}),
    HOST: '127.0.0.1',
    PORT: '0',
    KB_LOG_LEVEL: 'silent',
    // Timings, not the limiter: the queries would otherwise meet the per-user search limit.
    KB_SEARCH_RATE_PER_MINUTE: String(1_000_000),
  };
  // The model decides the vectors; the cache key needs it before the store is opened.
  const probeConfig = loadConfig({ ...baseEnvironment, KB_DATA_DIR: os.tmpdir() });
  const modelKey = probeConfig.openai.baseUrl ? `openai:${probeConfig.openai.embeddingModel}` : probeConfig.embeddings.localModel;
  const cacheKey = createHash('sha256')
    .update(JSON.stringify({ plan, modelKey, version: GENERATOR_VERSION, noise: NOISE_SIGMA }))
    .digest('hex')
    .slice(0, 12);
  const storeDir = useCache ? path.join(cacheDir, `search-store-${cacheKey}`) : await mkdtemp(path.join(os.tmpdir(), 'kb-bench-search-'));
  const manifestPath = path.join(storeDir, 'bench-manifest.json');
  let manifest: Seeded | undefined;
  if (useCache && existsSync(manifestPath)) manifest = JSON.parse(await readFile(manifestPath, 'utf8')) as Seeded;
  else if (useCache) await rm(storeDir, { recursive: true, force: true });
  await mkdir(storeDir, { recursive: true });
  const config: Config = loadConfig({ ...baseEnvironment, KB_DATA_DIR: storeDir });
  const storeLabel = config.databaseUrl ? 'PostgreSQL (DATABASE_URL)' : 'embedded store (PGlite)';
  const indexLabel = indexKind === 'elasticsearch' ? 'Elasticsearch' : config.databaseUrl ? 'pgvector' : 'pgvector in PGlite';

  const machine = machineDescription();
  const loadAtStart = loadNow();
  log(`search benchmark on ${machine}; load average ${loadAtStart}`);
  log(`store: ${storeLabel}; index: ${indexLabel}; ${plan.mainChunks} chunks + ${plan.otherWorkspaces} x ${plan.otherChunks}; store ${useCache ? `cached in ${path.relative(process.cwd(), storeDir)}${manifest ? ' (reused)' : ' (new)'}` : `in ${storeDir}`}`);

  const abstracts = await readAbstracts();
  const queriesAll = await readQueries();
  const queries = queriesAll.slice(0, queryLimit);

  const app = await startApp(config);
  let embedder: Embedder | undefined;
  let index: VectorIndex | undefined;
  let seeded: Seeded | undefined;
  const cleanUp = async () => {
    if (!useCache && seeded && (config.databaseUrl || indexKind === 'elasticsearch')) {
      // An external store or index outlives this run: take out what it added.
      const api = new ServiceClient(app.url, seeded.key);
      for (const workspaceId of [seeded.mainWorkspaceId, ...seeded.otherWorkspaceIds]) {
        await api.json('DELETE', `/v1/kb/workspaces/${workspaceId}`).catch(() => {});
        if (indexKind === 'elasticsearch') await index?.deleteWorkspace(workspaceId).catch((error: unknown) => log(`could not remove workspace ${workspaceId} from Elasticsearch: ${String(error)}`));
      }
    }
    await index?.close().catch(() => {});
    await embedder?.close().catch(() => {});
    await app.close().catch((error: unknown) => log(`could not close the service: ${String(error)}`));
    if (!useCache) await rm(storeDir, { recursive: true, force: true });
  };
  const stopListening = cleanUpOnInterrupt(cleanUp);

  try {
    // The measuring side's own embedder and index, made from the same configuration as the
    // service's (which are not exposed): same model and threads, same store connection or
    // Elasticsearch server. The service's embedder is idle while this one is measured.
    embedder = await createEmbedder(config);
    index = await openVectorIndex(config, app.db, embedder, { loadAhead: false });

    if (manifest) {
      const ok = await new ServiceClient(app.url, manifest.key).json('GET', '/v1/kb/workspaces').then(
        () => true,
        () => false,
      );
      const count = ok ? await app.db.prisma.chunk.count() : 0;
      if (!ok || count !== manifest.chunks) throw new Error(`the cached store in ${storeDir} is not usable (${count} chunks); delete that directory and run again`);
      seeded = manifest;
      log(`seeded store reused: ${manifest.chunks} chunks (seeded in ${manifest.seconds.toFixed(0)} s when it was made)`);
    } else {
      const vectors = await abstractVectors(embedder, abstracts);
      log(`seeding ${plan.mainChunks + plan.otherWorkspaces * plan.otherChunks} chunks; load average ${loadNow()}`);
      seeded = await seed(app, index, plan, abstracts, vectors);
      log(`seeded ${seeded.chunks} chunks (${seeded.documents} documents) in ${seeded.seconds.toFixed(1)} s, ${seeded.chunksPerSecond.toFixed(0)} chunks/s`);
      if (useCache) await writeFile(manifestPath, JSON.stringify(seeded, null, 1));
    }
    if (indexKind !== 'elasticsearch') {
      // Seeded rows wait outside pgvector's graph until the service merges them: measuring
      // before that would time the merge and a search that compares them one by one.
      log(`waiting for the seeded chunks to be merged into the vector graph; load average ${loadNow()}`);
      const waited = await waitForGraphMerge(app);
      if (waited !== null) log(`waited ${waited.toFixed(1)} s for the merge into the vector graph`);
    }
    const storeBytes = config.databaseUrl ? null : await bytesUnder(embeddedStoreDirectory(storeDir));
    const api = new ServiceClient(app.url, seeded.key);
    const workspaceId = seeded.mainWorkspaceId;
    const prisma = app.db.prisma;

    // What the service builds for a hybrid search of top_k 10 (service.ts).
    const { limit, readTop } = sideDepths('hybrid', TOP_K);
    const termsOf = (query: string) => [...new Set(analyze(query.trim()))].slice(0, searchLimits.maxKeywordTerms);
    log(`embedding the ${queries.length} queries once, for the backend calls (not timed); load average ${loadNow()}`);
    const queryVectors: Float32Array[] = [];
    for (const query of queries) queryVectors.push((await embedder.embed([query.trim()], 'query'))[0]!);

    const steps: Record<PathName, (position: number) => Promise<unknown>> = {
      api: async (position) => {
        const started = performance.now();
        const { body, headers } = await api.request('POST', '/v1/kb/query', { query: queries[position]!, workspace_id: workspaceId, top_k: TOP_K, mode: 'hybrid' });
        const parts = serverTimingParts(headers.get('server-timing'));
        for (const [part, ms] of Object.entries(parts)) (serverParts[part] ??= []).push(ms);
        if (parts.total !== undefined) (serverParts.outside ??= []).push(performance.now() - started - parts.total);
        return body;
      },
      embedder: (position) => embedder!.embed([queries[position]!.trim()], 'query'),
      backend: (position) =>
        index!.search({ workspaceIds: [workspaceId], vector: queryVectors[position], terms: termsOf(queries[position]!), limit, readTop, excludeDocumentIds: [] }),
      vectorOnly: (position) => index!.search({ workspaceIds: [workspaceId], vector: queryVectors[position], terms: [], limit, excludeDocumentIds: [] }),
      keywordOnly: (position) => index!.search({ workspaceIds: [workspaceId], terms: termsOf(queries[position]!), limit, excludeDocumentIds: [] }),
      notReady: () => searchScope(app.db.query, { userId: seeded!.userId, workspaceIds: null }, [workspaceId]),
      readBack: (position) => readBack(app.db.query, workspaceId, hybridTop.get(position) ?? []),
    };
    // The API's Server-Timing, milliseconds by part, and `outside`: the client's wait beyond the server's total.
    const serverParts: Record<string, number[]> = {};
    // The fused hits of each query (from its backend call), for the read-back.
    const hybridTop = new Map<number, string[]>();
    const timings: Record<PathName, number[]> = Object.fromEntries(paths.map((name) => [name, []])) as unknown as Record<PathName, number[]>;
    const errors: Record<PathName, string[]> = Object.fromEntries(paths.map((name) => [name, []])) as unknown as Record<PathName, string[]>;
    let sameTop10 = 0;
    let compared = 0;
    let apiResultCount = 0;
    const sides = { vector: [] as number[], keyword: [] as number[] };

    // The service loads its keyword side at start; it should not be measured while doing so.
    const warmStarted = performance.now();
    await app.warmed;
    log(`the service's start-up preparation (VectorIndex.warm) ended ${((performance.now() - warmStarted) / 1000).toFixed(1)} s after the seeding or reuse`);
    // The first keyword search of a workspace loads its keyword side (pgvector: postings in memory).
    const memoryBefore = process.memoryUsage();
    const firstStarted = performance.now();
    await index.search({ workspaceIds: [workspaceId], terms: termsOf(queries[0]!), limit, excludeDocumentIds: [] });
    const firstKeywordMs = performance.now() - firstStarted;
    const memoryAfter = process.memoryUsage();
    const memoryGrowthMb = (memoryAfter.heapUsed + memoryAfter.arrayBuffers - memoryBefore.heapUsed - memoryBefore.arrayBuffers) / 2 ** 20;
    log(`first keyword search of the workspace: ${firstKeywordMs.toFixed(0)} ms, memory +${memoryGrowthMb.toFixed(0)} MB`);
    // The service's index and this one each build their vector graphs in memory after a load.
    log(`waited ${(await waitForVectorGraphs(app)).toFixed(1)} s for the vector graphs in memory to be built`);

    log(`warm-up: ${WARMUP_QUERIES} queries through every path`);
    for (let position = 0; position < Math.min(WARMUP_QUERIES, queries.length); position++) {
      const hits = (await steps.backend(position).catch(() => ({ vector: [], keyword: [] }))) as { vector: IndexHit[]; keyword: IndexHit[] };
      hybridTop.set(position, fuseConvex(hits.vector, hits.keyword).slice(0, TOP_K).map((hit) => hit.chunkId));
      for (const name of paths) await steps[name](position).catch(() => {});
    }
    hybridTop.clear();

    const loadBeforeQueries = loadNow();
    const bar = progressBar('queries |{bar}| {value}/{total} | {duration_formatted}');
    bar.start(queries.length, 0);
    for (let position = 0; position < queries.length; position++) {
      // The read-back needs this query's fused hits: the backend goes before it in every order.
      const order: PathName[] = paths.map((_, step) => paths[(position + step) % paths.length]!).filter((name) => name !== 'readBack');
      order.splice(order.indexOf('backend') + 1, 0, 'readBack');
      let apiResults: { document_id: string; chunk_index: number }[] = [];
      let apiFailed = false;
      for (const name of order) {
        const started = performance.now();
        let answer: unknown;
        try {
          answer = await steps[name](position);
        } catch (error) {
          // A failed call (a 503 when a statement ran past its limit) counts with the time it took.
          timings[name].push(performance.now() - started);
          errors[name].push((error as Error).message.slice(0, 300));
          if (name === 'api') apiFailed = true;
          continue;
        }
        timings[name].push(performance.now() - started);
        if (name === 'backend') {
          const hits = answer as { vector: IndexHit[]; keyword: IndexHit[] };
          sides.vector.push(hits.vector.length);
          sides.keyword.push(hits.keyword.length);
          const top = fuseConvex(hits.vector, hits.keyword).slice(0, TOP_K).map((hit) => hit.chunkId);
          hybridTop.set(position, top);
        }
        if (name === 'api') apiResults = (answer as { results: { document_id: string; chunk_index: number }[] }).results;
      }
      apiResultCount += apiResults.length;
      // Is the backend call the same work as the service's? Their top 10 should match.
      const fused = hybridTop.get(position)?.slice(0, TOP_K);
      if (fused && !apiFailed) {
        compared++;
        const fusedRows = await prisma.chunk.findMany({ where: { id: { in: fused } }, select: { id: true, documentId: true, chunkIndex: true } });
        const keyOf = new Map(fusedRows.map((row) => [row.id, `${row.documentId}#${row.chunkIndex}`]));
        if (fused.map((id) => keyOf.get(id)).join() === apiResults.map((result) => `${result.document_id}#${result.chunk_index}`).join()) sameTop10++;
      }
      bar.update(position + 1);
    }
    bar.stop();
    const loadAfterQueries = loadNow();

    // ----- report
    const p50 = (name: PathName) => percentile(timings[name], 50);
    const p95 = (name: PathName) => percentile(timings[name], 95);
    const ratio = p50('api') / (p50('embedder') + p50('backend'));
    const ratioVerdict = ratio <= TARGET_RATIO ? 'PASS' : 'MISS';
    const apiVerdict = p50('api') < TARGET_API_P50_MS ? 'PASS' : 'MISS';
    const headers = ['path', 'p50 ms', 'p95 ms', 'mean ms', 'failed'];
    const rows = paths.map((name) => [pathLabels[name], p50(name).toFixed(2), p95(name).toFixed(2), mean(timings[name]).toFixed(2), String(errors[name].length)]);
    // Inside (a): where the service says its time went (Server-Timing), placed after the API's row.
    const partRows = Object.entries(serverParts).map(([part, values]) => [
      `    (a) ${part === 'outside' ? 'outside the server: HTTP and the client' : `in the server: ${part}`}`,
      percentile(values, 50).toFixed(2),
      percentile(values, 95).toFixed(2),
      mean(values).toFixed(2),
      '',
    ]);
    rows.splice(paths.indexOf('api') + 1, 0, ...partRows);
    const failures = paths.filter((name) => errors[name].length > 0).map((name) => `${name}: ${errors[name].length} failed, first: ${errors[name][0]}`);
    const unexplained = p50('api') - p50('embedder') - p50('backend') - p50('notReady');
    const notes = [
      `${ratioVerdict}: API p50 / (embedder p50 + backend p50) = ${p50('api').toFixed(2)} / (${p50('embedder').toFixed(2)} + ${p50('backend').toFixed(2)}) = ${ratio.toFixed(2)} against the target <= ${TARGET_RATIO}.`,
      `${apiVerdict}: API p50 ${p50('api').toFixed(2)} ms against the target < ${TARGET_API_P50_MS} ms${config.databaseUrl || indexKind === 'elasticsearch' ? ' (the target is for the embedded store; this run is not on it)' : ' on the embedded store'}.`,
      `API p50 minus the p50s of (b), (c) and the workspace check: ${unexplained.toFixed(2)} ms left for HTTP, authentication (${app.db.kind === 'pglite' ? 'the key found among the valid keys this process holds' : 'an API-key lookup in the store'}; last_used_at is written at most once a minute), rate limits, GraphQL, the fusion and the read-back of the fused top ${TOP_K}, less what the service overlaps (it checks the workspace, and on pgvector syncs the keyword side, while the query is embedded).`,
      `First keyword search of the workspace, before the warm-up (on pgvector it loads the workspace's postings into memory): ${firstKeywordMs.toFixed(0)} ms; heap and array buffers grew by ${memoryGrowthMb.toFixed(0)} MB.`,
      `Data: ${seeded.chunks.toLocaleString('en-US')} chunks in ${seeded.documents.toLocaleString('en-US')} ready documents of ${plan.chunksPerDoc} chunks: ${plan.mainChunks.toLocaleString('en-US')} in the searched workspace, ${plan.otherWorkspaces} other workspaces of ${plan.otherChunks.toLocaleString('en-US')} (same user). Each chunk is runs of sentences of 2 or 3 SciFact abstracts (about one abstract long, every text distinct); its vector is the normalised mix of those abstracts' ${embedder.modelId} passage vectors weighted by characters given, plus Gaussian noise (sigma ${NOISE_SIGMA.toFixed(4)} per dimension, norm about 0.1). Terms: analyze(content), as the embed jobs write them.`,
      seeded === manifest
        ? `Seeding: reused the store cached in ${path.relative(process.cwd(), storeDir)} (it took ${seeded.seconds.toFixed(0)} s, ${seeded.chunksPerSecond.toFixed(0)} chunks/s, when made).`
        : `Seeding: ${seeded.seconds.toFixed(1)} s, ${seeded.chunksPerSecond.toFixed(0)} chunks/s: createMany of ${DOCS_PER_WRITE} documents and their chunks, then index.upsert of up to ${CHUNKS_PER_UPSERT} chunks at a time into the live index (HNSW built incrementally).`,
      storeBytes === null ? '' : `Embedded store on disk: ${(storeBytes / 2 ** 20).toFixed(0)} MB.`,
      `Queries: ${queries.length} SciFact test queries, each through (a) to (d) one after another, the order rotating by one path per query (the read-back always right after the backend call whose hits it reads), after ${WARMUP_QUERIES} warm-up queries through every path. The backend calls get the query's vector embedded beforehand (not timed), its analysed terms (at most ${searchLimits.maxKeywordTerms}), limit ${limit}, readTop ${readTop}, excludeDocumentIds []: the arguments service.ts builds for hybrid top_k ${TOP_K}. With the vector at hand the backend does what it does for the service, in the same order: on pgvector it syncs the keyword side, sends the vector statement and ranks the keywords while the store works on it; on Elasticsearch it sends the two searches at once. Neither reads chunks along with two sides: the service reads the fused top ${TOP_K} afterwards, as (d) does. (d) calls the store reads service.ts makes besides the index (searchScope, and readBack of the fused top ${TOP_K}); they are not part of the ratio's denominator.`,
      failures.length > 0 ? `Failed calls (counted in the percentiles with the time they took): ${failures.join('; ')}` : 'No call failed.',
      `Same results: the API's top ${TOP_K} equals the convex fusion of the backend call's two sides for ${sameTop10} of ${compared} queries where both answered. Hits per side: vector ${mean(sides.vector).toFixed(1)}, keyword ${mean(sides.keyword).toFixed(1)} on average (limit ${limit}); API results ${(apiResultCount / queries.length).toFixed(1)} per query.`,
      `Load average at start ${loadAtStart}; before the queries ${loadBeforeQueries}, after ${loadAfterQueries}.`,
    ].filter((note) => note !== '');

    process.stdout.write(`\nSearch latency (${indexLabel}, ${storeLabel}, ${embedder.modelId}; ${seeded.chunks.toLocaleString('en-US')} chunks)\n\n`);
    process.stdout.write(`${textTable(headers, rows)}\n\n`);
    process.stdout.write(`${notes.map((note) => `- ${note}`).join('\n')}\n`);

    const suffix = indexKind === 'elasticsearch' ? '-elasticsearch' : '';
    const date = new Date().toISOString().slice(0, 10);
    const json = {
      date,
      machine,
      store: storeLabel,
      index: indexLabel,
      embedder: embedder.modelId,
      plan,
      seeded: { chunks: seeded.chunks, documents: seeded.documents, seconds: seeded.seconds, chunksPerSecond: seeded.chunksPerSecond, reused: seeded === manifest, storeBytes },
      queries: queries.length,
      topK: TOP_K,
      limit,
      load: { start: loadAtStart, queries: [loadBeforeQueries, loadAfterQueries] },
      latencyMs: Object.fromEntries(paths.map((name) => [name, { p50: p50(name), p95: p95(name), mean: mean(timings[name]) }])),
      ratio,
      targets: { ratio: TARGET_RATIO, apiP50Ms: TARGET_API_P50_MS },
      verdicts: { ratio: ratioVerdict, apiP50: apiVerdict },
      sameTop10,
      compared,
      errors,
      timingsMs: timings,
      serverTimingMs: serverParts,
      firstKeywordMs,
      memoryGrowthMb,
      notes,
    };
    const html = resultPage({
      title: 'Search latency benchmark',
      heading: 'Search latency',
      meta: `${date} · ${machine} · ${storeLabel} · index ${indexLabel} · ${embedder.modelId} · ${seeded.chunks.toLocaleString('en-US')} chunks`,
      body: `<figure>${latencyChart(
        paths.map((name) => ({ label: pathLabels[name].trim(), p50: p50(name), p95: p95(name) })),
        TARGET_API_P50_MS,
      )}</figure>
${htmlTable(headers, rows)}`,
      notes,
    });
    await writeResults(`search${suffix}`, json, html);
  } finally {
    stopListening();
    await cleanUp();
  }
}

runBenchmark(main);
