import type { GraphQLField } from 'graphql';
import type { Scope } from '../auth/scopes.js';

export type RateLimitName = 'apiKeys' | 'search';

/**
 * What a root field needs before it may run: the scope declared with `authScopes: { scope }`
 * (kept by Pothos in the field's extensions), an optional named rate limit, declared with
 * `extensions: { rateLimit }`, and `extensions: { unrestrictedOnly: '<what it does>' }` for what
 * a key restricted to workspaces may not do (policy.ts). Read by the operation gate and by the
 * scope-auth error message, so each requirement is declared once, on the field.
 */
export function fieldRequirements(field: GraphQLField<unknown, unknown> | undefined): {
  scope?: Scope;
  rateLimit?: RateLimitName;
  unrestrictedOnly?: string;
} {
  const extensions = (field?.extensions ?? {}) as {
    pothosOptions?: { authScopes?: { scope?: Scope } };
    rateLimit?: RateLimitName;
    unrestrictedOnly?: string;
  };
  const authScopes = extensions.pothosOptions?.authScopes;
  return {
    scope: typeof authScopes === 'object' ? authScopes.scope : undefined,
    rateLimit: extensions.rateLimit,
    unrestrictedOnly: extensions.unrestrictedOnly,
  };
}
