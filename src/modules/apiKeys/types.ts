import { z } from 'zod';
import { allScopes, type Scope } from '../../auth/scopes.js';
import { builder } from '../../graphql/builder.js';
import { DeletedRef } from '../../graphql/shared-types.js';
import { viewerOf } from '../../graphql/viewer.js';
import { maxKeyWorkspaces } from '../../auth/policy.js';
import { nameInput, textInput } from '../../input-limits.js';
import { createApiKey, listApiKeys, revokeApiKey, workspaceIdsOf, type NewApiKey } from './service.js';

const workspaceIdsDescription =
  'The workspaces the key is restricted to: it sees only these, and nothing of any other (404). Null: every workspace of the user.';

builder.prismaObject('ApiKey', {
  fields: (t) => ({
    id: t.exposeID('id'),
    name: t.exposeString('name'),
    displayKey: t.exposeString('displayKey', { description: '`sk_` + 4 characters + `...` + the last 4 characters.' }),
    scopes: t.exposeStringList('scopes'),
    workspaceIds: t.field({
      type: ['ID'],
      nullable: true,
      description: workspaceIdsDescription,
      select: { workspaceRestricted: true, workspaceIds: true },
      resolve: (key) => workspaceIdsOf(key),
    }),
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
    workspaceIds: t.exposeIDList('workspaceIds', { nullable: true, description: workspaceIdsDescription }),
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
    workspaceIds: t.idList({
      required: false,
      description:
        `Restricts the key to these workspaces (1 to ${maxKeyWorkspaces}, duplicates collapse); leave it out for every workspace. ` +
        'A key that is itself restricted must name some of its own workspaces.',
      validate: z
        .array(textInput())
        .min(1, 'must name at least one workspace; leave the field out for a key that sees every workspace')
        .refine((ids) => new Set(ids.map((id) => id.toLowerCase())).size <= maxKeyWorkspaces, `must name at most ${maxKeyWorkspaces} workspaces`)
        .nullish(),
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
    description:
      "The viewer's active API keys, newest first. Never includes key values. A key restricted to workspaces sees only keys restricted to some of its own workspaces.",
    authScopes: { scope: 'user:read' },
    extensions: rateLimited,
    resolve: (query, _root, _args, context) => listApiKeys(context, viewerOf(context), query),
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
      createApiKey(context, viewerOf(context), {
        name: input.name.trim(),
        scopes: input.scopes as Scope[],
        workspaceIds: input.workspaceIds?.map(String) ?? null,
      }),
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
    resolve: (_root, { id }, context) => revokeApiKey(context, viewerOf(context), String(id)),
  }),
);
