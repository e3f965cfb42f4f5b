import { describe, expect, it } from 'vitest';
import { makeEpub, makeOdt, makePptx, makeRtf, newDeck, parseError } from '../../../test/support/documents.js';
import { chunkDocument } from './chunk.js';
import { detectDocumentType } from './detect.js';
import { parseDocument } from './parse.js';
import { EPUB_TYPE, ODT_TYPE, PPTX_TYPE, RTF_TYPE } from './types.js';


describe('PPTX', () => {
  it('reads each slide as a page: its title a heading, text in order, tables one row a line, speaker notes marked', async () => {
    const bytes = await makePptx();
    expect(detectDocumentType(bytes, 'deck.bin')).toBe(PPTX_TYPE);
    const parsed = await parseDocument(bytes, PPTX_TYPE);
    expect(parsed.pageCount).toBe(2);
    expect(parsed.metadataTitle).toBe('Kestrel programme review');
    expect(parsed.blocks.map((block) => [block.kind, block.page, block.text, block.headingPath])).toEqual([
      ['heading', 1, 'Launch schedule', ['Launch schedule']],
      ['text', 1, 'The Kestrel-4 probe launches from Port Alder in March.', ['Launch schedule']],
      ['heading', 1, 'Speaker notes', ['Launch schedule', 'Speaker notes']],
      ['text', 1, 'Mention that the magnetometer was built in Tromso.', ['Launch schedule', 'Speaker notes']],
      ['heading', 2, 'Budget', ['Budget']],
      ['text', 2, 'Item | Cost (EUR)\nFuel | 4,200\nTelemetry | 1,150', ['Budget']],
    ]);
    expect(parsed.blocks[5]!.tableHeader).toBe('Item | Cost (EUR)');
    const chunks = chunkDocument(parsed, { chunkTokens: 512, overlapTokens: 32 });
    expect(chunks.map((chunk) => [chunk.metadata.page, chunk.metadata.headings])).toEqual([
      [1, ['Launch schedule']],
      [1, ['Launch schedule', 'Speaker notes']],
      [2, ['Budget']],
    ]);
  });

  it('is a deck even when it embeds the workbook of a chart (whose part names it then holds too)', async () => {
    const deck = await newDeck();
    const slide = deck.addSlide();
    slide.addText('Launches by year', { x: 0.5, y: 0.3, w: 9, h: 1 });
    slide.addChart(deck.ChartType.bar, [{ name: 'Launches', labels: ['2024', '2025'], values: [3, 5] }], { x: 0.5, y: 1.5, w: 6, h: 3 });
    const bytes = new Uint8Array((await deck.write({ outputType: 'uint8array' })) as Uint8Array);
    expect(Buffer.from(bytes).includes('xl/workbook.xml')).toBe(true);
    expect(detectDocumentType(bytes, 'chart.bin')).toBe(PPTX_TYPE);
    expect((await parseDocument(bytes, PPTX_TYPE)).text).toContain('Launches by year');
  });

  it('refuses a truncated deck and an encrypted one with a reason', async () => {
    const bytes = await makePptx();
    expect((await parseError(parseDocument(bytes.subarray(0, bytes.length / 2), PPTX_TYPE))).message).toMatch(/^not a readable PPTX: /);
    const compound = new Uint8Array(4096);
    compound.set([0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1]);
    expect(detectDocumentType(compound, 'deck.pptx')).toBe(PPTX_TYPE);
    expect((await parseError(parseDocument(compound, PPTX_TYPE))).message).toMatch(/^the PPTX is password-protected/);
  });
});

describe('EPUB', () => {
  it('reads the chapters in spine order under their headings, without the table of contents', async () => {
    const bytes = await makeEpub();
    expect(detectDocumentType(bytes, 'book.zip')).toBe(EPUB_TYPE);
    const parsed = await parseDocument(bytes, EPUB_TYPE);
    expect(parsed.metadataTitle).toBe('The Lighthouse Keeper');
    expect(parsed.blocks.map((block) => [block.kind, block.text, block.headingPath])).toEqual([
      ['heading', 'The storm', ['The storm']],
      ['text', 'The keeper lit the lamp at dusk.', ['The storm']],
      ['text', 'Waves broke over the rocks all night.', ['The storm']],
      ['heading', 'The rescue', ['The rescue']],
      ['heading', 'Morning', ['The rescue', 'Morning']],
      ['text', 'The lifeboat came from Port Alder at dawn and took the crew ashore.', ['The rescue', 'Morning']],
    ]);
  });
});

describe('ODT', () => {
  it('reads headings and paragraphs', async () => {
    const bytes = await makeOdt();
    expect(detectDocumentType(bytes, 'notes.bin')).toBe(ODT_TYPE);
    const parsed = await parseDocument(bytes, ODT_TYPE);
    expect(parsed.blocks.map((block) => [block.kind, block.text, block.headingPath])).toEqual([
      ['heading', 'Field notes', ['Field notes']],
      ['text', 'The heron nests by the weir.', ['Field notes']],
      ['heading', 'Spring', ['Field notes', 'Spring']],
      ['text', 'The first eggs hatch in April.', ['Field notes', 'Spring']],
    ]);
  });
});

describe('RTF', () => {
  it('reads headings, paragraphs in the code page and escapes they use, and tables one row a line', async () => {
    const bytes = makeRtf();
    // Its header decides, whatever the name, though an 8-bit byte keeps it from being UTF-8 text.
    expect(detectDocumentType(bytes, 'notes.txt')).toBe(RTF_TYPE);
    expect(detectDocumentType(bytes, 'notes')).toBe(RTF_TYPE);
    const parsed = await parseDocument(bytes, RTF_TYPE);
    expect(parsed.blocks.map((block) => [block.kind, block.text, block.headingPath])).toEqual([
      ['heading', 'Berth fees', ['Berth fees']],
      ['text', 'The harbour master raised the fee for berth 7 to 42 euros in March.', ['Berth fees']],
      ['text', 'Café owners on the quay pay € 3 a day.', ['Berth fees']],
      ['text', 'Berth | Fee\n7 | 42', ['Berth fees']],
      ['text', 'Fees are reviewed each spring.', ['Berth fees']],
      ['text', 'Naïve sailors welcome.', ['Berth fees']],
    ]);
    expect(parsed.blocks[3]!.tableHeader).toBe('Berth | Fee');
  });

  it('refuses a file that only starts like RTF with a reason', async () => {
    expect((await parseError(parseDocument(new TextEncoder().encode('{\\rtf1 {{{{'), RTF_TYPE))).message).toMatch(/^(not a readable RTF: |the document contains no text)/);
  });
});
