/**
 * `npm run bench:answers`: the agent's answers, judged and timed through `POST /agent/stream`,
 * with the service started in this process on the embedded store (DATABASE_URL and
 * ELASTICSEARCH_URL are ignored; the answer model is the configured one, the embedded extractive
 * answerer unless OPENAI_BASE_URL and OPENAI_CHAT_MODEL are set). One run, three measurements:
 *
 *   1. SQuAD 2.0 (2 dev articles): the 87 paragraphs uploaded as documents (`<article> <n>.txt`)
 *      into one workspace, then each question in fast mode. Answerable questions: the share whose
 *      answer contains a gold answer (both normalised as SQuAD does, citation markers removed,
 *      matched as whole words; target >= 60%), the share wrongly answered "not found", the share
 *      citing the gold paragraph. Unanswerable ones: the share answered exactly with the
 *      not-found answer.
 *   2. HotpotQA (100 multi-hop questions): the 994 paragraphs uploaded as documents whose file name
 *      is the encoded title, then each question in fast AND deep mode, the mode that goes first
 *      alternating from one question to the next. Per mode: both supporting paragraphs among the
 *      cited sources, at least one of them, answer containment, cited sources per answer, mean
 *      support_score, latency; and deep minus fast of the both-paragraph recall in points
 *      (target >= 10).
 *   3. Latency on a workspace of at least 10,000 chunks: the SciFact abstracts uploaded once, and
 *      again as distinct copies until the workspace holds BENCH_ANSWERS_LATENCY_CHUNKS chunks;
 *      after a few warm-up runs, SciFact test queries alternately in fast and deep mode (each
 *      query asked once): time to the first `token` event and to the `done` event from sending
 *      the request, p50 and p95 (target: fast time to first token p50 < 300 ms). The built store
 *      is kept in bench/results/.cache and reused by later runs with the same settings.
 *
 * Parts 1 and 2 share one fresh temporary store; part 3 runs on its own (cached) store, after the
 * first service has been closed. Every request is sent alone. Tables go to stdout, progress to
 * stderr; bench/results/answers.json (with every question's answer, cited titles and checks) and
 * answers.html are written.
 *
 * Knobs: BENCH_ANSWERS_SQUAD_QUESTIONS (all 626; fewer are picked evenly over the file, 0 skips
 * part 1), BENCH_ANSWERS_HOTPOT_QUESTIONS (100, the first ones; 0 skips part 2),
 * BENCH_ANSWERS_LATENCY_RUNS (50 per mode), BENCH_ANSWERS_SKIP_LATENCY=1 (skips part 3),
 * BENCH_ANSWERS_LATENCY_DOCS (all 5,183 abstracts per copy; fewer for a quick check),
 * BENCH_ANSWERS_LATENCY_CHUNKS (10,000: copies are added until the workspace holds this many),
 * BENCH_ANSWERS_CACHE (1: keep and reuse the latency store; 0: a fresh temporary one).
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startApp, type RunningApp } from '../src/app.js';
import { BenchClient, ingest, newUser, waitForGraphMerge } from './in-process-service.js';
import { loadConfig, type Config } from '../src/config.js';
import { notFoundAnswer } from '../src/modules/agent/answer-model.js';
import { sentencesOf } from '../src/modules/agent/text.js';
import {
  abstractFiles,
  askAgent,
  containsGold,
  normalisedAnswer,
  isNotFound,
  readHotpot,
  readScifact,
  readSquad,
  spread,
  titleOfFile,
  type AgentRun,
  type HotpotQuestion,
  type SquadQuestion,
  type TextFile,
} from './answers-data.js';
import {
  elapsedSeconds,
  htmlTable,
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
  textTable,
  writeResults,
} from './helpers.js';

const TARGET_SQUAD_CONTAINMENT = 0.6;
const TARGET_DEEP_GAIN_POINTS = 10;
/** Issue 25: the answer's first sentence holds a gold answer; both supporting paragraphs cited. */
const TARGET_SQUAD_FIRST_SENTENCE = 0.75;
const TARGET_HOTPOT_FAST = 0.25;
const TARGET_HOTPOT_DEEP = 0.65;
const TARGET_TTFT_P50_MS = 300;
/** The size of workspace the latency target is for. */
const TARGET_LATENCY_CHUNKS = 10_000;
const WARMUP_RUNS_PER_MODE = 3;
/** Copies of the abstracts the latency workspace may take before the chunk target is called unreachable. */
const MAX_COPIES = 20;
/** Bump when the latency workspace is made differently: cached stores of another version are not reused. */
const LATENCY_STORE_VERSION = 1;
const cacheDir = path.join(resultsDir, '.cache');

const modes = ['fast', 'deep'] as const;
type Mode = (typeof modes)[number];

// ---------------------------------------------------------------------------------------------
// Service

// ---------------------------------------------------------------------------------------------
// Formatting and summaries

const pct = (value: number) => (Number.isFinite(value) ? `${(100 * value).toFixed(1)}%` : '-');
const share = (count: number, total: number) => (total === 0 ? '-' : `${pct(count / total)} (${count}/${total})`);
const ms = (value: number) => (Number.isFinite(value) ? value.toFixed(0) : '-');
const fixed = (value: number, digits = 2) => (Number.isFinite(value) ? value.toFixed(digits) : '-');
/** Words of an answer without its citation markers. */
const wordsOf = (answer: string) => normalisedAnswer(answer).split(' ').filter((word) => word !== '').length;
const verdict = (pass: boolean, caveat: string | null) => `${pass ? 'PASS' : 'MISS'}${caveat ? ` (${caveat})` : ''}`;

type Timings = { runs: number; errors: number; ttftP50: number; ttftP95: number; doneP50: number; doneP95: number; jobStartedP50: number };

/** Percentiles of the runs that ended with `done`; failed runs are counted apart. */
function timingsOf(runs: readonly AgentRun[]): Timings {
  const ok = runs.filter((run) => run.error === null && run.doneMs !== null);
  const ttft = ok.flatMap((run) => (run.firstTokenMs === null ? [] : [run.firstTokenMs]));
  const done = ok.map((run) => run.doneMs!);
  const jobStarted = ok.flatMap((run) => (run.jobStartedMs === null ? [] : [run.jobStartedMs]));
  return {
    runs: runs.length,
    errors: runs.length - ok.length,
    ttftP50: percentile(ttft, 50),
    ttftP95: percentile(ttft, 95),
    doneP50: percentile(done, 50),
    doneP95: percentile(done, 95),
    jobStartedP50: percentile(jobStarted, 50),
  };
}

/** What the JSON keeps of a run besides the checks. */
const runRecord = (run: AgentRun) => ({
  answer: run.answer,
  citedFiles: run.sources.map((source) => source.filename),
  supportScore: run.supportScore,
  reasoningSteps: run.reasoningSteps,
  tokens: run.tokens,
  jobStartedMs: run.jobStartedMs,
  firstTokenMs: run.firstTokenMs,
  doneMs: run.doneMs,
  error: run.error,
});

// ---------------------------------------------------------------------------------------------
// 1. SQuAD

type SquadResult = SquadQuestion & { notFound: boolean; contains: boolean; firstSentenceContains: boolean; goldParagraphCited: boolean; run: AgentRun };

async function runSquad(client: BenchClient, workspaceId: string, questions: readonly SquadQuestion[]): Promise<SquadResult[]> {
  const results: SquadResult[] = [];
  const bar = progressBar('SQuAD questions (fast) |{bar}| {value}/{total} | {duration_formatted} | eta {eta_formatted}');
  bar.start(questions.length, 0);
  for (const question of questions) {
    const run = await client.ask(question.question, workspaceId, 'fast');
    results.push({
      ...question,
      notFound: run.error === null && isNotFound(run.answer),
      contains: run.error === null && question.answerable && containsGold(run.answer, question.gold),
      firstSentenceContains: run.error === null && question.answerable && containsGold(sentencesOf(run.answer)[0]?.text ?? '', question.gold),
      goldParagraphCited: run.sources.some((source) => source.filename === question.paragraphFile),
      run,
    });
    bar.increment();
  }
  bar.stop();
  return results;
}

function squadSummary(results: readonly SquadResult[]) {
  const answerable = results.filter((result) => result.answerable);
  const unanswerable = results.filter((result) => !result.answerable);
  const count = (list: readonly SquadResult[], test: (result: SquadResult) => boolean) => list.filter(test).length;
  const timings = timingsOf(results.map((result) => result.run));
  return {
    answerable: answerable.length,
    unanswerable: unanswerable.length,
    contains: count(answerable, (result) => result.contains),
    firstSentenceContains: count(answerable, (result) => result.firstSentenceContains),
    answerableNotFound: count(answerable, (result) => result.notFound),
    goldParagraphCited: count(answerable, (result) => result.goldParagraphCited),
    unanswerableNotFound: count(unanswerable, (result) => result.notFound),
    errors: timings.errors,
    containment: answerable.length === 0 ? NaN : count(answerable, (result) => result.contains) / answerable.length,
    unanswerableNotFoundRate: unanswerable.length === 0 ? NaN : count(unanswerable, (result) => result.notFound) / unanswerable.length,
    answerableNotFoundRate: answerable.length === 0 ? NaN : count(answerable, (result) => result.notFound) / answerable.length,
    meanSupportScore: mean(results.flatMap((result) => (result.run.supportScore === null ? [] : [result.run.supportScore]))),
    meanAnswerWords: mean(results.filter((result) => result.run.error === null && !result.notFound).map((result) => wordsOf(result.run.answer))),
    timings,
  };
}

// ---------------------------------------------------------------------------------------------
// 2. HotpotQA

type HotpotCheck = { citedTitles: string[]; bothCited: boolean; anyCited: boolean; contains: boolean; run: AgentRun };
type HotpotResult = HotpotQuestion & { runs: Record<Mode, HotpotCheck> };

function checkHotpot(question: HotpotQuestion, run: AgentRun): HotpotCheck {
  const citedTitles = [...new Set(run.sources.flatMap((source) => titleOfFile(source.filename) ?? []))];
  const cited = new Set(citedTitles);
  return {
    citedTitles,
    bothCited: question.supportingTitles.every((title) => cited.has(title)),
    anyCited: question.supportingTitles.some((title) => cited.has(title)),
    contains: run.error === null && containsGold(run.answer, [question.answer]),
    run,
  };
}

async function runHotpot(client: BenchClient, workspaceId: string, questions: readonly HotpotQuestion[]): Promise<HotpotResult[]> {
  const results: HotpotResult[] = [];
  const bar = progressBar('HotpotQA questions (fast + deep) |{bar}| {value}/{total} | {duration_formatted} | eta {eta_formatted}');
  bar.start(questions.length, 0);
  for (const [position, question] of questions.entries()) {
    const runs = {} as Record<Mode, HotpotCheck>;
    // The mode that goes first alternates: neither profits more than the other from what the one before left in caches.
    for (let step = 0; step < modes.length; step++) {
      const mode = modes[(position + step) % modes.length]!;
      runs[mode] = checkHotpot(question, await client.ask(question.question, workspaceId, mode));
    }
    results.push({ ...question, runs });
    bar.increment();
  }
  bar.stop();
  return results;
}

function hotpotSummary(results: readonly HotpotResult[], mode: Mode) {
  const checks = results.map((result) => result.runs[mode]);
  const rate = (test: (check: HotpotCheck) => boolean) => (checks.length === 0 ? NaN : checks.filter(test).length / checks.length);
  const scores = checks.flatMap((check) => (check.run.supportScore === null ? [] : [check.run.supportScore]));
  return {
    questions: checks.length,
    bothCited: rate((check) => check.bothCited),
    anyCited: rate((check) => check.anyCited),
    contains: rate((check) => check.contains),
    notFound: rate((check) => check.run.error === null && isNotFound(check.run.answer)),
    meanSources: mean(checks.map((check) => check.run.sources.length)),
    meanSupportScore: mean(scores),
    supportScoreNull: checks.length - scores.length,
    meanReasoningSteps: mean(checks.map((check) => check.run.reasoningSteps)),
    meanAnswerWords: mean(checks.filter((check) => check.run.error === null && !isNotFound(check.run.answer)).map((check) => wordsOf(check.run.answer))),
    timings: timingsOf(checks.map((check) => check.run)),
  };
}

// ---------------------------------------------------------------------------------------------
// 3. Latency

type LatencyPlan = { docs: number; chunkTarget: number };
type LatencyManifest = { key: string; userId: string; workspaceId: string; documents: number; chunks: number; copies: number; seconds: number; modelKey: string; built: string };
type LatencyRun = { mode: Mode; query: string; run: AgentRun };

/** Builds the latency workspace: copy after copy of the abstracts until it holds the chunk target. */
async function buildLatencyWorkspace(app: RunningApp, config: Config, abstracts: Parameters<typeof abstractFiles>[0], plan: LatencyPlan, modelKey: string): Promise<LatencyManifest> {
  const { userId, key } = await newUser(app, 'Answers benchmark (latency)');
  const client = new BenchClient(app.url, key);
  const workspaceId = await client.workspace('answers bench: latency');
  const start = performance.now();
  let copies = 0;
  let stats = { documents: 0, chunks: 0 };
  while (stats.chunks < plan.chunkTarget) {
    if (copies >= MAX_COPIES) throw new Error(`${copies} copies of ${abstracts.length} abstracts make ${stats.chunks} chunks, short of BENCH_ANSWERS_LATENCY_CHUNKS ${plan.chunkTarget}`);
    copies += 1;
    log(`latency workspace: copy ${copies} of ${abstracts.length} abstracts (${stats.chunks} chunks so far, ${plan.chunkTarget} wanted); load average ${loadNow()}`);
    stats = await ingest(app, client, workspaceId, abstractFiles(abstracts, copies), `latency copy ${copies}`, config.uploads.maxFiles);
  }
  return { key, userId, workspaceId, documents: stats.documents, chunks: stats.chunks, copies, seconds: elapsedSeconds(start), modelKey, built: new Date().toISOString() };
}

async function runLatency(client: BenchClient, workspaceId: string, queries: readonly string[], runsPerMode: number) {
  const queryAt = (position: number) => queries[position % queries.length]!;
  log(`latency: ${WARMUP_RUNS_PER_MODE} warm-up runs per mode, then ${runsPerMode} per mode, alternating; load average ${loadNow()}`);
  const warmup: AgentRun[] = [];
  for (let position = 0; position < WARMUP_RUNS_PER_MODE * modes.length; position++) {
    warmup.push(await client.ask(queryAt(position), workspaceId, modes[position % modes.length]!));
  }
  const runs: LatencyRun[] = [];
  const bar = progressBar('latency runs |{bar}| {value}/{total} | {duration_formatted} | eta {eta_formatted}');
  bar.start(runsPerMode * modes.length, 0);
  const loadBefore = loadNow();
  for (let pair = 0; pair < runsPerMode; pair++) {
    for (let step = 0; step < modes.length; step++) {
      const mode = modes[(pair + step) % modes.length]!;
      // Each query is asked once: fast and deep take turns along the list, after the warm-up's.
      const query = queryAt(WARMUP_RUNS_PER_MODE * modes.length + pair * modes.length + modes.indexOf(mode));
      runs.push({ mode, query, run: await client.ask(query, workspaceId, mode) });
      bar.increment();
    }
  }
  bar.stop();
  return { runs, warmup, loadBefore, loadAfter: loadNow() };
}

// ---------------------------------------------------------------------------------------------

async function main() {
  const squadLimit = intFromEnv('BENCH_ANSWERS_SQUAD_QUESTIONS', Number.MAX_SAFE_INTEGER, 0);
  const hotpotLimit = intFromEnv('BENCH_ANSWERS_HOTPOT_QUESTIONS', 100, 0);
  const latencyRuns = intFromEnv('BENCH_ANSWERS_LATENCY_RUNS', 50);
  const skipLatency = intFromEnv('BENCH_ANSWERS_SKIP_LATENCY', 0, 0) > 0;
  const latencyDocs = intFromEnv('BENCH_ANSWERS_LATENCY_DOCS', Number.MAX_SAFE_INTEGER);
  const chunkTarget = intFromEnv('BENCH_ANSWERS_LATENCY_CHUNKS', TARGET_LATENCY_CHUNKS);
  const useCache = intFromEnv('BENCH_ANSWERS_CACHE', 1, 0) > 0;

  // The embedded store, whatever DATABASE_URL and ELASTICSEARCH_URL say.
  const { DATABASE_URL: _databaseUrl, ELASTICSEARCH_URL: _elasticsearchUrl, ...environment } = process.env;
  const baseEnvironment = {
    ...environment,
    HOST: '127.0.0.1',
    PORT: '0',
    KB_LOG_LEVEL: 'silent',
    KB_SEARCH_RATE_PER_MINUTE: String(1_000_000),
  };
  const probeConfig = loadConfig({ ...baseEnvironment, KB_DATA_DIR: os.tmpdir() });
  const modelKey = probeConfig.openai.baseUrl && probeConfig.openai.embeddingModel ? `openai:${probeConfig.openai.embeddingModel}` : probeConfig.embeddings.localModel;
  const answerModel =
    probeConfig.openai.baseUrl && probeConfig.openai.chatModel ? `OpenAI-compatible ${probeConfig.openai.chatModel}` : 'embedded extractive answerer';

  const machine = machineDescription();
  const loadAtStart = loadNow();
  log(`answers benchmark on ${machine}; load average ${loadAtStart}`);
  log(`answer model: ${answerModel}; embedder: ${modelKey}; store: embedded (PGlite)`);
  process.stdout.write(`load average at start: ${loadAtStart}\n`);

  const squad = await readSquad();
  const hotpot = await readHotpot();
  const squadQuestions = spread(squad.questions, squadLimit);
  const hotpotQuestions = hotpot.questions.slice(0, hotpotLimit);
  const squadSubset = squadQuestions.length > 0 && squadQuestions.length < squad.questions.length;
  const hotpotSubset = hotpotQuestions.length > 0 && hotpotQuestions.length < hotpot.questions.length;

  // ----- 1 and 2: one fresh store
  let squadResults: SquadResult[] = [];
  let hotpotResults: HotpotResult[] = [];
  const ingests: Record<string, { documents: number; chunks: number; seconds: number; mergeSeconds: number | null }> = {};
  const loads: Record<string, [string, string]> = {};
  if (squadQuestions.length > 0 || hotpotQuestions.length > 0) {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'kb-bench-answers-'));
    const config = loadConfig({ ...baseEnvironment, KB_DATA_DIR: dataDir });
    log(`starting the service (${dataDir})`);
    const app = await startApp(config);
    const cleanUp = async () => {
      await app.close().catch((error: unknown) => log(`could not close the service: ${String(error)}`));
      await rm(dataDir, { recursive: true, force: true });
    };
    const stopListening = cleanUpOnInterrupt(cleanUp);
    try {
      const { key } = await newUser(app, 'Answers benchmark');
      const client = new BenchClient(app.url, key);
      if (squadQuestions.length > 0) {
        const workspaceId = await client.workspace('answers bench: SQuAD 2.0');
        ingests.squad = await ingest(app, client, workspaceId, squad.files, 'SQuAD paragraphs', config.uploads.maxFiles);
        await app.warmed;
        const before = loadNow();
        log(`SQuAD: ${squadQuestions.length} questions${squadSubset ? ` (SUBSET of ${squad.questions.length})` : ''}, fast mode; load average ${before}`);
        squadResults = await runSquad(client, workspaceId, squadQuestions);
        loads.squad = [before, loadNow()];
      }
      if (hotpotQuestions.length > 0) {
        const workspaceId = await client.workspace('answers bench: HotpotQA');
        ingests.hotpot = await ingest(app, client, workspaceId, hotpot.files, 'HotpotQA paragraphs', config.uploads.maxFiles);
        await app.warmed;
        const before = loadNow();
        log(`HotpotQA: ${hotpotQuestions.length} questions${hotpotSubset ? ` (SUBSET of ${hotpot.questions.length})` : ''}, fast and deep; load average ${before}`);
        hotpotResults = await runHotpot(client, workspaceId, hotpotQuestions);
        loads.hotpot = [before, loadNow()];
      }
    } finally {
      stopListening();
      await cleanUp();
    }
  }

  // ----- 3: the latency store, cached
  let latency: { runs: LatencyRun[]; loadBefore: string; loadAfter: string; manifest: LatencyManifest; reused: boolean; storeDir: string; docsPerCopy: number } | undefined;
  if (!skipLatency) {
    const scifact = await readScifact();
    const abstracts = scifact.abstracts.slice(0, latencyDocs);
    const plan: LatencyPlan = { docs: abstracts.length, chunkTarget };
    const cacheKey = createHash('sha256')
      .update(JSON.stringify({ plan, modelKey, chunkTokens: probeConfig.ingestion.chunkTokens, overlap: probeConfig.ingestion.overlapTokens, version: LATENCY_STORE_VERSION }))
      .digest('hex')
      .slice(0, 12);
    const storeDir = useCache ? path.join(cacheDir, `answers-latency-${cacheKey}`) : await mkdtemp(path.join(os.tmpdir(), 'kb-bench-answers-latency-'));
    const manifestPath = path.join(storeDir, 'bench-manifest.json');
    let manifest: LatencyManifest | undefined;
    if (useCache && existsSync(manifestPath)) manifest = JSON.parse(await readFile(manifestPath, 'utf8')) as LatencyManifest;
    else if (useCache) await rm(storeDir, { recursive: true, force: true });
    await mkdir(storeDir, { recursive: true });
    const config = loadConfig({ ...baseEnvironment, KB_DATA_DIR: storeDir });
    log(`latency store: ${useCache ? `${path.relative(process.cwd(), storeDir)}${manifest ? ' (reused)' : ' (new, kept for later runs)'}` : storeDir}`);
    const app = await startApp(config);
    const sessions: string[] = [];
    const cleanUp = async () => {
      if (useCache && manifest) {
        // Keep the cached store as it was built: the runs' chat sessions go.
        const client = new BenchClient(app.url, manifest.key);
        for (const sessionId of sessions) await client.json('DELETE', `/v1/chat/sessions/${sessionId}`).catch(() => {});
      }
      await app.close().catch((error: unknown) => log(`could not close the service: ${String(error)}`));
      if (!useCache) await rm(storeDir, { recursive: true, force: true });
    };
    const stopListening = cleanUpOnInterrupt(cleanUp);
    try {
      const reused = manifest !== undefined;
      if (manifest) {
        const stats = await new BenchClient(app.url, manifest.key).stats(manifest.workspaceId).catch(() => undefined);
        if (!stats || stats.chunk_count !== manifest.chunks) {
          throw new Error(`the cached store in ${storeDir} is not usable (${stats ? `${stats.chunk_count} chunks, ${manifest.chunks} expected` : 'its workspace cannot be read'}); delete that directory and run again`);
        }
        log(`latency workspace reused: ${manifest.chunks} chunks in ${manifest.documents} documents (built in ${manifest.seconds.toFixed(0)} s)`);
      } else {
        manifest = await buildLatencyWorkspace(app, config, abstracts, plan, modelKey);
        if (useCache) await writeFile(manifestPath, JSON.stringify(manifest, null, 1));
      }
      await app.warmed;
      await waitForGraphMerge(app);
      const client = new BenchClient(app.url, manifest.key);
      const measured = await runLatency(client, manifest.workspaceId, scifact.queries, latencyRuns);
      for (const run of [...measured.warmup, ...measured.runs.map((entry) => entry.run)]) if (run.sessionId) sessions.push(run.sessionId);
      latency = { runs: measured.runs, loadBefore: measured.loadBefore, loadAfter: measured.loadAfter, manifest, reused, storeDir, docsPerCopy: abstracts.length };
    } finally {
      stopListening();
      await cleanUp();
    }
  }
  const loadAtEnd = loadNow();

  // ----- report
  const squadStats = squadResults.length > 0 ? squadSummary(squadResults) : undefined;
  const hotpotStats = hotpotResults.length > 0 ? { fast: hotpotSummary(hotpotResults, 'fast'), deep: hotpotSummary(hotpotResults, 'deep') } : undefined;
  const deepGainPoints = hotpotStats ? 100 * (hotpotStats.deep.bothCited - hotpotStats.fast.bothCited) : NaN;
  const latencyStats = latency ? { fast: timingsOf(latency.runs.filter((r) => r.mode === 'fast').map((r) => r.run)), deep: timingsOf(latency.runs.filter((r) => r.mode === 'deep').map((r) => r.run)) } : undefined;
  const smallLatencyWorkspace = latency !== undefined && latency.manifest.chunks < TARGET_LATENCY_CHUNKS;

  const verdicts = {
    squadContainment: squadStats ? verdict(squadStats.containment >= TARGET_SQUAD_CONTAINMENT, squadSubset ? 'subset' : null) : 'skipped',
    hotpotDeepGain: hotpotStats ? verdict(deepGainPoints >= TARGET_DEEP_GAIN_POINTS, hotpotSubset ? 'subset' : null) : 'skipped',
    ttftFastP50: latencyStats ? verdict(latencyStats.fast.ttftP50 < TARGET_TTFT_P50_MS, smallLatencyWorkspace ? `only ${latency!.manifest.chunks} chunks` : null) : 'skipped',
  };

  const summaryHeaders = ['measure', 'measured', 'target', 'verdict'];
  const summaryRows: string[][] = [
    [
      `SQuAD answerable: answer contains a gold answer (fast${squadSubset ? ', SUBSET' : ''})`,
      squadStats ? share(squadStats.contains, squadStats.answerable) : 'skipped',
      `>= ${pct(TARGET_SQUAD_CONTAINMENT)}`,
      verdicts.squadContainment,
    ],
    [
      'SQuAD answerable: the first sentence contains a gold answer',
      squadStats ? share(squadStats.firstSentenceContains, squadStats.answerable) : 'skipped',
      `>= ${pct(TARGET_SQUAD_FIRST_SENTENCE)}`,
      squadStats ? verdict(squadStats.firstSentenceContains / squadStats.answerable >= TARGET_SQUAD_FIRST_SENTENCE, squadSubset ? 'subset' : null) : 'skipped',
    ],
    ['SQuAD unanswerable: answered "not found"', squadStats ? share(squadStats.unanswerableNotFound, squadStats.unanswerable) : 'skipped', '', ''],
    ['SQuAD answerable: wrongly answered "not found"', squadStats ? share(squadStats.answerableNotFound, squadStats.answerable) : 'skipped', '', ''],
    [
      `HotpotQA both paragraphs cited, fast / deep${hotpotSubset ? ' (SUBSET)' : ''}`,
      hotpotStats ? `${pct(hotpotStats.fast.bothCited)} / ${pct(hotpotStats.deep.bothCited)}` : 'skipped',
      `>= ${pct(TARGET_HOTPOT_FAST)} / >= ${pct(TARGET_HOTPOT_DEEP)}`,
      hotpotStats
        ? `${verdict(hotpotStats.fast.bothCited >= TARGET_HOTPOT_FAST, hotpotSubset ? 'subset' : null)} / ${verdict(hotpotStats.deep.bothCited >= TARGET_HOTPOT_DEEP, hotpotSubset ? 'subset' : null)}`
        : 'skipped',
    ],
    ['HotpotQA deep - fast, both paragraphs cited', hotpotStats ? `${deepGainPoints >= 0 ? '+' : ''}${deepGainPoints.toFixed(1)} points` : 'skipped', `>= +${TARGET_DEEP_GAIN_POINTS} points`, verdicts.hotpotDeepGain],
    [
      `time to first token p50, fast (${latency ? `${latency.manifest.chunks.toLocaleString('en-US')} chunks` : 'latency part'})`,
      latencyStats ? `${ms(latencyStats.fast.ttftP50)} ms` : 'skipped',
      `< ${TARGET_TTFT_P50_MS} ms`,
      verdicts.ttftFastP50,
    ],
    ['time to first token p50, deep', latencyStats ? `${ms(latencyStats.deep.ttftP50)} ms` : 'skipped', '', ''],
  ];

  const squadHeaders = ['SQuAD 2.0, fast mode', 'share', 'count'];
  const squadRows: string[][] = squadStats
    ? [
        ['answerable: answer contains a gold answer', pct(squadStats.containment), `${squadStats.contains}/${squadStats.answerable}`],
        ['answerable: wrongly answered "not found"', pct(squadStats.answerableNotFoundRate), `${squadStats.answerableNotFound}/${squadStats.answerable}`],
        ['answerable: the gold paragraph is cited', pct(squadStats.answerable === 0 ? NaN : squadStats.goldParagraphCited / squadStats.answerable), `${squadStats.goldParagraphCited}/${squadStats.answerable}`],
        ['unanswerable: answered "not found"', pct(squadStats.unanswerableNotFoundRate), `${squadStats.unanswerableNotFound}/${squadStats.unanswerable}`],
        ['runs that failed (error event, no done)', '', String(squadStats.errors)],
        ['mean support_score (answers with one)', fixed(squadStats.meanSupportScore), ''],
        ['mean words per answer (not "not found")', fixed(squadStats.meanAnswerWords, 1), ''],
        ['time to first token p50 / p95, ms', `${ms(squadStats.timings.ttftP50)} / ${ms(squadStats.timings.ttftP95)}`, ''],
        ['time to done p50 / p95, ms', `${ms(squadStats.timings.doneP50)} / ${ms(squadStats.timings.doneP95)}`, ''],
      ]
    : [];

  const hotpotHeaders = ['HotpotQA mode', 'both cited', 'at least one', 'answer contains gold', '"not found"', 'words/answer', 'sources/answer', 'support_score', 'reasoning steps', 'p50 ms (done)', 'p50 ms (1st token)', 'failed'];
  const hotpotRow = (mode: Mode) => {
    const s = hotpotStats![mode];
    return [mode, pct(s.bothCited), pct(s.anyCited), pct(s.contains), pct(s.notFound), fixed(s.meanAnswerWords, 1), fixed(s.meanSources), `${fixed(s.meanSupportScore)}${s.supportScoreNull > 0 ? ` (${s.supportScoreNull} null)` : ''}`, fixed(s.meanReasoningSteps, 1), ms(s.timings.doneP50), ms(s.timings.ttftP50), String(s.timings.errors)];
  };
  const points = (a: number, b: number) => `${b - a >= 0 ? '+' : ''}${(100 * (b - a)).toFixed(1)} pt`;
  const hotpotRows: string[][] = hotpotStats
    ? [
        hotpotRow('fast'),
        hotpotRow('deep'),
        [
          'deep - fast',
          points(hotpotStats.fast.bothCited, hotpotStats.deep.bothCited),
          points(hotpotStats.fast.anyCited, hotpotStats.deep.anyCited),
          points(hotpotStats.fast.contains, hotpotStats.deep.contains),
          points(hotpotStats.fast.notFound, hotpotStats.deep.notFound),
          fixed(hotpotStats.deep.meanAnswerWords - hotpotStats.fast.meanAnswerWords, 1),
          fixed(hotpotStats.deep.meanSources - hotpotStats.fast.meanSources),
          fixed(hotpotStats.deep.meanSupportScore - hotpotStats.fast.meanSupportScore),
          '',
          ms(hotpotStats.deep.timings.doneP50 - hotpotStats.fast.timings.doneP50),
          '',
          '',
        ],
      ]
    : [];
  const typeHeaders = ['HotpotQA by type', 'questions', 'both cited fast', 'both cited deep', 'contains fast', 'contains deep'];
  const typeRows: string[][] = hotpotStats
    ? [...new Set(hotpotResults.map((result) => result.type))].sort().map((type) => {
        const ofType = hotpotResults.filter((result) => result.type === type);
        const fast = hotpotSummary(ofType, 'fast');
        const deep = hotpotSummary(ofType, 'deep');
        return [type, String(ofType.length), pct(fast.bothCited), pct(deep.bothCited), pct(fast.contains), pct(deep.contains)];
      })
    : [];

  const latencyHeaders = ['/agent/stream latency', 'runs', 'failed', 'job_started p50', '1st token p50', '1st token p95', 'done p50', 'done p95', 'target'];
  const latencyRows: string[][] = latencyStats
    ? modes.map((mode) => {
        const t = latencyStats[mode];
        return [mode, String(t.runs), String(t.errors), ms(t.jobStartedP50), ms(t.ttftP50), ms(t.ttftP95), ms(t.doneP50), ms(t.doneP95), mode === 'fast' ? `1st token p50 < ${TARGET_TTFT_P50_MS}: ${verdicts.ttftFastP50}` : ''];
      })
    : [];

  const failures = [
    ...squadResults.flatMap((result) => (result.run.error ? [`SQuAD ${result.id}: ${result.run.error.code} ${result.run.error.message}`] : [])),
    ...hotpotResults.flatMap((result) => modes.flatMap((mode) => (result.runs[mode].run.error ? [`HotpotQA ${result.id} ${mode}: ${result.runs[mode].run.error!.code} ${result.runs[mode].run.error!.message}`] : []))),
    ...(latency?.runs.flatMap((entry) => (entry.run.error ? [`latency ${entry.mode}: ${entry.run.error.code} ${entry.run.error.message}`] : [])) ?? []),
  ];
  const notes = [
    `Answer model: ${answerModel}; embedder ${modelKey}; embedded store (PGlite, pgvector); chunks of ${probeConfig.ingestion.chunkTokens} tokens, ${probeConfig.ingestion.overlapTokens} overlap. Every request is sent alone; times are the client's, from just before the request is sent until the read that completed the event returned (loopback HTTP).`,
    `Checks: answers are the stream's token contents concatenated; citation markers [n] are removed, then SQuAD's normalisation (lower case, punctuation and articles removed); "contains" means a normalised gold answer occurs in the normalised answer as whole words, so a longer answer has more chances (words per answer are shown beside). "Not found" means the answer is exactly "${notFoundAnswer}". A run that failed counts as neither containing nor "not found".`,
    squadStats
      ? `SQuAD: ${ingests.squad!.documents} paragraphs as documents (${ingests.squad!.chunks} chunks) in one workspace; ${squadResults.length} questions${squadSubset ? ` (SUBSET: ${squadResults.length} of ${squad.questions.length}, picked evenly over the file)` : ''}, fast mode. Load average ${loads.squad![0]} before, ${loads.squad![1]} after.`
      : 'SQuAD: skipped (BENCH_ANSWERS_SQUAD_QUESTIONS=0).',
    hotpotStats
      ? `HotpotQA: ${ingests.hotpot!.documents} paragraphs as documents (${ingests.hotpot!.chunks} chunks; file name = encodeURIComponent(title).txt) in one workspace; ${hotpotResults.length} questions${hotpotSubset ? ` (SUBSET: the first ${hotpotResults.length} of ${hotpot.questions.length})` : ''}, each in fast and deep mode, the first mode alternating. "Both cited": every supporting title is among the titles of the answer's sources; sources/answer counts documents cited. Load average ${loads.hotpot![0]} before, ${loads.hotpot![1]} after.`
      : 'HotpotQA: skipped (BENCH_ANSWERS_HOTPOT_QUESTIONS=0).',
    latency
      ? `Latency: one workspace of ${latency.manifest.chunks.toLocaleString('en-US')} chunks in ${latency.manifest.documents.toLocaleString('en-US')} documents (${latency.manifest.copies} cop${latency.manifest.copies === 1 ? 'y' : 'ies'} of ${latency.docsPerCopy} SciFact abstracts, copies after the first with "(copy n)" after the title)${smallLatencyWorkspace ? `, SMALLER than the ${TARGET_LATENCY_CHUNKS.toLocaleString('en-US')} chunks the target is for` : ''}; ${latency.reused ? `reused from ${path.relative(process.cwd(), latency.storeDir)} (built in ${latency.manifest.seconds.toFixed(0)} s)` : `built in ${latency.manifest.seconds.toFixed(0)} s${useCache ? `, kept in ${path.relative(process.cwd(), latency.storeDir)}` : ''}`}. ${WARMUP_RUNS_PER_MODE} warm-up runs per mode, then ${latencyRuns} per mode, fast and deep alternating (the first mode alternating too), each a different SciFact test query. Deep mode streams its tokens only after its answer is verified, so its first token comes shortly before done. Load average ${latency.loadBefore} before, ${latency.loadAfter} after.`
      : 'Latency: skipped (BENCH_ANSWERS_SKIP_LATENCY=1).',
    failures.length > 0 ? `Failed runs (${failures.length}): ${failures.slice(0, 5).join('; ')}${failures.length > 5 ? '; ...' : ''}` : 'No run failed.',
    `Load average at start ${loadAtStart}, at end ${loadAtEnd}. ${machine}.`,
  ];

  const anySubset = squadSubset || hotpotSubset || smallLatencyWorkspace;
  const out = (text: string) => process.stdout.write(text);
  out(`\nAgent answers (${answerModel}, ${modelKey}, embedded store)${anySubset ? ' -- SUBSET RUN, not the full benchmark' : ''}\n\n`);
  out(`${textTable(summaryHeaders, summaryRows, (column) => column === 1)}\n\n`);
  if (squadStats) out(`${textTable(squadHeaders, squadRows)}\n\n`);
  if (hotpotStats) out(`${textTable(hotpotHeaders, hotpotRows)}\n\n${textTable(typeHeaders, typeRows)}\n\n`);
  if (latencyStats) out(`${textTable(latencyHeaders, latencyRows, (column) => column > 0 && column < 8)}\n\n`);
  out(`${notes.map((note) => `- ${note}`).join('\n')}\n`);
  out(`load average at end: ${loadAtEnd}\n`);

  const date = new Date().toISOString().slice(0, 10);
  const json = {
    date,
    machine,
    answerModel,
    embedder: modelKey,
    store: 'embedded store (PGlite)',
    settings: { chunkTokens: probeConfig.ingestion.chunkTokens, overlapTokens: probeConfig.ingestion.overlapTokens, agentCost: probeConfig.agentCost, latencyRunsPerMode: latencyRuns, warmupRunsPerMode: WARMUP_RUNS_PER_MODE },
    subset: { squad: squadSubset, hotpot: hotpotSubset, latencyWorkspaceBelowTarget: smallLatencyWorkspace },
    load: { start: loadAtStart, end: loadAtEnd, ...loads, ...(latency ? { latency: [latency.loadBefore, latency.loadAfter] } : {}) },
    targets: { squadContainment: TARGET_SQUAD_CONTAINMENT, hotpotDeepGainPoints: TARGET_DEEP_GAIN_POINTS, ttftFastP50Ms: TARGET_TTFT_P50_MS, latencyChunks: TARGET_LATENCY_CHUNKS },
    verdicts,
    ingest: ingests,
    squad: squadStats
      ? {
          summary: squadStats,
          questions: squadResults.map(({ run, ...result }) => ({ ...result, ...runRecord(run) })),
        }
      : null,
    hotpot: hotpotStats
      ? {
          summary: { ...hotpotStats, deepMinusFastBothCitedPoints: deepGainPoints },
          questions: hotpotResults.map(({ runs, ...result }) => ({
            ...result,
            runs: Object.fromEntries(modes.map((mode) => [mode, { ...runRecord(runs[mode].run), citedTitles: runs[mode].citedTitles, bothCited: runs[mode].bothCited, anyCited: runs[mode].anyCited, contains: runs[mode].contains }])),
          })),
        }
      : null,
    latency: latency
      ? {
          workspace: { chunks: latency.manifest.chunks, documents: latency.manifest.documents, copies: latency.manifest.copies, abstractsPerCopy: latency.docsPerCopy, reused: latency.reused, buildSeconds: latency.manifest.seconds },
          summary: latencyStats,
          runs: latency.runs.map((entry) => ({ mode: entry.mode, query: entry.query, ...runRecord(entry.run), citedFiles: entry.run.sources.map((source) => source.filename) })),
        }
      : null,
    notes,
  };
  const section = (heading: string, headers: string[], rows: string[][]) => (rows.length === 0 ? '' : `<h2>${heading}</h2>\n${htmlTable(headers, rows)}\n`);
  const html = resultPage({
    title: 'Agent answers benchmark',
    heading: `Agent answers${anySubset ? ' (subset run)' : ''}`,
    meta: `${date} · ${machine} · ${answerModel} · ${modelKey} · embedded store`,
    body: [
      section('Summary', summaryHeaders, summaryRows),
      section('SQuAD 2.0', squadHeaders, squadRows),
      section('HotpotQA', hotpotHeaders, hotpotRows),
      section('HotpotQA by question type', typeHeaders, typeRows),
      section(`Latency through /agent/stream (ms)${latency ? `, ${latency.manifest.chunks.toLocaleString('en-US')} chunks` : ''}`, latencyHeaders, latencyRows),
    ].join(''),
    notes,
  });
  await writeResults('answers', json, html);
}

runBenchmark(main);
