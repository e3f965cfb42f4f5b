export const allScopes = ['user:read', 'user:write', 'kb:read', 'kb:write', 'chat:read', 'chat:write'] as const;

export type Scope = (typeof allScopes)[number];

export function isScope(value: unknown): value is Scope {
  return typeof value === 'string' && (allScopes as readonly string[]).includes(value);
}
