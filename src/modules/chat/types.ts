import { z } from 'zod';
import { builder } from '../../graphql/builder.js';
import { DeletedRef } from '../../graphql/shared-types.js';
import { viewerOf } from '../../graphql/viewer.js';
import { optionalNameInput, textInput, withMaxCharacters } from '../../input-limits.js';
import { appendMessage, createSession, deleteSession, findSession, listSessions, messageRoles, type MessageRole } from './service.js';

export const maxMessageLength = 50_000;

builder.prismaObject('ChatMessage', {
  fields: (t) => ({
    id: t.exposeID('id'),
    role: t.exposeString('role', { description: '`user`, `assistant` or `system`.' }),
    content: t.exposeString('content'),
    sources: t.expose('sources', { type: 'JSON', description: 'Citations of an assistant answer: [{doc_id, filename, pages}].' }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

builder.prismaObject('ChatSession', {
  fields: (t) => ({
    id: t.exposeID('id'),
    title: t.exposeString('title', { nullable: true }),
    workspaceIds: t.exposeIDList('workspaceIds'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
    messageCount: t.relationCount('messages'),
    messages: t.relation('messages', {
      description: 'The full history, oldest first.',
      query: { orderBy: [{ createdAt: 'asc' }, { id: 'asc' }] },
    }),
  }),
});

const CreateChatSessionInput = builder.inputType('CreateChatSessionInput', {
  fields: (t) => ({
    title: t.string({
      required: false,
      validate: optionalNameInput(),
    }),
    workspaceIds: t.idList({ required: false, validate: z.array(textInput()).max(100, 'must name at most 100 workspaces').nullish() }),
  }),
});

const SendChatMessageInput = builder.inputType('SendChatMessageInput', {
  fields: (t) => ({
    content: t.string({
      validate: withMaxCharacters(textInput().min(1, 'must not be empty'), maxMessageLength),
    }),
    role: t.string({ validate: z.enum(messageRoles, { error: `must be one of ${messageRoles.join(', ')}` }) }),
  }),
});

builder.queryField('chatSessions', (t) =>
  t.prismaConnection({
    type: 'ChatSession',
    cursor: 'id',
    defaultSize: 100,
    maxSize: 1000,
    description: "The viewer's chat sessions, newest first; for a key restricted to workspaces, those whose workspaces are all among its own.",
    authScopes: { scope: 'chat:read' },
    resolve: (query, _root, _args, context) => listSessions(context, viewerOf(context), query),
  }),
);

builder.queryField('chatSession', (t) =>
  t.prismaField({
    type: 'ChatSession',
    authScopes: { scope: 'chat:read' },
    args: { id: t.arg.id() },
    resolve: (query, _root, { id }, context) => findSession(context, viewerOf(context), String(id), query),
  }),
);

builder.mutationField('createChatSession', (t) =>
  t.prismaField({
    errors: {},
    type: 'ChatSession',
    authScopes: { scope: 'chat:write' },
    args: { input: t.arg({ type: CreateChatSessionInput, required: false }) },
    resolve: (query, _root, { input }, context) =>
      createSession(
        context,
        viewerOf(context),
        { title: input?.title?.trim() || null, workspaceIds: (input?.workspaceIds ?? []).map(String) },
        query,
      ),
  }),
);

builder.mutationField('deleteChatSession', (t) =>
  t.field({
    errors: {},
    type: DeletedRef,
    description: 'Deletes the session and all its messages.',
    authScopes: { scope: 'chat:write' },
    args: { id: t.arg.id() },
    resolve: (_root, { id }, context) => deleteSession(context, viewerOf(context), String(id)),
  }),
);

builder.mutationField('sendChatMessage', (t) =>
  t.prismaField({
    errors: {},
    type: 'ChatMessage',
    description: 'Appends a message to the session. It produces no answer; answers come from the agent.',
    authScopes: { scope: 'chat:write' },
    args: { sessionId: t.arg.id(), input: t.arg({ type: SendChatMessageInput }) },
    resolve: (query, _root, { sessionId, input }, context) =>
      appendMessage(
        context,
        viewerOf(context),
        String(sessionId),
        { role: input.role as MessageRole, content: input.content },
        query,
      ),
  }),
);
