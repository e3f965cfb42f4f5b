/**
 * `npm run bench:ocr`: how well and how fast scanned pages are read, and whether a long scan
 * holds anybody else up.
 *
 * 1. Accuracy and speed. Pages of the bench PDFs that have a text layer (the four samples, and
 *    the first BENCH_OCR_LYFT_PAGES (10) pages of lyft_2021.pdf) are rendered as the parser renders
 *    a scan (pdf.js on @napi-rs/canvas, 144 dpi) and read by the service's OCR (`PageReader`).
 *    Each page's character error rate is the edit distance between what OCR read and the page's
 *    own text layer, over the text layer's length, both with runs of whitespace made one space:
 *    the ground truth is exact, though a page whose layout OCR reads in another order (columns,
 *    tables) counts that order as errors. Pages per second, one engine on this machine, and the
 *    process's peak resident memory while reading.
 * 2. The scanned sample (non_text_searchable.pdf) through the parser: its text and confidence.
 * 3. End to end, in the service started in this process (embedded store, a temporary data
 *    directory): another user's note is uploaded alone and timed to `ready` (quiet), then a
 *    BENCH_OCR_SCAN_PAGES-page (100) scan (the sample's scanned page, repeated) is uploaded and,
 *    a second later, another note; the scan's time to `ready` and the note's.
 *
 * Prints the tables and writes bench/results/ocr.{json,html}; the HTML page charts each page's
 * error rate.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { distance } from 'fastest-levenshtein';
import { getDocument } from 'pdfjs-dist/legacy/build/pdf.mjs';
import type { TextItem } from 'pdfjs-dist/types/src/display/api.js';
import { startApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { PageReader } from '../src/modules/ingestion/ocr.js';
import { joinLines } from '../src/modules/ingestion/text.js';
import { defaultParseLimits, parseDocument } from '../src/modules/ingestion/parse.js';
import { renderedPage } from '../src/modules/ingestion/pdf.js';
import { cleanUpOnInterrupt, escapeHtml, htmlTable, intFromEnv, loadNow, log, machineDescription, percentile, progressBar, resultPage, runBenchmark, sleep, textTable, writeResults } from './helpers.js';
import { makeRepeatedScan } from '../test/support/documents.js';
import { BenchClient, newUser } from './in-process-service.js';

const pdfDirectory = path.resolve(import.meta.dirname, '../../shared/bench-data/pdfs');
const lyftPages = intFromEnv('BENCH_OCR_LYFT_PAGES', 10, 0);
const scanPages = intFromEnv('BENCH_OCR_SCAN_PAGES', 100);
/** As the parser renders a scan (pdf.ts, OCR_SCALE). */
const scale = 2;

type PageResult = { file: string; page: number; characters: number; errors: number; cer: number; confidence: number; seconds: number };

const normalized = (text: string) => text.replace(/\s+/gu, ' ').trim();

/** The process's resident memory, sampled until `stop` is called; returns the peak in MB. */
function memoryPeak(): { stop(): number } {
  let peak = process.memoryUsage().rss;
  const timer = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage().rss);
  }, 100);
  return {
    stop() {
      clearInterval(timer);
      return Math.max(peak, process.memoryUsage().rss) / 1024 / 1024;
    },
  };
}

async function readPages(reader: PageReader, files: { name: string; pages: number }[]): Promise<PageResult[]> {
  const results: PageResult[] = [];
  const opened = await Promise.all(
    files.map(async (file) => ({ ...file, pdf: await getDocument({ data: new Uint8Array(await readFile(path.join(pdfDirectory, file.name))), isEvalSupported: false, verbosity: 0 }).promise })),
  );
  const bar = progressBar('pages read by OCR |{bar}| {value}/{total} | {duration_formatted} | eta {eta_formatted}');
  bar.start(opened.reduce((sum, file) => sum + Math.min(file.pages, file.pdf.numPages), 0), 0);
  for (const { pdf, ...file } of opened) {
    for (let pageNumber = 1; pageNumber <= Math.min(file.pages, pdf.numPages); pageNumber++) {
      const page = await pdf.getPage(pageNumber);
      const truth = normalized(
        (await page.getTextContent()).items
          .filter((item): item is TextItem => 'str' in item)
          .map((item) => item.str + (item.hasEOL ? '\n' : ' '))
          .join(''),
      );
      const started = performance.now();
      const paragraphs = await reader.read(await (await renderedPage(page, scale)).encode('png'));
      const seconds = (performance.now() - started) / 1000;
      const read = normalized(paragraphs.map((paragraph) => joinLines(paragraph.lines)).join(' '));
      const errors = distance(read, truth);
      const characters = paragraphs.reduce((sum, paragraph) => sum + paragraph.lines.join(' ').length, 0);
      const confidence = characters === 0 ? 0 : paragraphs.reduce((sum, paragraph) => sum + paragraph.confidence * paragraph.lines.join(' ').length, 0) / characters;
      if (truth.length > 0) results.push({ file: file.name, page: pageNumber, characters: truth.length, errors, cer: errors / truth.length, confidence, seconds });
      page.cleanup();
      bar.increment();
    }
    await pdf.destroy();
  }
  bar.stop();
  return results;
}

async function timeToReady(client: BenchClient, id: string): Promise<{ seconds: number; status: string; error: string | null }> {
  const started = performance.now();
  for (;;) {
    const document = await client.json<{ status: string; error: string | null }>('GET', `/v1/kb/documents/${id}`);
    if (document.status === 'ready' || document.status === 'failed') return { seconds: (performance.now() - started) / 1000, status: document.status, error: document.error };
    await sleep(100);
  }
}

async function main() {
  const machine = machineDescription();
  log(`bench:ocr on ${machine}; load average ${loadNow()}`);

  // 1. Accuracy and speed of reading pages.
  const reader = new PageReader({ language: 'eng' });
  const memory = memoryPeak();
  const started = performance.now();
  let pages: PageResult[];
  try {
    pages = await readPages(reader, [
      { name: 'sample_pdf_1.pdf', pages: 100 },
      { name: 'sample_pdf_2.pdf', pages: 100 },
      { name: 'sample_pdf_3.pdf', pages: 100 },
      { name: 'sample_pdf_4.pdf', pages: 100 },
      ...(lyftPages > 0 ? [{ name: 'lyft_2021.pdf', pages: lyftPages }] : []),
    ]);
  } finally {
    await reader.close();
  }
  const readingSeconds = (performance.now() - started) / 1000;
  const peakMb = memory.stop();
  const totalCharacters = pages.reduce((sum, page) => sum + page.characters, 0);
  const totalErrors = pages.reduce((sum, page) => sum + page.errors, 0);

  // 2. The scanned sample through the parser.
  const scanned = await parseDocument(new Uint8Array(await readFile(path.join(pdfDirectory, 'non_text_searchable.pdf'))), 'application/pdf', {
    ...defaultParseLimits,
    ocr: { language: 'eng' },
  });

  // 3. End to end: a long scan, and another user's note meanwhile.
  const { DATABASE_URL: _databaseUrl, ELASTICSEARCH_URL: _elasticsearchUrl, ...environment } = process.env;
  const storeDir = await mkdtemp(path.join(os.tmpdir(), 'kb-bench-ocr-'));
  const config = loadConfig({ ...environment, KB_DATA_DIR: storeDir, HOST: '127.0.0.1', PORT: '0', KB_LOG_LEVEL: 'silent' });
  const app = await startApp(config);
  const cleanUp = async () => {
    await app.close().catch((error: unknown) => log(`could not close the service: ${String(error)}`));
    await rm(storeDir, { recursive: true, force: true });
  };
  const stopListening = cleanUpOnInterrupt(cleanUp);
  let endToEnd: { scanBytes: number; scan: Awaited<ReturnType<typeof timeToReady>>; quietNote: number; noteDuringScan: Awaited<ReturnType<typeof timeToReady>> };
  try {
    await app.warmed;
    const scanner = new BenchClient(app.url, (await newUser(app, 'scans')).key);
    const writer = new BenchClient(app.url, (await newUser(app, 'notes')).key);
    const scanWorkspace = await scanner.workspace('Scans');
    const noteWorkspace = await writer.workspace('Notes');
    const note = (label: string) => ({ name: `${label}.txt`, bytes: `A short note (${label}) written while the archive was being scanned.` });
    const [quiet] = await writer.upload(noteWorkspace, [note('quiet')]);
    const quietNote = (await timeToReady(writer, quiet!.id)).seconds;
    const scanBytes = await makeRepeatedScan(scanPages);
    log(`uploading a ${scanPages}-page scan (${(scanBytes.length / 1024 / 1024).toFixed(1)} MB)`);
    const [scanDocument] = await scanner.upload(scanWorkspace, [{ name: `scan-${scanPages}-pages.pdf`, bytes: scanBytes }]);
    const scanReady = timeToReady(scanner, scanDocument!.id);
    await sleep(1000);
    const [during] = await writer.upload(noteWorkspace, [note('during')]);
    const noteDuringScan = await timeToReady(writer, during!.id);
    endToEnd = { scanBytes: scanBytes.length, scan: await scanReady, quietNote, noteDuringScan };
  } finally {
    stopListening();
    await cleanUp();
  }

  const cers = pages.map((page) => page.cer);
  const rows = [
    ['pages read (with a text layer to compare)', String(pages.length)],
    ['character error rate, all pages (errors / characters)', `${((totalErrors / totalCharacters) * 100).toFixed(2)} %`],
    ['character error rate, median page', `${(percentile(cers, 50) * 100).toFixed(2)} %`],
    ['pages at most 3 % CER', `${pages.filter((page) => page.cer <= 0.03).length} of ${pages.length}`],
    ['pages per second (render + OCR, one engine)', (pages.length / readingSeconds).toFixed(2)],
    ['seconds per page, median', percentile(pages.map((page) => page.seconds), 50).toFixed(2)],
    ['peak resident memory while reading', `${peakMb.toFixed(0)} MB`],
    ['scanned sample: confidence, characters', `${scanned.blocks.map((block) => block.ocrConfidence ?? 0).join(', ')}; ${scanned.text.length}`],
    [`${scanPages}-page scan (${(endToEnd.scanBytes / 1024 / 1024).toFixed(1)} MB), upload to ${endToEnd.scan.status}`, `${endToEnd.scan.seconds.toFixed(1)} s${endToEnd.scan.error ? ` (${endToEnd.scan.error})` : ''}`],
    ['another user\'s note to ready, alone', `${endToEnd.quietNote.toFixed(2)} s`],
    ['another user\'s note to ready, during the scan', `${endToEnd.noteDuringScan.seconds.toFixed(2)} s (${(endToEnd.noteDuringScan.seconds / endToEnd.quietNote).toFixed(1)}x)`],
  ];
  const perFile = [...new Set(pages.map((page) => page.file))].map((file) => {
    const own = pages.filter((page) => page.file === file);
    const characters = own.reduce((sum, page) => sum + page.characters, 0);
    const errors = own.reduce((sum, page) => sum + page.errors, 0);
    return [file, String(own.length), `${((errors / characters) * 100).toFixed(2)} %`, percentile(own.map((page) => page.seconds), 50).toFixed(2)];
  });
  process.stdout.write(`\nOCR (tesseract.js, eng, pages at ${72 * scale} dpi) on ${machine}\n\n${textTable(['measure', 'value'], rows)}\n\n`);
  process.stdout.write(`${textTable(['file', 'pages', 'CER', 's/page'], perFile)}\n\nthe scanned sample, read:\n${scanned.text}\n`);

  const chartWidth = 720;
  const barWidth = Math.max(2, Math.floor(chartWidth / Math.max(1, pages.length)) - 1);
  const maxCer = Math.max(0.05, ...cers);
  const bars = pages
    .map((page, index) => {
      const height = (page.cer / maxCer) * 200;
      return `<rect x="${40 + index * (barWidth + 1)}" y="${220 - height}" width="${barWidth}" height="${height}" fill="${page.cer <= 0.03 ? '#3a7' : '#c53'}"><title>${escapeHtml(`${page.file} p${page.page}: ${(page.cer * 100).toFixed(2)} %`)}</title></rect>`;
    })
    .join('');
  const threshold = 220 - (0.03 / maxCer) * 200;
  const chart = `<h2>Character error rate by page</h2><svg width="${chartWidth + 60}" height="250" role="img" aria-label="character error rate of each page">
<line x1="40" x2="${chartWidth + 40}" y1="220" y2="220" stroke="#999"/><line x1="40" x2="${chartWidth + 40}" y1="${threshold}" y2="${threshold}" stroke="#c53" stroke-dasharray="4 3"/>
<text x="0" y="${threshold + 4}" font-size="11">3 %</text><text x="0" y="24" font-size="11">${(maxCer * 100).toFixed(0)} %</text>${bars}</svg>`;
  await writeResults(
    'ocr',
    { date: new Date().toISOString().slice(0, 10), machine, scaleDpi: 72 * scale, pages, totals: { characters: totalCharacters, errors: totalErrors, readingSeconds, peakMb }, scanned: scanned.text, endToEnd },
    resultPage({
      title: 'bench:ocr',
      heading: 'OCR of rendered pages, and a long scan end to end',
      meta: `${machine}; ${new Date().toISOString().slice(0, 10)}`,
      body: `${htmlTable(['measure', 'value'], rows)}${chart}<h2>By file</h2>${htmlTable(['file', 'pages', 'CER', 's/page'], perFile)}`,
      notes: ['A page\'s error rate counts a reading order that differs from its text layer\'s (tables, columns) as errors.'],
    }),
  );
}

runBenchmark(main);
