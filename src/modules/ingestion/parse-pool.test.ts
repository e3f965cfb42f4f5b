import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../config.js';
import { ingestionSettings } from './handlers.js';
import { createParsePool, ParserCrashError, type ParsePool } from './parse-pool.js';
import { XLSX_TYPE } from './types.js';
import { makeNumberedRowsXlsx, makeRepeatedScan } from '../../../test/support/documents.js';
import { isRunning, serve, stop } from '../../../test/support/cli.js';
import { migratedDataDir } from '../../../test/support/server.js';
import { parsingProcessesOf, threadsOf, until } from '../../../test/support/processes.js';
import { placeThisThread, threadCpus } from '../../thread-placement.js';

// Real parsing processes: when a pool starts them, what ends them, and what a parse hears when one dies.
let pool: ParsePool | undefined;

afterEach(async () => {
  await pool?.close();
  pool = undefined;
});

const config = loadConfig({ ...process.env });
const limits = { parseMemoryMb: config.ingestion.parseMemoryMb, parseIdleSeconds: config.ingestion.parseIdleSeconds, parseLimits: ingestionSettings(config).parseLimits };

const scanTask = async (pages: number) => ({
  bytes: await makeRepeatedScan(pages),
  type: 'application/pdf' as const,
  filename: 'scan.pdf',
  chunkOptions: { chunkTokens: 256, overlapTokens: 32 },
  limits: limits.parseLimits,
});

describe('the parse pool', () => {
  it('starts no process before a document unless asked to warm', async () => {
    pool = createParsePool(2, { memoryMb: limits.parseMemoryMb, idleSeconds: limits.parseIdleSeconds });
    await pool.warmed;
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(pool.processes).toBe(0);
  });

  it('warmed, starts every process with no document, and they parse', async () => {
    pool = createParsePool(2, { memoryMb: limits.parseMemoryMb, idleSeconds: limits.parseIdleSeconds, warm: true });
    await pool.warmed;
    expect(pool.processes).toBe(2);
    const result = await pool.parse({
      bytes: new TextEncoder().encode('A heron stands in the shallows.\n\nIt waits for a fish.'),
      type: 'text/plain',
      filename: 'note.txt',
      chunkOptions: { chunkTokens: 64, overlapTokens: 8 },
      limits: limits.parseLimits,
    });
    expect(result).toMatchObject({ ok: true, chunks: [{ content: expect.stringContaining('heron') }] });
    expect(pool.processes).toBe(2);
  });

  it('starts processes that take the CPUs they are given, though started by a thread kept to fewer (thread-placement.ts)', async () => {
    const all = threadCpus()!;
    const narrowed = all.length > 1 ? all.slice(0, -1) : all;
    // Servers of other files in this worker may keep parsing processes of their own.
    const others = new Set(parsingProcessesOf(process.pid));
    expect(await placeThisThread(narrowed)).toBeUndefined();
    try {
      pool = createParsePool(2, { memoryMb: limits.parseMemoryMb, idleSeconds: limits.parseIdleSeconds, warm: true, cpus: all });
      await pool.warmed;
    } finally {
      expect(await placeThisThread(all)).toBeUndefined();
    }
    const parsers = parsingProcessesOf(process.pid).filter((pid) => !others.has(pid));
    expect(parsers).toHaveLength(2);
    for (const parser of parsers) {
      const threads = threadsOf(parser);
      expect(threads.length).toBeGreaterThanOrEqual(2);
      for (const thread of threads) expect(thread.cpus).toEqual(all);
    }
  });

  it('reads a sheet of a million rows a row at a time, within a process of half the default 1024 MB', { timeout: 120_000 }, async () => {
    pool = createParsePool(1, { memoryMb: 512, idleSeconds: limits.parseIdleSeconds });
    const result = await pool.parse({
      bytes: await makeNumberedRowsXlsx(1_000_000),
      type: XLSX_TYPE,
      filename: 'million.xlsx',
      chunkOptions: { chunkTokens: 512, overlapTokens: 32 },
      limits: limits.parseLimits,
    });
    if (!result.ok) throw new Error(result.error);
    // The first row is the header, repeated in every chunk; every other row is in exactly one chunk, in order.
    const ranges = result.chunks.map((chunk) => /^A(\d+):A(\d+)$/.exec(chunk.metadata.range!)!.slice(1).map(Number));
    expect(ranges[0]![0]).toBe(2);
    expect(ranges.at(-1)![1]).toBe(1_000_000);
    for (let index = 1; index < ranges.length; index++) expect(ranges[index]![0]).toBe(ranges[index - 1]![1]! + 1);
    expect(result.chunks.at(-1)!.content.endsWith('\n1000000')).toBe(true);
  });

  it('fails a parse whose process dies mid-file (as a fault in native code in a parser ends it) and goes on with a new process', { timeout: 120_000 }, async () => {
    pool = createParsePool(1, { memoryMb: limits.parseMemoryMb, idleSeconds: limits.parseIdleSeconds });
    // Other pools of this test process (test servers' shared models) have parsing processes too.
    const others = new Set(parsingProcessesOf(process.pid));
    let killed: number | undefined;
    const parse = pool.parse(await scanTask(3), undefined, () => {
      // OCR is about to read a page: the process is deep in rendering and recognition.
      if (killed !== undefined) return;
      killed = parsingProcessesOf(process.pid).find((pid) => !others.has(pid));
      process.kill(killed!, 'SIGSEGV');
    });
    await expect(parse).rejects.toThrow(new ParserCrashError('the parsing process ended while it read the file (signal SIGSEGV)'));
    expect(killed).toBeDefined();
    const next = await pool.parse({ ...(await scanTask(1)), bytes: new TextEncoder().encode('The heron came back.'), type: 'text/plain', filename: 'note.txt' });
    expect(next).toMatchObject({ ok: true, chunks: [{ content: expect.stringContaining('heron') }] });
    expect(parsingProcessesOf(process.pid)).not.toContain(killed);
    expect(pool.processes).toBe(1);
  });

  it('ends the process of an aborted parse at once, and starts another for the next', { timeout: 120_000 }, async () => {
    pool = createParsePool(1, { memoryMb: limits.parseMemoryMb, idleSeconds: limits.parseIdleSeconds });
    const controller = new AbortController();
    const others = new Set(parsingProcessesOf(process.pid));
    let parsing: number | undefined;
    const parse = pool.parse(await scanTask(3), controller.signal, () => {
      parsing ??= parsingProcessesOf(process.pid).find((pid) => !others.has(pid));
      controller.abort(new Error('the upload was deleted'));
    });
    await expect(parse).rejects.toThrow('the upload was deleted');
    expect(parsing).toBeDefined();
    expect(await until(() => !isRunning(parsing!), 5_000)).toBe(true);
    const next = await pool.parse({ ...(await scanTask(1)), bytes: new TextEncoder().encode('Another heron.'), type: 'text/plain', filename: 'note.txt' });
    expect(next).toMatchObject({ ok: true });
  });

  it('leaves no parsing process behind when its server is killed with SIGKILL', { timeout: 120_000 }, async () => {
    const server = await serve({ ...process.env, KB_DATA_DIR: await migratedDataDir('parse-orphans'), KB_LOG_LEVEL: 'error', KB_INGEST_CONCURRENCY: '2' });
    const pid = server.child.pid!;
    expect(await until(() => parsingProcessesOf(pid).length === 2, 30_000), 'the server started its two parsing processes').toBe(true);
    const children = parsingProcessesOf(pid);
    await stop(server.child, 'SIGKILL');
    expect(await until(() => children.every((child) => !isRunning(child)), 10_000), `still running: ${children.filter(isRunning).join(', ')}`).toBe(true);
  });
});
