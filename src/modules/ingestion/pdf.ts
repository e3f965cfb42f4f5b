import { createRequire } from 'node:module';
import path from 'node:path';
import { getDocument, OPS, VerbosityLevel } from 'pdfjs-dist/legacy/build/pdf.mjs';
import type { OcrSettings, PageReader } from './ocr.js';
import { pageParagraphs, paragraphsToBlocks, type Paragraph } from './pdf-layout.js';
import { ParseError, type ParsedDocument } from './types.js';

const pdfjsRoot = path.dirname(createRequire(import.meta.url).resolve('pdfjs-dist/package.json'));

/** Whole-document budget; pdf.js runs on this thread, so this only catches stalls, not busy loops. */
const PDF_PARSE_TIMEOUT_MS = 120_000;

/** A page whose text layer holds fewer letters than this, and that paints an image, is a scan: it is read by OCR. */
const MIN_TEXT_LAYER_LETTERS = 16;
/** Scale a page is rendered at for OCR (pdf.js units are 1/72 inch: 2 is 144 dpi), and the most pixels either side may have. */
const OCR_SCALE = 2;
const OCR_MAX_SIDE_PIXELS = 4_000;

/** `onOcrPage` is told of each page about to be read by OCR, and how many pages the PDF has. */
export type PdfOptions = { ocr: OcrSettings; maxOcrPages: number; onOcrPage?: (page: number, pageCount: number) => void };

export async function parsePdf(bytes: Uint8Array, options: PdfOptions = { ocr: null, maxOcrPages: 0 }): Promise<ParsedDocument> {
  const loadingTask = getDocument({
    // pdf.js takes ownership of (detaches) the buffer it is given.
    data: bytes.slice(),
    disableFontFace: true,
    useSystemFonts: false,
    isEvalSupported: false,
    useWorkerFetch: false,
    disableAutoFetch: true,
    disableStream: true,
    enableXfa: false,
    verbosity: VerbosityLevel.ERRORS,
    // Local copies so that documents using the 14 standard fonts or CJK CMaps never go to the network.
    standardFontDataUrl: `${pdfjsRoot}/standard_fonts/`,
    cMapUrl: `${pdfjsRoot}/cmaps/`,
    cMapPacked: true,
  });

  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new ParseError(`not a readable PDF: parsing took longer than ${PDF_PARSE_TIMEOUT_MS / 1000} s`)),
      PDF_PARSE_TIMEOUT_MS,
    );
  });
  try {
    return await Promise.race([extract(loadingTask.promise, options, () => clearTimeout(timer)), timeout]);
  } catch (error) {
    throw toParseError(error);
  } finally {
    clearTimeout(timer);
    await loadingTask.destroy().catch(() => undefined);
  }
}

function toParseError(error: unknown): ParseError {
  if (error instanceof ParseError) return error;
  const name = error instanceof Error ? error.name : '';
  const message = error instanceof Error ? error.message : String(error);
  if (name === 'PasswordException') return new ParseError('the PDF is password-protected');
  return new ParseError(`not a readable PDF: ${message}`);
}

/**
 * Reads every page's text layer; a page with next to none (a scan) is rendered and read by OCR
 * when OCR is on, so a PDF of scanned and typeset pages comes out whole, in page order. OCR
 * takes its own time (`PageReader`'s per page): the whole-document stall timer stops at the
 * first page read so (`stopStallTimer`).
 */
async function extract(documentPromise: ReturnType<typeof getDocument>['promise'], options: PdfOptions, stopStallTimer: () => void): Promise<ParsedDocument> {
  const pdf = await documentPromise;
  const pageCount = pdf.numPages;
  if (pageCount === 0) throw new ParseError('not a readable PDF: it has no pages');

  const paragraphs: Paragraph[] = [];
  const scanned: number[] = [];
  // Tesseract and the canvas are loaded for the first scanned page, not for every PDF.
  let reader: PageReader | undefined;
  const readerFor = async (settings: NonNullable<OcrSettings>) => (reader ??= new (await import('./ocr.js')).PageReader(settings));
  try {
    for (let pageNumber = 1; pageNumber <= pageCount; pageNumber++) {
      const page = await pdf.getPage(pageNumber);
      const content = await page.getTextContent();
      const found = pageParagraphs(content.items, pageNumber);
      if (options.ocr && letterCount(found) < MIN_TEXT_LAYER_LETTERS && (await drawsImage(page))) {
        scanned.push(pageNumber);
        if (scanned.length > options.maxOcrPages) {
          throw new ParseError(`the PDF has more than ${options.maxOcrPages.toLocaleString('en')} pages without a text layer, the most read by OCR in one document`);
        }
        stopStallTimer();
        options.onOcrPage?.(pageNumber, pageCount);
        const recognised = await recognisedParagraphs(page, pageNumber, await readerFor(options.ocr));
        // What little text layer there was is kept when OCR reads no more than it.
        paragraphs.push(...(letterCount(recognised) > letterCount(found) ? recognised : found));
      } else paragraphs.push(...found);
      page.cleanup();
    }
  } finally {
    await reader?.close();
  }
  if (paragraphs.length === 0) {
    throw new ParseError(
      options.ocr ? 'the PDF has no text: no text layer, and no scanned page with text for OCR to read' : 'the PDF has no text layer (scanned pages?); OCR is turned off (KB_OCR_LANGUAGE)',
    );
  }

  const blocks = paragraphsToBlocks(paragraphs);
  const { info } = await pdf.getMetadata().catch(() => ({ info: undefined }));
  const title = (info as { Title?: unknown } | undefined)?.Title;
  return { text: blocks.map((block) => block.text).join('\n\n'), pageCount, blocks, metadataTitle: typeof title === 'string' ? title : null };
}

const imageOperators = new Set([OPS.paintImageXObject, OPS.paintInlineImageXObject, OPS.paintImageMaskXObject, OPS.paintImageXObjectRepeat]);

/** Whether a page paints an image: a page with next to no text is a scan only if it does. */
async function drawsImage(page: { getOperatorList(): Promise<{ fnArray: number[] }> }): Promise<boolean> {
  const { fnArray } = await page.getOperatorList();
  return fnArray.some((operator) => imageOperators.has(operator));
}

const letterCount = (paragraphs: Paragraph[]) =>
  paragraphs.reduce((total, paragraph) => total + paragraph.lines.reduce((sum, line) => sum + (line.text.match(/\p{L}/gu)?.length ?? 0), 0), 0);

/** A page rendered onto a canvas and read by OCR, as paragraphs whose size is their line height in PDF units. */
type PdfPage = Awaited<ReturnType<Awaited<ReturnType<typeof getDocument>['promise']>['getPage']>>;

async function recognisedParagraphs(page: PdfPage, pageNumber: number, reader: PageReader): Promise<Paragraph[]> {
  const natural = page.getViewport({ scale: 1 });
  const scale = Math.min(OCR_SCALE, OCR_MAX_SIDE_PIXELS / Math.max(natural.width, natural.height, 1));
  const image = await (await renderedPage(page, scale)).encode('png');
  return (await reader.read(image)).map((paragraph, index) => ({
    // Lines from the top down, a line's height its size: the reading order and headings work as for a text layer.
    lines: paragraph.lines.map((text, line) => ({ text, y: -(index * 1000 + line), size: paragraph.lineHeight / scale })),
    size: paragraph.lineHeight / scale,
    page: pageNumber,
    ocrConfidence: paragraph.confidence,
  }));
}

/** A page drawn onto a canvas at `scale` (1 is 72 dpi), on white as on paper: some scans have no background of their own. */
export async function renderedPage(page: PdfPage, scale: number) {
  const viewport = page.getViewport({ scale });
  const { createCanvas } = await import('@napi-rs/canvas');
  const canvas = createCanvas(Math.max(1, Math.ceil(viewport.width)), Math.max(1, Math.ceil(viewport.height)));
  const context = canvas.getContext('2d');
  context.fillStyle = '#ffffff';
  context.fillRect(0, 0, canvas.width, canvas.height);
  await page.render({ canvas: canvas as unknown as HTMLCanvasElement, canvasContext: context as unknown as CanvasRenderingContext2D, viewport }).promise;
  return canvas;
}
