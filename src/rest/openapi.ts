// The OpenAPI 3.1 description of the REST layer, generated from the route table: each route's
// declared path, query and body, the validators of the GraphQL input type its body fills, and
// the selection of its persisted operation (whose aliases are the REST field names). Nothing
// here restates a field by hand, so the description cannot drift from what the handler does.
import { createRequire } from 'node:module';
import type { DocumentNode, GraphQLInputField, GraphQLInputObjectType, GraphQLInputType, GraphQLSchema } from 'graphql';
import { z } from 'zod';
import { createDocument, type ZodOpenApiOperationObject, type ZodOpenApiPathsObject, type ZodOpenApiResponsesObject } from 'zod-openapi';
import { errorCatalogue } from '../errors.js';
import { filenamePattern, jsonObjectKey, maxFilenameLength } from '../input-limits.js';
import { fieldSelections, fragmentsOf, leafSchema, objectSchema, operationDefinition, resultShapes, type Schema } from './openapi-output.js';
import { requestIdHeader } from './response-kinds.js';
import { declaredStatuses } from './route-errors.js';
import type { JsonBody, Route, RouteTag } from './route.js';
import { eventIdAlias } from './event-stream.js';
import { RestAgentStream } from './routes/agent.js';

// The type predicates check which copy of graphql made a type (see openapi-output.ts).
const { getNullableType, isInputObjectType, isListType, isNonNullType, isUnionType } = createRequire(import.meta.url)('graphql') as typeof import('graphql');

const tagDescriptions: Record<RouteTag, string> = {
  User: 'The caller: profile and credits.',
  'API keys': 'Scoped bearer keys. The raw key is shown once, at creation.',
  Workspaces: 'Containers of documents; names are unique per user.',
  Documents: 'Uploaded files, their processing status, text and chunks.',
  Chat: 'Chat sessions and their stored messages.',
  Search: 'Retrieval of matching chunks, without an answer.',
  Agent: 'Answers with citations, streamed as Server-Sent Events.',
};

const errorBody = z
  .object({
    error: z.enum(Object.keys(errorCatalogue) as [keyof typeof errorCatalogue, ...(keyof typeof errorCatalogue)[]]).describe('A stable machine code.'),
    message: z.string().describe('What went wrong, in words.'),
  })
  .meta({ id: 'Error', description: 'Every refusal: a machine code and a human-readable message.' });

const statusWords: Record<number, string> = {
  400: 'Missing or invalid parameters; the message names the field.',
  401: 'Missing, malformed, expired or revoked credential.',
  402: 'No active subscription, or too few credits for the run.',
  403: 'The credential lacks the scope this endpoint needs; the message names it.',
  404: 'No such resource, or not visible to the caller.',
  406: 'The client does not accept the response type (`text/event-stream` for streams).',
  409: 'Conflicts with the current state (a duplicate name, a retry of a document that has not failed), or the same `Idempotency-Key` is still being answered.',
  413: 'The body is larger than the server accepts.',
  415: 'The body has a Content-Type this endpoint does not take.',
  422: 'The `Idempotency-Key` was used before with a different request.',
  429: 'Too many requests; `Retry-After` says when to try again.',
  500: 'An unexpected server error.',
  503: 'The database, the search index or the model is unavailable for now; try again (`Retry-After` when known).',
};


/** Builds the description. `schema` is the GraphQL schema the persisted operations run against. */
export function openApiDocument(routes: readonly Route[], schema: GraphQLSchema, options: { version: string; maxUploadFiles: number }) {
  const paths: ZodOpenApiPathsObject = {};
  for (const route of routes) {
    const path = route.path.replace(/:(\w+)/g, '{$1}');
    paths[path] ??= {};
    (paths[path] as Record<string, ZodOpenApiOperationObject>)[route.method.toLowerCase()] = operationOf(route, schema, options);
  }
  return createDocument(
    {
      openapi: '3.1.0',
      info: {
        title: 'Knowledge-base and agent service',
        version: options.version,
        description:
          'Workspaces of documents, vector search over their chunks, and an agent that streams cited answers. Every endpoint takes `Authorization: Bearer <API key>`. The same domain is also a GraphQL schema at `/graphql`.',
      },
      servers: [{ url: '/', description: 'This server' }],
      tags: Object.entries(tagDescriptions).map(([name, description]) => ({ name, description })),
      security: [{ bearerAuth: [] }],
      components: {
        securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', description: 'An API key (`sk_...`) or an HS256 JWT.' } },
        schemas: { AgentEvent: agentEventSchema(schema) },
      },
      paths,
    },
    { override: queryStringsAsWritten },
  );
}

function operationOf(route: Route, schema: GraphQLSchema, options: { maxUploadFiles: number }): ZodOpenApiOperationObject {
  const operation = operationDefinition(route.operation as DocumentNode);
  const pathNames = [...route.path.matchAll(/:(\w+)/g)].map((match) => match[1]!);
  const pathShape = Object.fromEntries(
    pathNames.map((name) => {
      const rule = route.params?.[name];
      const parameter = rule ? z.string().regex(rule.pattern).describe(rule.description) : z.string().min(1).describe(name === 'id' ? "The resource's id." : `The ${name.replace(/_/g, ' ')}.`);
      return [name, parameter];
    }),
  );
  const headerShape: Record<string, Schema> = { ...(route.headers as Record<string, Schema> | undefined) };
  if (route.idempotent) {
    headerShape['Idempotency-Key'] = z
      .string()
      .min(1)
      .max(255)
      .regex(/^[\x20-\x7e]+$/)
      .optional()
      .describe('Makes a retry safe: the same key with the same request within 24 hours replays the first response instead of acting again.');
  }
  return {
    operationId: operation.name!.value.replace(/^Rest/, '').replace(/^./, (letter) => letter.toLowerCase()) + (route.path === '/query' ? 'Legacy' : ''),
    summary: route.summary,
    ...(route.description && { description: route.description }),
    tags: [route.tag],
    requestParams: {
      ...(pathNames.length > 0 && { path: z.object(pathShape) }),
      ...(route.query && { query: z.object(route.query) }),
      ...(Object.keys(headerShape).length > 0 && { header: z.object(headerShape) }),
    },
    ...(route.body && { requestBody: requestBodyOf(route.body, schema, route.fieldNames, options) }),
    responses: responsesOf(route, schema),
  };
}

function requestBodyOf(body: Route['body'] & object, schema: GraphQLSchema, fieldNames: Route['fieldNames'], options: { maxUploadFiles: number }) {
  if (body.kind === 'upload') {
    const metadata = z.record(jsonObjectKey(), z.unknown()).describe('A JSON object stored with each document.');
    return {
      required: true,
      content: {
        'multipart/form-data': {
          schema: z.object({
            file: z
              .array(z.string().min(1).meta({ format: 'binary' }))
              .min(1)
              .max(options.maxUploadFiles)
              .describe('One or more files (PDF, DOCX, HTML, Markdown, text, ...).'),
            metadata: metadata.optional(),
          })
          .strict(),
          encoding: { metadata: { contentType: 'application/json' } },
        },
        'application/json': {
          schema: z
            .object({
              filename: z
                .string()
                .min(1)
                .meta({ pattern: filenamePattern })
                .describe(`A plain file name (no path separators), 1 to ${maxFilenameLength} characters after trimming; its extension says how the content is read.`),
              content: z.string().min(1).meta({ pattern: '^[^\\u0000]*$' }).describe('The text of the document.'),
              metadata: metadata.optional(),
            })
            .strict(),
        },
      },
    };
  }
  const bodySchema = jsonBodySchema(body, schema, fieldNames);
  return { required: !body.optional, content: { 'application/json': { schema: bodySchema } } };
}

/** The REST body: the declared fields, each with the type and validators of the GraphQL input field it fills. */
function jsonBodySchema(body: JsonBody, schema: GraphQLSchema, _fieldNames: Route['fieldNames']) {
  const input = schema.getType(body.input);
  if (!isInputObjectType(input)) throw new Error(`${body.input} is not an input type`);
  const fields = input.getFields();
  const shape: Record<string, Schema> = {};
  for (const [restName, target] of Object.entries(body.fields)) {
    const field = fields[target.replace(/\[\]$/, '')];
    if (!field) throw new Error(`${body.input} has no field ${target}`);
    shape[restName] = inputFieldSchema(field, typeValidatorShape(input));
  }
  const object = z.object(shape).strict();
  // Fields of which exactly one must be given (the type validator's `exactlyOneOf`), in the body's names.
  const exactlyOneOf = (typeValidator(input)?.meta()?.exactlyOneOf ?? []) as string[];
  if (exactlyOneOf.length === 0) return object;
  const restNameOf = new Map(Object.entries(body.fields).map(([restName, target]) => [target.replace(/\[\]$/, ''), restName]));
  return object.meta({ oneOf: exactlyOneOf.map((name) => ({ required: [restNameOf.get(name) ?? name] })) });
}

const validatorsOf = (extensions: Readonly<Record<string, unknown>> | null | undefined) =>
  ((extensions?.['@pothos/plugin-validation'] as { schemas?: unknown[] } | undefined)?.schemas ?? []).filter(
    (candidate): candidate is Schema => candidate instanceof z.ZodType,
  );

/** The fields of an input type's own object validator (one that checks fields together), if it has one. */
function typeValidatorShape(type: GraphQLInputObjectType): Record<string, Schema> {
  return (typeValidator(type)?.shape ?? {}) as Record<string, Schema>;
}

const typeValidator = (type: GraphQLInputObjectType) => validatorsOf(type.extensions).find((candidate): candidate is z.ZodObject => candidate instanceof z.ZodObject);

function inputFieldSchema(field: GraphQLInputField, typeValidators: Record<string, Schema> = {}): Schema {
  const typeValidator = typeValidators[field.name];
  let fieldSchema = validatorsOf(field.extensions)[0] ?? typeValidator ?? inputTypeSchema(getNullableType(field.type) as GraphQLInputType);
  if (field.description) fieldSchema = fieldSchema.describe(field.description);
  // The type's own validator checks the fields together: what it requires is required.
  if (isNonNullType(field.type) || (typeValidator && !validatorsOf(field.extensions)[0])) return fieldSchema;
  // A validator may say already that null or nothing is accepted.
  if (!fieldSchema.safeParse(null).success) fieldSchema = fieldSchema.nullable();
  return fieldSchema.safeParse(undefined).success ? fieldSchema : fieldSchema.optional();
}

function inputTypeSchema(type: GraphQLInputType): Schema {
  if (isNonNullType(type)) return inputTypeSchema(type.ofType);
  if (isListType(type)) {
    const item = type.ofType as GraphQLInputType;
    const itemSchema = inputTypeSchema(item);
    return z.array(isNonNullType(item) ? itemSchema : itemSchema.nullable());
  }
  if (isInputObjectType(type)) {
    const shape = Object.fromEntries(Object.values(type.getFields()).map((field) => [field.name, inputFieldSchema(field, typeValidatorShape(type))]));
    let object: Schema = z.object(shape).strict();
    if (type.description) object = object.describe(type.description);
    return object;
  }
  return leafSchema(type);
}





function responsesOf(route: Route, schema: GraphQLSchema): ZodOpenApiResponsesObject {
  const successHeaders = route.idempotent
    ? {
        ...requestIdHeader,
        'Idempotent-Replayed': {
          description: '`true` when this is the first answer to the same request with the same `Idempotency-Key`, replayed.',
          required: false,
          schema: { type: 'string' as const, enum: ['true'] },
        },
      }
    : requestIdHeader;
  const responses: Record<string, NonNullable<ZodOpenApiResponsesObject['200']>> = route.response.describe({
    summary: route.summary,
    method: route.method,
    headers: successHeaders,
    shapes: resultShapes(route.operation as DocumentNode, schema),
  });
  const retryAfter = (required: boolean) => ({ 'Retry-After': { description: 'Seconds to wait before trying again.', required, schema: { type: 'integer' as const } } });
  for (const status of declaredStatuses(route)) {
    responses[String(status)] = {
      description: statusWords[status]!,
      headers: status === 429 ? { ...requestIdHeader, ...retryAfter(true) } : (status === 409 && route.idempotent) || status === 503 ? { ...requestIdHeader, ...retryAfter(false) } : requestIdHeader,
      content: { 'application/json': { schema: errorBody } },
    };
  }
  return responses as ZodOpenApiResponsesObject;
}











/** The agent's events: one object per member of the `AgentEvent` union, as the REST stream selects them. */
function agentEventSchema(schema: GraphQLSchema): Schema {
  const union = schema.getType('AgentEvent');
  if (!isUnionType(union)) throw new Error('the schema has no AgentEvent union');
  const stream = RestAgentStream as DocumentNode;
  const fragments = fragmentsOf(stream, schema);
  const root = fieldSelections(operationDefinition(stream).selectionSet, fragments)[0]!;
  // Each event's id is its SSE `id:` line, not a field of its `data:` line.
  const members = union.getTypes().map((member) => (objectSchema(member, root.selectionSet!, fragments) as z.ZodObject).omit({ [eventIdAlias]: true }));
  return z
    .discriminatedUnion('type', members as unknown as [z.ZodObject, z.ZodObject, ...z.ZodObject[]])
    .meta({ id: 'AgentEvent', unusedIO: 'output', description: 'One Server-Sent Event of POST /agent/stream, by its `type`.' });
}

/**
 * Query parameters arrive as text. A parameter parsed from digits into a bounded number is
 * described as that integer (its bounds included), and a default as the text a client sends.
 */
function queryStringsAsWritten({ jsonSchema, zodSchema, io }: { jsonSchema: Record<string, unknown>; zodSchema: z.core.$ZodType; io: 'input' | 'output' }) {
  if (io !== 'input') return;
  const definition = zodSchema._zod.def as { type: string; in?: z.core.$ZodType; out?: z.core.$ZodType; innerType?: z.core.$ZodType };
  // A check of the raw value piped into the shape it then has: described by that shape.
  if (definition.type === 'pipe' && definition.in && definition.out && (definition.in._zod.def as { type: string }).type === 'unknown') {
    for (const key of Object.keys(jsonSchema)) delete jsonSchema[key];
    Object.assign(jsonSchema, z.toJSONSchema(definition.out as z.ZodType, { io: 'input', unrepresentable: 'any' }), { $schema: undefined });
    delete jsonSchema.$schema;
    return;
  }
  if (definition.type === 'pipe' && definition.in && definition.out) {
    const inner = z.toJSONSchema(definition.in as z.ZodType, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
    const numeric = numericPart(definition.out);
    if (inner.type === 'string' && numeric) {
      const bounds = z.toJSONSchema(numeric, { io: 'output' }) as Record<string, unknown>;
      for (const key of Object.keys(jsonSchema)) if (key !== 'description' && key !== 'default') delete jsonSchema[key];
      Object.assign(jsonSchema, { type: 'integer', minimum: bounds.minimum ?? 0, ...(bounds.maximum !== undefined && { maximum: bounds.maximum }) });
    }
  }
  if (jsonSchema.default !== undefined && typeof jsonSchema.default !== 'string' && jsonSchema.type === 'string') jsonSchema.default = String(jsonSchema.default);
}

function numericPart(schema: z.core.$ZodType): z.ZodNumber | undefined {
  const definition = schema._zod.def as { type: string; in?: z.core.$ZodType; out?: z.core.$ZodType };
  if (definition.type === 'number') return schema as z.ZodNumber;
  if (definition.type === 'pipe') return numericPart(definition.out!) ?? numericPart(definition.in!);
  return undefined;
}
