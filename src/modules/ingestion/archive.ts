import yauzl from 'yauzl';
import { ParseError } from './types.js';

/** The parts of an archive that are parsed (XML, an e-book's XHTML); media and embedded objects are unpacked only to read pictures by OCR. */
const isParsedPart = (name: string) => /\.(xml|rels|xhtml|html?|opf|ncx)$/i.test(name);

/** Most entries an archive may have: each is a part to look up, whether it is parsed or not. */
export const maxArchiveEntries = 50_000;

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
  const zip = await new Promise<yauzl.ZipFile>((resolve, reject) =>
    yauzl.fromBuffer(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength), { lazyEntries: true, strictFileNames: false }, (error, file) =>
      error ? reject(unreadable(error)) : resolve(file),
    ),
  );
  if (zip.entryCount > maxArchiveEntries) {
    zip.close();
    throw new ParseError(`the ${what} has more than the limit of ${maxArchiveEntries.toLocaleString('en')} parts`);
  }
  let unpacked = 0;
  try {
    await new Promise<void>((resolve, reject) => {
      zip.on('error', (error: Error) => reject(unreadable(error)));
      zip.on('end', () => resolve());
      zip.on('entry', (entry: yauzl.Entry) => {
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
  const zip = await new Promise<yauzl.ZipFile>((resolve, reject) =>
    yauzl.fromBuffer(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength), { lazyEntries: true, strictFileNames: false }, (error, file) =>
      error ? reject(error) : resolve(file),
    ),
  );
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
