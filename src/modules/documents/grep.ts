import { setImmediate as nextTurn } from 'node:timers/promises';
import { RE2JS, RE2JSException } from 're2js';
import { badRequest } from '../../errors.js';
import type { Access } from '../../auth/policy.js';
import { documentIdIn, type DocumentDependencies, type DocumentInWorkspace } from './service.js';

export const maxPatternLength = 1000;
const highlightStart = '<mark>';
const highlightEnd = '</mark>';

/**
 * Regular-expression search over a document's chunks with RE2 semantics: matching time is
 * linear in the text, so no pattern can stall the server. Empty matches are skipped.
 */
export type GrepPattern = { pattern: string; caseSensitive: boolean; expression: RE2JS };

/** Checks and compiles a grep pattern; a 400 comes before any lookup, as the contract orders errors. */
export function compileGrepPattern(pattern: string, caseSensitive: boolean): GrepPattern {
  if (pattern.length === 0) throw badRequest('pattern', 'must not be empty');
  if (pattern.length > maxPatternLength) throw badRequest('pattern', `must be at most ${maxPatternLength} characters`);
  try {
    return { pattern, caseSensitive, expression: RE2JS.compile(pattern, caseSensitive ? 0 : RE2JS.CASE_INSENSITIVE) };
  } catch (error) {
    if (error instanceof RE2JSException) throw badRequest('pattern', `invalid regular expression: ${syntaxErrorOf(pattern, error)}`);
    throw error;
  }
}

/** The compile error of the pattern as sent: compiled case-insensitively, RE2JS quotes it with a `(?i)` the user never typed. */
function syntaxErrorOf(pattern: string, error: RE2JSException): string {
  try {
    RE2JS.compile(pattern);
  } catch (plain) {
    if (plain instanceof RE2JSException) return plain.message;
  }
  return error.message;
}

/**
 * What one grep may return and spend. Matching stops at whichever comes first, and the result
 * says `truncated`: the caller asked for more than one answer should carry.
 */
export const grepLimits = {
  maxMatches: 1000,
  /** Characters of `content` and `highlighted` together, over all returned chunks. */
  maxResponseCharacters: 2_000_000,
  /** Wall-clock time spent reading and matching. */
  maxMilliseconds: 5_000,
};

/** Chunks read from the store at a time, so a document of any size is never held whole. */
const grepPageSize = 200;
/** Longest stretch of matching before other requests get the event loop back. */
const grepSliceMilliseconds = 10;

/** Greps a document the viewer may see in `workspaceId` (the pattern is compiled first: a 400 comes before a 404). */
export async function grepDocument(
  dependencies: Pick<DocumentDependencies, 'prisma'>,
  viewer: Access,
  where: DocumentInWorkspace,
  grep: GrepPattern,
  limits = grepLimits,
  signal?: AbortSignal,
) {
  return grepChunks(dependencies, await documentIdIn(dependencies, viewer, where), grep, limits, signal);
}

async function grepChunks(
  { prisma }: Pick<DocumentDependencies, 'prisma'>,
  documentId: string,
  { pattern, caseSensitive, expression }: GrepPattern,
  limits: typeof grepLimits,
  signal?: AbortSignal,
) {
  const started = performance.now();
  let sliceStarted = started;
  const matched = [];
  let totalMatches = 0;
  let responseCharacters = 0;
  let truncated = false;
  let nextIndex = 0;
  pages: for (;;) {
    const page = await prisma.chunk.findMany({
      where: { documentId, chunkIndex: { gte: nextIndex } },
      orderBy: { chunkIndex: 'asc' },
      take: grepPageSize,
      select: { chunkIndex: true, content: true, metadata: true },
    });
    for (const chunk of page) {
      signal?.throwIfAborted();
      if (performance.now() - sliceStarted > grepSliceMilliseconds) {
        await nextTurn();
        sliceStarted = performance.now();
      }
      if (performance.now() - started > limits.maxMilliseconds) {
        truncated = true;
        break pages;
      }
      const matches: { start: number; end: number }[] = [];
      const matcher = expression.matcher(chunk.content);
      while (matcher.find()) {
        if (matcher.end() === matcher.start()) continue;
        if (totalMatches + matches.length === limits.maxMatches) {
          truncated = true;
          break;
        }
        matches.push({ start: matcher.start(), end: matcher.end() });
      }
      if (matches.length > 0) {
        const highlighted = highlight(chunk.content, matches);
        if (responseCharacters + chunk.content.length + highlighted.length > limits.maxResponseCharacters) {
          truncated = true;
          break pages;
        }
        responseCharacters += chunk.content.length + highlighted.length;
        totalMatches += matches.length;
        matched.push({ chunkIndex: chunk.chunkIndex, content: chunk.content, highlighted, matches, metadata: chunk.metadata });
      }
      if (truncated) break pages;
    }
    if (page.length < grepPageSize) break;
    nextIndex = page[page.length - 1]!.chunkIndex + 1;
  }
  return { documentId, pattern, caseSensitive, totalMatches, truncated, chunks: matched };
}

function highlight(content: string, matches: readonly { start: number; end: number }[]) {
  let highlighted = '';
  let position = 0;
  for (const { start, end } of matches) {
    highlighted += content.slice(position, start) + highlightStart + content.slice(start, end) + highlightEnd;
    position = end;
  }
  return highlighted + content.slice(position);
}
