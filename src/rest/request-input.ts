import { z } from 'zod';
import { badRequest } from '../errors.js';
import { checkJson } from '../input-limits.js';

/**
 * Maps a REST body onto a GraphQL input: only the listed fields are accepted (anything else is
 * a 400 naming it), and snake_case names are renamed to the GraphQL ones. The values are not
 * checked here: GraphQL coerces them against the input type, and the handler reports any
 * mismatch as a 400 naming the field, so the result can be typed as the operation's input.
 * A GraphQL name ending in `[]` marks a list: GraphQL would accept a lone value there and wrap
 * it, but a REST client sending one has made a mistake worth a 400.
 */
export function bodyInput<Input>(body: unknown, fields: Record<string, string>, options: { optional?: boolean; ids?: readonly string[] } = {}): Input {
  if (body === undefined) {
    if (options.optional) return undefined as Input;
    throw badRequest('body', 'a JSON object is required');
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw badRequest('body', 'must be a JSON object');
  const input: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(body)) {
    const target = Object.hasOwn(fields, key) ? fields[key] : undefined;
    if (target === undefined) throw badRequest(key, `is not a known field (accepted: ${Object.keys(fields).join(', ')})`);
    // NUL, unpaired surrogates and deep nesting are refused here, in the shared words.
    checkJson(key, value);
    const isList = target.endsWith('[]');
    if (isList && value !== null && !Array.isArray(value)) throw badRequest(key, 'must be an array');
    // GraphQL's ID type would take the number 123 as the id "123"; a JSON body names ids as strings.
    if (options.ids?.includes(key) && value !== null) {
      if (isList ? (value as unknown[]).some((item) => typeof item !== 'string') : typeof value !== 'string') {
        throw badRequest(key, isList ? 'must be an array of id strings' : 'must be an id string');
      }
    }
    input[isList ? target.slice(0, -2) : target] = value;
  }
  return input as Input;
}

/** Parses query parameters with a zod object; the first problem is a 400 naming its parameter. */
export function queryInput<Shape extends z.ZodRawShape>(query: URLSearchParams, shape: Shape): z.infer<z.ZodObject<Shape>> {
  const raw = Object.fromEntries(Object.keys(shape).map((name) => [name, query.get(name) ?? undefined]));
  const parsed = z.object(shape).safeParse(raw);
  if (!parsed.success) {
    const [issue] = parsed.error.issues;
    throw badRequest(String(issue?.path[0] ?? 'query'), issue?.message ?? 'invalid');
  }
  return parsed.data;
}

/** A non-negative integer query parameter with a default and an upper bound. (zod 4 returns a
 * default as it is, without running the pipeline, so defaults are given as output values.) */
export const countParameter = (fallback: number, max: number) =>
  z
    .string()
    .regex(/^\d+$/, 'must be a non-negative integer')
    .transform(Number)
    .pipe(z.number().max(max, `must be at most ${max}`))
    .default(fallback);

export const requiredParameter = z.string({ error: 'is required' }).min(1, 'is required');

export const booleanParameter = (fallback: boolean) =>
  z
    .enum(['true', 'false'], { error: 'must be true or false' })
    .transform((value) => value === 'true')
    .default(fallback);

/** `limit` (default 100, at most 1000) and `cursor` of list endpoints, as Relay `first`/`after`. */
export const listQuery = {
  limit: z
    .string()
    .regex(/^\d+$/, 'must be an integer from 1 to 1000')
    .transform(Number)
    .pipe(z.number().min(1, 'must be at least 1').max(1000, 'must be at most 1000'))
    .default(100)
    .describe('How many items to return, from 1 to 1000.'),
  cursor: z
    .string()
    .regex(/^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/, 'is not a cursor from this API')
    .optional()
    .describe('Where to continue: the id of the last item of the previous page, as in its `Link: rel="next"` URL.'),
};
