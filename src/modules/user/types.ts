import { z } from 'zod';
import { builder } from '../../graphql/builder.js';
import { viewerOf } from '../../graphql/viewer.js';
import { phoneRule } from './input.js';
import { findUser, updatePhone } from './service.js';

export const UserRef = builder.prismaObject('User', {
  fields: (t) => ({
    id: t.exposeID('id'),
    email: t.exposeString('email'),
    name: t.exposeString('name'),
    phone: t.exposeString('phone', { nullable: true, description: 'E.164, e.g. +14155550100.' }),
    creditsBalance: t.exposeInt('creditsBalance'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

const UpdateMeInput = builder.inputType('UpdateMeInput', {
  description: 'Only the phone number can be changed; null removes it.',
  fields: (t) => ({
    phone: t.string({ required: false }),
  }),
  validate: z.object({
    phone: z.union([phoneRule, z.null()], {
      error: (issue) => (issue.input === undefined ? 'is required' : 'must be a string in E.164 form or null'),
    }),
  }),
});

builder.queryField('me', (t) =>
  t.prismaField({
    type: 'User',
    authScopes: { scope: 'user:read' },
    resolve: (query, _root, _args, context) => findUser(context.prisma, viewerOf(context).userId, query),
  }),
);

builder.mutationField('updateMe', (t) =>
  t.prismaField({
    errors: {},
    type: 'User',
    authScopes: { scope: 'user:write' },
    args: { input: t.arg({ type: UpdateMeInput }) },
    resolve: (query, _root, { input }, context) =>
      updatePhone(context.prisma, viewerOf(context).userId, input.phone ?? null, query),
  }),
);
