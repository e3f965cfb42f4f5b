import { imageSize } from 'image-size';
import { PageReader, type OcrSettings } from './ocr.js';
import { joinLines } from './text.js';
import { ParseError, type ParsedBlock, type ParsedDocument } from './types.js';

/** Most pixels an image may have to be read by OCR (a 30,000 x 30,000 PNG decodes to 3.6 GB), and most on either side. */
export const maxImagePixels = 50_000_000;
export const maxImageSide = 20_000;

/**
 * A photo or scan of a page (PNG, JPEG, WebP) read by OCR as one page. Its size is read from its
 * header before anything is decoded, so an image that would decode to gigabytes is refused first.
 */
export async function parseImage(bytes: Uint8Array, what: string, ocr: OcrSettings, onOcrPage?: (page: number, pageCount: number) => void): Promise<Omit<ParsedDocument, 'text'>> {
  if (!ocr) throw new ParseError(`the ${what} image can only be read by OCR, which is turned off (KB_OCR_LANGUAGE)`);
  let width: number | undefined;
  let height: number | undefined;
  try {
    ({ width, height } = imageSize(bytes));
  } catch (error) {
    throw new ParseError(`not a readable ${what}: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (!width || !height) throw new ParseError(`not a readable ${what}: it does not say its size`);
  if (width > maxImageSide || height > maxImageSide || width * height > maxImagePixels) {
    throw new ParseError(
      `the ${what} is ${width.toLocaleString('en')} x ${height.toLocaleString('en')} pixels, more than OCR reads (${maxImageSide.toLocaleString('en')} on a side, ${maxImagePixels / 1_000_000} megapixels)`,
    );
  }
  const reader = new PageReader(ocr);
  onOcrPage?.(1, 1);
  try {
    const blocks: ParsedBlock[] = (await reader.read(bytes)).map((paragraph) => ({
      kind: 'text',
      text: joinLines(paragraph.lines),
      page: 1,
      headingPath: [],
      ocrConfidence: paragraph.confidence,
    }));
    return { pageCount: 1, blocks };
  } catch (error) {
    if (error instanceof ParseError) throw error;
    throw new ParseError(`not a readable ${what}: ${error instanceof Error ? error.message : String(error)}`);
  } finally {
    await reader.close();
  }
}
