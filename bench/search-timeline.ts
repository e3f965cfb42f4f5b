/**
 * `npm run bench:search -- --timeline [--store postgres]`: search latency as a user meets it
 * right after a bulk load and during an ingest, minute by minute, beside what the service was
 * doing to the store of its own accord meanwhile (BackgroundWork: graph merges, ANALYZE, VACUUM,
 * loading keyword postings).
 *
 * 1. After the load: a new store is seeded as `bench:search` seeds it (100,000 chunks in the
 *    searched workspace and 4 x 5,000 in others, written in bulk, with nothing merged into the
 *    vector graph yet), and from the moment the seeding ends a search is sent every second, for
 *    BENCH_SEARCH_TIMELINE_MINUTES (30) minutes: `POST /v1/kb/query`, hybrid, top_k 10, each a
 *    different SciFact test query. The service is left to its own maintenance.
 * 2. During an ingest: BENCH_SEARCH_TIMELINE_ABSTRACTS (5,000) SciFact abstracts are uploaded
 *    through the API into another workspace while the searches go on, once a second, until the
 *    ingest is done, its chunks are in the graph, and a minute more has passed.
 *
 * A search is sent on the second whether or not the one before has answered, as users' searches
 * would be. Every second the benchmark also reads the service's BackgroundWork (in this process)
 * and, every 5 seconds, the number of chunks still outside the graph.
 *
 * Targets (issue 26): p50 < 50 ms and p95 < 150 ms in every minute of both timelines, and the
 * first search of the large workspace under 500 ms.
 *
 * `--store postgres` runs on DATABASE_URL (pgvector) instead of a new embedded store, and reports
 * PostgreSQL's shared_buffers beside the size of the HNSW graph; the workspaces it made are
 * deleted at the end.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startApp, type RunningApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { bytesUnder, embeddedStoreDirectory } from '../src/db/embedded-store.js';
import { createEmbedder } from '../src/modules/embeddings/select.js';
import { openVectorIndex } from '../src/modules/retrieval/select.js';
import type { VectorIndex } from '../src/modules/retrieval/vector-index.js';
import { backgroundTasks, type BackgroundTask } from '../src/observability/background-work.js';
import { BenchClient, ingest } from './in-process-service.js';
import { abstractVectors, readAbstracts, readQueries, seed, type Plan } from './search-seed.js';
import {
  cleanUpOnInterrupt,
  escapeHtml,
  htmlTable,
  intFromEnv,
  loadNow,
  log,
  machineDescription,
  percentile,
  resultPage,
  serverTimingParts,
  sleep,
  textTable,
  writeResults,
} from './helpers.js';

const TARGET_P50_MS = 50;
const TARGET_P95_MS = 150;
const TARGET_FIRST_MS = 500;
const TOP_K = 10;
const BACKLOG_EVERY_S = 5;

/** `parts`: the search's Server-Timing, milliseconds by part (docs/observability.md). */
type Search = { phase: Phase; at: number; ms: number; ok: boolean; error?: string; parts?: Record<string, number> };
type Second = { phase: Phase; at: number; busy: Record<BackgroundTask, number>; runs: Record<BackgroundTask, number>; running: BackgroundTask[]; backlog?: number };
type Phase = 'after load' | 'during ingest';

/**
 * Sends a search every second and reads the background work; `stop` waits for the searches in
 * flight. With `forSeconds`, no search is sent once that many seconds have passed, so the last
 * minute is a whole one.
 */
function startTimeline(
  app: RunningApp,
  index: VectorIndex,
  client: BenchClient,
  workspaceId: string,
  queries: readonly string[],
  phase: Phase,
  searches: Search[],
  seconds: Second[],
  forSeconds = Number.POSITIVE_INFINITY,
) {
  const started = performance.now();
  const at = () => (performance.now() - started) / 1000;
  let sent = 0;
  const inFlight = new Set<Promise<void>>();
  let reported = new Map(app.db.backgroundWork.states().map((state) => [state.task, state]));
  const tick = () => {
    const sentAt = at();
    if (sentAt >= forSeconds) return;
    const query = queries[sent++ % queries.length]!;
    const t0 = performance.now();
    const search = client
      .request('POST', '/v1/kb/query', { query, workspace_id: workspaceId, top_k: TOP_K, mode: 'hybrid' })
      .then(
        ({ headers }) => void searches.push({ phase, at: sentAt, ms: performance.now() - t0, ok: true, parts: serverTimingParts(headers.get('server-timing')) }),
        (error: unknown) => void searches.push({ phase, at: sentAt, ms: performance.now() - t0, ok: false, error: String(error).slice(0, 200) }),
      )
      .finally(() => inFlight.delete(search));
    inFlight.add(search);
    const states = app.db.backgroundWork.states();
    const second: Second = {
      phase,
      at: sentAt,
      busy: Object.fromEntries(states.map((state) => [state.task, state.seconds - (reported.get(state.task)?.seconds ?? 0)])) as Record<BackgroundTask, number>,
      runs: Object.fromEntries(states.map((state) => [state.task, state.runs - (reported.get(state.task)?.runs ?? 0)])) as Record<BackgroundTask, number>,
      running: states.filter((state) => state.running > 0).map((state) => state.task),
    };
    reported = new Map(states.map((state) => [state.task, state]));
    seconds.push(second);
    if (seconds.filter((item) => item.phase === phase).length % BACKLOG_EVERY_S === 1) {
      void index.graphBacklog?.().then(
        (count) => void (second.backlog = count),
        () => undefined,
      );
    }
  };
  tick();
  const timer = setInterval(tick, 1_000);
  return {
    elapsed: at,
    async stop() {
      clearInterval(timer);
      await Promise.all(inFlight);
    },
  };
}

/** Parts shown for the slowest searches of a minute, in this order. */
const shownParts = ['auth', 'scope', 'embed', 'sync', 'fresh', 'vector', 'graph', 'keywords', 'read', 'search', 'total'] as const;

/**
 * The median of each Server-Timing part over the searches of the minute at or above its p90,
 * and how much longer the client waited than the server's total (HTTP, and the event loop).
 */
function slowestParts(searches: readonly Search[]): string {
  const times = searches.map((search) => search.ms);
  const slow = searches.filter((search) => search.ok && search.parts && search.ms >= percentile(times, 90));
  if (slow.length === 0) return '';
  const median = (values: number[]) => percentile(values, 50);
  const shown = shownParts
    .map((part) => [part, slow.map((search) => search.parts![part]).filter((ms): ms is number => ms !== undefined)] as const)
    .filter(([, values]) => values.length > 0)
    .map(([part, values]) => `${part} ${median(values).toFixed(0)}`);
  const outside = median(slow.filter((search) => search.parts!.total !== undefined).map((search) => search.ms - search.parts!.total!));
  return [...shown, `outside ${outside.toFixed(0)}`].join(', ');
}

type MinuteRow = {
  phase: Phase;
  minute: number;
  searches: number;
  failed: number;
  p50: number;
  p95: number;
  max: number;
  busy: Record<BackgroundTask, number>;
  /** Mean milliseconds of a graph merge slice that ended in the minute. */
  sliceMs: number | undefined;
  backlog: number | undefined;
  /** Where the slowest tenth of the minute's searches spent their time (slowestParts). */
  slowParts: string;
  pass: boolean;
};

function minutes(searches: readonly Search[], seconds: readonly Second[], phase: Phase): MinuteRow[] {
  const rows: MinuteRow[] = [];
  const mine = searches.filter((search) => search.phase === phase);
  const last = Math.max(0, ...mine.map((search) => search.at));
  for (let minute = 0; minute * 60 <= last; minute++) {
    const inMinute = mine.filter((search) => search.at >= minute * 60 && search.at < (minute + 1) * 60);
    const times = inMinute.map((search) => search.ms);
    const ticks = seconds.filter((second) => second.phase === phase && second.at >= minute * 60 && second.at < (minute + 1) * 60);
    const busy = Object.fromEntries(backgroundTasks.map((task) => [task, ticks.reduce((sum, second) => sum + second.busy[task], 0)])) as Record<BackgroundTask, number>;
    const slices = ticks.reduce((sum, second) => sum + second.runs.graph_merge, 0);
    const sliceMs = slices > 0 ? (1000 * busy.graph_merge) / slices : undefined;
    const backlog = ticks.findLast((second) => second.backlog !== undefined)?.backlog;
    const p50 = percentile(times, 50);
    const p95 = percentile(times, 95);
    rows.push({ phase, minute, searches: inMinute.length, failed: inMinute.filter((search) => !search.ok).length, p50, p95, max: Math.max(...times), busy, sliceMs, backlog, slowParts: slowestParts(inMinute), pass: p50 < TARGET_P50_MS && p95 < TARGET_P95_MS && inMinute.every((search) => search.ok) });
  }
  return rows;
}

const taskColours: Record<BackgroundTask, string> = { graph_merge: '#f28e2b', analyze: '#59a14f', vacuum: '#e15759', keyword_load: '#b07aa1', vector_graph_build: '#4e79a7', cache_resize: '#76b7b2', cache_warm: '#9c755f', index_save: '#edc948' };

/** Each search's latency over time (log scale), with a band per background task marking the seconds it held the store. */
function timelineChart(searches: readonly Search[], seconds: readonly Second[], phase: Phase, ingesting?: { from: number; to: number }): string {
  const mine = searches.filter((search) => search.phase === phase);
  const ticks = seconds.filter((second) => second.phase === phase);
  const width = 900;
  const left = 115;
  const right = 20;
  const top = 30;
  const plotHeight = 260;
  const bandHeight = 12;
  const bands = [...backgroundTasks, ...(ingesting ? ['ingesting'] : [])];
  const height = top + plotHeight + 30 + bands.length * (bandHeight + 4) + 20;
  const span = Math.max(60, ...mine.map((search) => search.at));
  const x = (at: number) => left + (at / span) * (width - left - right);
  const low = Math.log10(5);
  const high = Math.log10(Math.max(1_000, ...mine.map((search) => search.ms)));
  const y = (ms: number) => top + plotHeight - ((Math.log10(Math.max(ms, 5)) - low) / (high - low)) * plotHeight;
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-label="search latency over time, ${escapeHtml(phase)}">`,
    `<text x="0" y="16" font-size="13" font-weight="600">${escapeHtml(phase)}: each search's latency (ms, log scale) against minutes since the start</text>`,
  ];
  for (const ms of [5, 10, 20, 50, 100, 150, 200, 500, 1_000, 2_000, 5_000, 10_000].filter((value) => Math.log10(value) <= high)) {
    parts.push(`<line x1="${left}" x2="${width - right}" y1="${y(ms).toFixed(1)}" y2="${y(ms).toFixed(1)}" stroke="#eee"/>`, `<text x="${left - 6}" y="${(y(ms) + 4).toFixed(1)}" font-size="10" text-anchor="end">${ms}</text>`);
  }
  for (const [ms, label] of [
    [TARGET_P50_MS, 'p50 target'],
    [TARGET_P95_MS, 'p95 target'],
  ] as const) {
    parts.push(`<line x1="${left}" x2="${width - right}" y1="${y(ms).toFixed(1)}" y2="${y(ms).toFixed(1)}" stroke="#c0392b" stroke-dasharray="4 3"/>`, `<text x="${width - right}" y="${(y(ms) - 3).toFixed(1)}" font-size="10" fill="#c0392b" text-anchor="end">${label} ${ms} ms</text>`);
  }
  for (let minute = 0; minute * 60 <= span; minute += span > 900 ? 5 : 1) {
    parts.push(`<text x="${x(minute * 60).toFixed(1)}" y="${top + plotHeight + 14}" font-size="10" text-anchor="middle">${minute}</text>`);
  }
  parts.push(`<text x="${left - 6}" y="${top + plotHeight + 14}" font-size="10" text-anchor="end">minute</text>`);
  for (const search of mine) {
    parts.push(`<circle cx="${x(search.at).toFixed(1)}" cy="${y(search.ms).toFixed(1)}" r="1.8" fill="${search.ok ? '#4e79a7' : '#c0392b'}"><title>${search.at.toFixed(0)} s: ${search.ms.toFixed(1)} ms${search.parts ? ` (${Object.entries(search.parts).map(([part, ms]) => `${part} ${ms.toFixed(1)}`).join(', ')})` : ''}</title></circle>`);
  }
  backgroundTasks.forEach((task, index) => {
    const bandTop = top + plotHeight + 30 + index * (bandHeight + 4);
    parts.push(`<text x="${left - 6}" y="${bandTop + bandHeight - 2}" font-size="10" text-anchor="end">${task}</text>`);
    for (const second of ticks) {
      const share = Math.min(1, second.busy[task] + (second.running.includes(task) ? 1 : 0));
      if (share <= 0) continue;
      parts.push(`<rect x="${x(second.at).toFixed(1)}" y="${bandTop}" width="${Math.max(1, x(second.at + 1) - x(second.at)).toFixed(1)}" height="${bandHeight}" fill="${taskColours[task]}" opacity="${(0.25 + 0.75 * share).toFixed(2)}"/>`);
    }
  });
  if (ingesting) {
    const bandTop = top + plotHeight + 30 + backgroundTasks.length * (bandHeight + 4);
    parts.push(
      `<text x="${left - 6}" y="${bandTop + bandHeight - 2}" font-size="10" text-anchor="end">ingesting</text>`,
      `<rect x="${x(ingesting.from).toFixed(1)}" y="${bandTop}" width="${Math.max(1, x(ingesting.to) - x(ingesting.from)).toFixed(1)}" height="${bandHeight}" fill="#76b7b2"><title>uploads until the last document was ready</title></rect>`,
    );
  }
  parts.push('</svg>');
  return parts.join('\n');
}

export async function timeline(argv: readonly string[]) {
  const onPostgres = argv.includes('--store') && argv[argv.indexOf('--store') + 1] === 'postgres';
  const { DATABASE_URL: databaseUrl, ELASTICSEARCH_URL: _elasticsearch, ...environment } = process.env;
  if (onPostgres && !databaseUrl) throw new Error('--store postgres needs DATABASE_URL');
  const plan: Plan = {
    mainChunks: intFromEnv('BENCH_SEARCH_CHUNKS', 100_000),
    otherWorkspaces: intFromEnv('BENCH_SEARCH_OTHER_WORKSPACES', 4, 0),
    otherChunks: intFromEnv('BENCH_SEARCH_OTHER_CHUNKS', 5_000),
    chunksPerDoc: intFromEnv('BENCH_SEARCH_CHUNKS_PER_DOC', 10),
  };
  const afterLoadMinutes = intFromEnv('BENCH_SEARCH_TIMELINE_MINUTES', 30);
  const abstractCount = intFromEnv('BENCH_SEARCH_TIMELINE_ABSTRACTS', 5_000, 0);
  const storeDir = await mkdtemp(path.join(os.tmpdir(), 'kb-bench-timeline-'));
  const config = loadConfig({
    ...environment,
    ...(onPostgres ? { DATABASE_URL: databaseUrl } : {}),
    KB_DATA_DIR: storeDir,
    HOST: '127.0.0.1',
    PORT: '0',
    KB_LOG_LEVEL: 'silent',
    KB_SEARCH_RATE_PER_MINUTE: String(1_000_000),
  });
  const storeLabel = onPostgres ? 'PostgreSQL with pgvector (DATABASE_URL)' : 'embedded store (PGlite, pgvector)';
  const machine = machineDescription();
  log(`search timeline on ${machine}; ${storeLabel}; load average ${loadNow()}`);
  const app = await startApp(config);
  const embedder = await createEmbedder(config);
  const index = await openVectorIndex(config, app.db, embedder, { loadAhead: false });
  const made: string[] = [];
  let key = '';
  const cleanUp = async () => {
    if (onPostgres && key) {
      const client = new BenchClient(app.url, key);
      for (const workspaceId of made) await client.json('DELETE', `/v1/kb/workspaces/${workspaceId}`).catch(() => {});
    }
    await index.close().catch(() => {});
    await embedder.close().catch(() => {});
    await app.close().catch(() => {});
    await rm(storeDir, { recursive: true, force: true });
  };
  const stopListening = cleanUpOnInterrupt(cleanUp);
  const searches: Search[] = [];
  const seconds: Second[] = [];
  try {
    const abstracts = await readAbstracts();
    const queries = await readQueries();
    const vectors = await abstractVectors(embedder, abstracts);
    log(`seeding ${plan.mainChunks + plan.otherWorkspaces * plan.otherChunks} chunks; load average ${loadNow()}`);
    const seeded = await seed(app, index, plan, abstracts, vectors);
    key = seeded.key;
    made.push(seeded.mainWorkspaceId, ...seeded.otherWorkspaceIds);
    log(`seeded ${seeded.chunks} chunks in ${seeded.seconds.toFixed(1)} s; searching every second for ${afterLoadMinutes} minutes`);
    const client = new BenchClient(app.url, seeded.key);

    const afterLoad = startTimeline(app, index, client, seeded.mainWorkspaceId, queries, 'after load', searches, seconds, afterLoadMinutes * 60);
    let lastReport = 0;
    while (afterLoad.elapsed() < afterLoadMinutes * 60) {
      await sleep(1_000);
      if (afterLoad.elapsed() - lastReport >= 60) {
        lastReport = afterLoad.elapsed();
        const recent = searches.filter((search) => search.phase === 'after load' && search.at >= lastReport - 60).map((search) => search.ms);
        log(`after load, minute ${Math.round(lastReport / 60)}: p50 ${percentile(recent, 50).toFixed(1)} ms, p95 ${percentile(recent, 95).toFixed(1)} ms; load average ${loadNow()}`);
      }
    }
    await afterLoad.stop();
    const storeBytes = onPostgres ? null : await bytesUnder(embeddedStoreDirectory(storeDir));
    // A graph larger than PostgreSQL's shared buffers is read page by page from outside them by every search (docs/deployment.md).
    const postgresMemory = onPostgres
      ? (
          await app.db.prisma.$queryRaw<{ sharedBuffers: string; sharedBufferBytes: bigint; graphBytes: bigint }[]>`
            SELECT current_setting('shared_buffers') AS "sharedBuffers",
                   pg_size_bytes(current_setting('shared_buffers')) AS "sharedBufferBytes",
                   pg_relation_size('chunk_index_embedding') AS "graphBytes"`
        ).map((row) => ({ sharedBuffers: row.sharedBuffers, sharedBufferBytes: Number(row.sharedBufferBytes), graphBytes: Number(row.graphBytes) }))[0]
      : undefined;

    let ingestResult: Awaited<ReturnType<typeof ingest>> | undefined;
    let ingesting: { from: number; to: number } | undefined;
    if (abstractCount > 0) {
      // As bench:scifact uploads them: the title, a blank line, the text.
      const files = abstracts.slice(0, abstractCount).map((abstract) => ({ name: `${abstract.id}.txt`, bytes: abstract.text }));
      const ingestWorkspace = await client.workspace('search timeline: ingest');
      made.push(ingestWorkspace);
      log(`ingesting ${files.length} SciFact abstracts through the API while searching every second`);
      const during = startTimeline(app, index, client, seeded.mainWorkspaceId, queries, 'during ingest', searches, seconds);
      ingestResult = await ingest(app, client, ingestWorkspace, files, 'abstracts', config.uploads.maxFiles);
      const ended = during.elapsed();
      ingesting = { from: 0, to: ingestResult.seconds };
      while (during.elapsed() < ended + 60) await sleep(1_000);
      await during.stop();
    }

    const rows = [...minutes(searches, seconds, 'after load'), ...minutes(searches, seconds, 'during ingest')];
    const first = searches.find((search) => search.phase === 'after load');
    const firstPass = first !== undefined && first.ok && first.ms < TARGET_FIRST_MS;
    const headers = ['timeline', 'minute', 'searches', 'failed', 'p50 ms', 'p95 ms', 'max ms', ...backgroundTasks.map((task) => `${task} s`), 'merge slice ms', 'outside graph', 'p50 < 50, p95 < 150', 'slowest tenth, median ms by part'];
    const table = rows.map((row) => [
      row.phase,
      String(row.minute),
      String(row.searches),
      String(row.failed),
      row.p50.toFixed(1),
      row.p95.toFixed(1),
      row.max.toFixed(0),
      ...backgroundTasks.map((task) => row.busy[task].toFixed(1)),
      row.sliceMs === undefined ? '' : row.sliceMs.toFixed(0),
      row.backlog === undefined ? '' : String(row.backlog),
      row.pass ? 'PASS' : 'MISS',
      row.slowParts,
    ]);
    const missed = rows.filter((row) => !row.pass);
    const notes = [
      `${firstPass ? 'PASS' : 'MISS'}: the first search of the ${plan.mainChunks.toLocaleString('en-US')}-chunk workspace, sent as the seeding ended, took ${first ? first.ms.toFixed(0) : '-'} ms (target < ${TARGET_FIRST_MS} ms).`,
      `${missed.length === 0 ? 'PASS' : 'MISS'}: ${rows.length - missed.length} of ${rows.length} minutes had p50 < ${TARGET_P50_MS} ms and p95 < ${TARGET_P95_MS} ms with no failed search${missed.length > 0 ? `; missed: ${missed.map((row) => `${row.phase} ${row.minute}`).join(', ')}` : ''}.`,
      `Seeding: ${seeded.chunks.toLocaleString('en-US')} chunks (${plan.mainChunks.toLocaleString('en-US')} in the searched workspace, ${plan.otherWorkspaces} x ${plan.otherChunks.toLocaleString('en-US')} in others) written in bulk in ${seeded.seconds.toFixed(0)} s, outside the vector graph; the service was then left to merge and maintain on its own.${storeBytes === null ? '' : ` Embedded store on disk after the first timeline: ${(storeBytes / 2 ** 20).toFixed(0)} MB.`}`,
      ingestResult
        ? `Ingest: ${ingestResult.documents} SciFact abstracts (${ingestResult.chunks} chunks) ready in ${ingestResult.seconds.toFixed(0)} s through the API${ingestResult.mergeSeconds === null ? '' : `, merged into the graph ${ingestResult.mergeSeconds.toFixed(0)} s later`}; searches went on a minute after that.`
        : 'Ingest timeline: skipped (BENCH_SEARCH_TIMELINE_ABSTRACTS=0).',
      ...(postgresMemory
        ? [
            `PostgreSQL's shared_buffers ${postgresMemory.sharedBuffers}; the HNSW graph (chunk_index_embedding) ${(postgresMemory.graphBytes / 2 ** 20).toFixed(0)} MB after the first timeline${postgresMemory.graphBytes > postgresMemory.sharedBufferBytes ? ': larger than the shared buffers, so searches read its pages from outside them' : ''}.`,
          ]
        : []),
      `Background work columns: seconds each task held the store in that minute (counted when a run ends, so a long run counts in the minute it ended); "merge slice ms": the mean time of a graph merge slice that ended in the minute (a search arriving meanwhile waits for the rest of it); "outside graph": chunks still waiting for the graph at the minute's last reading (every ${BACKLOG_EVERY_S} s).`,
      `"Slowest tenth": over the minute's searches at or above its p90, the median milliseconds of each part the service reported in Server-Timing (auth: checking the API key; scope: the workspace check; embed: the query's embedding; sync: bringing the keyword side up to date; fresh: scoring the chunks outside the graph in memory; vector: the vector statement in the store; graph: the search of the vector graph held in memory; keywords: the BM25 ranking; read: reading the results back; search: the whole search; total: the request in the server), and "outside": how much longer the client waited than that total. Parts overlap: the sync and the workspace check run while the query is embedded.`,
      `Searches: POST /v1/kb/query, hybrid, top_k ${TOP_K}, one sent every second whether or not the one before had answered, each a different SciFact test query; client-side latency over loopback HTTP.`,
      `Load average at the end ${loadNow()}.`,
    ];
    process.stdout.write(`\nSearch latency over time (${storeLabel})\n\n${textTable(headers, table)}\n\n${notes.map((note) => `- ${note}`).join('\n')}\n`);
    const date = new Date().toISOString().slice(0, 10);
    const suffix = onPostgres ? '-postgres' : '';
    await writeResults(
      `search-timeline${suffix}`,
      { date, machine, store: storeLabel, plan, seeded: { chunks: seeded.chunks, seconds: seeded.seconds }, ingest: ingestResult ?? null, ingesting: ingesting ?? null, postgres: postgresMemory ?? null, first: first ?? null, minutes: rows, searches, seconds, notes },
      resultPage({
        title: 'Search latency over time',
        heading: 'Search latency after a bulk load and during an ingest',
        meta: `${date} · ${machine} · ${storeLabel} · ${seeded.chunks.toLocaleString('en-US')} chunks`,
        body: `<figure>${timelineChart(searches, seconds, 'after load')}</figure>\n${abstractCount > 0 ? `<figure>${timelineChart(searches, seconds, 'during ingest', ingesting)}</figure>\n` : ''}${htmlTable(headers, table)}`,
        notes,
      }),
    );
  } finally {
    stopListening();
    await cleanUp();
  }
}
