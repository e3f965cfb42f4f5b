import type { StandardSchemaV1 } from '@standard-schema/spec';
import { badRequest } from '../errors.js';

/** A 400 that names the first offending field, e.g. `phone: must be E.164`. */
export function validationErrorFromIssues(issues: readonly StandardSchemaV1.Issue[]) {
  const [issue] = issues;
  const path = (issue?.path ?? [])
    .map((segment) => (typeof segment === 'object' ? segment.key : segment))
    .filter((segment) => segment !== 'input')
    .join('.');
  return badRequest(path || 'input', issue?.message ?? 'invalid');
}
