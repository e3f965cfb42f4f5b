import { chunkDocument } from './chunk.js';
import type { DocumentType } from './detect.js';
import { documentContext, documentTitle, nameWords } from './document-name.js';
import { parseDocument, ParseError, type ParseLimits } from './parse.js';

export type ParseTask = {
  bytes: Uint8Array;
  type: DocumentType;
  filename: string;
  chunkOptions: { chunkTokens: number; overlapTokens: number };
  limits: ParseLimits;
};

/** The page about to be read by OCR, and the document's page count. */
export type ParseProgress = { ocrPage: number; pageCount: number };

export type ParseTaskResult =
  | { ok: true; text: string; pageCount: number | null; title: string; nameWords: string; context: string; chunks: ReturnType<typeof chunkDocument> }
  | { ok: false; error: string };

/**
 * Runs in a parsing process (parse-process.ts). A document that cannot be parsed is an answer
 * (`ok: false`), not a crash: it will fail the same way on every attempt, so it is not retried.
 * `onProgress` hears of each page before OCR reads it.
 */
export async function runParseTask(task: ParseTask, onProgress?: (progress: ParseProgress) => void): Promise<ParseTaskResult> {
  try {
    const parsed = await parseDocument(task.bytes, task.type, task.limits, {
      onOcrPage: onProgress ? (page, pageCount) => onProgress({ ocrPage: page, pageCount }) : undefined,
    });
    const fileNameWords = nameWords(task.filename, parsed.text);
    const title = documentTitle(parsed, fileNameWords);
    return {
      ok: true,
      text: parsed.text,
      pageCount: parsed.pageCount,
      title,
      nameWords: fileNameWords,
      context: documentContext(fileNameWords, title),
      chunks: chunkDocument(parsed, task.chunkOptions),
    };
  } catch (error) {
    if (error instanceof ParseError) return { ok: false, error: error.message };
    throw error;
  }
}
