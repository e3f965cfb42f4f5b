/**
 * `npm run bench:sheets`: what a very long spreadsheet costs to read, the service's streaming
 * reader beside reading the whole workbook into memory first (ExcelJS's `Workbook.xlsx.load`, as
 * the service did before), in the same run.
 *
 * The workbook is one sheet of BENCH_SHEET_ROWS (1,000,000) rows, each holding its own number.
 * Each reading runs in a child process of its own, so that one reader's heap never counts for
 * the other: first with a heap limit rising through a ladder of old-space sizes until the read
 * succeeds (the smallest that did is the memory the reader needs), then BENCH_SHEET_REPEATS (3)
 * times with 4 GB, timed, the median reported. Both readers produce the same text, checked.
 *
 * Prints the table and writes bench/results/sheets.{json,html}, with a chart of the two.
 */
import { spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { escapeHtml, htmlTable, intFromEnv, loadNow, log, machineDescription, percentile, resultPage, runBenchmark, textTable, writeResults } from './helpers.js';

const readers = ['streaming (the service)', 'whole workbook in memory'] as const;
type Reader = (typeof readers)[number];
const ladderMb = [128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072];
const timingHeapMb = 4096;

/** One reading in this process: prints `{ms, characters, sha256}` as JSON on its last line. */
async function readOnce(reader: Reader, file: string) {
  const bytes = new Uint8Array(await readFile(file));
  // Modules load before the clock starts: only the reading is timed.
  const [{ parseDocument }, { XLSX_TYPE }, ExcelJS] = await Promise.all([
    import('../src/modules/ingestion/parse.js'),
    import('../src/modules/ingestion/types.js'),
    import('exceljs').then((module) => module.default),
    import('../src/modules/ingestion/spreadsheet.js'),
  ]);
  const started = performance.now();
  let text: string;
  if (reader === 'streaming (the service)') {
    text = (await parseDocument(bytes, XLSX_TYPE)).text;
  } else {
    // What the service's reader did before it streamed: load the workbook, then walk its rows.
    const workbook = new ExcelJS.Workbook();
    await workbook.xlsx.load(Buffer.from(bytes) as unknown as ArrayBuffer);
    const lines: string[] = [];
    for (const sheet of workbook.worksheets) {
      lines.push(sheet.name, '');
      const rows: string[] = [];
      sheet.eachRow({ includeEmpty: false }, (row) => rows.push(row.getCell(1).text));
      lines.push(rows.join('\n'));
    }
    text = lines.join('\n');
  }
  const ms = performance.now() - started;
  // The two texts differ only in layout; the numbers they hold must be the same.
  const numbers = text.match(/\d+/g) ?? [];
  process.stdout.write(`${JSON.stringify({ ms, numbers: numbers.length, sha256: createHash('sha256').update(numbers.join(',')).digest('hex') })}\n`);
}

type Reading = { ok: true; ms: number; numbers: number; sha256: string } | { ok: false; reason: string };

function readInChild(reader: Reader, file: string, heapMb: number): Reading {
  const child = spawnSync(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), '--read', reader, file], {
    env: { ...process.env, NODE_OPTIONS: `--max-old-space-size=${heapMb}` },
    encoding: 'utf8',
    maxBuffer: 16 * 1024 * 1024,
  });
  const last = child.stdout.trim().split('\n').at(-1) ?? '';
  if (child.status === 0 && last.startsWith('{')) return { ok: true, ...(JSON.parse(last) as { ms: number; numbers: number; sha256: string }) };
  const outOfMemory = /heap out of memory|Reached heap limit/.test(child.stderr);
  return { ok: false, reason: outOfMemory ? 'out of memory' : `exit ${child.status ?? child.signal}: ${child.stderr.trim().split('\n').at(-1) ?? ''}` };
}

async function main() {
  if (process.argv[2] === '--read') return readOnce(process.argv[3] as Reader, process.argv[4]!);
  const rows = intFromEnv('BENCH_SHEET_ROWS', 1_000_000);
  const repeats = intFromEnv('BENCH_SHEET_REPEATS', 3);
  const machine = machineDescription();
  log(`bench:sheets on ${machine}; load ${loadNow()}`);
  const { makeNumberedRowsXlsx } = await import('../test/support/documents.js');
  const directory = await mkdtemp(path.join(os.tmpdir(), 'kb-bench-sheets-'));
  const file = path.join(directory, 'rows.xlsx');
  try {
    const bytes = await makeNumberedRowsXlsx(rows);
    await writeFile(file, bytes);
    log(`a sheet of ${rows.toLocaleString('en')} rows: ${(bytes.length / 1024 / 1024).toFixed(1)} MB, ${((rows * 40) / 1024 / 1024).toFixed(0)} MB of XML`);

    const results = [];
    for (const reader of readers) {
      let needed: { heapMb: number; ms: number } | undefined;
      const refused: string[] = [];
      for (const heapMb of ladderMb) {
        const reading = readInChild(reader, file, heapMb);
        log(`${reader}, ${heapMb} MB heap: ${reading.ok ? `read in ${(reading.ms / 1000).toFixed(1)} s` : reading.reason}`);
        if (reading.ok) {
          needed = { heapMb, ms: reading.ms };
          break;
        }
        refused.push(`${heapMb} MB: ${reading.reason}`);
      }
      const timed: Extract<Reading, { ok: true }>[] = [];
      for (let run = 1; run <= repeats; run++) {
        const reading = readInChild(reader, file, timingHeapMb);
        if (!reading.ok) throw new Error(`${reader} failed with a ${timingHeapMb} MB heap: ${reading.reason}`);
        log(`${reader}, run ${run} of ${repeats}: ${(reading.ms / 1000).toFixed(1)} s`);
        timed.push(reading);
      }
      results.push({ reader, neededHeapMb: needed?.heapMb ?? null, refused, seconds: timed.map((reading) => reading.ms / 1000), numbers: timed[0]!.numbers, sha256: timed[0]!.sha256 });
    }
    const [streaming, inMemory] = results;
    if (streaming!.sha256 !== inMemory!.sha256) throw new Error('the two readers read different numbers');
    if (streaming!.numbers < rows) throw new Error(`${streaming!.numbers} numbers read of ${rows} rows`);

    const median = (values: number[]) => percentile(values, 50);
    const tableRows = results.map((result) => [
      result.reader,
      result.neededHeapMb === null ? `more than ${ladderMb.at(-1)} MB` : `${result.neededHeapMb} MB`,
      `${median(result.seconds).toFixed(1)} s`,
      result.seconds.map((seconds) => seconds.toFixed(1)).join(', '),
    ]);
    const headers = ['reader', 'smallest heap that read it', 'median time', 'runs (s)'];
    const heapRatio = inMemory!.neededHeapMb && streaming!.neededHeapMb ? inMemory!.neededHeapMb / streaming!.neededHeapMb : null;
    const timeRatio = median(inMemory!.seconds) / median(streaming!.seconds);
    process.stdout.write(`\nA sheet of ${rows.toLocaleString('en')} rows (one number each) read to text on ${machine}\n\n${textTable(headers, tableRows)}\n\n`);
    process.stdout.write(`in memory / streaming: heap ${heapRatio === null ? 'n/a' : `${heapRatio.toFixed(1)}x`}, time ${timeRatio.toFixed(2)}x (same run)\n`);

    const widest = Math.max(...results.map((result) => result.neededHeapMb ?? ladderMb.at(-1)!));
    const bars = results
      .map((result, index) => {
        const width = ((result.neededHeapMb ?? ladderMb.at(-1)!) / widest) * 480;
        const y = 20 + index * 40;
        return `<text x="0" y="${y + 18}" font-size="12">${escapeHtml(result.reader)}</text><rect x="200" y="${y}" width="${width}" height="26" fill="${index === 0 ? '#3a7' : '#c53'}"/><text x="${206 + width}" y="${y + 18}" font-size="12">${result.neededHeapMb ?? '>'} MB</text>`;
      })
      .join('');
    const chart = `<h2>Smallest heap that read the sheet</h2><svg width="760" height="${30 + results.length * 40}" role="img" aria-label="smallest heap each reader needed">${bars}</svg>`;
    await writeResults(
      'sheets',
      { date: new Date().toISOString().slice(0, 10), machine, rows, ladderMb, results, heapRatio, timeRatio },
      resultPage({
        title: 'bench:sheets',
        heading: `A sheet of ${rows.toLocaleString('en')} rows, read to text`,
        meta: `${machine}; ${new Date().toISOString().slice(0, 10)}`,
        body: `${htmlTable(headers, tableRows)}${chart}`,
        notes: ['Each reading runs in a child process of its own; the heap is V8\'s old space (--max-old-space-size). Times are with a 4 GB heap.'],
      }),
    );
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
}

runBenchmark(main);
