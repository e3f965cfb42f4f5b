import type { RestCalls } from './rest-calls.js';
import { maxTextCharacters } from './tool-definition.js';

/** `kb://documents/{id}`: a document's text (as the REST preview gives it). */
export const documentTemplate = 'kb://documents/{document_id}';
/** A chunk with its neighbours (as GET .../chunks/{chunk_index}/context gives them). */
export const chunkContextTemplate = 'kb://documents/{document_id}/chunks/{chunk_index}';

const documentUri = /^kb:\/\/documents\/([^/?#]+)$/;
const chunkUri = /^kb:\/\/documents\/([^/?#]+)\/chunks\/(\d{1,9})$/;

export const resourceTemplates = [
  {
    uriTemplate: documentTemplate,
    name: 'document',
    title: 'A document',
    description: `A document's text, up to ${maxTextCharacters.toLocaleString('en')} characters (read_document reads on).`,
    mimeType: 'text/plain',
  },
  {
    uriTemplate: chunkContextTemplate,
    name: 'chunk_context',
    title: 'A chunk in its context',
    description: 'A chunk with the two chunks before and after it, as JSON.',
    mimeType: 'application/json',
  },
];

type ListedDocument = { id: string; workspace_id: string; filename: string; content_type: string; size_bytes: number; status: string };

/** Resources are listed a workspace at a time; the cursor names the workspace and the position in it. */
type ListCursor = { workspace: string; after?: string };

const pageSize = 100;
const workspacesPerPage = 50;

export async function listDocumentResources(rest: RestCalls, cursor: string | undefined) {
  let position: ListCursor | undefined;
  if (cursor !== undefined) {
    try {
      position = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as ListCursor;
      if (typeof position.workspace !== 'string') throw new Error();
    } catch {
      throw new ResourceNotFound(`cursor: is not one this server gave`);
    }
  }
  const workspaces: { id: string; name: string }[] = [];
  for (let after: string | undefined, pages = 0; pages < 10; pages += 1) {
    const { body, next } = await rest.json<{ id: string; name: string }[]>('GET', '/v1/kb/workspaces', { query: { limit: 1000, cursor: after } });
    workspaces.push(...body);
    if (!next) break;
    after = next;
  }
  let index = position ? workspaces.findIndex((workspace) => workspace.id === position.workspace) : 0;
  if (index < 0) return { resources: [] };
  let after = position?.after;
  for (let visited = 1; index < workspaces.length; index += 1, visited += 1, after = undefined) {
    const workspace = workspaces[index]!;
    const { body, next } = await rest.json<ListedDocument[]>('GET', `/v1/kb/workspaces/${workspace.id}/documents`, { query: { limit: pageSize, cursor: after } });
    const following = next ? { workspace: workspace.id, after: next } : workspaces[index + 1] ? { workspace: workspaces[index + 1]!.id } : undefined;
    // Empty workspaces are passed over, at most `workspacesPerPage` of them a call: then the page is empty and the cursor goes on.
    if (body.length === 0 && following && visited < workspacesPerPage) continue;
    return {
      resources: body.map((document) => ({
        uri: `kb://documents/${document.id}`,
        name: document.filename,
        title: `${document.filename} (${workspace.name})`,
        description: `${document.status} document in workspace ${workspace.name} (${workspace.id})`,
        mimeType: 'text/plain',
        size: document.size_bytes,
      })),
      ...(following && { nextCursor: Buffer.from(JSON.stringify(following)).toString('base64url') }),
    };
  }
  return { resources: [] };
}

export async function readResource(rest: RestCalls, uri: string) {
  const chunk = chunkUri.exec(uri);
  const document = chunk ?? documentUri.exec(uri);
  if (!document) throw new ResourceNotFound(`unknown resource ${uri}: the server has ${documentTemplate} and ${chunkContextTemplate}`);
  let documentId: string;
  try {
    documentId = decodeURIComponent(document[1]!);
  } catch {
    throw new ResourceNotFound(`unknown resource ${uri}: its document id is not well-formed`);
  }
  const { body: found } = await rest.json<{ workspace_id: string }>('GET', `/v1/kb/documents/${encodeURIComponent(documentId)}`);
  if (chunk) {
    const path = `/v1/kb/documents/${encodeURIComponent(documentId)}/chunks/${chunk[2]}/context`;
    const { body } = await rest.json('GET', path, { query: { workspace_id: found.workspace_id } });
    return { contents: [{ uri, mimeType: 'application/json', text: JSON.stringify(body) }] };
  }
  const { body } = await rest.json<{ content: string | null }>('GET', `/v1/kb/documents/${encodeURIComponent(documentId)}/preview`, {
    query: { workspace_id: found.workspace_id, chunks: 1 },
  });
  const text = body.content ?? '';
  const cut = text.length > maxTextCharacters;
  return {
    contents: [
      {
        uri,
        mimeType: 'text/plain',
        text: cut ? `${text.slice(0, maxTextCharacters)}\n\n[cut at ${maxTextCharacters} of ${text.length} characters: read_document reads on]` : text,
      },
    ],
  };
}

export class ResourceNotFound extends Error {
  override name = 'ResourceNotFound';
}
