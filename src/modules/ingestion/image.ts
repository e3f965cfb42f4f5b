import { imageSize } from 'image-size';
import { PageReader, type OcrSettings } from './ocr.js';
import { joinLines } from './text.js';
import { ParseError, type ParsedBlock, type ParsedDocument } from './types.js';

/** Most pixels an image may have to be read by OCR (a 30,000 x 30,000 PNG decodes to 3.6 GB), and most on either side. */
export const maxImagePixels = 50_000_000;
export const maxImageSide = 20_000;

type OnOcrPage = (page: number, pageCount: number) => void;

/**
 * A photo or scan of a page (PNG, JPEG, WebP) read by OCR as one page. Its size is read from its
 * header before anything is decoded, so an image that would decode to gigabytes is refused first.
 */
export async function parseImage(bytes: Uint8Array, what: string, ocr: OcrSettings, onOcrPage?: OnOcrPage): Promise<Omit<ParsedDocument, 'text'>> {
  if (!ocr) throw ocrOff(what);
  let width: number | undefined;
  let height: number | undefined;
  try {
    ({ width, height } = imageSize(bytes));
  } catch (error) {
    throw new ParseError(`not a readable ${what}: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (!width || !height) throw new ParseError(`not a readable ${what}: it does not say its size`);
  checkSize(width, height, `the ${what}`);
  const reader = new PageReader(ocr);
  onOcrPage?.(1, 1);
  try {
    return { pageCount: 1, blocks: await pageBlocks(reader, bytes, 1) };
  } catch (error) {
    if (error instanceof ParseError) throw error;
    throw new ParseError(`not a readable ${what}: ${error instanceof Error ? error.message : String(error)}`);
  } finally {
    await reader.close();
  }
}

/**
 * A TIFF, a scanner's usual file: each of its pages (frames) a page read by OCR, in order. The
 * page count and each page's size are read from the file's directories before the page is
 * decoded (by libvips, through sharp, which also stops at the pixel limit), and one page is
 * decoded at a time.
 */
export async function parseTiff(bytes: Uint8Array, ocr: OcrSettings, maxOcrPages: number, onOcrPage?: OnOcrPage): Promise<Omit<ParsedDocument, 'text'>> {
  if (!ocr) throw ocrOff('TIFF');
  const sharp = (await import('sharp')).default;
  // One page at a time, nothing kept between them: the parsing process's memory is what is left.
  sharp.cache(false);
  sharp.concurrency(1);
  const input = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  // Reading a page's directory decodes nothing, so it goes unlimited: checkSize gives the reason.
  const directory = (index: number) => sharp(input, { page: index, limitInputPixels: false, failOn: 'error' }).metadata();
  const decode = (index: number) => sharp(input, { page: index, limitInputPixels: maxImagePixels, failOn: 'error' });
  const unreadable = (error: unknown) => new ParseError(`not a readable TIFF: ${error instanceof Error ? error.message : String(error)}`);

  const pageCount = await directory(0).then((metadata) => metadata.pages ?? 1, (error: unknown) => Promise.reject(unreadable(error)));
  if (pageCount > maxOcrPages) {
    throw new ParseError(`the TIFF has ${pageCount.toLocaleString('en')} pages, more than the ${maxOcrPages.toLocaleString('en')} read by OCR in one document`);
  }
  const reader = new PageReader(ocr);
  const blocks: ParsedBlock[] = [];
  try {
    for (let index = 0; index < pageCount; index++) {
      const number = index + 1;
      const { width, height, density } = await directory(index).catch((error: unknown) => Promise.reject(unreadable(error)));
      if (!width || !height) throw new ParseError(`not a readable TIFF: page ${number} does not say its size`);
      checkSize(width, height, `page ${number} of the TIFF`);
      onOcrPage?.(number, pageCount);
      const png = await decode(index)
        // Tesseract sizes text by the resolution: the page's own, or a scanner's usual 300 dpi when it says none that could be a scan's.
        .withMetadata({ density: density !== undefined && density >= 70 ? density : 300 })
        .png({ compressionLevel: 1 })
        .toBuffer()
        .catch((error: unknown) => Promise.reject(unreadable(error)));
      blocks.push(...(await pageBlocks(reader, png, number)));
    }
  } catch (error) {
    if (error instanceof ParseError) throw error;
    throw unreadable(error);
  } finally {
    await reader.close();
  }
  return { pageCount, blocks };
}

const ocrOff = (what: string) => new ParseError(`the ${what} image can only be read by OCR, which is turned off (KB_OCR_LANGUAGE)`);

/** Whether OCR reads an image of this size (one larger would decode to gigabytes). */
export const withinOcrSize = (width: number, height: number) => width <= maxImageSide && height <= maxImageSide && width * height <= maxImagePixels;

function checkSize(width: number, height: number, what: string): void {
  if (!withinOcrSize(width, height)) {
    throw new ParseError(
      `${what} is ${width.toLocaleString('en')} x ${height.toLocaleString('en')} pixels, more than OCR reads (${maxImageSide.toLocaleString('en')} on a side, ${maxImagePixels / 1_000_000} megapixels)`,
    );
  }
}

/** The paragraphs OCR reads on one page's image, each a block of that page. */
async function pageBlocks(reader: PageReader, image: Uint8Array, page: number): Promise<ParsedBlock[]> {
  return (await reader.read(image)).map((paragraph) => ({
    kind: 'text',
    text: joinLines(paragraph.lines),
    page,
    headingPath: [],
    ocrConfidence: paragraph.confidence,
  }));
}
