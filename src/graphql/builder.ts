import SchemaBuilder from '@pothos/core';
import ComplexityPlugin from '@pothos/plugin-complexity';
import DataloaderPlugin from '@pothos/plugin-dataloader';
import ErrorsPlugin from '@pothos/plugin-errors';
import PrismaPlugin from '@pothos/plugin-prisma';
import RelayPlugin from '@pothos/plugin-relay';
import ScopeAuthPlugin from '@pothos/plugin-scope-auth';
import ValidationPlugin from '@pothos/plugin-validation';
import type { Scope } from '../auth/scopes.js';
import { AppError, authenticationRequired, missingScope } from '../errors.js';
import type PrismaTypes from '../generated/pothos-prisma-types.js';
import { getDatamodel } from '../generated/pothos-prisma-types.js';
import type { Context } from './context.js';
import { fieldCost } from './cost.js';
import { fieldRequirements } from './field-requirements.js';
import { graphqlLimits } from './limits.js';
import { validationErrorFromIssues } from './validation-error.js';

export const builder = new SchemaBuilder<{
  Context: Context;
  PrismaTypes: PrismaTypes;
  AuthScopes: { scope: Scope };
  DefaultFieldNullability: false;
  DefaultInputFieldRequiredness: true;
  Scalars: {
    DateTime: { Input: Date; Output: Date };
    JSON: { Input: unknown; Output: unknown };
    File: { Input: File; Output: never };
  };
}>({
  plugins: [ErrorsPlugin, ScopeAuthPlugin, PrismaPlugin, RelayPlugin, ValidationPlugin, DataloaderPlugin, ComplexityPlugin],
  defaultFieldNullability: false,
  defaultInputFieldRequiredness: true,
  scopeAuth: {
    authorizeOnSubscribe: true,
    authScopes: (context) => ({
      scope: (scope) => context.viewer?.scopes.has(scope) ?? false,
    }),
    unauthorizedError: (_parent, context, info) => {
      if (!context.viewer) return authenticationRequired();
      const { scope } = fieldRequirements(info.parentType.getFields()[info.fieldName]);
      return scope ? missingScope(scope) : new AppError('forbidden', 'not allowed');
    },
  },
  prisma: {
    client: (context) => context.prisma,
    dmmf: getDatamodel(),
    filterConnectionTotalCount: true,
    onUnusedQuery: null,
    maxConnectionSize: graphqlLimits.maxConnectionSize,
    defaultConnectionSize: graphqlLimits.defaultConnectionSize,
  },
  relay: {
    clientMutationId: 'omit',
    cursorType: 'String',
  },
  errors: {
    defaultTypes: [AppError],
    directResult: true,
  },
  complexity: {
    fieldComplexity: fieldCost,
    // The plugin's own check runs inside each root resolver, once execution has begun; the
    // operation gate measures the operation before execution instead (operation-gate.ts).
    disabled: true,
  },
  validation: {
    validationError: (result) => validationErrorFromIssues(result.issues),
  },
});
