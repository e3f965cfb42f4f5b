import { DateTimeResolver, JSONResolver } from 'graphql-scalars';
import { AppError } from '../errors.js';
import { builder } from './builder.js';

builder.addScalarType('DateTime', DateTimeResolver);
builder.addScalarType('JSON', JSONResolver);

builder.queryType({});
builder.mutationType({});
builder.subscriptionType({});

const ErrorInterface = builder.interfaceRef<AppError>('Error').implement({
  description: 'Every error a mutation can return as data.',
  fields: (t) => ({
    code: t.exposeString('code', { description: 'Stable machine code, the same as REST `error`.' }),
    message: t.exposeString('message'),
  }),
});

builder.objectType(AppError, {
  name: 'AppError',
  interfaces: [ErrorInterface],
  fields: (t) => ({
    field: t.string({ nullable: true, resolve: (error) => error.details.field ?? null }),
  }),
});

/** Returned by deletions: the id of what no longer exists. */
export const DeletedRef = builder.objectRef<{ id: string }>('Deleted').implement({
  fields: (t) => ({ id: t.exposeID('id') }),
});
