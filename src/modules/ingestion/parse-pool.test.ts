import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../config.js';
import { ingestionSettings } from './handlers.js';
import { createParsePool, type ParsePool } from './parse-pool.js';
import { XLSX_TYPE } from './types.js';
import { makeNumberedRowsXlsx } from '../../../test/support/documents.js';

// Real parser threads: whether a pool starts them before its first document.
let pool: ParsePool | undefined;

afterEach(async () => {
  await pool?.close();
  pool = undefined;
});

const config = loadConfig({ ...process.env });
const limits = { parseMemoryMb: config.ingestion.parseMemoryMb, parseThreadIdleSeconds: config.ingestion.parseThreadIdleSeconds, parseLimits: ingestionSettings(config).parseLimits };

describe('the parse pool', () => {
  it('starts no thread before a document unless asked to warm', async () => {
    pool = createParsePool(2, { memoryMb: limits.parseMemoryMb, idleSeconds: limits.parseThreadIdleSeconds });
    await pool.warmed;
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(pool.threads).toBe(0);
  });

  it('warmed, starts every thread with no document, and they parse', async () => {
    pool = createParsePool(2, { memoryMb: limits.parseMemoryMb, idleSeconds: limits.parseThreadIdleSeconds, warm: true });
    await pool.warmed;
    expect(pool.threads).toBe(2);
    const result = await pool.parse({
      bytes: new TextEncoder().encode('A heron stands in the shallows.\n\nIt waits for a fish.'),
      type: 'text/plain',
      filename: 'note.txt',
      chunkOptions: { chunkTokens: 64, overlapTokens: 8 },
      limits: limits.parseLimits,
    });
    expect(result).toMatchObject({ ok: true, chunks: [{ content: expect.stringContaining('heron') }] });
    expect(pool.threads).toBe(2);
  });

  it('reads a sheet of a million rows a row at a time, within a thread of half the default 1024 MB', { timeout: 120_000 }, async () => {
    pool = createParsePool(1, { memoryMb: 512, idleSeconds: limits.parseThreadIdleSeconds });
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
});
