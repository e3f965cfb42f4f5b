import { imageSize } from 'image-size';
import { detectDocumentType } from './detect.js';
import { withinOcrSize } from './image.js';
import { PageReader } from './ocr.js';
import { joinLines } from './text.js';
import type { ParsedBlock, PictureReading } from './types.js';

/** The pictures OCR reads: those Tesseract decodes, recognised by their bytes, not their stated type. */
const readableTypes = new Set(['image/png', 'image/jpeg', 'image/webp']);
/**
 * Smaller pictures are not read: an icon, a bullet or a logo holds no text worth the second or
 * more OCR takes (a line of text at a legible size is at least about 48 pixels tall with its margins).
 */
const minSide = 48;
const minPixels = 40_000;

/** A picture where it stands in a file: its empty block, a key the same picture shown again shares, and its bytes. */
export type Picture = { block: ParsedBlock; key: string; bytes: () => Uint8Array };

/**
 * Reads the text of a file's pictures by OCR into their blocks (left empty where a picture has
 * none, is too small or too large, or cannot be decoded: a picture never fails its document).
 * A picture shown several times is read once. At most `maxImages` distinct pictures are read, in
 * the order they first appear; `onImage` hears of each before it is read.
 */
export async function readPictures(pictures: readonly Picture[], { ocr, maxImages, onImage }: PictureReading) {
  if (ocr === null) return;
  const toRead = new Map<string, { bytes: Uint8Array; blocks: ParsedBlock[] }>();
  for (const picture of pictures) {
    const known = toRead.get(picture.key);
    if (known) {
      known.blocks.push(picture.block);
      continue;
    }
    if (toRead.size >= maxImages) continue;
    const bytes = picture.bytes();
    if (worthReading(bytes)) toRead.set(picture.key, { bytes, blocks: [picture.block] });
  }
  if (toRead.size === 0) return;
  const reader = new PageReader(ocr);
  try {
    let index = 0;
    for (const { bytes, blocks } of toRead.values()) {
      onImage?.(++index, toRead.size);
      const paragraphs = await reader.read(bytes).catch(() => []);
      if (paragraphs.length === 0) continue;
      const text = paragraphs.map((paragraph) => joinLines(paragraph.lines)).join('\n\n');
      const confidence = paragraphs.reduce((sum, paragraph) => sum + paragraph.confidence, 0) / paragraphs.length;
      for (const block of blocks) Object.assign(block, { text, ocrConfidence: confidence });
    }
  } finally {
    await reader.close();
  }
}

function worthReading(bytes: Uint8Array): boolean {
  const type = detectDocumentType(bytes, 'picture');
  if (type === null || !readableTypes.has(type)) return false;
  try {
    const { width, height } = imageSize(bytes);
    if (!width || !height || !withinOcrSize(width, height)) return false;
    return Math.min(width, height) >= minSide && width * height >= minPixels;
  } catch {
    return false;
  }
}
