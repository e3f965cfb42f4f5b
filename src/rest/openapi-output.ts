// The JSON Schema of what a persisted operation selects: its aliases are the REST field names
// and the GraphQL types give their types and nullability. The OpenAPI description (openapi.ts)
// and the response kinds (response-kinds.ts) describe bodies with it.
import { createRequire } from 'node:module';
import type { DocumentNode, FragmentDefinitionNode, GraphQLField, GraphQLInputType, GraphQLObjectType, GraphQLOutputType, GraphQLSchema, OperationDefinitionNode, SelectionSetNode } from 'graphql';
import { z } from 'zod';

// The type predicates check which copy of graphql made a type. Node loads graphql's CommonJS
// build for Pothos (the schema's types) and for this file alike, but vitest hands source files
// the ESM build; taking them from the CommonJS build as Node loads it is right in both.
const { getNamedType, getNullableType, isEnumType, isInterfaceType, isListType, isNonNullType, isObjectType, isScalarType, isUnionType, Kind } = createRequire(import.meta.url)('graphql') as typeof import('graphql');

export type Schema = z.ZodType;

export const int32 = () => z.number().int().min(-(2 ** 31)).max(2 ** 31 - 1);

/** `conditional`: under `@include` or `@skip`, so the field may be left out of the response. */
type FieldSelection = { name: string; responseName: string; selectionSet?: SelectionSetNode; conditional: boolean };

/** A document's fragments by name, and which type names are unions or interfaces (a fragment on one applies to its members). */
export type Fragments = { definitions: Map<string, FragmentDefinitionNode>; abstractTypes: ReadonlySet<string> };

export function fragmentsOf(document: DocumentNode, schema: GraphQLSchema): Fragments {
  const definitions = new Map(
    document.definitions.filter((definition): definition is FragmentDefinitionNode => definition.kind === Kind.FRAGMENT_DEFINITION).map((fragment) => [fragment.name.value, fragment]),
  );
  const abstractTypes = new Set(Object.values(schema.getTypeMap()).filter((type) => isUnionType(type) || isInterfaceType(type)).map((type) => type.name));
  return { definitions, abstractTypes };
}

export function operationDefinition(document: DocumentNode): OperationDefinitionNode {
  const operation = document.definitions.find((definition): definition is OperationDefinitionNode => definition.kind === Kind.OPERATION_DEFINITION);
  if (!operation?.name) throw new Error('a REST operation must be a named operation');
  return operation;
}

/**
 * The fields a selection set asks for, for an object of `typeName`: its own fields and those of
 * fragments on that type. Fragments on `AppError` are the refusals, answered as error bodies.
 */
export function fieldSelections(selectionSet: SelectionSetNode, fragments: Fragments, typeName?: string): FieldSelection[] {
  const fields: FieldSelection[] = [];
  for (const selection of selectionSet.selections) {
    if (selection.kind === Kind.FIELD) {
      if (selection.name.value === '__typename') continue;
      fields.push({
        name: selection.name.value,
        responseName: selection.alias?.value ?? selection.name.value,
        selectionSet: selection.selectionSet,
        conditional: (selection.directives ?? []).some((directive) => directive.name.value === 'include' || directive.name.value === 'skip'),
      });
    } else {
      const fragment = selection.kind === Kind.INLINE_FRAGMENT ? selection : fragments.definitions.get(selection.name.value)!;
      const condition = fragment.typeCondition?.name.value;
      if (condition === 'AppError' || (typeName && condition && condition !== typeName && !fragments.abstractTypes.has(condition))) continue;
      fields.push(...fieldSelections(fragment.selectionSet, fragments, typeName));
    }
  }
  return fields;
}

/** A field's schema as it appears in the response: `required` is the value without its null. */
export function outputSchema(type: GraphQLOutputType, selectionSet: SelectionSetNode | undefined, fragments: Fragments): { schema: Schema; required: Schema } {
  const inner = getNullableType(type) as GraphQLOutputType;
  let required: Schema;
  if (isListType(inner)) {
    required = z.array(outputSchema(inner.ofType as GraphQLOutputType, selectionSet, fragments).schema);
  } else if (isObjectType(inner)) {
    required = objectSchema(inner, selectionSet!, fragments);
  } else if (isUnionType(inner)) {
    // A mutation's result: the union of AppError (answered as an error body) and the success type.
    const success = inner.getTypes().filter((member) => member.name !== 'AppError');
    if (success.length !== 1) throw new Error(`${inner.name}: a REST result union must have one success type`);
    required = objectSchema(success[0]!, selectionSet!, fragments);
  } else {
    required = leafSchema(inner);
  }
  // A mutation's union result is null only when refused: the success body is never null.
  const nullable = !isNonNullType(type) && !isUnionType(inner);
  return { schema: nullable ? required.nullable() : required, required };
}

export function objectSchema(type: GraphQLObjectType, selectionSet: SelectionSetNode, fragments: Fragments): Schema {
  const fields = type.getFields();
  const shape: Record<string, Schema> = {};
  for (const selection of fieldSelections(selectionSet, fragments, type.name)) {
    const field = fields[selection.name]!;
    const fieldSchema = describedField(field, outputSchema(field.type, selection.selectionSet, fragments).schema);
    shape[selection.responseName] = selection.conditional ? fieldSchema.optional() : fieldSchema;
  }
  return z.object(shape);
}

function describedField(field: GraphQLField<unknown, unknown>, fieldSchema: Schema): Schema {
  const constant = field.extensions?.constant;
  if (typeof constant === 'string') fieldSchema = z.literal(constant);
  return field.description ? fieldSchema.describe(field.description) : fieldSchema;
}

/** A list route answers with a connection's nodes as a bare array. */
export function listItems(type: GraphQLOutputType, selectionSet: SelectionSetNode, fragments: Fragments): Schema {
  const connection = getNamedType(type) as GraphQLObjectType;
  const edges = fieldSelections(selectionSet, fragments).find((selection) => selection.name === 'edges')!;
  const edgeType = getNamedType(connection.getFields().edges!.type) as GraphQLObjectType;
  const node = fieldSelections(edges.selectionSet!, fragments).find((selection) => selection.name === 'node')!;
  return z.array(outputSchema(edgeType.getFields().node!.type, node.selectionSet, fragments).required);
}

export function pickField(type: GraphQLOutputType, selectionSet: SelectionSetNode, fragments: Fragments, name: string): Schema {
  const parent = getNamedType(type) as GraphQLObjectType;
  const selection = fieldSelections(selectionSet, fragments).find((candidate) => candidate.responseName === name)!;
  return outputSchema(parent.getFields()[selection.name]!.type, selection.selectionSet, fragments).required;
}

export function leafSchema(type: GraphQLInputType | GraphQLOutputType): Schema {
  if (isEnumType(type)) {
    const values = type.getValues().map((value) => value.value as string) as [string, ...string[]];
    return z.enum(values);
  }
  if (!isScalarType(type)) throw new Error(`no JSON schema for ${String(type)}`);
  switch (type.name) {
    case 'String':
    case 'ID':
      return z.string();
    case 'Int':
      return int32();
    case 'Float':
      return z.number();
    case 'Boolean':
      return z.boolean();
    case 'DateTime':
      return z.string().meta({ format: 'date-time' });
    case 'JSON':
      return z.unknown();
    default:
      throw new Error(`no JSON schema for the scalar ${type.name}`);
  }
}

/** The shapes a route's body may take, from its operation's `result` field. */
export type ResultShapes = {
  /** The result itself (`schema`), and without its null (`required`). */
  result(): { schema: Schema; required: Schema };
  /** A connection's nodes, as a list route answers them. */
  listItems(): Schema;
  /** One field of the result. */
  field(name: string): Schema;
};

export function resultShapes(document: DocumentNode, schema: GraphQLSchema): ResultShapes {
  const operation = operationDefinition(document);
  const rootType = operation.operation === 'query' ? schema.getQueryType() : operation.operation === 'mutation' ? schema.getMutationType() : schema.getSubscriptionType();
  const fragments = fragmentsOf(document, schema);
  const resultField = fieldSelections(operation.selectionSet, fragments)[0]!;
  const field = rootType!.getFields()[resultField.name]!;
  return {
    result: () => outputSchema(field.type, resultField.selectionSet, fragments),
    listItems: () => listItems(field.type, resultField.selectionSet!, fragments),
    field: (name) => pickField(field.type, resultField.selectionSet!, fragments, name),
  };
}
