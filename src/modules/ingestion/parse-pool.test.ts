import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../config.js';
import { ingestionSettings } from './jobs.js';
import { createParsePool, type ParsePool } from './parse-pool.js';

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
});
