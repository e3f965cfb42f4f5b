/**
 * `npm run bench:financebench`: search and answers on long filings with tables, as a user would
 * meet them. The FinanceBench development split (../shared/bench-data/financebench_dev: 42
 * analyst questions about 10 companies, 24 filings) through the HTTP API of the service started
 * in this process on the embedded store:
 *
 *   1. The 24 PDFs uploaded into ONE workspace (several filings of the same company side by
 *      side); ingest time and chunks.
 *   2. Each question through `POST /v1/kb/query` (hybrid, top_k 10): the evidence page (the
 *      filing and a page the benchmark gives as evidence, counted from 1) among the first 1, 5
 *      and 10 results; the right filing first; the right filing among the 10.
 *   3. Each question through `POST /agent/stream` in fast and in deep mode: a cited source on an
 *      evidence page; the gold figure in the answer (every number of the gold answer, and of
 *      figures given in millions or billions the other scale too, matched after rounding to the
 *      answer's precision); latency.
 *
 * Targets (issue 25): evidence page in the top 10 >= 60 %, right filing first >= 80 %, fast
 * answers citing the evidence page >= 40 %.
 *
 * Knobs: BENCH_FINANCEBENCH_QUESTIONS (all 42; fewer are the first ones), BENCH_FINANCEBENCH_ANSWERS
 * (1; 0 skips part 3). Tables go to stdout, progress to stderr; bench/results/financebench.json
 * (every question with its results, answers and checks) and financebench.html are written.
 */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { benchData, type AgentRun } from './answers-data.js';
import {
  cleanUpOnInterrupt,
  htmlTable,
  intFromEnv,
  loadNow,
  log,
  machineDescription,
  percentile,
  progressBar,
  resultPage,
  runBenchmark,
  textTable,
  writeResults,
} from './helpers.js';
import { BenchClient, ingest, newUser, type AgentMode, type IngestResult } from './in-process-service.js';

const TARGET_PAGE_TOP10 = 0.6;
const TARGET_DOCUMENT_FIRST = 0.8;
const TARGET_FAST_CITES_PAGE = 0.4;
const TOP_K = 10;

const dataDir = path.join(benchData, 'financebench_dev');

type Evidence = { doc_name: string; evidence_page_num: number; evidence_text: string };
type Question = { financebench_id: string; question: string; answer: string; question_type: string; doc_name: string; evidence: Evidence[] };

type SearchHit = { filename: string; chunk_index: number; score: number; metadata: { page?: number | null; pages?: number[] } };

type SearchCheck = {
  /** Rank (1-based) of the first result on an evidence page, or null. */
  evidenceRank: number | null;
  documentFirst: boolean;
  documentInTop: boolean;
  top: { filename: string; pages: number[]; score: number }[];
  ms: number;
};

type AnswerCheck = {
  citesEvidencePage: boolean;
  citesDocument: boolean;
  goldNumber: boolean | null;
  answer: string;
  cited: { filename: string; pages: number[] }[];
  firstTokenMs: number | null;
  doneMs: number | null;
  error: string | null;
};

type Result = Question & { search: SearchCheck; answers: Partial<Record<AgentMode, AnswerCheck>> };

const pdfName = (docName: string) => `${docName}.pdf`;

/** Pages (from 1) that hold the question's evidence, per filing. */
function evidencePages(question: Question): Map<string, Set<number>> {
  const pages = new Map<string, Set<number>>();
  for (const evidence of question.evidence) {
    const name = pdfName(evidence.doc_name);
    if (!pages.has(name)) pages.set(name, new Set());
    pages.get(name)!.add(evidence.evidence_page_num + 1);
  }
  return pages;
}

const pagesOf = (hit: SearchHit) => hit.metadata.pages ?? (typeof hit.metadata.page === 'number' ? [hit.metadata.page] : []);

function onEvidence(evidence: Map<string, Set<number>>, filename: string, pages: readonly number[]) {
  const wanted = evidence.get(filename);
  return wanted !== undefined && pages.some((page) => wanted.has(page));
}

/** Numbers written in a text: `$1,577.00` is 1577, `(2.3)` is 2.3, `12%` is 12. */
function numbersIn(text: string): { value: number; decimals: number }[] {
  const found: { value: number; decimals: number }[] = [];
  for (const match of text.matchAll(/(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![\w.,])\d+(?:\.\d+)?/g)) {
    const plain = match[0].replace(/,/g, '');
    const decimals = plain.includes('.') ? plain.split('.')[1]!.length : 0;
    found.push({ value: Number(plain), decimals });
  }
  return found;
}

/**
 * Whether the answer states one of the gold answer's figures: a number of the answer equal to a
 * gold number when both are rounded to the coarser of their precisions, or a gold figure in
 * millions or billions written in the other scale. Null when the gold answer has no figure.
 */
export function statesGoldNumber(answer: string, gold: string): boolean | null {
  const wanted = numbersIn(gold).filter((number) => number.value !== 0);
  if (wanted.length === 0) return null;
  const stated = numbersIn(answer);
  const candidates = wanted.flatMap((number) => [number, { value: number.value * 1000, decimals: Math.max(0, number.decimals - 3) }, { value: number.value / 1000, decimals: number.decimals + 3 }]);
  return candidates.some((goldNumber) =>
    stated.some((number) => {
      const decimals = Math.min(goldNumber.decimals, number.decimals);
      const round = (value: number) => Math.round(value * 10 ** decimals);
      return round(number.value) === round(goldNumber.value);
    }),
  );
}

function checkSearch(question: Question, hits: readonly SearchHit[], ms: number): SearchCheck {
  const evidence = evidencePages(question);
  const rankIndex = hits.findIndex((hit) => onEvidence(evidence, hit.filename, pagesOf(hit)));
  const wanted = pdfName(question.doc_name);
  return {
    evidenceRank: rankIndex === -1 ? null : rankIndex + 1,
    documentFirst: hits[0]?.filename === wanted,
    documentInTop: hits.some((hit) => hit.filename === wanted),
    top: hits.map((hit) => ({ filename: hit.filename, pages: pagesOf(hit), score: hit.score })),
    ms,
  };
}

function checkAnswer(question: Question, run: AgentRun): AnswerCheck {
  const evidence = evidencePages(question);
  const cited = run.sources.map((source) => ({ filename: source.filename, pages: source.pages.length > 0 ? source.pages : source.passages.flatMap((passage) => (passage.page === null ? [] : [passage.page])) }));
  return {
    citesEvidencePage: cited.some((source) => onEvidence(evidence, source.filename, source.pages)),
    citesDocument: cited.some((source) => source.filename === pdfName(question.doc_name)),
    goldNumber: statesGoldNumber(run.answer, question.answer),
    answer: run.answer,
    cited,
    firstTokenMs: run.firstTokenMs,
    doneMs: run.doneMs,
    error: run.error ? `${run.error.code}: ${run.error.message}` : null,
  };
}

// ---------------------------------------------------------------------------------------------

const pct = (count: number, total: number) => (total === 0 ? '-' : `${((100 * count) / total).toFixed(1)} % (${count}/${total})`);
const verdict = (value: number, target: number) => (value >= target ? 'PASS' : 'MISS');

function summaries(results: readonly Result[], answerModes: readonly AgentMode[]) {
  const total = results.length;
  const within = (k: number) => results.filter((result) => result.search.evidenceRank !== null && result.search.evidenceRank <= k).length;
  const figureQuestions = results.filter((result) => result.question_type === 'metrics-generated');
  const searchRows: string[][] = [
    ['evidence page, first result', pct(within(1), total), ''],
    ['evidence page in the top 5', pct(within(5), total), ''],
    ['evidence page in the top 10', pct(within(10), total), `>= 60 %: ${verdict(within(10) / total, TARGET_PAGE_TOP10)}`],
    [
      '  of figure questions (metrics-generated)',
      pct(figureQuestions.filter((result) => result.search.evidenceRank !== null).length, figureQuestions.length),
      '',
    ],
    ['right filing first', pct(results.filter((result) => result.search.documentFirst).length, total), `>= 80 %: ${verdict(results.filter((result) => result.search.documentFirst).length / total, TARGET_DOCUMENT_FIRST)}`],
    ['right filing in the top 10', pct(results.filter((result) => result.search.documentInTop).length, total), ''],
    ['search p50 / p95 (client)', `${percentile(results.map((result) => result.search.ms), 50).toFixed(0)} / ${percentile(results.map((result) => result.search.ms), 95).toFixed(0)} ms`, ''],
  ];
  const answerRows = answerModes.map((mode) => {
    const checks = results.map((result) => result.answers[mode]!);
    const withFigure = checks.filter((check) => check.goldNumber !== null);
    const firstTokens = checks.flatMap((check) => (check.firstTokenMs === null ? [] : [check.firstTokenMs]));
    const dones = checks.flatMap((check) => (check.doneMs === null ? [] : [check.doneMs]));
    const cites = checks.filter((check) => check.citesEvidencePage).length;
    return [
      mode,
      pct(cites, total) + (mode === 'fast' ? ` ${verdict(cites / total, TARGET_FAST_CITES_PAGE)}` : ''),
      pct(checks.filter((check) => check.citesDocument).length, total),
      pct(withFigure.filter((check) => check.goldNumber).length, withFigure.length),
      `${percentile(firstTokens, 50).toFixed(0)} ms`,
      `${percentile(dones, 50).toFixed(0)} ms`,
      String(checks.filter((check) => check.error !== null).length),
    ];
  });
  return { searchRows, answerRows };
}

const answerHeaders = ['mode', 'cites the evidence page (>= 40 % fast)', 'cites the right filing', 'gold figure in the answer', 'first token p50', 'done p50', 'errors'];

async function main() {
  const questionLimit = intFromEnv('BENCH_FINANCEBENCH_QUESTIONS', Number.MAX_SAFE_INTEGER);
  const withAnswers = intFromEnv('BENCH_FINANCEBENCH_ANSWERS', 1, 0) > 0;
  const answerModes: AgentMode[] = withAnswers ? ['fast', 'deep'] : [];
  const questions = (await readFile(path.join(dataDir, 'questions.jsonl'), 'utf8'))
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as Question)
    .slice(0, questionLimit);
  const pdfNames = (await readdir(path.join(dataDir, 'pdfs'))).filter((name) => name.endsWith('.pdf')).sort();
  const files = await Promise.all(pdfNames.map(async (name) => ({ name, bytes: new Uint8Array(await readFile(path.join(dataDir, 'pdfs', name))) })));

  const { DATABASE_URL: _databaseUrl, ELASTICSEARCH_URL: _elasticsearchUrl, ...environment } = process.env;
  const storeDir = await mkdtemp(path.join(os.tmpdir(), 'kb-bench-financebench-'));
  const config = loadConfig({ ...environment, KB_DATA_DIR: storeDir, HOST: '127.0.0.1', PORT: '0', KB_LOG_LEVEL: 'silent', KB_SEARCH_RATE_PER_MINUTE: String(1_000_000) });
  const answerModel = config.openai.baseUrl && config.openai.chatModel ? `OpenAI-compatible ${config.openai.chatModel}` : 'embedded extractive answerer';
  const machine = machineDescription();
  log(`FinanceBench dev on ${machine}; load average ${loadNow()}; answer model: ${answerModel}; store: embedded`);
  const app = await startApp(config);
  const cleanUp = async () => {
    await app.close().catch((error: unknown) => log(`could not close the service: ${String(error)}`));
    await rm(storeDir, { recursive: true, force: true });
  };
  const stopListening = cleanUpOnInterrupt(cleanUp);
  const results: Result[] = [];
  let ingested: IngestResult;
  try {
    const { key } = await newUser(app, 'FinanceBench benchmark');
    const client = new BenchClient(app.url, key);
    const workspaceId = await client.workspace('FinanceBench dev filings');
    ingested = await ingest(app, client, workspaceId, files, `${files.length} filings`, config.uploads.maxFiles);
    await app.warmed;

    const bar = progressBar(`questions (search${withAnswers ? ', fast, deep' : ''}) |{bar}| {value}/{total} | {duration_formatted} | eta {eta_formatted}`);
    bar.start(questions.length, 0);
    for (const question of questions) {
      const started = performance.now();
      const { results: hits } = await client.json<{ results: SearchHit[] }>('POST', '/v1/kb/query', { workspace_id: workspaceId, query: question.question, top_k: TOP_K });
      const result: Result = { ...question, search: checkSearch(question, hits, performance.now() - started), answers: {} };
      for (const mode of answerModes) result.answers[mode] = checkAnswer(question, await client.ask(question.question, workspaceId, mode));
      results.push(result);
      bar.increment();
    }
    bar.stop();
  } finally {
    stopListening();
    await cleanUp();
  }

  const { searchRows, answerRows } = summaries(results, answerModes);
  const ingestLine = `ingest: ${ingested.documents} filings, ${ingested.chunks} chunks, ready in ${ingested.seconds.toFixed(1)} s (${(ingested.chunks / ingested.seconds).toFixed(1)} chunks/s)`;
  process.stdout.write(`\nFinanceBench dev: ${results.length} questions, ${files.length} filings in one workspace (${machine})\n${ingestLine}\n\n`);
  process.stdout.write(`${textTable(['search (hybrid, top 10)', 'measured', 'target'], searchRows)}\n`);
  if (answerRows.length > 0) process.stdout.write(`\n${textTable(answerHeaders, answerRows)}\n`);

  const questionRows = results.map((result) => [
    result.doc_name,
    result.question.slice(0, 140),
    result.answer.slice(0, 80),
    result.search.evidenceRank === null ? '-' : String(result.search.evidenceRank),
    result.search.documentFirst ? 'yes' : result.search.top[0]?.filename ?? '-',
    ...answerModes.map((mode) => `${result.answers[mode]!.citesEvidencePage ? 'page' : '-'} / ${result.answers[mode]!.goldNumber === null ? 'n/a' : result.answers[mode]!.goldNumber ? 'figure' : '-'}: ${result.answers[mode]!.answer.slice(0, 160)}`),
  ]);
  const body = `<h2>Search</h2>${htmlTable(['search (hybrid, top 10)', 'measured', 'target'], searchRows)}
${answerRows.length > 0 ? `<h2>Answers</h2>${htmlTable(answerHeaders, answerRows)}` : ''}
<h2>Questions</h2>${htmlTable(['filing', 'question', 'gold answer', 'evidence rank', 'first result', ...answerModes.map((mode) => `${mode}: page / figure: answer`)], questionRows)}`;
  await writeResults(
    'financebench',
    { machine, answerModel, ingest: ingested, results },
    resultPage({ title: 'FinanceBench dev', heading: 'FinanceBench dev: search and answers on 24 filings in one workspace', meta: `${machine}; ${answerModel}; ${ingestLine}`, body, notes: [] }),
  );
}

runBenchmark(main);
