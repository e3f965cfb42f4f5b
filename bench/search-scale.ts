/**
 * `npm run bench:search -- --scale [--index elasticsearch]`: search latency as one workspace grows
 * to BENCH_SCALE_SIZES chunks (100,000, 300,000, 1,000,000), on PostgreSQL with pgvector, or on
 * PostgreSQL with a three-node Elasticsearch cluster as the index.
 *
 * The services run beside the usual test ones, on their own ports and directories, with settings
 * for the size: PostgreSQL (.ci/start-pgvector.sh) with BENCH_SCALE_PG_SETTINGS (4 GB of shared
 * buffers), the cluster (.ci/start-elasticsearch-cluster.sh) with BENCH_SCALE_ES_HEAP (1 GB) per
 * node. Two processes of the service: this one (`--role api`, no background work) writes the
 * chunks the way bench:search seeds them (documents and chunks with prisma, vectors and terms
 * through `index.upsert`) and times the embedder and the backend alone; a `kb serve` child, the
 * deployment's process, answers the API's searches and does the index's own work (pgvector: it
 * merges the written chunks into the HNSW graph while they arrive). Each step grows the workspace,
 * waits until the index has taken everything in (pgvector: no chunk left outside the graph;
 * Elasticsearch: refreshed, no merge running, the cluster green), times the first search through
 * the API, then BENCH_SCALE_QUERIES SciFact test queries through each path in turn: (a) `POST
 * /v1/kb/query` hybrid top_k 10 to the child, (b) the embedder alone, (c) `index.search` with the
 * arguments the service builds. Then memory (each process's resident set; PostgreSQL as the sum
 * of its processes' proportional sets, so shared buffers count once; each Elasticsearch node's
 * resident set and heap in use) and the index on disk.
 *
 * Results after every step in bench/results/search-scale-<index>.{json,html}, with a chart.
 *
 * BENCH_SCALE_REUSE=1 measures again the store the last run left in those directories (with other
 * settings, say), without writing: one step, the searched workspace as found. BENCH_SCALE_WARM
 * (0 by default) runs that many backend searches before a step's queries, each with the vector
 * and the first sentence's terms of a SciFact abstract, not of a test query: an index whose pages
 * (and, on Elasticsearch, whose nodes' compiled query code) are in memory, as a service
 * searched all day has them, against one just written.
 */
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync } from 'node:fs';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { startApp, type RunningApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { createEmbedder } from '../src/modules/embeddings/select.js';
import { analyze } from '../src/modules/retrieval/analyzer.js';
import { openVectorIndex } from '../src/modules/retrieval/select.js';
import { searchLimits } from '../src/modules/retrieval/input.js';
import { sideDepths } from '../src/modules/retrieval/service.js';
import { escapeHtml, elapsedSeconds, htmlTable, indexKindFromArgs, intFromEnv, loadNow, log, machineDescription, mean, percentile, progressBar, resultPage, ServiceClient, sleep, textTable, writeResults } from './helpers.js';
import { abstractVectors, chunkMaker, readAbstracts, readQueries, searchBars, syntheticDocument, writeDocuments, type SyntheticDocument } from './search-seed.js';
import { adminCommands } from '../src/cli/admin-commands.js';
import { allScopes } from '../src/auth/scopes.js';
import { issueApiKey } from '../src/modules/apiKeys/service.js';

const run = promisify(execFile);
const root = path.resolve(import.meta.dirname, '..');
const TOP_K = 10;
const WARMUP_QUERIES = 10;
const OTHER_WORKSPACES = 4;
const OTHER_CHUNKS = 5_000;
const CHUNKS_PER_DOC = 10;
/** Documents per write: 500 chunks, as bench:search's seeding. */
const DOCS_PER_WRITE = 50;
const childPort = 3710;
const MAX_UPSERT_ATTEMPTS = 5;
const MAIN_WORKSPACE = 'scale: main';
/** The longest a step waits for the store's own work after the writes (storeQuiet). */
const STORE_QUIET_LIMIT_S = 900;

type Step = {
  chunks: number;
  totalChunks: number;
  writeSeconds: number;
  /** From the end of the writes until the index had taken everything in. */
  settleSeconds: number;
  /** Then until the store's own work after the writes was done (storeQuiet). */
  storeQuietSeconds: number;
  firstSearchMs: number;
  /** Backend searches run before the first search to bring the index into memory (BENCH_SCALE_WARM), and how long they took. */
  warmSearches: number;
  warmSeconds: number;
  /** Upserts that failed during the step's writes (each written again). */
  failedWrites: string[];
  latencyMs: Record<'api' | 'embedder' | 'backend', { p50: number; p95: number; mean: number }>;
  ratio: number;
  failed: number;
  memoryMb: Record<string, number>;
  diskMb: Record<string, number>;
  load: string;
};

/** The CI scripts' cache root, as .ci/lib-services.sh chooses it. */
function ciCache() {
  return process.env.KB_CI_CACHE ?? (process.getuid?.() === 0 ? '/var/cache/kb-ci' : path.join(os.homedir(), '.cache/kb-ci'));
}

async function script(name: string, args: string[], env: NodeJS.ProcessEnv) {
  const { stdout } = await run('bash', [path.join(root, '.ci', name), ...args], { cwd: root, env: { ...process.env, ...env }, maxBuffer: 1 << 24 });
  return stdout.trim().split('\n').at(-1)!;
}

async function kilobytesIn(file: string, field: string): Promise<number> {
  const text = await readFile(file, 'utf8').catch(() => '');
  const match = new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(text);
  return match ? Number(match[1]) : 0;
}
const rssMb = async (pid: number) => (await kilobytesIn(`/proc/${pid}/status`, 'VmRSS')) / 1024;

/** PostgreSQL's memory: the proportional set of the postmaster and every process it started. */
async function postgresMb(postmasterPid: number): Promise<number> {
  let kilobytes = await kilobytesIn(`/proc/${postmasterPid}/smaps_rollup`, 'Pss');
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const status = await readFile(`/proc/${entry}/status`, 'utf8').catch(() => '');
    if (new RegExp(`^PPid:\\s+${postmasterPid}$`, 'm').test(status)) kilobytes += await kilobytesIn(`/proc/${entry}/smaps_rollup`, 'Pss');
  }
  return kilobytes / 1024;
}

async function startChild(env: NodeJS.ProcessEnv, logFile: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, [path.join(root, 'bin/kb.mjs'), 'serve'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const output = createWriteStream(logFile);
  child.stdout!.pipe(output);
  child.stderr!.pipe(output);
  for (let waited = 0; waited < 180_000; waited += 500) {
    if (child.exitCode !== null) throw new Error(`kb serve exited (${child.exitCode}); see ${logFile}`);
    if (await fetch(`http://127.0.0.1:${childPort}/readyz`).then((response) => response.ok, () => false)) return child;
    await sleep(500);
  }
  throw new Error(`kb serve is not ready after 180 s; see ${logFile}`);
}

/** A line chart over the sizes (logarithmic), one line per series. */
function lineChart(title: string, unit: string, sizes: number[], series: { label: string; values: number[]; colour: string }[]): string {
  const width = 680;
  const height = 300;
  const left = 60;
  const right = 180;
  const top = 30;
  const bottom = 40;
  const maxValue = Math.max(1, ...series.flatMap((line) => line.values.filter(Number.isFinite))) * 1.1;
  const logMin = Math.log10(Math.min(...sizes));
  const logMax = Math.log10(Math.max(...sizes));
  const x = (size: number) => left + (logMax === logMin ? 0.5 : (Math.log10(size) - logMin) / (logMax - logMin)) * (width - left - right);
  const y = (value: number) => top + (1 - value / maxValue) * (height - top - bottom);
  const parts = [`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-size="11" role="img" aria-label="${escapeHtml(title)}">`, `<text x="${left}" y="16" font-weight="bold">${escapeHtml(title)}</text>`];
  for (let tick = 0; tick <= 4; tick++) {
    const value = (maxValue * tick) / 4;
    parts.push(`<line x1="${left}" x2="${width - right}" y1="${y(value)}" y2="${y(value)}" stroke="#eee"/><text x="${left - 6}" y="${y(value) + 4}" text-anchor="end">${value.toFixed(value < 10 ? 1 : 0)}</text>`);
  }
  parts.push(`<text x="12" y="${top + (height - top - bottom) / 2}" transform="rotate(-90 12 ${top + (height - top - bottom) / 2})" text-anchor="middle">${escapeHtml(unit)}</text>`);
  for (const size of sizes) parts.push(`<text x="${x(size)}" y="${height - bottom + 16}" text-anchor="middle">${size.toLocaleString('en-US')}</text>`);
  parts.push(`<text x="${left + (width - left - right) / 2}" y="${height - 6}" text-anchor="middle">chunks in the searched workspace (logarithmic)</text>`);
  series.forEach((line, position) => {
    const points = sizes.map((size, n) => [x(size), y(line.values[n] ?? NaN)] as const).filter(([, value]) => Number.isFinite(value));
    parts.push(`<polyline fill="none" stroke="${line.colour}" stroke-width="2" points="${points.map(([px, py]) => `${px.toFixed(1)},${py.toFixed(1)}`).join(' ')}"/>`);
    for (const [px, py] of points) parts.push(`<circle cx="${px.toFixed(1)}" cy="${py.toFixed(1)}" r="3" fill="${line.colour}"/>`);
    parts.push(`<rect x="${width - right + 14}" y="${top + position * 18 - 8}" width="10" height="10" fill="${line.colour}"/><text x="${width - right + 30}" y="${top + position * 18 + 1}">${escapeHtml(line.label)}</text>`);
  });
  parts.push('</svg>');
  return parts.join('\n');
}

const colours = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2'];

export async function scale(argv: string[]) {
  const indexKind = indexKindFromArgs(argv.filter((arg) => arg !== '--scale'), 'bench:search --scale');
  const sizes = (process.env.BENCH_SCALE_SIZES ?? '100000,300000,1000000').split(',').map((size) => Number(size.trim()));
  if (sizes.some((size, n) => !Number.isInteger(size) || size <= 0 || (n > 0 && size <= sizes[n - 1]!))) throw new Error('BENCH_SCALE_SIZES: increasing positive integers, comma-separated');
  const queryCount = intFromEnv('BENCH_SCALE_QUERIES', 200);
  const reuse = process.env.BENCH_SCALE_REUSE === '1';
  const warmSearches = intFromEnv('BENCH_SCALE_WARM', 0);
  // Statements over 2 s and lock waits go to PostgreSQL's log (in KB_PGVECTOR_DIR): what a stalled write waited for.
  const pgSettings = process.env.BENCH_SCALE_PG_SETTINGS ?? '-c shared_buffers=4GB -c effective_cache_size=12GB -c maintenance_work_mem=1GB -c log_min_duration_statement=2000 -c log_lock_waits=on';
  const esHeap = process.env.BENCH_SCALE_ES_HEAP ?? '1g';
  const cache = ciCache();
  const pgEnv = { KB_PGVECTOR_DIR: path.join(cache, 'pgvector-scale'), KB_PGVECTOR_PORT: '5443', KB_TEST_DATABASE: 'kb_scale', KB_PGVECTOR_SETTINGS: pgSettings };
  const esEnv = { KB_ES_CLUSTER_DIR: path.join(cache, 'elasticsearch-scale'), KB_ES_CLUSTER_PORT: '9221', KB_ES_HEAP: esHeap };
  const machine = machineDescription();
  log(`bench:search --scale on ${indexKind}: ${sizes.map((size) => size.toLocaleString('en-US')).join(', ')} chunks; ${machine}; load ${loadNow()}`);

  // A server already running keeps the settings it started with: start it anew.
  await script('stop-pgvector.sh', [], pgEnv);
  const fresh = reuse ? [] : ['--fresh'];
  const databaseUrl = await script('start-pgvector.sh', fresh, pgEnv);
  const postmasterPid = Number((await readFile(path.join(pgEnv.KB_PGVECTOR_DIR, 'data/postmaster.pid'), 'utf8')).split('\n')[0]);
  let esUrls = '';
  if (indexKind === 'elasticsearch') {
    await script('stop-elasticsearch-cluster.sh', [], esEnv);
    esUrls = await script('start-elasticsearch-cluster.sh', fresh, esEnv);
  }
  const esNode = esUrls.split(',')[0]!;
  const esIndex = 'kb_scale';

  const work = await mkdtemp(path.join(os.tmpdir(), 'kb-bench-scale-'));
  const { DATABASE_URL: _database, ELASTICSEARCH_URL: _elasticsearch, ...inherited } = process.env;
  const env: NodeJS.ProcessEnv = {
    ...inherited,
    DATABASE_URL: databaseUrl,
    ...(indexKind === 'elasticsearch' ? { ELASTICSEARCH_URL: esUrls, KB_ES_INDEX: esIndex } : {}),
    KB_DATA_DIR: work,
    HOST: '127.0.0.1',
    KB_SEARCH_RATE_PER_MINUTE: String(1_000_000),
  };
  const config = loadConfig({ ...env, PORT: '0', KB_ROLE: 'api', KB_LOG_LEVEL: 'silent' });
  const app: RunningApp = await startApp(config);
  const embedder = await createEmbedder(config);
  const index = await openVectorIndex(config, app.db, embedder, { loadAhead: false });
  const childLog = path.join(os.tmpdir(), `kb-bench-scale-${indexKind}-serve.log`);
  const child = await startChild({ ...env, PORT: String(childPort), KB_MIGRATE: 'off', KB_LOG_LEVEL: 'info', KB_INSTANCE: 'scale' }, childLog);
  log(`kb serve (pid ${child.pid}) ready on port ${childPort}; its log: ${childLog}`);

  const steps: Step[] = [];
  // Its timer keeps the process alive: stopped whatever ends the run.
  const bar = progressBar('writing |{bar}| {value}/{total} chunks | {rate} chunks/s | {duration_formatted} | eta {eta_formatted}', searchBars);
  try {
    const abstracts = await readAbstracts();
    const vectors = await abstractVectors(embedder, abstracts);
    const queries = (await readQueries()).slice(0, queryCount);
    const reused = reuse ? await app.db.prisma.workspace.findFirst({ where: { name: MAIN_WORKSPACE }, orderBy: { createdAt: 'desc' } }) : null;
    if (reuse && !reused) throw new Error(`BENCH_SCALE_REUSE: the store has no workspace "${MAIN_WORKSPACE}": run bench:search --scale once without it`);
    const key = reused
      ? (await issueApiKey(app.db.prisma, reused.userId, 'bench:search --scale, reused', allScopes)).rawKey
      : (await adminCommands['users.create'](app.db.prisma, { email: `bench-scale-${Date.now()}@example.com`, name: 'Scale benchmark', credits: 0, active: true })).api_key.raw_key;
    const api = new ServiceClient(`http://127.0.0.1:${childPort}`, key);
    const workspace = async (name: string) => (await api.json<{ id: string }>('POST', '/v1/kb/workspaces', { name })).id;
    const mainWorkspaceId = reused?.id ?? (await workspace(MAIN_WORKSPACE));
    const seen = new Set<string>();
    const others: { id: string; maker: () => ReturnType<ReturnType<typeof chunkMaker>> }[] = [];
    if (!reused) for (let n = 0; n < OTHER_WORKSPACES; n++) others.push({ id: await workspace(`scale: other ${n + 1}`), maker: chunkMaker(abstracts, vectors, 100 + n, seen) });
    const mainMaker = chunkMaker(abstracts, vectors, 1, seen);
    let serial = 0;
    let mainChunks = reused ? await app.db.prisma.chunk.count({ where: { document: { workspaceId: reused.id } } }) : 0;
    if (reused) {
      sizes.splice(0, sizes.length, mainChunks);
      log(`reusing the store: "${MAIN_WORKSPACE}" holds ${mainChunks.toLocaleString('en-US')} chunks; nothing is written`);
    }
    /** Upserts that failed and were written again, as an embed job would after its backoff. */
    const failedWrites: string[] = [];

    /** Writes `count` chunks into a workspace, DOCS_PER_WRITE documents at a time. */
    const grow = async (workspaceId: string, maker: () => ReturnType<ReturnType<typeof chunkMaker>>, count: number, onWritten: (chunks: number) => void) => {
      for (let left = count; left > 0; ) {
        const documents: SyntheticDocument[] = [];
        for (let d = 0; d < DOCS_PER_WRITE && left > 0; d++) {
          const chunks = Math.min(CHUNKS_PER_DOC, left);
          left -= chunks;
          documents.push(syntheticDocument(maker, chunks, `scale-${++serial}.txt`));
        }
        onWritten(
          await writeDocuments(app.db.prisma, index, workspaceId, documents, {
            onUpsertFailed: (error, attempt) => {
              failedWrites.push(`${new Date().toISOString()} attempt ${attempt}: ${String(error).replace(/\s+/g, ' ').slice(0, 300)}`);
              log(`an upsert failed (attempt ${attempt}, tried again up to ${MAX_UPSERT_ATTEMPTS}): ${String(error).replace(/\s+/g, ' ').slice(0, 300)}`);
              return attempt < MAX_UPSERT_ATTEMPTS;
            },
          }),
        );
      }
    };

    const settle = async () => {
      const started = performance.now();
      if (indexKind === 'elasticsearch') {
        await fetch(`${esNode}/${esIndex}/_refresh`, { method: 'POST' });
        let quiet = 0;
        while (quiet < 3) {
          const stats = (await (await fetch(`${esNode}/${esIndex}/_stats/merge`)).json()) as { _all: { total: { merges: { current: number } } } };
          const health = (await (await fetch(`${esNode}/_cluster/health`)).json()) as { status: string; relocating_shards: number; initializing_shards: number };
          quiet = stats._all.total.merges.current === 0 && health.status === 'green' && health.relocating_shards === 0 && health.initializing_shards === 0 ? quiet + 1 : 0;
          await sleep(2_000);
        }
      } else {
        const waiting = async () => (await app.db.prisma.$queryRaw<{ waiting: boolean }[]>`SELECT EXISTS (SELECT 1 FROM chunk_index_fresh) AS waiting`)[0]!.waiting;
        let said = performance.now();
        while (await waiting()) {
          await sleep(2_000);
          if (performance.now() - said > 30_000) {
            said = performance.now();
            log(`  ${elapsedSeconds(started).toFixed(0)} s: ${(await index.graphBacklog?.()) ?? '?'} chunks still outside the graph; load ${loadNow()}`);
          }
        }
      }
      return elapsedSeconds(started);
    };

    /**
     * After a bulk load PostgreSQL goes on with work of its own for minutes (autovacuum and
     * analyse of the tables just written, checkpoints of the pages they dirtied): at 1,000,000
     * chunks it held both cores, and the query's embedding alone took 27 ms against 6 ms at
     * 300,000. The step's queries wait until no autovacuum worker runs, a checkpoint is done and
     * the machine's one-minute load is under 1 (at most STORE_QUIET_LIMIT_S), so they measure
     * the index, not the store's catching up; how long that took is reported.
     */
    const storeQuiet = async () => {
      const started = performance.now();
      let said = performance.now();
      const vacuuming = async () =>
        (await app.db.prisma.$queryRaw<{ workers: number }[]>`SELECT count(*)::int AS workers FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'`)[0]!.workers;
      let checkpointed = false;
      while (elapsedSeconds(started) < STORE_QUIET_LIMIT_S) {
        const workers = await vacuuming();
        if (workers === 0 && !checkpointed) {
          await app.db.prisma.$executeRawUnsafe('CHECKPOINT');
          checkpointed = true;
        }
        if (workers === 0 && checkpointed && os.loadavg()[0]! < 1) break;
        if (performance.now() - said > 30_000) {
          said = performance.now();
          log(`  ${elapsedSeconds(started).toFixed(0)} s: ${workers} autovacuum workers; load ${loadNow()}`);
        }
        await sleep(5_000);
      }
      return elapsedSeconds(started);
    };

    const memory = async (): Promise<Record<string, number>> => {
      const figures: Record<string, number> = { 'kb serve (API)': await rssMb(child.pid!), 'this process (writer, timings)': await rssMb(process.pid), PostgreSQL: await postgresMb(postmasterPid) };
      if (indexKind === 'elasticsearch') {
        const nodes = (await (await fetch(`${esNode}/_nodes/stats/jvm,process`)).json()) as { nodes: Record<string, { name: string; jvm: { mem: { heap_used_in_bytes: number } } }> };
        for (const node of Object.values(nodes.nodes).sort((a, b) => a.name.localeCompare(b.name))) {
          const pidFile = path.join(esEnv.KB_ES_CLUSTER_DIR, node.name, 'elasticsearch.pid');
          figures[`Elasticsearch ${node.name}`] = existsSync(pidFile) ? await rssMb(Number((await readFile(pidFile, 'utf8')).trim())) : NaN;
          figures[`Elasticsearch ${node.name} heap in use`] = node.jvm.mem.heap_used_in_bytes / 2 ** 20;
        }
      }
      return figures;
    };

    const disk = async (): Promise<Record<string, number>> => {
      const mb = (bytes: bigint | number) => Number(bytes) / 2 ** 20;
      // With Elasticsearch as the index the store has no chunk_index: its sizes are null then.
      const [row] = await app.db.prisma.$queryRaw<{ database: bigint; chunks: bigint; index_table: bigint | null; hnsw: bigint | null }[]>`
        SELECT pg_database_size(current_database()) AS database,
               pg_total_relation_size('chunks') AS chunks,
               pg_total_relation_size(to_regclass('chunk_index')) AS index_table,
               (SELECT sum(pg_relation_size(indexrelid)) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
                 WHERE i.indrelid = to_regclass('chunk_index') AND a.amname = 'hnsw') AS hnsw`;
      const figures: Record<string, number> = { 'PostgreSQL database': mb(row!.database), 'chunks table (text)': mb(row!.chunks) };
      if (row!.index_table !== null) figures['chunk_index table with its indexes'] = mb(row!.index_table);
      if (row!.hnsw !== null) figures['HNSW graph'] = mb(row!.hnsw);
      if (indexKind === 'elasticsearch') {
        const listed = (await (await fetch(`${esNode}/_cat/indices/${esIndex}*?format=json&bytes=b`)).json()) as { index: string; 'store.size': string; 'pri.store.size': string }[];
        // The layout migrations' lock index is not the chunks'.
        const indices = listed.filter((entry) => entry.index !== `${esIndex}-lock`);
        figures['Elasticsearch index, all copies'] = mb(indices.reduce((sum, entry) => sum + Number(entry['store.size']), 0));
        figures['Elasticsearch index, primaries'] = mb(indices.reduce((sum, entry) => sum + Number(entry['pri.store.size']), 0));
      }
      return figures;
    };

    const { limit, readTop } = sideDepths('hybrid', TOP_K);
    const termsOf = (query: string) => [...new Set(analyze(query.trim()))].slice(0, searchLimits.maxKeywordTerms);
    const queryVectors: Float32Array[] = [];
    for (const query of queries) queryVectors.push((await embedder.embed([query.trim()], 'query'))[0]!);
    const paths = {
      api: (position: number) => api.request('POST', '/v1/kb/query', { query: queries[position]!, workspace_id: mainWorkspaceId, top_k: TOP_K, mode: 'hybrid' }),
      embedder: (position: number) => embedder.embed([queries[position]!.trim()], 'query'),
      backend: (position: number) => index.search({ workspaceIds: [mainWorkspaceId], vector: queryVectors[position], terms: termsOf(queries[position]!), limit, readTop, excludeDocumentIds: [] }),
    };
    const names = Object.keys(paths) as (keyof typeof paths)[];

    const report = async () => {
      const headers = ['chunks (searched workspace)', 'write s', 'settle s', 'store quiet s', 'warm searches (s)', 'first search ms', 'API p50', 'API p95', 'embedder p50', 'backend p50', 'ratio', 'failed', 'upserts failed'];
      const rows = steps.map((step) => [
        step.chunks.toLocaleString('en-US'),
        step.writeSeconds.toFixed(0),
        step.settleSeconds.toFixed(0),
        step.storeQuietSeconds.toFixed(0),
        step.warmSearches > 0 ? `${step.warmSearches} (${step.warmSeconds.toFixed(0)})` : '-',
        step.firstSearchMs.toFixed(0),
        step.latencyMs.api.p50.toFixed(1),
        step.latencyMs.api.p95.toFixed(1),
        step.latencyMs.embedder.p50.toFixed(1),
        step.latencyMs.backend.p50.toFixed(1),
        step.ratio.toFixed(2),
        String(step.failed),
        String(step.failedWrites.length),
      ]);
      const memoryNames = [...new Set(steps.flatMap((step) => Object.keys(step.memoryMb)))];
      const diskNames = [...new Set(steps.flatMap((step) => Object.keys(step.diskMb)))];
      const sizeHeaders = ['MB', ...steps.map((step) => step.chunks.toLocaleString('en-US'))];
      const memoryRows = memoryNames.map((name) => [name, ...steps.map((step) => (step.memoryMb[name] ?? NaN).toFixed(0))]);
      const diskRows = diskNames.map((name) => [name, ...steps.map((step) => (step.diskMb[name] ?? NaN).toFixed(0))]);
      const label = indexKind === 'elasticsearch' ? 'Elasticsearch, three nodes' : 'PostgreSQL with pgvector';
      process.stdout.write(`\nSearch latency by size (${label}; milliseconds)\n\n${textTable(headers, rows)}\n\nMemory (MB, after each step's queries)\n\n${textTable(sizeHeaders, memoryRows, (column) => column > 0)}\n\nOn disk (MB)\n\n${textTable(sizeHeaders, diskRows, (column) => column > 0)}\n`);
      const stepSizes = steps.map((step) => step.chunks);
      const notes = [
        `${machine}; PostgreSQL 18 with pgvector 0.8.2, ${pgSettings}${indexKind === 'elasticsearch' ? `; Elasticsearch 8.19 (integ-test zip), three nodes of ${esHeap} heap, the service's default shards and replicas for a cluster` : ''}.`,
        `Beside the searched workspace, ${OTHER_WORKSPACES} workspaces of ${OTHER_CHUNKS.toLocaleString('en-US')} chunks (the same user), written first.`,
        `write s: documents, chunks and index.upsert for the step's new chunks; settle s: from the end of the writes until ${indexKind === 'elasticsearch' ? 'the index was refreshed, no merge ran and the cluster was green' : 'kb serve had merged every written chunk into the HNSW graph (it merges while the writes go on)'}; store quiet s: then until no autovacuum worker ran, a checkpoint was done and the one-minute load was under 1 (at most ${STORE_QUIET_LIMIT_S} s). first search: the first API search after the step (${indexKind === 'elasticsearch' ? 'nothing to load' : 'kb serve brings its keyword postings up to date from the change log'}).`,
        ...(reuse ? ['The store a previous run left, measured again without writing (BENCH_SCALE_REUSE=1): one step; write s is 0.'] : []),
        ...(warmSearches > 0 ? [`Before each step's first search, ${warmSearches} backend searches, hybrid, with the vectors and first sentences of SciFact abstracts (not of test queries), brought the index into memory (BENCH_SCALE_WARM).`] : []),
        `${queryCount} SciFact test queries per step after ${WARMUP_QUERIES} warm-up queries, each through (a) the API of kb serve over HTTP, (b) the embedder alone, (c) index.search alone (in this process), the order rotating; ratio = API p50 / (embedder p50 + backend p50).`,
      ];
      const body = [
        lineChart(`Search latency (${label})`, 'ms', stepSizes, [
          { label: 'API p50', values: steps.map((step) => step.latencyMs.api.p50), colour: colours[0]! },
          { label: 'API p95', values: steps.map((step) => step.latencyMs.api.p95), colour: colours[1]! },
          { label: 'backend p50', values: steps.map((step) => step.latencyMs.backend.p50), colour: colours[2]! },
          { label: 'embedder p50', values: steps.map((step) => step.latencyMs.embedder.p50), colour: colours[3]! },
        ]),
        htmlTable(headers, rows),
        lineChart('Memory after each step', 'MB', stepSizes, memoryNames.filter((name) => !name.endsWith('heap in use')).map((name, n) => ({ label: name, values: steps.map((step) => step.memoryMb[name] ?? NaN), colour: colours[n % colours.length]! }))),
        htmlTable(sizeHeaders, memoryRows),
        lineChart('On disk', 'MB', stepSizes, diskNames.map((name, n) => ({ label: name, values: steps.map((step) => step.diskMb[name] ?? NaN), colour: colours[n % colours.length]! }))),
        htmlTable(sizeHeaders, diskRows),
      ].join('\n');
      const date = new Date().toISOString().slice(0, 10);
      await writeResults(`search-scale-${indexKind}${reuse ? '-reused' : ''}`, { date, machine, index: indexKind, reused: reuse, pgSettings, esHeap: indexKind === 'elasticsearch' ? esHeap : undefined, queries: queryCount, steps, notes }, resultPage({ title: 'Search at scale', heading: `Search latency as a workspace grows: ${label}`, meta: `${date} · ${machine}`, body, notes }));
    };

    const writeStarted = performance.now();
    const otherTotal = reused ? (await app.db.prisma.chunk.count()) - mainChunks : OTHER_WORKSPACES * OTHER_CHUNKS;
    let written = reused ? otherTotal + mainChunks : 0;
    bar.start(otherTotal + sizes.at(-1)!, written, { rate: '-' });
    const onWritten = (chunks: number) => {
      written += chunks;
      bar.update(written, { rate: (written / elapsedSeconds(writeStarted)).toFixed(0) });
    };
    for (const other of others) await grow(other.id, other.maker, OTHER_CHUNKS, onWritten);
    for (const size of sizes) {
      const stepStarted = performance.now();
      await grow(mainWorkspaceId, mainMaker, size - mainChunks, onWritten);
      mainChunks = size;
      const writeSeconds = elapsedSeconds(stepStarted);
      log(`\n${size.toLocaleString('en-US')} chunks written in ${writeSeconds.toFixed(0)} s; waiting for the index to take them in; load ${loadNow()}`);
      const settleSeconds = await settle();
      log(`settled in ${settleSeconds.toFixed(0)} s; load ${loadNow()}`);
      // This process's own preparations, done before the store counts as quiet: its service's
      // (keyword postings, the graph read into the buffers) and the timed index's keyword
      // postings, which its first search would otherwise load beside the timed queries (at
      // 1,000,000 chunks about 90 s of this process's CPU, the embedder alone 33 ms meanwhile).
      await app.warmed;
      await index.warm?.(new AbortController().signal);
      const storeQuietSeconds = await storeQuiet();
      log(`the store's own work done in ${storeQuietSeconds.toFixed(0)} s more; load ${loadNow()}`);
      const warmStarted = performance.now();
      for (let n = 0; n < warmSearches; n++) {
        // Both sides, as a hybrid search asks: each has code paths of its own to bring in (on
        // Elasticsearch, a restarted node's JIT-compiled query code as well as the index's files).
        const terms = termsOf(abstracts[n % abstracts.length]!.sentences[0] ?? '');
        await index.search({ workspaceIds: [mainWorkspaceId], vector: vectors[n % vectors.length], terms, limit, readTop, excludeDocumentIds: [] });
      }
      const warmSeconds = elapsedSeconds(warmStarted);
      if (warmSearches > 0) log(`${warmSearches} backend searches to bring the index into memory: ${warmSeconds.toFixed(0)} s; load ${loadNow()}`);
      const firstStarted = performance.now();
      await paths.api(0);
      const firstSearchMs = performance.now() - firstStarted;
      for (let position = 0; position < Math.min(WARMUP_QUERIES, queries.length); position++) for (const name of names) await paths[name](position);
      const timings = { api: [] as number[], embedder: [] as number[], backend: [] as number[] };
      let failed = 0;
      for (let position = 0; position < queries.length; position++) {
        for (let n = 0; n < names.length; n++) {
          const name = names[(position + n) % names.length]!;
          const started = performance.now();
          await paths[name](position).catch((error: unknown) => {
            failed++;
            log(`${name} failed: ${String(error).slice(0, 300)}`);
          });
          timings[name].push(performance.now() - started);
        }
      }
      const latencyMs = Object.fromEntries(names.map((name) => [name, { p50: percentile(timings[name], 50), p95: percentile(timings[name], 95), mean: mean(timings[name]) }])) as Step['latencyMs'];
      steps.push({
        chunks: size,
        totalChunks: size + otherTotal,
        writeSeconds,
        settleSeconds,
        storeQuietSeconds,
        firstSearchMs,
        warmSearches,
        warmSeconds,
        failedWrites: failedWrites.splice(0),
        latencyMs,
        ratio: latencyMs.api.p50 / (latencyMs.embedder.p50 + latencyMs.backend.p50),
        failed,
        memoryMb: await memory(),
        diskMb: await disk(),
        load: loadNow(),
      });
      await report();
    }
  } finally {
    bar.stop();
    child.kill('SIGTERM');
    await new Promise((resolve) => (child.exitCode === null ? child.once('exit', resolve) : resolve(undefined)));
    await index.close().catch(() => undefined);
    await embedder.close().catch(() => undefined);
    await app.close().catch((error: unknown) => log(`could not close the service: ${String(error)}`));
    if (indexKind === 'elasticsearch') await script('stop-elasticsearch-cluster.sh', [], esEnv).catch(() => undefined);
    await script('stop-pgvector.sh', [], pgEnv).catch(() => undefined);
    await rm(work, { recursive: true, force: true });
  }
}
