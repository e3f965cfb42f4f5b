import { readFileSync } from 'node:fs';
import { Document, HeadingLevel, Packer, Paragraph } from 'docx';
import { describe, expect, it } from 'vitest';
import { detectDocumentType } from './detect.js';
import { benchPdfDirectory } from '../../../test/support/documents.js';

const benchPdfs = benchPdfDirectory;
const samplePdf = new Uint8Array(readFileSync(`${benchPdfs}/sample_pdf_1.pdf`));
const utf8 = (text: string) => new TextEncoder().encode(text);
const PNG_HEADER = Uint8Array.of(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d, 0x49, 0x48, 0x44, 0x52);
/** GIF is not read: an animation's frames are rarely pages of text. */
const GIF_HEADER = Uint8Array.of(0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 1, 0, 1, 0, 0x80, 0, 0, 0xff, 0xff, 0xff, 0, 0, 0);

/** Deterministic bytes that are not text: every byte value, NULs included. */
function binaryJunk(length: number): Uint8Array {
  return Uint8Array.from({ length }, (_, index) => (index * 151 + 7) % 256);
}

describe('detectDocumentType', () => {
  it('recognises a PDF by its signature whatever its name', () => {
    expect(detectDocumentType(samplePdf, 'report.pdf')).toBe('application/pdf');
    expect(detectDocumentType(samplePdf, 'report.txt')).toBe('application/pdf');
    expect(detectDocumentType(samplePdf, 'no-extension')).toBe('application/pdf');
    const withLeadingJunk = Uint8Array.of(0x00, 0xff, 0x00, 0xfe, ...samplePdf);
    expect(detectDocumentType(withLeadingJunk, 'scan.pdf')).toBe('application/pdf');
  });

  it('does not mistake text that mentions the PDF header for a PDF', () => {
    expect(detectDocumentType(utf8('Every PDF file starts with %PDF-1.x, then a binary comment.'), 'notes.md')).toBe('text/markdown');
  });

  it('recognises a DOCX by its content whatever its name', async () => {
    const docx = new Uint8Array(
      await Packer.toBuffer(new Document({ sections: [{ children: [new Paragraph({ text: 'Hi', heading: HeadingLevel.HEADING_1 })] }] })),
    );
    expect(detectDocumentType(docx, 'notes.docx')).toBe('application/vnd.openxmlformats-officedocument.wordprocessingml.document');
    expect(detectDocumentType(docx, 'notes.bin')).toBe('application/vnd.openxmlformats-officedocument.wordprocessingml.document');
  });

  it('passes a zip named .docx on as DOCX so that the parser can explain what is wrong', () => {
    const zipHeader = Uint8Array.of(0x50, 0x4b, 0x03, 0x04, 0x14, 0, 0, 0, 8, 0);
    expect(detectDocumentType(zipHeader, 'broken.docx')).toBe('application/vnd.openxmlformats-officedocument.wordprocessingml.document');
    expect(detectDocumentType(zipHeader, 'archive.zip')).toBeNull();
    expect(detectDocumentType(zipHeader, 'archive.txt')).toBeNull();
  });

  it('recognises images of pages by their signature, whatever their name', () => {
    expect(detectDocumentType(PNG_HEADER, 'picture.txt')).toBe('image/png');
    expect(detectDocumentType(Uint8Array.of(0xff, 0xd8, 0xff, 0xe0, 0, 0x10), 'scan')).toBe('image/jpeg');
    expect(detectDocumentType(new TextEncoder().encode('RIFF\u0000\u0000\u0000\u0000WEBPVP8 '), 'page.bin')).toBe('image/webp');    expect(detectDocumentType(Uint8Array.of(0x49, 0x49, 0x2a, 0x00, 8, 0, 0, 0), 'scan.dat')).toBe('image/tiff');
    expect(detectDocumentType(Uint8Array.of(0x4d, 0x4d, 0x00, 0x2a, 0, 0, 0, 8), 'scan')).toBe('image/tiff');
  });

  it('rejects binary junk even when it is named like text', () => {
    expect(detectDocumentType(GIF_HEADER, 'picture.txt')).toBeNull();
    expect(detectDocumentType(GIF_HEADER, 'picture.gif')).toBeNull();
    expect(detectDocumentType(binaryJunk(4096), 'notes.txt')).toBeNull();
    expect(detectDocumentType(binaryJunk(4096), 'notes.md')).toBeNull();
    expect(detectDocumentType(binaryJunk(4096), 'notes.pdf')).toBeNull();
    expect(detectDocumentType(binaryJunk(4096), 'notes.docx')).toBeNull();
    expect(detectDocumentType(Uint8Array.of(0x68, 0x69, 0xc3, 0x28), 'invalid-utf8.txt')).toBeNull();
    expect(detectDocumentType(utf8('text with a NUL \u0000 inside'), 'nul.txt')).toBeNull();
  });

  it('classifies text by extension', () => {
    expect(detectDocumentType(utf8('# Title\n\nBody'), 'README.md')).toBe('text/markdown');
    expect(detectDocumentType(utf8('# Title'), 'notes.MARKDOWN')).toBe('text/markdown');
    expect(detectDocumentType(utf8('<p>hello</p>'), 'page.html')).toBe('text/html');
    expect(detectDocumentType(utf8('<p>hello</p>'), 'page.htm')).toBe('text/html');
    expect(detectDocumentType(utf8('a,b\n1,2\n'), 'table.csv')).toBe('text/csv');
    expect(detectDocumentType(utf8('{"a": [1, 2]}'), 'data.json')).toBe('application/json');
    expect(detectDocumentType(utf8('just words'), 'notes.txt')).toBe('text/plain');
    expect(detectDocumentType(utf8('just words'), 'LICENSE')).toBe('text/plain');
    expect(detectDocumentType(utf8('key: value'), 'config.yaml')).toBe('text/plain');
  });

  it('treats a .json file that does not parse as plain text', () => {
    expect(detectDocumentType(utf8('{"unterminated": '), 'broken.json')).toBe('text/plain');
  });

  it('sniffs HTML pages among plain text files', () => {
    expect(detectDocumentType(utf8('<!DOCTYPE html><html><body>x</body></html>'), 'saved.txt')).toBe('text/html');
    expect(detectDocumentType(utf8('  <html lang="en"><body>x</body></html>'), 'page')).toBe('text/html');
    expect(detectDocumentType(utf8('<p>a fragment is not a page</p>'), 'fragment.txt')).toBe('text/plain');
    expect(detectDocumentType(utf8('<!doctype html><p>x</p>'), 'notes.md')).toBe('text/markdown');
  });

  it('accepts UTF-8 and UTF-16 with a byte-order mark', () => {
    expect(detectDocumentType(Uint8Array.of(0xef, 0xbb, 0xbf, ...utf8('hello')), 'bom.txt')).toBe('text/plain');
    const utf16le = Uint8Array.of(0xff, 0xfe, ...Array.from('hello').flatMap((character) => [character.charCodeAt(0), 0]));
    expect(detectDocumentType(utf16le, 'wide.txt')).toBe('text/plain');
  });

  it('types an empty file by its name and leaves emptiness to the parser', () => {
    const empty = new Uint8Array(0);
    expect(detectDocumentType(empty, 'empty.pdf')).toBe('application/pdf');
    expect(detectDocumentType(empty, 'empty.md')).toBe('text/markdown');
    expect(detectDocumentType(empty, 'empty.json')).toBe('application/json');
    expect(detectDocumentType(empty, 'empty')).toBe('text/plain');
    expect(detectDocumentType(empty, 'empty.png')).toBe('image/png');
    expect(detectDocumentType(empty, 'empty.gif')).toBeNull();
  });
});
