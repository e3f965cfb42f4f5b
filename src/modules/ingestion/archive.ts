import yauzl from 'yauzl';
import { ParseError } from './types.js';

/** The parts of an archive that are parsed (XML, an e-book's XHTML); media and embedded objects are unpacked only to read pictures by OCR. */
const isParsedPart = (name: string) => /\.(xml|rels|xhtml|html?|opf|ncx)$/i.test(name);

/** Most entries an archive may have: each is a part to look up, whether it is parsed or not. */
export const maxArchiveEntries = 50_000;

/** An archive's directory, its entries read one at a time on `readEntry`. */
const openZip = (bytes: Uint8Array) =>
  new Promise<yauzl.ZipFile>((resolve, reject) =>
    yauzl.fromBuffer(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength), { lazyEntries: true, strictFileNames: false }, (error, file) =>
      error ? reject(error) : resolve(file),
    ),
  );

const megabytes = (bytes: number) => `${Math.round((bytes / 1024 / 1024) * 10) / 10} MB`;

/**
 * Refuses an archive whose parsed parts unpack to more than `maxBytes` (a zip bomb: a 0.85 MB
 * DOCX can hold 300 MB of XML). The sizes the archive declares are checked first, then every
 * part is inflated and counted without keeping it, since a declared size can lie; yauzl stops a
 * part that inflates past its declared size. With `media`, every other part counts too: the
 * pictures are unpacked when OCR reads them, and a picture can be a bomb as well.
 */
export async function checkUnpackedSize(bytes: Uint8Array, maxBytes: number, what: string, { media = false } = {}): Promise<void> {
  const tooLarge = () => new ParseError(`the ${what} unpacks to more than the limit of ${megabytes(maxBytes)}`);
  const unreadable = (error: Error) => new ParseError(`not a readable ${what}: ${error.message}`);
  const zip = await openZip(bytes).catch((error: Error) => Promise.reject(unreadable(error)));
  if (zip.entryCount > maxArchiveEntries) {
    zip.close();
    throw new ParseError(`the ${what} has more than the limit of ${maxArchiveEntries.toLocaleString('en')} parts`);
  }
  // Where the directory starts: yauzl reads the entries from there on.
  const directoryOffset = (zip as unknown as { readEntryCursor: number }).readEntryCursor;
  const entries: yauzl.Entry[] = [];
  let unpacked = 0;
  try {
    await new Promise<void>((resolve, reject) => {
      zip.on('error', (error: Error) => reject(unreadable(error)));
      zip.on('end', () => {
        const outside = unlistedBytes(bytes, entries, directoryOffset);
        if (outside) reject(new ParseError(`not a readable ${what}: ${outside}`));
        else resolve();
      });
      zip.on('entry', (entry: yauzl.Entry) => {
        const mismatch = localHeaderMismatch(bytes, entry);
        if (mismatch) return reject(new ParseError(`not a readable ${what}: the header of ${entry.fileName} ${mismatch}`));
        entries.push(entry);
        if (!media && !isParsedPart(entry.fileName)) return zip.readEntry();
        if (unpacked + entry.uncompressedSize > maxBytes) return reject(tooLarge());
        zip.openReadStream(entry, (error, stream) => {
          if (error) return reject(unreadable(error));
          stream.on('data', (chunk: Buffer) => {
            unpacked += chunk.length;
            if (unpacked > maxBytes) {
              stream.destroy();
              reject(tooLarge());
            }
          });
          stream.on('error', (streamError: Error) => reject(unreadable(streamError)));
          stream.on('end', () => zip.readEntry());
        });
      });
      zip.readEntry();
    });
  } finally {
    zip.close();
  }
}

/**
 * The bytes of one part of an archive already checked by `checkUnpackedSize`, or null when it
 * has no such part or the part is larger than `maxBytes`.
 */
export async function readArchivePart(bytes: Uint8Array, name: string, maxBytes: number): Promise<Buffer | null> {
  const zip = await openZip(bytes);
  try {
    return await new Promise<Buffer | null>((resolve, reject) => {
      zip.on('error', reject);
      zip.on('end', () => resolve(null));
      zip.on('entry', (entry: yauzl.Entry) => {
        if (entry.fileName !== name) return zip.readEntry();
        if (entry.uncompressedSize > maxBytes) return resolve(null);
        zip.openReadStream(entry, (error, stream) => {
          if (error) return reject(error);
          const parts: Buffer[] = [];
          stream.on('data', (chunk: Buffer) => parts.push(chunk));
          stream.on('error', reject);
          stream.on('end', () => resolve(Buffer.concat(parts)));
        });
      });
      zip.readEntry();
    });
  } finally {
    zip.close();
  }
}

/**
 * Where the parts the directory lists leave bytes unaccounted for before the directory, if they
 * do. A reader that streams the archive meets every local header in turn, listed or not: a
 * directory whose count of parts was damaged hid a damaged part from the checks above, and
 * ExcelJS's workbook reader then waited forever on its broken data. Each listed part must start
 * where the one before ends (after its data descriptor, when it has one), from the first byte to
 * the directory.
 */
function unlistedBytes(bytes: Uint8Array, entries: yauzl.Entry[], directoryOffset: number): string | null {
  const parts = entries.toSorted((a, b) => a.relativeOffsetOfLocalHeader - b.relativeOffsetOfLocalHeader);
  let cursor = 0;
  for (const [index, entry] of parts.entries()) {
    const at = entry.relativeOffsetOfLocalHeader;
    if (at !== cursor) return at > cursor ? 'it holds data its directory does not list' : `its parts overlap at ${entry.fileName}`;
    const view = new DataView(bytes.buffer, bytes.byteOffset + at, 30);
    const dataEnd = at + 30 + view.getUint16(26, true) + view.getUint16(28, true) + entry.compressedSize;
    if ((entry.generalPurposeBitFlag & 0x8) === 0) {
      cursor = dataEnd;
      continue;
    }
    // A data descriptor: an optional signature, the checksum, then both sizes in 4 or 8 bytes each.
    const next = parts[index + 1]?.relativeOffsetOfLocalHeader ?? directoryOffset;
    if (![12, 16, 20, 24].includes(next - dataEnd)) return next > dataEnd ? 'it holds data its directory does not list' : `its parts overlap at ${entry.fileName}`;
    cursor = next;
  }
  return cursor === directoryOffset ? null : cursor < directoryOffset ? 'it holds data its directory does not list' : 'its parts overlap its directory';
}

/**
 * How a part's local header disagrees with the archive's directory, if it does. Readers that
 * stream an archive (ExcelJS's workbook reader) trust the local headers alone: one whose sizes
 * were damaged left such a reader waiting for bytes that never came.
 */
function localHeaderMismatch(bytes: Uint8Array, entry: yauzl.Entry): string | null {
  const at = entry.relativeOffsetOfLocalHeader;
  if (at + 30 > bytes.length) return 'lies past the end of the file';
  const view = new DataView(bytes.buffer, bytes.byteOffset + at, 30);
  if (view.getUint32(0, true) !== 0x04034b50) return 'is not where the directory says';
  const flags = view.getUint16(6, true);
  if (view.getUint16(8, true) !== entry.compressionMethod) return 'names another compression than the directory';
  const nameLength = view.getUint16(26, true);
  if (at + 30 + nameLength > bytes.length) return 'lies past the end of the file';
  if (Buffer.from(bytes.buffer, bytes.byteOffset + at + 30, nameLength).toString('latin1') !== Buffer.from(entry.fileNameRaw).toString('latin1')) {
    return 'names another part than the directory';
  }
  if ((flags & 0x8) === 0 && view.getUint32(14, true) !== entry.crc32) return 'gives another checksum than the directory';
  // With a data descriptor (flag bit 3) the sizes follow the data and the header's may be zero.
  if ((flags & 0x8) === 0 && ((entry.generalPurposeBitFlag & 0x8) !== 0 || view.getUint32(18, true) !== entry.compressedSize || view.getUint32(22, true) !== entry.uncompressedSize)) {
    // Zip64 headers give their sizes elsewhere.
    if (view.getUint32(18, true) !== 0xffffffff) return 'gives other sizes than the directory';
  }
  return null;
}
