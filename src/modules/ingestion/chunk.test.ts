import { readFileSync } from 'node:fs';
import { countTokens } from 'gpt-tokenizer';
import { describe, expect, it } from 'vitest';
import { chunkDocument, defaultChunkOptions, type DocumentChunk } from './chunk.js';
import { parseDocument } from './parse.js';
import type { ParsedBlock, ParsedDocument } from './types.js';
import path from 'node:path';
import { benchPdfDirectory } from '../../../test/support/documents.js';

function documentOf(blocks: ParsedBlock[]): ParsedDocument {
  return { text: blocks.map((block) => block.text).join('\n\n'), pageCount: null, blocks };
}
const text = (value: string, page: number | null = null, headingPath: string[] = []): ParsedBlock => ({
  kind: 'text',
  text: value,
  page,
  headingPath,
});
const heading = (value: string, level: number, headingPath: string[], page: number | null = null): ParsedBlock => ({
  kind: 'heading',
  text: value,
  page,
  headingPath,
  level,
});

/** Distinct, numbered sentences of roughly ten tokens each. */
function sentences(count: number, label = 'Sentence'): string[] {
  return Array.from({ length: count }, (_, index) => `${label} ${index + 1} talks about topic ${(index * 7) % 13} in plain words.`);
}

/** The longest suffix of `previous`, starting at a word, that `next` starts with. */
function sharedOverlap(previous: string, next: string): string {
  for (let index = 0; index < previous.length; index++) {
    if (index > 0 && !/\s/.test(previous[index - 1]!)) continue;
    const suffix = previous.slice(index);
    if (next.startsWith(suffix)) return suffix;
  }
  return '';
}

function expectWellFormed(chunks: DocumentChunk[], chunkTokens: number) {
  chunks.forEach((chunk, index) => {
    expect(chunk.chunkIndex).toBe(index);
    expect(chunk.content.trim()).toBe(chunk.content);
    expect(chunk.content.length).toBeGreaterThan(0);
    expect(chunk.tokenCount).toBe(countTokens(chunk.content));
    expect(chunk.tokenCount).toBeLessThanOrEqual(chunkTokens);
    const { page, pages } = chunk.metadata;
    expect(pages).toEqual([...new Set(pages)].sort((a, b) => a - b));
    expect(page).toBe(pages[0] ?? null);
    const starts = chunk.metadata.pageStarts;
    if (pages.length < 2) expect(starts).toBeUndefined();
    else {
      expect(new Set(starts!.map((start) => start.page))).toEqual(new Set(pages));
      expect(starts![0]!.offset).toBe(0);
      for (const [index, start] of starts!.entries()) {
        expect(start.offset).toBeGreaterThanOrEqual(index === 0 ? 0 : starts![index - 1]!.offset + 1);
        expect(chunk.content.charAt(start.offset)).toMatch(/\S/);
      }
    }
  });
}

describe('chunkDocument options', () => {
  const doc = documentOf([text('Hello.')]);

  it('exports 512/64 as defaults', () => {
    expect(defaultChunkOptions).toEqual({ chunkTokens: 512, overlapTokens: 64 });
    expect(chunkDocument(doc, defaultChunkOptions)).toHaveLength(1);
  });

  it.each([
    { chunkTokens: 15, overlapTokens: 0 },
    { chunkTokens: 100, overlapTokens: 100 },
    { chunkTokens: 100, overlapTokens: 150 },
    { chunkTokens: 100, overlapTokens: -1 },
    { chunkTokens: 100.5, overlapTokens: 10 },
    { chunkTokens: Number.NaN, overlapTokens: 10 },
  ])('rejects %o', (options) => {
    expect(() => chunkDocument(doc, options)).toThrow(RangeError);
  });

  it('returns no chunks for a document without blocks', () => {
    expect(chunkDocument(documentOf([]), defaultChunkOptions)).toEqual([]);
  });
});

describe('packing', () => {
  it('packs whole paragraphs in order and never splits one that fits', () => {
    const paragraphs = Array.from({ length: 40 }, (_, index) => sentences(3 + (index % 4), `Paragraph ${index}`).join(' '));
    const chunks = chunkDocument(documentOf(paragraphs.map((paragraph) => text(paragraph))), { chunkTokens: 120, overlapTokens: 0 });
    expectWellFormed(chunks, 120);
    expect(chunks.length).toBeGreaterThan(5);
    // Without overlap, the chunks are exactly the paragraphs, in order, grouped.
    expect(chunks.map((chunk) => chunk.content).join('\n\n')).toBe(paragraphs.join('\n\n'));
    for (const chunk of chunks) {
      for (const part of chunk.content.split('\n\n')) expect(paragraphs).toContain(part);
    }
  });

  it('splits a paragraph larger than a chunk on sentence boundaries', () => {
    const parts = sentences(200);
    const chunks = chunkDocument(documentOf([text(parts.join(' '), 7)]), { chunkTokens: 100, overlapTokens: 0 });
    expectWellFormed(chunks, 100);
    expect(chunks.length).toBeGreaterThanOrEqual(20);
    for (const chunk of chunks) {
      expect(chunk.content).toMatch(/^Sentence \d+ .*\.$/);
      expect(chunk.metadata).toEqual({ page: 7, pages: [7], headings: [] });
    }
    expect(chunks.map((chunk) => chunk.content).join(' ')).toBe(parts.join(' '));
  });

  it('splits on tokens when a paragraph has no sentence or line boundary', () => {
    const run = Array.from({ length: 3000 }, (_, index) => `w${index.toString(36)}`).join(' ');
    const chunks = chunkDocument(documentOf([text(run)]), { chunkTokens: 64, overlapTokens: 0 });
    expectWellFormed(chunks, 64);
    expect(chunks.map((chunk) => chunk.content).join(' ').replace(/\s+/g, ' ')).toBe(run);
    expect(Math.max(...chunks.map((chunk) => chunk.tokenCount))).toBeGreaterThan(50);
  });

  it('keeps multi-byte characters whole when splitting on tokens', () => {
    const run = '漢字と絵文字😀を含む長い文字列'.repeat(200);
    const chunks = chunkDocument(documentOf([text(run)]), { chunkTokens: 32, overlapTokens: 0 });
    expectWellFormed(chunks, 32);
    expect(chunks.map((chunk) => chunk.content).join('')).toBe(run);
    expect(chunks.some((chunk) => chunk.content.includes('\uFFFD'))).toBe(false);
  });

  it('splits line-structured blocks (tables, CSV, code) at line ends first', () => {
    const rows = Array.from({ length: 120 }, (_, index) => `row ${index},value ${index * 2},note ${index % 5}`);
    const chunks = chunkDocument(documentOf([text(rows.join('\n'))]), { chunkTokens: 80, overlapTokens: 0 });
    expectWellFormed(chunks, 80);
    for (const chunk of chunks) for (const line of chunk.content.split('\n')) expect(rows).toContain(line);
    expect(chunks.flatMap((chunk) => chunk.content.split('\n'))).toEqual(rows);
  });
});

describe('headings', () => {
  it('starts a new chunk at a heading and keeps the heading with its text', () => {
    const chunks = chunkDocument(
      documentOf([
        heading('Guide', 1, ['Guide']),
        text('Welcome to the guide.', null, ['Guide']),
        heading('Install', 2, ['Guide', 'Install']),
        text('Run the installer.', null, ['Guide', 'Install']),
        heading('Options', 3, ['Guide', 'Install', 'Options']),
        heading('Flags', 4, ['Guide', 'Install', 'Options', 'Flags']),
        text('Use --fast.', null, ['Guide', 'Install', 'Options', 'Flags']),
      ]),
      defaultChunkOptions,
    );
    expect(chunks.map((chunk) => [chunk.content, chunk.metadata.headings])).toEqual([
      ['Guide\n\nWelcome to the guide.', ['Guide']],
      ['Install\n\nRun the installer.', ['Guide', 'Install']],
      ['Options\n\nFlags\n\nUse --fast.', ['Guide', 'Install', 'Options']],
    ]);
  });

  it('keeps a heading with the start of a following paragraph that does not fit beside it', () => {
    const paragraph = sentences(9).join(' ');
    const chunkTokens = countTokens(paragraph);
    const chunks = chunkDocument(
      documentOf([heading('Background', 2, ['Background']), text(paragraph, null, ['Background'])]),
      { chunkTokens, overlapTokens: 0 },
    );
    expectWellFormed(chunks, chunkTokens);
    expect(chunks[0]!.content).toMatch(/^Background\n\nSentence 1 /);
    expect(chunks.every((chunk) => chunk.metadata.headings[0] === 'Background')).toBe(true);
  });

  it('does not carry overlap across a heading', () => {
    const chunks = chunkDocument(
      documentOf([
        text(sentences(5, 'Before').join(' ')),
        heading('Next', 1, ['Next']),
        text(sentences(5, 'After').join(' '), null, ['Next']),
      ]),
      { chunkTokens: 200, overlapTokens: 60 },
    );
    expect(chunks).toHaveLength(2);
    expect(chunks[1]!.content).toMatch(/^Next\n\nAfter 1 /);
  });
});

describe('overlap', () => {
  it('starts each chunk of a section with whole trailing sentences of the previous one, within the bound', () => {
    const paragraphs = Array.from({ length: 12 }, (_, index) => sentences(6, `P${index}`).join(' '));
    const options = { chunkTokens: 150, overlapTokens: 40 };
    const chunks = chunkDocument(documentOf(paragraphs.map((paragraph) => text(paragraph))), options);
    expectWellFormed(chunks, options.chunkTokens);
    expect(chunks.length).toBeGreaterThan(4);
    for (let index = 1; index < chunks.length; index++) {
      const overlap = sharedOverlap(chunks[index - 1]!.content, chunks[index]!.content);
      expect(overlap.length).toBeGreaterThan(0);
      expect(countTokens(overlap)).toBeLessThanOrEqual(options.overlapTokens);
      // Whole sentences: the overlap begins a sentence and ends one.
      expect(overlap).toMatch(/^P\d+ \d+ .*\.$/s);
      // And the chunk brings new text after it.
      expect(chunks[index]!.content.length).toBeGreaterThan(overlap.length);
    }
  });

  it('takes no overlap when the last sentence alone is longer than the bound', () => {
    const long = `${'A very long sentence that goes on and on without an end in sight'.repeat(3)}.`;
    const chunks = chunkDocument(documentOf([text(long), text(long), text(long)]), { chunkTokens: 60, overlapTokens: 10 });
    expectWellFormed(chunks, 60);
    expect(chunks).toHaveLength(3);
    expect(chunks.every((chunk) => chunk.content === long)).toBe(true);
  });
});

describe('a piece larger than a chunk only without its leading space', () => {
  it('is split rather than dropped (found by chunk.fuzz.test.ts, seed 2133867354)', () => {
    // Split by tokens, its second run is 16 tokens with its leading space and 17 without.
    const text = '\u0000\u{10000}# a\u{10000}' + '.'.repeat(500);
    const chunks = chunkDocument(documentOf([{ kind: 'text', text, page: null, headingPath: [] }]), { chunkTokens: 16, overlapTokens: 0 });
    expect(chunks.map((chunk) => chunk.content).join('').replace(/\s+/g, '')).toBe(text.replace(/\s+/g, ''));
    for (const chunk of chunks) expect(chunk.tokenCount).toBeLessThanOrEqual(16);
  });
});

describe('pages', () => {
  it('records the first page and every page a chunk spans', () => {
    const chunks = chunkDocument(
      documentOf([text('One.', 1), text('Two.', 2), text('Also two.', 2), text('Four.', 4)]),
      defaultChunkOptions,
    );
    expect(chunks).toHaveLength(1);
    const content = 'One.\n\nTwo.\n\nAlso two.\n\nFour.';
    expect(chunks[0]!.content).toBe(content);
    expect(chunks[0]!.metadata).toEqual({
      page: 1,
      pages: [1, 2, 4],
      headings: [],
      pageStarts: [
        { page: 1, offset: 0 },
        { page: 2, offset: content.indexOf('Two.') },
        { page: 4, offset: content.indexOf('Four.') },
      ],
    });
  });

  it('says where each page begins in a chunk that spans pages of a real PDF', async () => {
    const doc = await parseDocument(new Uint8Array(readFileSync(path.join(benchPdfDirectory, 'sample_pdf_2.pdf'))), 'application/pdf');
    const chunks = chunkDocument(doc, { chunkTokens: 512, overlapTokens: 0 });
    expectWellFormed(chunks, 512);
    const spanning = chunks.filter((chunk) => chunk.metadata.pages.length > 1);
    expect(spanning.length).toBeGreaterThan(0);
    for (const chunk of spanning) {
      for (const { page, offset } of chunk.metadata.pageStarts!.slice(1)) {
        // The text a page starts with in the chunk is that page's text in the parsed document.
        const opening = chunk.content.slice(offset, offset + 24);
        expect(doc.blocks.some((block) => block.page === page && block.text.includes(opening))).toBe(true);
      }
    }
  });

  it('keeps page numbers for a real PDF in reading order', async () => {
    const doc = await parseDocument(new Uint8Array(readFileSync(path.join(benchPdfDirectory, 'sample_pdf_2.pdf'))), 'application/pdf');
    const chunks = chunkDocument(doc, { chunkTokens: 128, overlapTokens: 16 });
    expectWellFormed(chunks, 128);
    const firstPages = chunks.map((chunk) => chunk.metadata.page!);
    expect(firstPages).toEqual([...firstPages].sort((a, b) => a - b));
    expect(new Set(chunks.flatMap((chunk) => chunk.metadata.pages))).toEqual(new Set([1, 2, 3, 4]));
  });
});

describe('tables', () => {
  const header = 'CONSOLIDATED BALANCE SHEETS (in millions)\nDecember 31, 2021 2020';
  const rows = Array.from({ length: 60 }, (_, index) => `Line item number ${index + 1} of the statement $ ${1_000 + index * 37} $ ${2_000 + index * 41}`);
  const table: ParsedBlock = { kind: 'text', text: [header, ...rows].join('\n'), page: 3, headingPath: [], tableHeader: header };

  it('cuts a table between rows and starts each of its chunks with its header', () => {
    const chunks = chunkDocument(documentOf([table]), { chunkTokens: 128, overlapTokens: 16 });
    expect(chunks.length).toBeGreaterThan(4);
    expectWellFormed(chunks, 128);
    for (const chunk of chunks) expect(chunk.content.startsWith(`${header}\n`)).toBe(true);
    const bodies = chunks.map((chunk) => chunk.content.slice(header.length + 1).split('\n'));
    // Every row whole, once, in order: the header takes the place of overlap.
    expect(bodies.flat()).toEqual(rows);
  });

  it('starts a large table in a chunk of its own, after the prose before it', () => {
    const prose = text(sentences(6).join(' '), 2);
    const chunks = chunkDocument(documentOf([prose, table]), { chunkTokens: 1_500, overlapTokens: 32 });
    expect(chunks[0]!.content).toBe(prose.text);
    expect(chunks[1]!.content).toBe(table.text);
  });

  it('keeps a small table with the prose around it', () => {
    const small: ParsedBlock = { ...table, text: [header, ...rows.slice(0, 3)].join('\n') };
    const chunks = chunkDocument(documentOf([text('Before the table.', 1), small, text('After the table.', 1)]), { chunkTokens: 512, overlapTokens: 32 });
    expect(chunks.map((chunk) => chunk.content)).toEqual([`Before the table.\n\n${small.text}\n\nAfter the table.`]);
  });

  it('cuts a block whose header would take more than a quarter of a chunk as text', () => {
    const longHeader = sentences(8).join(' ');
    const block: ParsedBlock = { ...table, text: [longHeader, ...rows].join('\n'), tableHeader: longHeader };
    const chunks = chunkDocument(documentOf([block]), { chunkTokens: 128, overlapTokens: 16 });
    expect(chunks.filter((chunk) => chunk.content.startsWith(longHeader))).toHaveLength(1);
  });
});

describe('lyft_2021.pdf (238 pages)', () => {
  it('reads its statements as tables: one row a line, headed by their caption and years', async () => {
    const doc = await parseDocument(new Uint8Array(readFileSync(path.join(benchPdfDirectory, 'lyft_2021.pdf'))), 'application/pdf');
    const balanceSheet = doc.blocks.find((block) => block.tableHeader?.includes('Consolidated Balance Sheets'));
    expect(balanceSheet?.tableHeader).toBe('Lyft, Inc.\nConsolidated Balance Sheets\n(in thousands, except for share and per share data)\nDecember 31,\n2021 2020');
    const lines = balanceSheet!.text.split('\n');
    expect(lines).toContain('Cash and cash equivalents $ 457,325 $ 319,734');
    expect(lines).toContain('Total current assets 2,776,070 2,594,138');

    // A chunk with a row of the balance sheet names the table and its columns.
    const chunks = chunkDocument(doc, { chunkTokens: 128, overlapTokens: 16 });
    const withRows = chunks.filter((chunk) => lines.slice(6).some((row) => chunk.content.split('\n').includes(row)));
    expect(withRows.length).toBeGreaterThan(1);
    for (const chunk of withRows) expect(chunk.content.startsWith(balanceSheet!.tableHeader!)).toBe(true);
  }, 60_000);

  it('parses and chunks within the sanity bound', async () => {
    const started = performance.now();
    const doc = await parseDocument(new Uint8Array(readFileSync(path.join(benchPdfDirectory, 'lyft_2021.pdf'))), 'application/pdf');
    const chunks = chunkDocument(doc, defaultChunkOptions);
    const elapsedMs = performance.now() - started;
    expect(elapsedMs).toBeLessThan(60_000);

    expect(doc.pageCount).toBe(238);
    expectWellFormed(chunks, defaultChunkOptions.chunkTokens);
    const firstPages = chunks.map((chunk) => chunk.metadata.page!);
    expect(firstPages).toEqual([...firstPages].sort((a, b) => a - b));
    expect(firstPages[0]).toBe(1);
    expect(chunks.at(-1)!.metadata.pages.at(-1)).toBeGreaterThan(230);
    expect(chunks.filter((chunk, index) => index > 0 && sharedOverlap(chunks[index - 1]!.content, chunk.content) !== '').length).toBeGreaterThan(
      chunks.length / 4,
    );
  }, 90_000);
});
