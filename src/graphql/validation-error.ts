import type { StandardSchemaV1 } from '@standard-schema/spec';
import { badRequest } from '../errors.js';

/** A 400 that names the first offending field, e.g. `phone: must be E.164`. */
export function validationErrorFromIssues(issues: readonly StandardSchemaV1.Issue[]) {
  const [issue] = issues;
  // `workspaceIds[0]`, `limits.maxHops`: positions in brackets, as the services name them.
  const path = (issue?.path ?? [])
    .map((segment) => (typeof segment === 'object' ? segment.key : segment))
    .filter((segment) => segment !== 'input')
    .map((segment, index) => (typeof segment === 'number' ? `[${segment}]` : `${index > 0 ? '.' : ''}${String(segment)}`))
    .join('')
    .replace(/^\./, '');
  return badRequest(path || 'input', issue?.message ?? 'invalid');
}
