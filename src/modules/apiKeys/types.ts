import { z } from 'zod';
import { allScopes, type Scope } from '../../auth/scopes.js';
import { builder } from '../../graphql/builder.js';
import { DeletedRef } from '../../graphql/shared-types.js';
import { viewerOf } from '../../graphql/viewer.js';
import { nameInput } from '../../input-limits.js';
import { issueApiKey, listApiKeys, revokeApiKey, type NewApiKey } from './service.js';

builder.prismaObject('ApiKey', {
  fields: (t) => ({
    id: t.exposeID('id'),
    name: t.exposeString('name'),
    displayKey: t.exposeString('displayKey', { description: '`sk_` + 4 characters + `...` + the last 4 characters.' }),
    scopes: t.exposeStringList('scopes'),
    lastUsedAt: t.expose('lastUsedAt', { type: 'DateTime', nullable: true }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

const NewApiKeyRef = builder.objectRef<NewApiKey>('NewApiKey').implement({
  description: 'A key just created. `rawKey` is shown here once and never again.',
  fields: (t) => ({
    id: t.exposeID('id'),
    name: t.exposeString('name'),
    displayKey: t.exposeString('displayKey'),
    rawKey: t.exposeString('rawKey'),
    scopes: t.exposeStringList('scopes'),
  }),
});

const CreateApiKeyInput = builder.inputType('CreateApiKeyInput', {
  fields: (t) => ({
    name: t.string({ validate: nameInput() }),
    scopes: t.stringList({
      validate: z
        .array(z.enum(allScopes, { error: `must be one of ${allScopes.join(', ')}` }))
        .min(1, 'must name at least one scope'),
    }),
  }),
});

const rateLimited = { rateLimit: 'apiKeys' } as const;

builder.queryField('apiKeys', (t) =>
  t.prismaConnection({
    type: 'ApiKey',
    cursor: 'id',
    defaultSize: 100,
    maxSize: 1000,
    description: "The viewer's active API keys, newest first. Never includes key values.",
    authScopes: { scope: 'user:read' },
    extensions: rateLimited,
    resolve: (query, _root, _args, context) => listApiKeys(context.prisma, viewerOf(context).userId, query),
  }),
);

builder.mutationField('createApiKey', (t) =>
  t.field({
    errors: {},
    type: NewApiKeyRef,
    authScopes: { scope: 'user:write' },
    extensions: rateLimited,
    args: { input: t.arg({ type: CreateApiKeyInput }) },
    resolve: (_root, { input }, context) =>
      issueApiKey(context.prisma, viewerOf(context).userId, input.name.trim(), input.scopes as Scope[]),
  }),
);

builder.mutationField('revokeApiKey', (t) =>
  t.field({
    errors: {},
    type: DeletedRef,
    description: 'Revokes the key permanently; requests with it fail with 401 from now on.',
    authScopes: { scope: 'user:write' },
    extensions: rateLimited,
    args: { id: t.arg.id() },
    resolve: (_root, { id }, context) => revokeApiKey(context.auth, viewerOf(context).userId, String(id)),
  }),
);
