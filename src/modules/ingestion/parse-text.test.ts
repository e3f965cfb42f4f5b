import { Document, Packer, Paragraph } from 'docx';
import { describe, expect, it } from 'vitest';
import { parseDocument } from './parse.js';
import { chunkDocument } from './chunk.js';
import { parseError } from '../../../test/support/documents.js';

// Text formats (HTML, Markdown, plain text, CSV, JSON), empty documents and headings; PDF and DOCX are in parse.test.ts.
const DOCX = 'application/vnd.openxmlformats-officedocument.wordprocessingml.document';
const utf8 = (text: string) => new TextEncoder().encode(text);

describe('HTML', () => {
  const page = `<!doctype html>
<html><head><title>Release notes</title>
<style>body { color: red } .secret-style {}</style>
<script>var secretScript = "do not index";</script>
</head>
<body>
  <nav><a href="/">Home</a> <a href="/docs">Docs</a></nav>
  <noscript>secret noscript text</noscript>
  <template><p>secret template text</p></template>
  <main>
    <article>
      <h1>Release notes</h1>
      <p>Version 2 brings a faster importer, a new search page and many small fixes that users asked for over the last year.</p>
      <h2>Importer</h2>
      <p>The importer now reads PDF, DOCX, HTML and Markdown files, and it reports files it cannot read with a clear message.</p>
      <script>console.log("secret inline script")</script>
      <ul><li>Faster parsing</li><li>Better errors<ul><li>Clear messages</li></ul></li></ul>
      <h2>Search</h2>
      <p>Search results show the page and the heading where each match was found, so long documents are easier to navigate.</p>
      <pre>kb import ./docs
kb search "importer"</pre>
    </article>
  </main>
</body></html>`;

  it('keeps the article text, headings and structure without script, style, noscript or template content', async () => {
    const doc = await parseDocument(utf8(page), 'text/html');
    expect(doc.text).not.toMatch(/secret|color: red/);
    expect(doc.text).toContain('Version 2 brings a faster importer');
    const headings = doc.blocks.filter((block) => block.kind === 'heading').map((block) => block.text);
    expect(headings).toContain('Importer');
    expect(headings).toContain('Search');
    const list = doc.blocks.find((block) => block.text.startsWith('- Faster parsing'));
    expect(list?.text).toBe('- Faster parsing\n- Better errors\n  - Clear messages');
    expect(list?.headingPath.at(-1)).toBe('Importer');
    expect(doc.text).toContain('kb import ./docs\nkb search "importer"');
    expect(doc.pageCount).toBeNull();
  });

  it('falls back to the body text when there is no article', async () => {
    const doc = await parseDocument(utf8('<p>Short note.</p><script>secret()</script><h3>Later</h3><div>More</div>'), 'text/html');
    expect(doc.text).not.toContain('secret');
    expect(doc.text).toContain('Short note.');
    expect(doc.blocks.find((block) => block.text === 'More')?.headingPath).toEqual(['Later']);
  });

  it('treats a page with only scripts and styles as empty', async () => {
    const error = await parseError(parseDocument(utf8('<html><head><style>p{}</style></head><body><script>x()</script></body></html>'), 'text/html'));
    expect(error.message).toBe('the document contains no text');
  });
});

describe('tables in HTML and Markdown', () => {
  it('marks an HTML table with its caption and title rows as its header', async () => {
    const html = '<table><caption>Revenue by segment</caption><thead><tr><th>Segment</th><th>2022</th></tr></thead><tbody><tr><td>Cloud</td><td>12</td></tr><tr><td>Devices</td><td>7</td></tr></tbody></table>';
    const doc = await parseDocument(utf8(html), 'text/html');
    expect(doc.blocks).toEqual([
      { kind: 'text', text: 'Revenue by segment\nSegment | 2022\nCloud | 12\nDevices | 7', page: null, headingPath: [], tableHeader: 'Revenue by segment\nSegment | 2022' },
    ]);
  });

  it('marks a Markdown pipe table with its title and delimiter rows as its header', async () => {
    const doc = await parseDocument(utf8('| Segment | 2022 |\n|---|--:|\n| Cloud | 12 |\n| Devices | 7 |'), 'text/markdown');
    expect(doc.blocks[0]!.tableHeader).toBe('| Segment | 2022 |\n|---|--:|');
    const prose = await parseDocument(utf8('A paragraph\nwith two lines.'), 'text/markdown');
    expect(prose.blocks[0]!.tableHeader).toBeUndefined();
  });
});

describe('Markdown', () => {
  const markdown = [
    '---',
    'title: Guide',
    '---',
    '# Guide',
    '',
    'Intro paragraph',
    'continues here.',
    '',
    'Setup',
    '-----',
    '',
    '```bash',
    'npm test',
    '',
    '# not a heading inside code',
    '```',
    '',
    '### Details ###',
    '',
    'Last paragraph.',
    '',
    '***',
    '',
    'Appendix',
    '========',
    'Tail text.',
  ].join('\n');

  it('makes ATX and setext headings, keeps fenced code intact and splits paragraphs on blank lines', async () => {
    const doc = await parseDocument(utf8(markdown), 'text/markdown');
    expect(doc.blocks).toEqual([
      { kind: 'text', text: '---\ntitle: Guide\n---', page: null, headingPath: [] },
      { kind: 'heading', text: 'Guide', page: null, headingPath: ['Guide'], level: 1 },
      { kind: 'text', text: 'Intro paragraph\ncontinues here.', page: null, headingPath: ['Guide'] },
      { kind: 'heading', text: 'Setup', page: null, headingPath: ['Guide', 'Setup'], level: 2 },
      { kind: 'text', text: '```bash\nnpm test\n\n# not a heading inside code\n```', page: null, headingPath: ['Guide', 'Setup'] },
      { kind: 'heading', text: 'Details', page: null, headingPath: ['Guide', 'Setup', 'Details'], level: 3 },
      { kind: 'text', text: 'Last paragraph.', page: null, headingPath: ['Guide', 'Setup', 'Details'] },
      { kind: 'heading', text: 'Appendix', page: null, headingPath: ['Appendix'], level: 1 },
      { kind: 'text', text: 'Tail text.', page: null, headingPath: ['Appendix'] },
    ]);
  });

  it('keeps an unclosed fence to the end of the file', async () => {
    const doc = await parseDocument(utf8('Before\n\n~~~\ncode\n\nmore code'), 'text/markdown');
    expect(doc.blocks.map((block) => block.text)).toEqual(['Before', '~~~\ncode\n\nmore code']);
  });
});

describe('plain text, CSV and JSON', () => {
  it('splits plain text on blank lines and normalises line endings', async () => {
    const doc = await parseDocument(utf8('First line\r\nsecond line\r\n\r\n  \r\nNext paragraph\n'), 'text/plain');
    expect(doc.blocks.map((block) => block.text)).toEqual(['First line\nsecond line', 'Next paragraph']);
    expect(doc.text).toBe('First line\nsecond line\n\nNext paragraph');
    expect(doc.pageCount).toBeNull();
  });

  it('keeps CSV rows whole, including quoted fields with line breaks', async () => {
    const rows = ['name,comment', 'alice,"likes\nnewlines"', 'bob,"says ""hi"""'];
    const doc = await parseDocument(utf8(`${rows.join('\n')}\n`), 'text/csv');
    expect(doc.blocks).toEqual([{ kind: 'text', text: rows.join('\n'), page: null, headingPath: [], tableHeader: 'name,comment' }]);
  });

  it('groups a long CSV into blocks of whole rows, each starting with the header row', async () => {
    const rows = Array.from({ length: 300 }, (_, index) => `${index},item number ${index},${index * 3}`);
    const doc = await parseDocument(utf8(['id,name,value', ...rows].join('\n')), 'text/csv');
    expect(doc.blocks.length).toBeGreaterThan(1);
    for (const block of doc.blocks) {
      expect(block.tableHeader).toBe('id,name,value');
      expect(block.text.split('\n')[0]).toBe('id,name,value');
    }
    expect(doc.blocks.flatMap((block) => block.text.split('\n').slice(1))).toEqual(rows);
  });

  it('repeats no header row too long to repeat: a megabyte of columns is stored once', async () => {
    const header = 'column,'.repeat(150_000);
    const rows = Array.from({ length: 200 }, (_, index) => `${index},value ${index}`);
    const doc = await parseDocument(utf8([header, ...rows].join('\n')), 'text/csv');
    expect(doc.blocks.every((block) => block.tableHeader === undefined)).toBe(true);
    expect(doc.blocks.reduce((total, block) => total + block.text.length, 0)).toBeLessThan(header.length + 10_000);
    expect(doc.blocks.flatMap((block) => block.text.split('\n'))).toEqual([header.trimEnd(), ...rows]);
  });

  it('pretty-prints JSON', async () => {
    const doc = await parseDocument(utf8('{"name":"kb","tags":["a","b"],"nested":{"ok":true}}'), 'application/json');
    expect(doc.text).toBe(JSON.stringify({ name: 'kb', tags: ['a', 'b'], nested: { ok: true } }, null, 2));
  });

  it('reads JSON that does not parse as plain text', async () => {
    const doc = await parseDocument(utf8('{"broken": '), 'application/json');
    expect(doc.text).toBe('{"broken":');
  });

  it('rejects invalid UTF-8', async () => {
    const error = await parseError(parseDocument(Uint8Array.of(0x61, 0xff, 0xfe, 0x62), 'text/plain'));
    expect(error.message).toBe('the file is not valid UTF-8 text');
  });
});

describe('empty documents', () => {
  const types = ['application/pdf', DOCX, 'text/html', 'text/markdown', 'text/plain', 'text/csv', 'application/json'] as const;

  it.each(types)('rejects an empty %s file', async (type) => {
    const error = await parseError(parseDocument(new Uint8Array(0), type));
    expect(error.message).toBe('the document contains no text');
  });

  it.each(['text/plain', 'text/markdown', 'text/csv', 'text/html'] as const)('rejects whitespace-only %s content', async (type) => {
    const error = await parseError(parseDocument(utf8('  \n\t\n  \n'), type));
    expect(error.message).toBe('the document contains no text');
  });

  it('rejects a DOCX without text', async () => {
    const empty = new Uint8Array(await Packer.toBuffer(new Document({ sections: [{ children: [new Paragraph('')] }] })));
    const error = await parseError(parseDocument(empty, DOCX));
    expect(error.message).toBe('the document contains no text');
  });
});

describe('headings of any length', () => {
  it('reads a "heading" over 300 characters as text, and names it in the trails below by its beginning', async () => {
    const long = `${'A whole paragraph styled as a heading '.repeat(3_000)}ends here`;
    const markdown = `# ${long}\n\n${'A sentence under the long heading. '.repeat(2_000)}\n\n## Short heading\n\nThe last words.`;
    const parsed = await parseDocument(new TextEncoder().encode(markdown), 'text/markdown');
    expect(parsed.blocks[0]).toMatchObject({ kind: 'text', text: long });
    expect(parsed.blocks[0]).not.toHaveProperty('level');
    const trail = parsed.blocks.at(-1)!.headingPath;
    expect(trail).toHaveLength(2);
    expect(trail[0]!.length).toBeLessThanOrEqual(300);
    // Cut at a word's end, marked.
    expect(trail[0]!).toMatch(/^(A whole paragraph styled as a heading )+[A-Za-z]+( [A-Za-z]+)*…$/);
    expect(long.startsWith(trail[0]!.slice(0, -1))).toBe(true);
    expect(trail[1]).toBe('Short heading');
    // Every chunk's trail stays short, however many chunks the text makes.
    const chunks = chunkDocument(parsed, { chunkTokens: 128, overlapTokens: 16 });
    expect(chunks.length).toBeGreaterThan(100);
    for (const chunk of chunks) for (const heading of chunk.metadata.headings) expect(heading.length).toBeLessThanOrEqual(300);
  });
});
