import { z } from 'zod';
import { badRequest } from './errors.js';

/**
 * Every limit the service puts on what a caller sends, written once. The REST layer applies
 * them while it reads a request (so the 400 keeps its place after 401/403/429), and the
 * services and GraphQL input types apply the same functions, so a GraphQL caller gets the
 * same 400, with the same words, as a REST caller. docs/api.md ("Requests") describes them.
 */

/** Workspace names, API key names and chat session titles, after trimming. */
export const maxNameLength = 200;
export const maxFilenameLength = 255;
/** Upload metadata, measured as compact JSON in UTF-8. */
export const maxMetadataBytes = 64 * 1024;
/**
 * How deeply JSON from a caller may nest: `{"a": 1}` is one level, `{"a": {"b": []}}` three.
 * It bounds metadata and every value of a REST body; it also means no walk over such a value
 * (ours, JSON.stringify's, a driver's) can run out of stack.
 */
export const maxJsonDepth = 20;

const nul = '\u0000';

// C0 controls, DEL and C1 controls.
const controlCharacter = /[\u0000-\u001f\u007f-\u009f]/u;
// The Unicode bidirectional formatting characters: ALM, LRM, RLM, LRE, RLE, PDF, LRO, RLO,
// LRI, RLI, FSI, PDI. One RLO turns `evil\u202Etxt.exe` into "eviltxt.exe" reversed on screen.
const bidiFormatting = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/u;
// Letters that draw nothing: the Hangul fillers (choseong, jungseong, compatibility and
// halfwidth) and the blank Braille pattern. "ㅤ" (U+3164) alone looks like an empty name.
const blankLooking = /[\u115f\u1160\u2800\u3164\uffa0]/u;
// Characters that draw nothing and have no place in a name: they make two names that look the
// same differ ("Papers" and "Pa\u200Bpers"). Every Default_Ignorable_Code_Point of Unicode (soft
// hyphen, combining grapheme joiner, zero-width space, word joiner, the invisible operators, the
// zero-width no-break space U+FEFF, the tag characters U+E0000-U+E007F, ...), and the line and
// paragraph separators and interlinear annotation marks, which break or hide text. Zero-width
// joiner and non-joiner (U+200C, U+200D) and the variation selectors stay: emoji sequences and
// Persian and Indic spelling need them (names are compared without them, see nameKey).
const keptIgnorable = /[\u180b-\u180d\u180f\u200c\u200d\ufe00-\ufe0f\u{e0100}-\u{e01ef}]/u;
const defaultIgnorable = /\p{Default_Ignorable_Code_Point}/u;
const defaultIgnorableEverywhere = /\p{Default_Ignorable_Code_Point}/gu;
const separatorOrAnnotation = /[\u2028\u2029\ufff9-\ufffb]/u;
const invisibleCharacterClass = characterClassOf(
  codePointRanges((character) => (defaultIgnorable.test(character) && !keptIgnorable.test(character)) || separatorOrAnnotation.test(character)),
);
const invisibleCharacter = new RegExp(`[${invisibleCharacterClass}]`, 'u');
// A UTF-16 surrogate without its partner: JSON can spell one ("\ud800") but it is not a
// character, and UTF-8 (the store's encoding) cannot hold it.
const loneSurrogate = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

const codePoint = (character: string) => `U+${character.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;

/** What is wrong with a text value that no field accepts: NUL, unpaired surrogates. */
export function textProblem(text: string): string | undefined {
  if (text.includes(nul)) return 'must not contain NUL (\\u0000) characters';
  if (loneSurrogate.test(text)) return 'must be well-formed Unicode (it holds an unpaired UTF-16 surrogate)';
  return undefined;
}

/** What is wrong with the characters of a name or file name, if anything. */
export function nameCharacterProblem(name: string): string | undefined {
  const text = textProblem(name);
  if (text) return text;
  const control = controlCharacter.exec(name);
  if (control) return `must not contain control characters (found ${codePoint(control[0])})`;
  const bidi = bidiFormatting.exec(name);
  if (bidi) return `must not contain bidirectional formatting characters (found ${codePoint(bidi[0])})`;
  const blank = blankLooking.exec(name);
  if (blank) return `must not contain characters that show as blank space (found ${codePoint(blank[0])})`;
  const invisible = invisibleCharacter.exec(name);
  if (invisible) return `must not contain invisible formatting characters (found ${codePoint(invisible[0])})`;
  return undefined;
}

/**
 * What two names are compared by, to refuse a second workspace that looks like the first: the
 * name without default-ignorable characters (the joiners and variation selectors a name may
 * hold, and any other in a name stored before these rules), in NFKC (compatibility forms
 * unified: `ﬁ` and `fi`, `Ａ` and `A`, `²` and `2`), case-folded, in NFKC again. That is
 * Unicode's NFKC_Casefold as closely as JavaScript allows: it has no case folding of its own, so
 * the name is upper-cased and then lower-cased, which folds `ß`, `SS` and `ss` into one, and
 * `ς`, `Σ` and `σ`.
 */
export function nameKey(name: string): string {
  const withoutIgnorable = (text: string) => text.replace(defaultIgnorableEverywhere, '');
  return withoutIgnorable(withoutIgnorable(name).normalize('NFKC').toUpperCase().toLowerCase().normalize('NFKC'));
}

/** A name as stored: trimmed, 1 to `max` characters, no control, bidirectional, blank-looking or invisible formatting characters. */
export function checkName(field: string, value: string, max = maxNameLength): string {
  const name = value.trim();
  if (!name) throw badRequest(field, 'must not be empty');
  if (characterCount(name) > max) throw badRequest(field, `must be at most ${max} characters`);
  const problem = nameCharacterProblem(name);
  if (problem) throw badRequest(field, problem);
  return name;
}

/** An optional name (a chat session title): trimmed; empty means none. */
export function checkOptionalName(field: string, value: string | null | undefined, max = maxNameLength): string | null {
  const name = value?.trim();
  return name ? checkName(field, name, max) : null;
}

/** Whether a trimmed name is a single path segment: no `/` or `\`, and not `.` or `..`. */
const isPlainFilename = (name: string) => !/[/\\]/.test(name) && name !== '.' && name !== '..';

/** A stored file name: a name that is also a single path segment (no `/`, `\`, `.` or `..`). */
export function checkFilename(filename: string): string {
  const name = checkName('filename', filename, maxFilenameLength);
  if (!isPlainFilename(name)) {
    throw badRequest('filename', `must be a plain file name without path separators (got ${JSON.stringify(name)})`);
  }
  return name;
}

/** Upload metadata: a JSON object of at most `maxJsonDepth` levels and `maxMetadataBytes`; `{}` when absent. */
export function checkMetadata(metadata: unknown): Record<string, unknown> {
  if (metadata === undefined || metadata === null) return {};
  if (!isPlainObject(metadata)) throw badRequest('metadata', 'must be a JSON object');
  checkJson('metadata', metadata, { maxBytes: maxMetadataBytes });
  return metadata;
}

/**
 * Checks a JSON value from a caller without recursion (so no depth can overflow the stack):
 * at most `maxDepth` levels of arrays and objects, no NUL or unpaired surrogate in any string
 * or key, no `__proto__` key, only JSON types, and, with `maxBytes`, at most that size as
 * compact UTF-8 JSON.
 * Returns that size. The first problem is a 400 naming `field`, with where it was found.
 */
export function checkJson(field: string, value: unknown, limits: { maxDepth?: number; maxBytes?: number } = {}): number {
  const maxDepth = limits.maxDepth ?? maxJsonDepth;
  const maxBytes = limits.maxBytes ?? Infinity;
  let bytes = 0;
  // [value, depth of the container holding it, path]; the path is built only when reported.
  const stack: [unknown, number, () => string][] = [[value, 0, () => field]];
  while (stack.length > 0) {
    const [item, depth, path] = stack.pop()!;
    const where = () => (path() === field ? '' : ` (at ${shorten(path())})`);
    if (typeof item === 'string') {
      const problem = textProblem(item);
      if (problem) throw badRequest(field, `${problem}${where()}`);
      bytes += jsonStringBytes(item);
    } else if (typeof item === 'number') {
      if (!Number.isFinite(item)) throw badRequest(field, `must hold only JSON values${where()}`);
      bytes += String(item).length;
    } else if (typeof item === 'boolean') {
      bytes += item ? 4 : 5;
    } else if (item === null) {
      bytes += 4;
    } else if (Array.isArray(item) || isPlainObject(item)) {
      if (depth + 1 > maxDepth) throw badRequest(field, `must not nest more than ${maxDepth} levels deep${where()}`);
      if (Array.isArray(item)) {
        bytes += 2 + Math.max(0, item.length - 1);
        for (let index = item.length - 1; index >= 0; index -= 1) stack.push([item[index], depth + 1, () => `${path()}[${index}]`]);
      } else {
        const entries = Object.entries(item);
        bytes += 2 + Math.max(0, entries.length - 1);
        for (let index = entries.length - 1; index >= 0; index -= 1) {
          const [key, child] = entries[index]!;
          const keyPath = () => `${path()}${/^[A-Za-z_$][\w$]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`}`;
          const problem = key === '__proto__' ? reservedKeyProblem : textProblem(key);
          if (problem) throw badRequest(field, `a key ${problem} (at ${shorten(keyPath())})`);
          bytes += jsonStringBytes(key) + 1;
          stack.push([child, depth + 1, keyPath]);
        }
      }
    } else {
      throw badRequest(field, `must hold only JSON values${where()}`);
    }
    if (bytes > maxBytes) throw badRequest(field, `must be at most ${maxBytes} bytes as JSON`);
  }
  return bytes;
}

// JavaScript code that copies an object key by key (`copy[key] = value`) turns this key into
// the copy's prototype instead of a property: it was dropped on its way to the store.
const reservedKeyProblem = 'must not be "__proto__"';

/**
 * The character rules of names as JSON Schema `pattern`s, for the OpenAPI description. The
 * server trims a name before it checks it, so the pattern allows the characters trimming takes
 * away at either end, and counts the length (1 to `max` characters) between them in a
 * lookahead: `maxLength` would count them too. In between, at least one character that is
 * neither white space nor refused, and none of the characters refused above. Written with
 * explicit code points (no `\p{...}`, no `\s`), so that the regular expressions of other
 * languages read it as JavaScript does: Python's `re`, which the fuzzer uses, counts U+001C-U+001F
 * and U+0085 as white space and U+FEFF not, and `trim` does the opposite.
 */
// What no text field accepts, as the inside of a character class: NUL. Unpaired surrogates are
// refused too, but no pattern says so: the fuzzer validates with Rust's regex engine, which
// refuses a class of surrogates as an invalid pattern (and then checks nothing).
export const refusedInText = '\\u0000';
const refusedInNames = [controlCharacter, bidiFormatting, blankLooking].map((pattern) => pattern.source.slice(1, -1)).join('') + invisibleCharacterClass + refusedInText;
const trimmedClass = characterClassOf(codePointRanges((character) => character.trim() === ''));
const trimmedNameBody = (refused: string, max: number) =>
  `[${trimmedClass}]*(?=[^${refused}]{1,${max}}[${trimmedClass}]*$)[^${refused}]*[^${trimmedClass}${refused}][^${refused}]*[${trimmedClass}]*`;
export const namePatternOf = (max = maxNameLength) => `^${trimmedNameBody(refusedInNames, max)}$`;
const optionalNamePatternOf = (max = maxNameLength) => `^(?:[${trimmedClass}]*|${trimmedNameBody(refusedInNames, max)})$`;
// `.` and `..` name a directory, not a file, however they are padded.
export const filenamePattern = `^(?![${trimmedClass}]*\\.{1,2}[${trimmedClass}]*$)${trimmedNameBody(`${refusedInNames}/\\\\`, maxFilenameLength)}$`;
/** Text with at least one character that trimming leaves, and no NUL. */
export const notBlankTextPattern = `^[^${refusedInText}]*[^${trimmedClass}${refusedInText}][^${refusedInText}]*$`;

/** Some character that shows: not white space, and none of the characters names refuse. */
export const visibleCharacterPattern = `[^${trimmedClass}${refusedInNames}]`;
const visibleCharacter = new RegExp(visibleCharacterPattern, 'u');
export const hasVisibleCharacter = (text: string) => visibleCharacter.test(text);

/** A key of a caller's JSON object, as the OpenAPI description gives it: any string but `__proto__` (checkJson refuses that one). */
export const jsonObjectKey = () => z.string().meta({ pattern: '^(?!__proto__$)' });

/** Zod schemas for GraphQL input fields, so the Pothos validation plugin reports the same 400s. */
export const nameInput = (max = maxNameLength) =>
  z
    .string({ error: 'must be a string' })
    .trim()
    .min(1, 'must not be empty')
    .refine((name) => characterCount(name) <= max, `must be at most ${max} characters`)
    .superRefine(refineWith(nameCharacterProblem))
    .meta({ pattern: namePatternOf(max), description: `1 to ${max} characters after trimming white space.` });

/** A stored file name (checkFilename): a name that is also a single path segment. */
export const filenameInput = () =>
  nameInput(maxFilenameLength)
    .refine(isPlainFilename, 'must be a plain file name without path separators')
    .meta({ pattern: filenamePattern, description: `A plain file name (no path separators), 1 to ${maxFilenameLength} characters after trimming white space.` });

/** Document metadata: a JSON object, null clearing it; its depth, size and keys are checkMetadata's, in the service. */
export const metadataInput = () =>
  z
    .record(jsonObjectKey(), z.unknown(), { error: 'must be a JSON object' })
    .nullish()
    .describe('A JSON object stored with the document; null clears it.');

/** An optional name: empty after trimming means none. */
export const optionalNameInput = (max = maxNameLength) =>
  z
    .string({ error: 'must be a string' })
    .trim()
    .refine((name) => characterCount(name) <= max, `must be at most ${max} characters`)
    .superRefine((value, context) => {
      if (value) refineWith(nameCharacterProblem)(value, context);
    })
    .meta({ pattern: optionalNamePatternOf(max), description: `At most ${max} characters after trimming white space; none when empty.` })
    .nullish();

/** Free text (a chat message): no NUL, no unpaired surrogates. */
export const textInput = () =>
  z
    .string({ error: 'must be a string' })
    .superRefine(refineWith(textProblem))
    .meta({ pattern: `^[^${refusedInText}]*$` });

/**
 * At most `max` characters, counted as JSON Schema's `maxLength` counts them (code points, so an
 * emoji is one), and described as that `maxLength`.
 */
/** An optional whole number from 1 to `max` (a count or a budget), refused in one message naming the range. */
export const countFromOneTo = (max: number) => {
  const message = `must be an integer from 1 to ${max}`;
  return z.number().int(message).min(1, message).max(max, message).nullish();
};

export const withMaxCharacters = <T extends z.ZodType<string>>(schema: T, max: number) =>
  schema.refine((text) => characterCount(text) <= max, `must be at most ${max} characters`).meta({ maxLength: max });

/** Characters as JSON Schema counts them: code points, an unpaired surrogate one too. */
export function characterCount(text: string): number {
  let count = 0;
  for (const _ of text) count += 1;
  return count;
}

function refineWith(problemOf: (value: string) => string | undefined) {
  return (value: string, context: z.RefinementCtx) => {
    const problem = problemOf(value);
    if (problem) context.addIssue({ code: 'custom', message: problem });
  };
}

/** The code points whose character passes `test`, as ranges [first, last] in ascending order (surrogates left out). */
function codePointRanges(test: (character: string) => boolean): [number, number][] {
  const ranges: [number, number][] = [];
  for (let point = 0; point <= 0x10ffff; point += 1) {
    if (point === 0xd800) point = 0xe000;
    if (!test(String.fromCodePoint(point))) continue;
    const last = ranges.at(-1);
    if (last && last[1] === point - 1) last[1] = point;
    else ranges.push([point, point]);
  }
  return ranges;
}

/**
 * The inside of a regular expression's character class for these ranges: `\uXXXX` escapes in the
 * Basic Multilingual Plane, the characters themselves beyond it (JavaScript with the `u` flag
 * and Python read both; `\u{...}` is JavaScript's alone).
 */
function characterClassOf(ranges: readonly [number, number][]): string {
  const written = (point: number) => (point > 0xffff ? String.fromCodePoint(point) : `\\u${point.toString(16).padStart(4, '0')}`);
  return ranges.map(([first, last]) => (first === last ? written(first) : `${written(first)}-${written(last)}`)).join('');
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const prototype = Object.getPrototypeOf(value);
  // JSON.parse makes plain objects; graphql-scalars' JSON literals have no prototype.
  return prototype === Object.prototype || prototype === null;
}

function jsonStringBytes(text: string) {
  return Buffer.byteLength(JSON.stringify(text));
}

function shorten(path: string) {
  return path.length > 120 ? `${path.slice(0, 117)}...` : path;
}
