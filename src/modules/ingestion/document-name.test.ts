import { describe, expect, it } from 'vitest';
import { analyze, queryTerms } from '../retrieval/analyzer.js';
import { documentContext, documentTitle, indexedText, nameWords } from './document-name.js';

describe('file name words', () => {
  it('drops the extension and splits on separators and case changes', () => {
    expect(nameWords('3M_2018_10K.pdf', '')).toBe('3M 2018 10K');
    expect(nameWords('annualReport-v2.docx', '')).toBe('annual Report v2');
    expect(nameWords('PEPSICO_2023_8K_dated-2023-05-05.pdf', '')).toBe('PEPSICO 2023 8K dated 2023 05 05');
    expect(nameWords('Ward%20Cunningham.txt', '')).toBe('Ward Cunningham');
    expect(nameWords('100%25_sure.txt', '')).toBe('100% sure');
    expect(nameWords('report.2019.pdf', '')).toBe('report 2019');
    expect(nameWords('results.2019', '')).toBe('results 2019');
    expect(nameWords('notes.v2.txt', '')).toBe('notes v2');
  });

  it('gives a run-together name as the words the document writes it with', () => {
    const text = 'Annual report of Harbor Light Freight Lines, Inc. for the year ended December 31, 2021.';
    expect(nameWords('HARBORLIGHTFREIGHT_2021_10K.pdf', text)).toBe('Harbor Light Freight 2021 10K');
    // A name the text never spells out stays as it is; a single word is not split.
    expect(nameWords('ZEPHYRCORP_2021.pdf', text)).toBe('ZEPHYRCORP 2021');
    expect(nameWords('Harbor_notes.txt', text)).toBe('Harbor notes');
  });
});

describe('document titles', () => {
  const blocks = [
    { kind: 'text' as const, text: 'Preface', page: 1, headingPath: [] },
    { kind: 'heading' as const, text: 'Tidal Patterns of the North Sea', page: 1, headingPath: ['Tidal Patterns of the North Sea'], level: 1 },
  ];

  it("takes the file's own title when it names something, else the first heading, else the file name's words", () => {
    expect(documentTitle({ blocks, metadataTitle: 'Form 10-K for Example Corp filed 02/09/2023' }, 'x')).toBe('Form 10-K for Example Corp filed 02/09/2023');
    expect(documentTitle({ blocks, metadataTitle: 'Microsoft Word - Tide report final' }, 'x')).toBe('Tide report final');
    // Accession numbers, file names and "Untitled" are not titles.
    expect(documentTitle({ blocks, metadataTitle: '0001018724-18-000005' }, 'x')).toBe('Tidal Patterns of the North Sea');
    expect(documentTitle({ blocks, metadataTitle: 'draft3.docx' }, 'x')).toBe('Tidal Patterns of the North Sea');
    // Without a heading: a first paragraph of one short line that ends no sentence.
    expect(documentTitle({ blocks: [blocks[0]!], metadataTitle: null }, 'tides 2021')).toBe('Preface');
    const sentence = { kind: 'text' as const, text: 'The tide came in.', page: null, headingPath: [] };
    expect(documentTitle({ blocks: [sentence], metadataTitle: null }, 'tides 2021')).toBe('tides 2021');
    // A first paragraph of one long word (a megabyte without spaces) is no title; nor is a long heading.
    const noSpaces = { kind: 'text' as const, text: 'x'.repeat(1_000_000), page: null, headingPath: [] };
    expect(documentTitle({ blocks: [noSpaces], metadataTitle: 'y'.repeat(300) }, 'no spaces')).toBe('no spaces');
    const longHeading = { kind: 'heading' as const, text: 'z'.repeat(201), page: null, headingPath: ['z'.repeat(201)], level: 1 };
    expect(documentTitle({ blocks: [longHeading], metadataTitle: null }, 'no spaces')).toBe('no spaces');
    expect(documentContext('w'.repeat(500), 'no spaces')).toHaveLength(200 + ': no spaces'.length);
  });

  it('indexes a chunk with its document context and heading trail before its own text', () => {
    expect(documentContext('tides 2021', 'Tides 2021')).toBe('tides 2021');
    // A name of digits says nothing; the title does.
    expect(documentContext('4983', 'Tidal Patterns')).toBe('Tidal Patterns');
    expect(documentContext('4983', '4983')).toBe('');
    const context = documentContext('Harbor Light 2021 10K', 'Annual report');
    expect(context).toBe('Harbor Light 2021 10K: Annual report');
    const text = indexedText(context, ['Item 8. Financial Statements', 'Consolidated Balance Sheets'], 'Total assets 1,234');
    expect(text).toBe('Harbor Light 2021 10K: Annual report\nItem 8. Financial Statements > Consolidated Balance Sheets\nTotal assets 1,234');
    // A heading the chunk starts with is not said twice.
    expect(indexedText('x', ['Risks'], 'Risks\nWeather')).toBe('x\nRisks\nWeather');
    // Nor is a title the chunk starts with (an article's first chunk).
    expect(indexedText('Tidal Patterns', [], 'Tidal Patterns\n\nThe tide rises twice a day.')).toBe('Tidal Patterns\n\nThe tide rises twice a day.');
  });
});

describe('the analyzer on words of letters and digits', () => {
  it('also gives their runs longer than one character, so that FY2017 meets a file named 2017', () => {
    expect(analyze("Harbor's FY2017 10-K")).toEqual(['harbor', 's', 'fy2017', 'fy', '2017', '10', 'k']);
    expect(analyze('10K Q1')).toEqual(['10k', '10', 'q1']);
  });

  it("gives a query's own words before the runs taken out of them", () => {
    expect(queryTerms('FY2017 revenue growth', 3)).toEqual(['fy2017', 'revenu', 'growth']);
    expect(queryTerms('FY2017 revenue', 10)).toEqual(['fy2017', 'revenu', 'fy', '2017']);
  });
});
