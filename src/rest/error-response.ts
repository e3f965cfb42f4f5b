import { AppError, isErrorCode } from '../errors.js';
import type { Route } from './route.js';

/** A GraphQL response as the REST layer reads it: the operation's `result`, or its errors. */
export type GraphQLResponseBody = {
  data?: { result?: unknown } | null;
  errors?: { message: string; extensions?: { code?: unknown; retryAfterSeconds?: unknown } }[];
};

/** The refusal a GraphQL result holds, as the REST body names it; undefined for a success. */
export function errorOf(result: GraphQLResponseBody, route?: Route): AppError | undefined {
  const [error] = result.errors ?? [];
  if (error) {
    const code = error.extensions?.code;
    const retryAfterSeconds = typeof error.extensions?.retryAfterSeconds === 'number' ? error.extensions.retryAfterSeconds : undefined;
    if (isErrorCode(code)) {
      const message = code === 'bad_request' ? restMessageOf(error.message, route?.fieldNames, restFieldNames(route)) : error.message;
      return new AppError(code, message, { retryAfterSeconds });
    }
    return new AppError('internal_error', 'internal error');
  }
  const value = result.data?.result as { __typename?: string; code?: unknown; message?: string } | null | undefined;
  if (value?.__typename === 'AppError' && isErrorCode(value.code)) return new AppError(value.code, value.message ?? value.code);
  if (value === undefined || value === null) return new AppError('internal_error', 'internal error');
  return undefined;
}

/**
 * GraphQL reports a REST body that does not fit the input type in its own words
 * (`Variable "$input" got invalid value ...`); say it in terms of the REST body's fields.
 */
export function restMessageOf(message: string, fieldNames: 'snake_case' | 'camelCase' = 'snake_case', restNames: ReadonlyMap<string, string> = new Map()): string {
  const snakeCase = fieldNames === 'camelCase' ? (path: string) => path : toSnakeCase;
  // Where in the body: `at "input.limits"` names the object holding the field GraphQL reports.
  const within = /at "\w+\.([\w.[\]]+)"; Field "/.exec(message)?.[1];
  const inside = (field: string) => snakeCase(within ? `${within}.${field}` : field);
  const missing = /Field "(\w+)" of required type "[^"]+" was not provided/.exec(message);
  if (missing) return `${inside(missing[1]!)}: is required`;
  const unknown = /Field "(\w+)" is not defined by type/.exec(message);
  if (unknown) return `${inside(unknown[1]!)}: is not a known field`;
  const invalid = /got invalid value .* at "\w+\.([\w.[\]]+)"; (.*)$/s.exec(message);
  if (invalid) return `${snakeCase(invalid[1]!)}: ${describeCoercion(invalid[2]!)}`;
  const wrongShape = /Variable "\$(\w+)" got invalid value .*; (.*)$/s.exec(message);
  if (wrongShape) return `${wrongShape[1] === 'input' ? 'body' : snakeCase(wrongShape[1]!)}: ${describeCoercion(wrongShape[2]!)}`;
  // A validator's `topK: must be ...` names the GraphQL field; REST callers sent `top_k`.
  const validated = /^([A-Za-z]\w*)([.[]|: )/.exec(message);
  const restName = validated && restNames.get(validated[1]!);
  if (restName) return `${restName}${message.slice(validated[1]!.length)}`;
  return message;
}

/** The body's GraphQL field names and the REST names the caller sent for them, where they differ. */
function restFieldNames(route: Route | undefined): Map<string, string> {
  const names = new Map<string, string>();
  if (route?.body?.kind !== 'json') return names;
  for (const [restName, target] of Object.entries(route.body.fields)) {
    const graphqlName = target.replace(/\[\]$/, '');
    if (graphqlName !== restName) names.set(graphqlName, restName);
  }
  return names;
}

function describeCoercion(detail: string) {
  if (/^String cannot represent/.test(detail)) return 'must be a string';
  if (/^ID cannot represent/.test(detail)) return 'must be a string';
  // GraphQL's Int is 32 bits: a larger whole number is an integer still, out of that range.
  if (/^Int cannot represent non 32-bit signed integer value/.test(detail)) return 'must be an integer from -2147483648 to 2147483647';
  if (/^Int cannot represent/.test(detail)) return 'must be an integer';
  if (/^Boolean cannot represent/.test(detail)) return 'must be a boolean';
  if (/^Expected type "\w+" to be an object/.test(detail)) return 'must be a JSON object';
  if (/^Expected value of non-null type/.test(detail)) return 'must not be null';
  if (/^Expected non-nullable type "[^"]+" not to be null/.test(detail)) return 'must not be null';
  if (/^Enum "\w+" cannot represent non-string value/.test(detail)) return 'must be a string';
  const notInEnum = /^Value "(.*)" does not exist in "\w+" enum\.(?: Did you mean the enum value "(.*)"\?)?/s.exec(detail);
  if (notInEnum) return `is not an accepted value: "${notInEnum[1]}"${notInEnum[2] ? `; did you mean "${notInEnum[2]}"?` : ''}`;
  return detail;
}

const toSnakeCase = (path: string) => path.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);

/** 405 for a method the path does not take, with the `Allow` header listing those it does. */
export function methodNotAllowed(method: string, pathname: string, allowed: string[]): Response {
  const response = errorResponse(new AppError('method_not_allowed', `${method} is not allowed on ${pathname}`));
  response.headers.set('allow', allowed.join(', '));
  return response;
}

export function errorResponse(error: AppError): Response {
  const headers = new Headers();
  if (error.details.retryAfterSeconds !== undefined) headers.set('retry-after', String(error.details.retryAfterSeconds));
  // The rest of an oversized body was never read, so this connection cannot carry another request.
  if (error.code === 'payload_too_large') headers.set('connection', 'close');
  return Response.json(error.toBody(), { status: error.status, headers });
}
