// Writes schema/schema.graphql from the code; CI fails when the committed file differs.
import { writeFile } from 'node:fs/promises';
import { lexicographicSortSchema, printSchema } from 'graphql';
import { schema } from '../src/graphql/schema.js';

await writeFile(new URL('../schema/schema.graphql', import.meta.url), `${printSchema(lexicographicSortSchema(schema))}\n`);
console.log('wrote schema/schema.graphql');
