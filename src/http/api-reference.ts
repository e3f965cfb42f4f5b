// GET /openapi.json (the REST layer's OpenAPI 3.1 description) and GET /docs (a browsable
// reference page). The page's assets are swagger-ui-dist's own files, served from node_modules:
// nothing is fetched from elsewhere, so the page works offline.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { Config } from '../config.js';
import { noEndpoint } from '../errors.js';
import { schema } from '../graphql/schema.js';
import { errorResponse, methodNotAllowed } from '../rest/error-response.js';
import { openApiDocument } from '../rest/openapi.js';
import { routes } from '../rest/routes.js';
import { serviceVersion } from '../version.js';

const require = createRequire(import.meta.url);
const assetDirectory = path.dirname(require.resolve('swagger-ui-dist/package.json'));

const assets: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
};

const page = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Knowledge-base API reference</title>
<link rel="icon" href="/docs/favicon-32x32.png">
<link rel="stylesheet" href="/docs/swagger-ui.css">
</head>
<body>
<div id="reference"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script src="/docs/reference.js"></script>
</body>
</html>
`;

// validatorUrl: null keeps Swagger UI from sending the description to validator.swagger.io.
const startScript = `window.ui = SwaggerUIBundle({
  url: '/openapi.json',
  dom_id: '#reference',
  deepLinking: true,
  validatorUrl: null,
  tryItOutEnabled: false,
  persistAuthorization: false,
});
`;

// Swagger UI sets inline styles; everything else comes from this server.
const contentSecurityPolicy = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'";

export type ApiReference = { handle(request: Request, pathname: string): Promise<Response> | null };

/** The description is generated once, on first request; it depends on code and configuration, never on a request. */
export function apiReference(config: Config): ApiReference {
  let description: string | undefined;
  const describe = () => (description ??= JSON.stringify(openApiDocument(routes, schema, { version: serviceVersion, maxUploadFiles: config.uploads.maxFiles })));
  return {
    handle(request, pathname) {
      if (pathname !== '/openapi.json' && pathname !== '/docs' && !pathname.startsWith('/docs/')) return null;
      if (request.method !== 'GET' && request.method !== 'HEAD') {
        return Promise.resolve(methodNotAllowed(request.method, pathname, ['GET', 'HEAD']));
      }
      if (pathname === '/openapi.json') {
        return Promise.resolve(new Response(describe(), { headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-cache' } }));
      }
      const securityHeaders = { 'content-security-policy': contentSecurityPolicy, 'x-content-type-options': 'nosniff' };
      if (pathname === '/docs' || pathname === '/docs/') {
        return Promise.resolve(new Response(page, { headers: { 'content-type': 'text/html; charset=utf-8', ...securityHeaders } }));
      }
      const name = pathname.slice('/docs/'.length);
      if (name === 'reference.js') {
        return Promise.resolve(new Response(startScript, { headers: { 'content-type': 'text/javascript; charset=utf-8', ...securityHeaders } }));
      }
      const type = Object.hasOwn(assets, name) ? assets[name] : undefined;
      if (!type) return Promise.resolve(errorResponse(noEndpoint('GET', pathname)));
      return readFile(path.join(assetDirectory, name)).then(
        (bytes) => new Response(bytes, { headers: { 'content-type': type, 'cache-control': 'public, max-age=3600', ...securityHeaders } }),
      );
    },
  };
}
