import type { Passage } from '../retrieval/service.js';

export type AgentMode = 'fast' | 'deep';

/** A retrieved passage as the answer model sees it: numbered for citation as `[number]`. */
export type NumberedPassage = Passage & { number: number; page: number | null; /** The deep-research hop that found it (0 for fast mode). */ hop?: number };

export type Turn = { role: 'user' | 'assistant' | 'system'; content: string };

export type AnswerRequest = {
  question: string;
  passages: readonly NumberedPassage[];
  mode: AgentMode;
  signal: AbortSignal;
  clock: GenerationClock;
};

/**
 * The time one run's model calls have taken together (they are made one after another). A chat
 * model holds a run to its generation budget with it; the extractive answerer takes no time of it.
 */
export class GenerationClock {
  spentMs = 0;
}

/** What the next hop of deep research should search for; none when the evidence covers the question. */
export type NextQueries = { queries: string[]; reason: string };

/**
 * Writes answers from retrieved passages. One is chosen from configuration at start (select.ts):
 * an OpenAI-compatible chat model, or the embedded extractive answerer that needs no model server.
 */
export interface AnswerModel {
  readonly kind: 'extractive' | 'openai';
  /** The question made to stand alone from the conversation so far ("and its revenue?" → "Lyft revenue"). */
  rewrite(question: string, history: readonly Turn[], signal: AbortSignal, clock: GenerationClock): Promise<string>;
  /** Deep mode's first step: the searches a question needs (a comparison of two things needs two). */
  decompose(question: string, signal: AbortSignal, clock: GenerationClock): Promise<string[]>;
  /** Deep mode's next hop, from the question and the evidence found so far. */
  nextQueries(request: { question: string; evidence: readonly NumberedPassage[]; asked: readonly string[]; signal: AbortSignal; clock: GenerationClock }): Promise<NextQueries>;
  /** The answer as it is written, piece by piece; passages are cited as `[n]`. */
  answer(request: AnswerRequest): AsyncIterable<string>;
}

/** The answer model failed (server down, malformed reply); the run ends with an `error` event. */
export class AnswerModelError extends Error {
  override name = 'AnswerModelError';
}

export const notFoundAnswer = 'I could not find an answer to that in the selected workspaces.';

/**
 * The page of the text at `offset` in a chunk: the last page starting at or before it (the
 * chunker's `pageStarts`, kept for chunks that span pages), else the chunk's first page.
 */
export function pageAt(metadata: unknown, offset: number): number | null {
  const starts = (metadata as { pageStarts?: unknown } | null)?.pageStarts;
  let found: number | null = null;
  if (Array.isArray(starts)) {
    for (const start of starts as { page?: unknown; offset?: unknown }[]) {
      if (typeof start?.page !== 'number' || !Number.isInteger(start.page) || typeof start.offset !== 'number') continue;
      if (start.offset > offset) break;
      found = start.page;
    }
  }
  return found ?? pageOf(metadata);
}

/**
 * The cells of a spreadsheet's row that the text at `offset` in a chunk is on, as Excel names
 * them (`Revenue!A3:C3`, a sheet name with other characters than letters, digits and `_` in
 * quotes); null for a chunk of any other format, or text before the chunk's first row.
 */
export function cellsAt(metadata: unknown, offset: number): string | null {
  const { sheet, range, rowStarts } = (metadata ?? {}) as { sheet?: unknown; range?: unknown; rowStarts?: unknown };
  const columns = typeof range === 'string' ? /^([A-Z]+)\d+:([A-Z]+)\d+$/.exec(range) : null;
  if (typeof sheet !== 'string' || !columns || !Array.isArray(rowStarts)) return null;
  let row: number | null = null;
  for (const start of rowStarts as { row?: unknown; offset?: unknown }[]) {
    if (typeof start?.row !== 'number' || typeof start.offset !== 'number') continue;
    if (start.offset > offset) break;
    row = start.row;
  }
  if (row === null) return null;
  const name = /^[\p{L}\p{N}_]+$/u.test(sheet) ? sheet : `'${sheet.replaceAll("'", "''")}'`;
  return `${name}!${columns[1]}${row}:${columns[2]}${row}`;
}

/** The page a chunk comes from, when its format has pages. */
export function pageOf(metadata: unknown): number | null {
  const page = (metadata as { page?: unknown } | null)?.page;
  return typeof page === 'number' && Number.isInteger(page) ? page : null;
}
