// GraphiQL at GET /graphql (Accept: text/html): the page Yoga would serve, with its assets from
// the @graphql-yoga/graphiql npm package served by this server under /graphiql/ instead of a CDN,
// so the page loads nothing from elsewhere, works offline, and runs under a Content-Security-Policy
// that allows this origin only.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { shouldRenderGraphiQL } from 'graphql-yoga';
import { noEndpoint } from '../errors.js';
import { graphqlEndpoint } from '../graphql/endpoints.js';
import { errorResponse, methodNotAllowed } from '../rest/error-response.js';
import { pageSecurityHeaders } from './console.js';

const require = createRequire(import.meta.url);
const assetDirectory = path.join(path.dirname(require.resolve('@graphql-yoga/graphiql/package.json')), 'dist');

export const graphiqlAssetsPath = '/graphiql/';

// The package's files, by the names they are served under; its graphql worker's file name has
// two dots as published.
const assets: Record<string, { file: string; type: string }> = {
  'graphiql.css': { file: 'graphiql.css', type: 'text/css; charset=utf-8' },
  'yoga-graphiql.umd.js': { file: 'yoga-graphiql.umd.js', type: 'text/javascript; charset=utf-8' },
  'editor.worker.js': { file: 'monacoeditorwork/editor.worker.bundle.js', type: 'text/javascript; charset=utf-8' },
  'json.worker.js': { file: 'monacoeditorwork/json.worker.bundle.js', type: 'text/javascript; charset=utf-8' },
  'graphql.worker.js': { file: 'monacoeditorwork/graphql.worker..bundle.js', type: 'text/javascript; charset=utf-8' },
};

const title = 'Knowledge base GraphQL';

// No inline script: the page's own code is start.js. The icon is empty, so the browser asks for
// none.
const page = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${graphiqlAssetsPath}graphiql.css">
</head>
<body>
<div id="graphiql">Loading ${title}...</div>
<script src="${graphiqlAssetsPath}yoga-graphiql.umd.js"></script>
<script src="${graphiqlAssetsPath}start.js"></script>
</body>
</html>
`;

// Monaco, GraphiQL's editor, starts its workers from the URLs getWorkerUrl gives, by label.
const startScript = `const workers = { editorWorkerService: 'editor.worker.js', json: 'json.worker.js', graphql: 'graphql.worker.js' };
self.MonacoEnvironment = {
  globalAPI: false,
  getWorkerUrl: (_moduleId, label) => '${graphiqlAssetsPath}' + (workers[label] ?? workers.editorWorkerService),
};
YogaGraphiQL.renderYogaGraphiQL(document.getElementById('graphiql'), { endpoint: '${graphqlEndpoint}', title: ${JSON.stringify(title)} });
`;

// The console's policy, but for styles: GraphiQL's editor and components write <style> elements.
const securityHeaders = pageSecurityHeaders({ 'style-src': "'self' 'unsafe-inline'" });

export type GraphiQLSite = { handle(request: Request, pathname: string): Promise<Response> | null };

/**
 * The page (GET /graphql asking for HTML; it runs nothing and needs no credential) and its
 * assets. Null for any other request, which is not GraphiQL's.
 */
export function graphiqlSite(): GraphiQLSite {
  return {
    handle(request, pathname) {
      if (pathname === graphqlEndpoint && shouldRenderGraphiQL(request)) {
        return Promise.resolve(new Response(page, { headers: { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-cache', ...securityHeaders } }));
      }
      if (!pathname.startsWith(graphiqlAssetsPath)) return null;
      if (request.method !== 'GET' && request.method !== 'HEAD') {
        return Promise.resolve(methodNotAllowed(request.method, pathname, ['GET', 'HEAD']));
      }
      const name = pathname.slice(graphiqlAssetsPath.length);
      if (name === 'start.js') {
        return Promise.resolve(new Response(startScript, { headers: { 'content-type': 'text/javascript; charset=utf-8', 'cache-control': 'no-cache', ...securityHeaders } }));
      }
      const asset = Object.hasOwn(assets, name) ? assets[name] : undefined;
      if (!asset) return Promise.resolve(errorResponse(noEndpoint(request.method, pathname)));
      return readFile(path.join(assetDirectory, asset.file)).then(
        (bytes) => new Response(bytes, { headers: { 'content-type': asset.type, 'cache-control': 'public, max-age=3600', ...securityHeaders } }),
      );
    },
  };
}
