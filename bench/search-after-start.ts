/**
 * `npm run bench:search -- --after-start`: searches in the first minutes after the service starts
 * on a large embedded store, whose page cache is new and empty then, with the warm-up that reads
 * the vector graph and the tables in (KB_STORE_CACHE_WARM_PERCENT 75, the default) and without it
 * (0), in alternating runs on the same store.
 *
 * The store is the one `npm run bench:search` seeded and kept in bench/results/.cache (100,000
 * chunks in the searched workspace and 4 x 5,000 in others, merged into the graph): run that
 * first. Each run starts the service on it, sends `POST /v1/kb/query` (hybrid, top_k 10, a
 * different SciFact test query each time) every BENCH_START_INTERVAL_MS (500) from the moment it
 * listens, for BENCH_START_SECONDS (150), and closes it. BENCH_START_PAIRS (2) pairs of runs.
 * The operating system's cache holds the store's files alike for every run but the first.
 *
 * With BENCH_START_COMPARE=index-snapshots, the two settings are instead the keyword postings and
 * the graph in memory saved on disk read back at the start (KB_INDEX_SNAPSHOTS on, saved first by
 * a start of its own when they are not) and read from the store (off), and each run's first
 * request is a keyword-only search, timed on its own: it waits for the workspace's postings.
 * With BENCH_START_COMPARE=thread-placement, they are KB_THREAD_PLACEMENT auto and off, with the
 * same keyword-only first request.
 *
 * Prints, per 30-second window and setting, p50 and p95 of the searches and p90 of their `vector`
 * part (Server-Timing), and when the warm-up ended; charts the searches of each run.
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { startApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { readQueries } from './search-seed.js';
import { escapeHtml, htmlTable, intFromEnv, loadNow, log, machineDescription, percentile, resultPage, resultsDir, serverTimingParts, ServiceClient, sleep, textTable, writeResults } from './helpers.js';

const WINDOW_S = 30;
type Setting = { label: string; colour: string; env: Record<string, string> };
const comparisons: Record<string, { title: string; settings: readonly [Setting, Setting] }> = {
  'warm-up': {
    title: 'with and without the page cache warm-up',
    settings: [
      { label: 'warm-up (75 %)', colour: '#4e79a7', env: { KB_STORE_CACHE_WARM_PERCENT: '75' } },
      { label: 'no warm-up (0)', colour: '#e15759', env: { KB_STORE_CACHE_WARM_PERCENT: '0' } },
    ],
  },
  'index-snapshots': {
    title: 'with the keyword postings and the graph in memory read back from disk, and read from the store',
    settings: [
      { label: 'saved (on)', colour: '#4e79a7', env: { KB_INDEX_SNAPSHOTS: 'on' } },
      { label: 'from the store (off)', colour: '#e15759', env: { KB_INDEX_SNAPSHOTS: 'off' } },
    ],
  },
  'thread-placement': {
    title: 'with the threads a search waits on placed apart, and left to the scheduler',
    settings: [
      { label: 'placed (auto)', colour: '#4e79a7', env: { KB_THREAD_PLACEMENT: 'auto' } },
      { label: 'left to the scheduler (off)', colour: '#e15759', env: { KB_THREAD_PLACEMENT: 'off' } },
    ],
  },
};
const comparison = comparisons[process.env.BENCH_START_COMPARE ?? 'warm-up'] ?? comparisons['warm-up']!;
if (process.env.BENCH_START_COMPARE && !comparisons[process.env.BENCH_START_COMPARE]) {
  throw new Error(`BENCH_START_COMPARE must be one of ${Object.keys(comparisons).join(', ')}`);
}
const settings = comparison.settings;
const firstKeywordOnly = process.env.BENCH_START_COMPARE === 'index-snapshots' || process.env.BENCH_START_COMPARE === 'thread-placement';

/** A search: when it was sent (s after listening), its time, its Server-Timing parts, and whether its keyword side was left out while postings loaded. */
type Search = { at: number; ms: number; vector: number | undefined; parts: Record<string, number>; withoutKeywords: boolean; ok: boolean };
type Run = {
  setting: string;
  searches: Search[];
  warmedAt: number | undefined;
  warmedMb: number | undefined;
  /** When the service's load of keyword postings at start ended (s after listening). */
  keywordsLoadedAt: number | undefined;
  /** The keyword-only search sent first (BENCH_START_COMPARE=index-snapshots), ms. */
  firstKeywordMs?: number;
  /** When the first search answered from the graph in memory was sent (s after listening): Server-Timing `graph`. */
  graphAt: number | undefined;
  listeningAfterS: number;
};

async function keptStore(): Promise<{ directory: string; key: string; workspaceId: string; chunks: number }> {
  const cache = path.join(resultsDir, '.cache');
  const candidates = (await readdir(cache).catch(() => [] as string[])).filter((name) => name.startsWith('search-store-'));
  for (const name of candidates) {
    const manifest = await readFile(path.join(cache, name, 'bench-manifest.json'), 'utf8').catch(() => undefined);
    if (!manifest) continue;
    const seeded = JSON.parse(manifest) as { key: string; mainWorkspaceId: string; chunks: number };
    return { directory: path.join(cache, name), key: seeded.key, workspaceId: seeded.mainWorkspaceId, chunks: seeded.chunks };
  }
  throw new Error(`no store seeded by npm run bench:search in ${cache}: run that first (BENCH_SEARCH_CACHE=1, the default)`);
}

async function oneRun(store: Awaited<ReturnType<typeof keptStore>>, setting: Setting, queries: string[], seconds: number, intervalMs: number): Promise<Run> {
  const started = performance.now();
  const config = loadConfig({
    ...process.env,
    DATABASE_URL: '',
    ELASTICSEARCH_URL: '',
    KB_DATA_DIR: store.directory,
    HOST: '127.0.0.1',
    PORT: '0',
    KB_LOG_LEVEL: 'silent',
    KB_SEARCH_RATE_PER_MINUTE: String(1_000_000),
    ...setting.env,
  });
  const app = await startApp(config);
  const listening = performance.now();
  const run: Run = { setting: setting.label, searches: [], warmedAt: undefined, warmedMb: undefined, keywordsLoadedAt: undefined, graphAt: undefined, listeningAfterS: (listening - started) / 1000 };
  const keywordLoad = () => app.db.backgroundWork.states().find((state) => state.task === 'keyword_load')!;
  void app.db.pageCacheWarmed?.().then((result) => {
    run.warmedAt = (performance.now() - listening) / 1000;
    run.warmedMb = (result?.blocks ?? 0) / 128;
  });
  const api = new ServiceClient(app.url, store.key);
  try {
    if (firstKeywordOnly) {
      const sentAt = performance.now();
      await api.request('POST', '/v1/kb/query', { query: queries[queries.length - 1]!, workspace_id: store.workspaceId, top_k: 10, mode: 'keyword' });
      run.firstKeywordMs = performance.now() - sentAt;
    }
    for (let position = 0; (performance.now() - listening) / 1000 < seconds; position++) {
      const sentAt = performance.now();
      let ok = true;
      let parts: Record<string, number> = {};
      try {
        const { headers } = await api.request('POST', '/v1/kb/query', { query: queries[position % queries.length]!, workspace_id: store.workspaceId, top_k: 10, mode: 'hybrid' });
        parts = serverTimingParts(headers.get('server-timing'));
      } catch {
        ok = false;
      }
      const ms = performance.now() - sentAt;
      run.searches.push({ at: (sentAt - listening) / 1000, ms, vector: parts.vector, parts, withoutKeywords: parts.keywords_loading !== undefined, ok });
      if (run.graphAt === undefined && parts.graph !== undefined) run.graphAt = (sentAt - listening) / 1000;
      if (run.keywordsLoadedAt === undefined && keywordLoad().runs > 0 && keywordLoad().running === 0) run.keywordsLoadedAt = (performance.now() - listening) / 1000;
      await sleep(Math.max(0, intervalMs - ms));
    }
  } finally {
    await app.close();
  }
  return run;
}

/** Starts the service once with index snapshots on, unless the workspace's postings and graph are saved, until they are. */
async function savePostings(store: Awaited<ReturnType<typeof keptStore>>) {
  const entry = path.join(store.directory, 'index-snapshots', `${store.workspaceId}.json`);
  const saved = () => readFile(entry, 'utf8').then((text) => (JSON.parse(text) as { graph?: unknown }).graph !== undefined, () => false);
  if (await saved()) return;
  log('saving the keyword postings and the graph first: a start with KB_INDEX_SNAPSHOTS=on, until they are on disk');
  const app = await startApp(loadConfig({ ...process.env, DATABASE_URL: '', ELASTICSEARCH_URL: '', KB_DATA_DIR: store.directory, HOST: '127.0.0.1', PORT: '0', KB_LOG_LEVEL: 'silent', KB_INDEX_SNAPSHOTS: 'on' }));
  try {
    while (!(await saved())) await sleep(500);
  } finally {
    await app.close();
  }
}

function chart(runs: Run[], seconds: number): string {
  const width = 900;
  const height = 320;
  const left = 60;
  const bottom = 40;
  const top = 20;
  const maxMs = Math.max(100, percentile(runs.flatMap((run) => run.searches.map((search) => search.ms)), 99));
  const x = (at: number) => left + (at / seconds) * (width - left - 20);
  const y = (ms: number) => height - bottom - (Math.min(ms, maxMs) / maxMs) * (height - bottom - top);
  const parts = [`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-label="search latency after a start">`];
  for (let ms = 0; ms <= maxMs; ms += maxMs > 400 ? 100 : 50) {
    parts.push(`<line x1="${left}" x2="${width - 20}" y1="${y(ms)}" y2="${y(ms)}" stroke="#eee"/><text x="${left - 6}" y="${y(ms) + 4}" font-size="11" text-anchor="end">${ms}</text>`);
  }
  for (let at = 0; at <= seconds; at += WINDOW_S) parts.push(`<text x="${x(at)}" y="${height - bottom + 16}" font-size="11" text-anchor="middle">${at} s</text>`);
  parts.push(`<text x="14" y="${top + 100}" font-size="11" transform="rotate(-90 14 ${top + 100})">search ms</text>`);
  for (const run of runs) {
    const colour = settings.find((setting) => setting.label === run.setting)!.colour;
    const points = run.searches.map((search) => `${x(search.at).toFixed(1)},${y(search.ms).toFixed(1)}`).join(' ');
    parts.push(`<polyline points="${points}" fill="none" stroke="${colour}" stroke-width="1" opacity="0.7"/>`);
    if (run.warmedAt !== undefined) parts.push(`<line x1="${x(run.warmedAt)}" x2="${x(run.warmedAt)}" y1="${top}" y2="${height - bottom}" stroke="${colour}" stroke-dasharray="4 3"/>`);
    if (run.keywordsLoadedAt !== undefined) {
      parts.push(`<line x1="${x(run.keywordsLoadedAt)}" x2="${x(run.keywordsLoadedAt)}" y1="${top}" y2="${height - bottom}" stroke="${colour}" stroke-dasharray="1 3" stroke-width="2"/>`);
    }
  }
  settings.forEach((setting, index) => {
    parts.push(`<rect x="${left + 10 + index * 200}" y="${top}" width="12" height="12" fill="${setting.colour}"/><text x="${left + 28 + index * 200}" y="${top + 10}" font-size="12">${escapeHtml(setting.label)}</text>`);
  });
  parts.push(`<text x="${left + 420}" y="${top + 10}" font-size="12">dashed: the warm-up ended; dotted: the keyword postings loaded</text>`, '</svg>');
  return parts.join('\n');
}

export async function afterStart(): Promise<void> {
  const seconds = intFromEnv('BENCH_START_SECONDS', 150);
  const intervalMs = intFromEnv('BENCH_START_INTERVAL_MS', 500);
  const pairs = intFromEnv('BENCH_START_PAIRS', 2);
  const store = await keptStore();
  const queries = (await readQueries()).map((query) => query.trim());
  if (firstKeywordOnly) await savePostings(store);
  const machine = machineDescription();
  log(`searches after a start on ${machine}; store ${path.relative(process.cwd(), store.directory)} (${store.chunks} chunks); load average ${loadNow()}`);
  const runs: Run[] = [];
  for (let pair = 0; pair < pairs; pair++) {
    // Alternating which goes first, so neither always follows the other.
    const order = pair % 2 === 0 ? settings : [...settings].reverse();
    for (const setting of order) {
      log(`run ${runs.length + 1} of ${pairs * 2}: ${setting.label}; load average ${loadNow()}`);
      const run = await oneRun(store, setting, queries, seconds, intervalMs);
      log(`  ${run.searches.length} searches;${run.firstKeywordMs === undefined ? '' : ` keyword-only first ${run.firstKeywordMs.toFixed(0)} ms;`} first ${run.searches[0]?.ms.toFixed(0)} ms; graph in memory from ${run.graphAt === undefined ? 'never' : `${run.graphAt.toFixed(1)} s`}; warm-up ended ${run.warmedAt === undefined ? 'never' : `after ${run.warmedAt.toFixed(1)} s (${run.warmedMb!.toFixed(0)} MB)`}`);
      runs.push(run);
    }
  }

  const headers = ['window', ...settings.flatMap((setting) => [`${setting.label} p50 / p95 ms`, 'vector p90 ms', 'no keywords'])];
  const rows: string[][] = [];
  for (let from = 0; from < seconds; from += WINDOW_S) {
    const row = [`${from}-${from + WINDOW_S} s`];
    for (const setting of settings) {
      const searches = runs.filter((run) => run.setting === setting.label).flatMap((run) => run.searches.filter((search) => search.at >= from && search.at < from + WINDOW_S));
      const ms = searches.map((search) => search.ms);
      const vector = searches.map((search) => search.vector).filter((value): value is number => value !== undefined);
      row.push(
        ms.length ? `${percentile(ms, 50).toFixed(0)} / ${percentile(ms, 95).toFixed(0)}` : '-',
        vector.length ? percentile(vector, 90).toFixed(0) : '-',
        String(searches.filter((search) => search.withoutKeywords).length),
      );
    }
    rows.push(row);
  }
  // Where the first search of each run, and the median search of the first window, spent their time.
  const partNames = [...new Set(runs.flatMap((run) => run.searches.flatMap((search) => Object.keys(search.parts))))];
  const partHeaders = ['search', 'ms', ...partNames];
  const partRows = runs.flatMap((run, index) => {
    const first = run.searches[0];
    const window = run.searches.filter((search) => search.at < WINDOW_S && search.ok);
    const median = (values: number[]) => (values.length ? percentile(values, 50).toFixed(1) : '-');
    return [
      [`run ${index + 1} (${run.setting}): first`, first ? first.ms.toFixed(0) : '-', ...partNames.map((name) => first?.parts[name]?.toFixed(1) ?? '-')],
      [`run ${index + 1}: p50 of 0-${WINDOW_S} s`, median(window.map((search) => search.ms)), ...partNames.map((name) => median(window.flatMap((search) => (search.parts[name] === undefined ? [] : [search.parts[name]!]))))],
    ];
  });
  const failed = runs.flatMap((run) => run.searches).filter((search) => !search.ok).length;
  const notes = [
    ...runs.map(
      (run, index) =>
        `run ${index + 1}, ${run.setting}: listening ${run.listeningAfterS.toFixed(1)} s after the start began;${run.firstKeywordMs === undefined ? '' : ` keyword-only first search ${run.firstKeywordMs.toFixed(0)} ms;`} first search ${run.searches[0]?.ms.toFixed(0)} ms; warm-up ${run.warmedAt === undefined ? 'none' : `ended after ${run.warmedAt.toFixed(1)} s, ${run.warmedMb!.toFixed(0)} MB`}; keyword postings loaded ${run.keywordsLoadedAt === undefined ? 'not within the run' : `after ${run.keywordsLoadedAt.toFixed(1)} s`}; first search answered by the graph in memory sent ${run.graphAt === undefined ? 'never' : `after ${run.graphAt.toFixed(1)} s`}`,
    ),
    `${failed} searches failed. "no keywords": searches ranked by vectors alone while their workspace's keyword postings loaded (Server-Timing keywords_loading).`,
    `One search every ${intervalMs} ms (or as soon as the one before answered) for ${seconds} s from the moment the service listens; windows pool the searches of every run of a setting.`,
  ];
  process.stdout.write(`\n${textTable(headers, rows)}\n\nServer-Timing parts, ms:\n${textTable(partHeaders, partRows)}\n\n${notes.join('\n')}\n`);
  const html = resultPage({
    title: 'Searches after a start',
    heading: `Searches after a start on ${store.chunks.toLocaleString('en')} chunks, ${comparison.title}`,
    meta: `${new Date().toISOString().slice(0, 10)}; ${machine}`,
    body: `<figure>${chart(runs, seconds)}</figure>\n${htmlTable(headers, rows)}\n<h2>Server-Timing parts, ms</h2>\n${htmlTable(partHeaders, partRows)}`,
    notes,
  });
  await writeResults(firstKeywordOnly ? 'search-after-start-snapshots' : 'search-after-start', { date: new Date().toISOString(), machine, seconds, intervalMs, runs }, html);
}
