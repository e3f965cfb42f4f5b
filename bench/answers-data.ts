/**
 * What bench/answers.ts reads and how it scores: the SQuAD 2.0, HotpotQA and SciFact files of
 * /work/shared/bench-data turned into documents and questions, the agent's stream read event by
 * event with its timings, and the answer checks (containment, "not found", cited paragraphs).
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { notFoundAnswer } from '../src/modules/agent/answer-model.js';
import { withoutMarkers } from '../src/modules/agent/citations.js';
import { normaliseAnswer } from '../src/modules/agent/text.js';

export const benchData = path.resolve(import.meta.dirname, '../../shared/bench-data');

/** A document to upload: its file name and text. */
export type TextFile = { name: string; bytes: string };

// ---------------------------------------------------------------------------------------------
// SQuAD 2.0

export type SquadQuestion = { id: string; question: string; answerable: boolean; gold: string[]; paragraphFile: string };

type SquadFile = {
  data: { title: string; paragraphs: { context: string; qas: { id: string; question: string; is_impossible?: boolean; answers: { text: string }[] }[] }[] }[];
};

/** Every paragraph as a document (`<article title> <n>.txt`, n from 1 in each article) and every question, in file order. */
export async function readSquad(): Promise<{ files: TextFile[]; questions: SquadQuestion[] }> {
  const squad = JSON.parse(await readFile(path.join(benchData, 'squad2_dev_subset/small.json'), 'utf8')) as SquadFile;
  const files: TextFile[] = [];
  const questions: SquadQuestion[] = [];
  for (const article of squad.data) {
    article.paragraphs.forEach((paragraph, index) => {
      const name = `${article.title.replace(/_/g, ' ')} ${index + 1}.txt`;
      files.push({ name, bytes: paragraph.context });
      for (const qa of paragraph.qas) {
        const answerable = qa.is_impossible !== true;
        questions.push({ id: qa.id, question: qa.question, answerable, gold: answerable ? [...new Set(qa.answers.map((answer) => answer.text))] : [], paragraphFile: name });
      }
    });
  }
  return { files, questions };
}

// ---------------------------------------------------------------------------------------------
// HotpotQA

export type HotpotQuestion = { id: string; question: string; answer: string; type: string; level: string; supportingTitles: string[] };

/** The file name of a HotpotQA paragraph: its title, reversibly (`titleOfFile`). */
export const hotpotFileName = (title: string) => `${encodeURIComponent(title)}.txt`;

/** The title a HotpotQA file name encodes; null for a name that is not one. */
export function titleOfFile(filename: string): string | null {
  if (!filename.endsWith('.txt')) return null;
  try {
    return decodeURIComponent(filename.slice(0, -'.txt'.length));
  } catch {
    return null;
  }
}

/** The 994 paragraphs as documents (`title + "\n\n" + sentences`) and the 100 questions, in file order. */
export async function readHotpot(): Promise<{ files: TextFile[]; questions: HotpotQuestion[] }> {
  const dir = path.join(benchData, 'hotpotqa_subset');
  const corpus = JSON.parse(await readFile(path.join(dir, 'hotpotqa_train_corpus.json'), 'utf8')) as Record<string, string[]>;
  const records = JSON.parse(await readFile(path.join(dir, 'hotpotqa_train.json'), 'utf8')) as {
    _id: string;
    question: string;
    answer: string;
    type: string;
    level: string;
    supporting_facts: [string, number][];
  }[];
  const files = Object.entries(corpus).map(([title, sentences]) => ({ name: hotpotFileName(title), bytes: `${title}\n\n${sentences.join('')}` }));
  const questions = records.map((record) => {
    const supportingTitles = [...new Set(record.supporting_facts.map(([title]) => title))];
    const missing = supportingTitles.find((title) => !Object.hasOwn(corpus, title));
    if (missing !== undefined) throw new Error(`HotpotQA question ${record._id}: its supporting paragraph ${JSON.stringify(missing)} is not in the corpus`);
    return { id: record._id, question: record.question, answer: record.answer, type: record.type, level: record.level, supportingTitles };
  });
  return { files, questions };
}

// ---------------------------------------------------------------------------------------------
// SciFact (the latency workspace)

export type Abstract = { id: string; title: string; text: string };

async function jsonLines<T>(file: string): Promise<T[]> {
  return (await readFile(file, 'utf8'))
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as T);
}

export async function readScifact(): Promise<{ abstracts: Abstract[]; queries: string[] }> {
  const dir = path.join(benchData, 'scifact');
  const abstracts = (await jsonLines<{ _id: string; title: string; text: string }>(path.join(dir, 'corpus.jsonl'))).map((record) => ({ id: record._id, title: record.title, text: record.text }));
  const queries = (await jsonLines<{ text: string }>(path.join(dir, 'queries_test.jsonl'))).map((query) => query.text);
  return { abstracts, queries };
}

/**
 * Copy `copy` (1, 2, ...) of the abstracts as documents. The service keeps one document per
 * content in a workspace, so copies after the first differ: their title line says which copy
 * they are (`<title> (copy 2)`), and their file name is `<_id>.copy2.txt`.
 */
export function abstractFiles(abstracts: readonly Abstract[], copy: number): TextFile[] {
  return abstracts.map((abstract) =>
    copy === 1
      ? { name: `${abstract.id}.txt`, bytes: `${abstract.title}\n\n${abstract.text}` }
      : { name: `${abstract.id}.copy${copy}.txt`, bytes: `${abstract.title} (copy ${copy})\n\n${abstract.text}` },
  );
}

// ---------------------------------------------------------------------------------------------
// Subsets

/** `count` items spread evenly over the list (all of them when count >= its length), in list order. */
export function spread<T>(items: readonly T[], count: number): T[] {
  if (count >= items.length) return [...items];
  return Array.from({ length: count }, (_, index) => items[Math.floor((index * items.length) / count)]!);
}

// ---------------------------------------------------------------------------------------------
// Scoring

/** The answer as the checks read it: citation markers taken out, then SQuAD's normalisation. */
export const normalisedAnswer = (answer: string) => normaliseAnswer(withoutMarkers(answer));

export const isNotFound = (answer: string) => answer.trim() === notFoundAnswer;

/**
 * Whether the normalised answer contains one of the normalised gold answers as a run of whole
 * words (so "10" is not found in "100"). A "not found" answer contains none.
 */
export function containsGold(answer: string, gold: readonly string[]): boolean {
  if (isNotFound(answer)) return false;
  const text = ` ${normalisedAnswer(answer)} `;
  return gold.map(normaliseAnswer).some((wanted) => wanted !== '' && text.includes(` ${wanted} `));
}

// ---------------------------------------------------------------------------------------------
// The agent's stream

export type StreamSource = {
  doc_id: string;
  filename: string;
  pages: number[];
  passages: { citation: number; chunk_index: number; page: number | null; quote: string; start: number; end: number }[];
};

export type AgentRun = {
  mode: 'fast' | 'deep';
  /** The tokens' contents, concatenated. */
  answer: string;
  sources: StreamSource[];
  supportScore: number | null;
  creditsUsed: number | null;
  sessionId: string | null;
  rewrittenQuery: string | null;
  reasoningSteps: number;
  tokens: number;
  /** From sending the request: the job_started event, the first token event, the done event (null when it did not come). */
  jobStartedMs: number | null;
  firstTokenMs: number | null;
  doneMs: number | null;
  /** Until the stream ended. */
  endMs: number;
  /** An error event, a refused request, a broken stream, or a stream that ended without `done`. */
  error: { code: string; message: string } | null;
};

type StreamEvent =
  | { type: 'job_started'; jobId: string }
  | { type: 'reasoning'; steps: unknown[] }
  | { type: 'token'; content: string }
  | { type: 'sources'; sources: StreamSource[] }
  | { type: 'done'; jobId: string; sessionId: string; creditsUsed: number; support_score: number | null; rewritten_query: string }
  | { type: 'error'; code: string; message: string };

/**
 * One question through `POST /agent/stream`, the stream read as it arrives. An event is timed
 * when the read that completed it returned, from just before the request was sent.
 */
export async function askAgent(
  baseUrl: string,
  key: string,
  body: { message: string; workspaceIds: string[]; mode: 'fast' | 'deep' },
  timeoutMs = 10 * 60_000,
): Promise<AgentRun> {
  const run: AgentRun = {
    mode: body.mode,
    answer: '',
    sources: [],
    supportScore: null,
    creditsUsed: null,
    sessionId: null,
    rewrittenQuery: null,
    reasoningSteps: 0,
    tokens: 0,
    jobStartedMs: null,
    firstTokenMs: null,
    doneMs: null,
    endMs: 0,
    error: null,
  };
  const started = performance.now();
  const since = () => performance.now() - started;
  let response: Response;
  try {
    response = await fetch(new URL('/agent/stream', baseUrl), {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (error) {
    run.endMs = since();
    run.error = { code: 'request_failed', message: String(error) };
    return run;
  }
  if (response.status !== 200 || !response.body) {
    const text = await response.text().catch(() => '');
    run.endMs = since();
    run.error = { code: `http_${response.status}`, message: text.slice(0, 500) };
    return run;
  }

  const handle = (event: StreamEvent, at: number) => {
    switch (event.type) {
      case 'job_started':
        run.jobStartedMs ??= at;
        break;
      case 'reasoning':
        run.reasoningSteps += event.steps.length;
        break;
      case 'token':
        run.firstTokenMs ??= at;
        run.tokens += 1;
        run.answer += event.content;
        break;
      case 'sources':
        run.sources = event.sources;
        break;
      case 'done':
        run.doneMs = at;
        run.supportScore = event.support_score;
        run.creditsUsed = event.creditsUsed;
        run.sessionId = event.sessionId;
        run.rewrittenQuery = event.rewritten_query;
        break;
      case 'error':
        run.error = { code: event.code, message: event.message };
        break;
    }
  };

  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffered = '';
  let data: string[] = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      const at = since();
      buffered += done ? decoder.decode() : decoder.decode(value, { stream: true });
      let newline: number;
      while ((newline = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, newline).replace(/\r$/, '');
        buffered = buffered.slice(newline + 1);
        if (line === '') {
          // A blank line ends an event.
          if (data.length > 0) handle(JSON.parse(data.join('\n')) as StreamEvent, at);
          data = [];
        } else if (line.startsWith(':')) {
          // A heartbeat.
        } else if (line.startsWith('data:')) {
          data.push(line.slice(5).replace(/^ /, ''));
        }
      }
      if (done) break;
    }
    if (data.length > 0) handle(JSON.parse(data.join('\n')) as StreamEvent, since());
  } catch (error) {
    run.error ??= { code: 'stream_failed', message: String(error) };
  } finally {
    reader.releaseLock();
  }
  run.endMs = since();
  if (run.doneMs === null && run.error === null) run.error = { code: 'no_done', message: 'the stream ended without a done event' };
  return run;
}
