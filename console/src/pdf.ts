// A PDF page drawn with pdf.js (loaded only when a PDF is opened), with its text layer over
// it so that a cited passage can be highlighted where it stands on the page.
import type { PDFDocumentProxy } from 'pdfjs-dist/legacy/build/pdf.mjs';

let library: Promise<typeof import('pdfjs-dist/legacy/build/pdf.mjs')> | undefined;

function pdfjs() {
  library ??= import('pdfjs-dist/legacy/build/pdf.mjs').then((module) => {
    module.GlobalWorkerOptions.workerSrc = '/assets/pdf.worker.min.mjs';
    return module;
  });
  return library;
}

export async function openPdf(bytes: ArrayBuffer): Promise<PDFDocumentProxy> {
  const { getDocument } = await pdfjs();
  return getDocument({
    data: new Uint8Array(bytes),
    cMapUrl: '/assets/cmaps/',
    cMapPacked: true,
    standardFontDataUrl: '/assets/standard_fonts/',
    isEvalSupported: false,
  }).promise;
}

/**
 * Draws page `pageNumber` (from 1), `width` CSS pixels wide, and marks the spans of its text
 * layer that hold `quote`. The page is built aside and put into `container` only if `signal`
 * has not been aborted by then (a later page asked for meanwhile), so two renders never mix.
 * Returns whether the quote was found on the page.
 */
export async function renderPage(
  pdf: PDFDocumentProxy,
  pageNumber: number,
  container: HTMLElement,
  width: number,
  quote: string | null,
  signal: AbortSignal,
): Promise<boolean> {
  const { TextLayer } = await pdfjs();
  const page = await pdf.getPage(pageNumber);
  if (signal.aborted) return false;
  const unscaled = page.getViewport({ scale: 1 });
  const viewport = page.getViewport({ scale: width / unscaled.width });
  const ratio = window.devicePixelRatio || 1;

  const sheet = document.createElement('div');
  sheet.className = 'pdf-sheet';
  sheet.style.setProperty('--total-scale-factor', String(viewport.scale));
  sheet.style.width = `${viewport.width}px`;
  sheet.style.height = `${viewport.height}px`;

  const canvas = document.createElement('canvas');
  canvas.width = Math.floor(viewport.width * ratio);
  canvas.height = Math.floor(viewport.height * ratio);
  canvas.style.width = `${viewport.width}px`;
  canvas.style.height = `${viewport.height}px`;
  canvas.setAttribute('role', 'img');
  canvas.setAttribute('aria-label', `Page ${pageNumber}`);
  sheet.append(canvas);
  const drawing = page.render({ canvas, viewport, transform: ratio === 1 ? undefined : [ratio, 0, 0, ratio, 0, 0] });
  const stopDrawing = () => drawing.cancel();
  signal.addEventListener('abort', stopDrawing, { once: true });
  try {
    await drawing.promise;
  } catch (error) {
    if (signal.aborted) return false;
    throw error;
  } finally {
    signal.removeEventListener('abort', stopDrawing);
  }

  const textContainer = document.createElement('div');
  textContainer.className = 'textLayer';
  sheet.append(textContainer);
  const textLayer = new TextLayer({ textContentSource: page.streamTextContent(), container: textContainer, viewport });
  const stopText = () => textLayer.cancel();
  signal.addEventListener('abort', stopText, { once: true });
  try {
    await textLayer.render();
  } catch (error) {
    if (signal.aborted) return false;
    throw error;
  } finally {
    signal.removeEventListener('abort', stopText);
  }
  if (signal.aborted) return false;
  const marked = quote ? markQuote(textLayer.textDivs, textLayer.textContentItemsStr, quote) : [];
  container.style.width = `${viewport.width}px`;
  container.replaceChildren(sheet);
  marked[0]?.scrollIntoView({ block: 'center' });
  return marked.length > 0;
}

const squeeze = (text: string) => text.toLowerCase().replace(/[^\p{L}\p{N}]+/gu, '');

/**
 * Finds the quote in the page's text items, ignoring case, spacing, punctuation and hyphenation
 * (the page's lines break where the chunk's text does not), and marks the items it covers.
 */
function markQuote(divs: HTMLElement[], strings: string[], quote: string): HTMLElement[] {
  const owners: number[] = [];
  let text = '';
  strings.forEach((item, index) => {
    const squeezed = squeeze(item);
    text += squeezed;
    for (let i = 0; i < squeezed.length; i++) owners.push(index);
  });
  const wanted = squeeze(quote);
  if (wanted.length === 0) return [];
  let start = text.indexOf(wanted);
  let length = wanted.length;
  // A quote that runs onto the next page: mark the part of it on this one.
  for (let cut = wanted.length; start < 0 && cut >= 24; cut = Math.floor(cut * 0.75)) {
    start = text.indexOf(wanted.slice(0, cut));
    length = cut;
  }
  if (start < 0) return [];
  const covered = new Set(owners.slice(start, start + length));
  const marked = [...covered].map((index) => divs[index]).filter((div): div is HTMLElement => Boolean(div));
  for (const div of marked) div.classList.add('cited');
  return marked;
}
