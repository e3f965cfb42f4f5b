import { createRequire } from 'node:module';
import path from 'node:path';
import { createWorker, OEM, type Worker } from 'tesseract.js';
import { ocrPageSeconds, ParseError } from './types.js';

/** What OCR reads with: a language whose data ships in the npm package `@tesseract.js-data/<language>`; null turns OCR off. */
export type OcrSettings = { language: string } | null;

/** A paragraph read from an image: its lines in reading order, their height in the image's pixels, and the mean word confidence (0 to 100). */
export type RecognisedParagraph = { lines: string[]; lineHeight: number; confidence: number };

/**
 * The folder of a language's trained data, inside its npm package: nothing is fetched at run
 * time. An unknown language is a ParseError naming the package to install.
 */
function languageData(language: string): string {
  try {
    const root = path.dirname(createRequire(import.meta.url).resolve(`@tesseract.js-data/${language}/package.json`));
    return path.join(root, '4.0.0_best_int');
  } catch {
    throw new ParseError(`OCR needs the language data of "${language}": install the npm package @tesseract.js-data/${language}`);
  }
}

/**
 * A Tesseract engine for one document's pages, started on first use and ended by `close`. Its
 * work runs in a thread of its own (tesseract.js), started from the parsing process.
 */
export class PageReader {
  #worker: Promise<Worker> | undefined;
  constructor(private readonly settings: { language: string }) {}

  async read(image: Uint8Array | Buffer): Promise<RecognisedParagraph[]> {
    this.#worker ??= createWorker(this.settings.language, OEM.LSTM_ONLY, {
      langPath: languageData(this.settings.language),
      gzip: true,
      cacheMethod: 'none',
      // The job's promise rejects with the error. Without a handler tesseract.js also throws it,
      // uncaught, in this thread: an image it cannot decode would end the parsing process.
      errorHandler: () => undefined,
    });
    const worker = await this.#worker;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new ParseError(`reading a page by OCR took longer than ${ocrPageSeconds} s`)), ocrPageSeconds * 1000);
    });
    try {
      const recognised = worker.recognize(Buffer.from(image.buffer, image.byteOffset, image.byteLength), {}, { text: true, blocks: true }).catch((error: unknown) => {
        // tesseract.js rejects with its worker's message, a string such as "Error: Error attempting to read image.".
        throw error instanceof Error ? error : new Error(String(error).replace(/^(Error: )+/, ''));
      });
      const { data } = await Promise.race([recognised, timeout]);
      const paragraphs: RecognisedParagraph[] = [];
      for (const block of data.blocks ?? []) {
        for (const paragraph of block.paragraphs) {
          const lines = paragraph.lines.map((line) => line.text.replace(/\s+/g, ' ').trim()).filter((line) => line !== '');
          if (lines.length === 0) continue;
          const heights = paragraph.lines.map((line) => line.bbox.y1 - line.bbox.y0).sort((a, b) => a - b);
          paragraphs.push({ lines, lineHeight: heights[Math.floor(heights.length / 2)] ?? 0, confidence: paragraph.confidence });
        }
      }
      return paragraphs;
    } finally {
      clearTimeout(timer);
    }
  }

  async close(): Promise<void> {
    const worker = this.#worker;
    this.#worker = undefined;
    if (worker) await (await worker.catch(() => undefined))?.terminate();
  }
}
