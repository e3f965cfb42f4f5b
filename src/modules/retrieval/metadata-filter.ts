import { badRequest } from '../../errors.js';
import { checkJson } from '../../input-limits.js';
import { Prisma, type PrismaClient } from '../../generated/prisma/client.js';
import { withTitle } from './stored-chunks.js';

export const filterLimits = {
  /** Keys of a metadata filter, and values of one `in` list. */
  maxFilterKeys: 20,
  maxFilterValues: 100,
} as const;

type FilterValue = string | number | boolean | null;
/** Document metadata filter: `{key: value}` for equality, `{key: {in: [values]}}` for one of several. */
export type MetadataFilter = Record<string, FilterValue | { in: FilterValue[] }>;

const isScalar = (value: unknown): value is FilterValue =>
  value === null || typeof value === 'string' || typeof value === 'boolean' || (typeof value === 'number' && Number.isFinite(value));

export function checkFilter(filter: unknown): MetadataFilter | undefined {
  if (filter === undefined || filter === null) return undefined;
  if (typeof filter !== 'object' || Array.isArray(filter)) throw badRequest('filter', 'must be an object of metadata keys');
  // NUL, unpaired surrogates, `__proto__` and depth, in the words every endpoint uses (GraphQL's JSON scalar checks none).
  checkJson('filter', filter);
  const entries = Object.entries(filter);
  if (entries.length > filterLimits.maxFilterKeys) throw badRequest('filter', `may name at most ${filterLimits.maxFilterKeys} keys`);
  for (const [key, condition] of entries) {
    if (isScalar(condition)) continue;
    const inList = typeof condition === 'object' && !Array.isArray(condition) ? (condition as Record<string, unknown>) : undefined;
    const values = inList && Object.keys(inList).length === 1 ? inList.in : undefined;
    if (!Array.isArray(values) || !values.every(isScalar)) {
      throw badRequest(`filter.${key}`, 'must be a string, number, boolean or null, or {"in": [such values]}');
    }
    if (values.length > filterLimits.maxFilterValues) throw badRequest(`filter.${key}`, `may list at most ${filterLimits.maxFilterValues} values`);
  }
  return filter as MetadataFilter;
}

/**
 * Ready documents of the workspace whose metadata matches every condition of the filter; `title`
 * is the document's title unless its metadata has a `title` of its own.
 */
export async function documentsMatching(prisma: PrismaClient, workspaceIds: readonly string[], filter: MetadataFilter): Promise<string[]> {
  const metadata = withTitle(Prisma.sql`d.metadata`);
  const equal: Record<string, FilterValue> = {};
  const oneOf: { key: string; values: FilterValue[] }[] = [];
  for (const [key, condition] of Object.entries(filter)) {
    if (isScalar(condition)) equal[key] = condition;
    else oneOf.push({ key, values: condition.in });
  }
  const rows = await prisma.$queryRaw<{ id: string }[]>`
    SELECT d.id FROM documents d
     WHERE d.workspace_id = ANY(${[...workspaceIds]}::uuid[]) AND d.status = 'ready'
       AND ${metadata} @> ${JSON.stringify(equal)}::jsonb
       AND NOT EXISTS (
         SELECT 1 FROM jsonb_to_recordset(${JSON.stringify(oneOf)}::jsonb) AS f(key text, "values" jsonb)
          WHERE NOT (${metadata} ? f.key AND f."values" @> jsonb_build_array(${metadata} -> f.key)))`;
  return rows.map((row) => row.id);
}
