import { createRequire } from 'node:module';

/** The service's version, as package.json gives it (OpenAPI's info.version, the MCP server's serverInfo). */
export const serviceVersion = (createRequire(import.meta.url)('../package.json') as { version: string }).version;
