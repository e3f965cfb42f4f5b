import { z } from 'zod';
import { multipartBlob } from '../http/multipart-body.js';
import { pageOf } from '../modules/agent/answer-model.js';
import { RestAgentStream } from '../rest/routes/agent.js';
import { RestListDocuments, RestUploadDocuments } from '../rest/routes/documents.js';
import { RestSearch } from '../rest/routes/search.js';
import { RestListWorkspaces } from '../rest/routes/workspaces.js';
import { chunkContext, grep, readDocument } from './document-tools.js';
import { define, fitting, id, json, limit, maxPassageCharacters, type Tool } from './tool-definition.js';

const workspaceIds = z.array(id).min(1).max(20);
const cursor = z.string().max(200).optional().describe('next_cursor of the previous page');

const documentFields = z.object({
  id: z.string(),
  workspace_id: z.string(),
  filename: z.string(),
  status: z.string(),
  stage: z.string().nullable(),
  error: z.string().nullable(),
  page_count: z.number().nullable(),
  chunk_count: z.number(),
  metadata: json,
  created_at: z.string(),
});
type DocumentFields = z.infer<typeof documentFields>;

const search = define({
  name: 'search',
  title: 'Search the knowledge base',
  description:
    "Finds passages in the user's workspaces (one or several, ranked together). Use it first for any question about their content; it is free and fast. Returns the best-matching chunks with document, file name, page and score.",
  input: z.object({
    query: z.string().describe('What to look for, in words'),
    workspace_ids: workspaceIds.describe('The workspaces to search (list_workspaces gives the ids)'),
    top_k: limit(5, 100).describe('How many passages (default 5)'),
    mode: z.enum(['hybrid', 'vector', 'keyword']).optional().describe('hybrid (default), vector or keyword'),
    filter: json.optional().describe('Document metadata to match: {"key": value} or {"key": {"in": [values]}}'),
  }),
  output: z.object({
    results: z.array(
      z.object({
        document_id: z.string(),
        filename: z.string(),
        page: z.number().nullable(),
        chunk_index: z.number(),
        score: z.number(),
        content: z.string(),
        metadata: json,
      }),
    ),
    truncated: z.boolean().describe(`Whether passages were left out to keep the result under ${maxPassageCharacters.toLocaleString('en')} characters`),
  }),
  operations: [RestSearch],
  annotations: { readOnlyHint: true, openWorldHint: false },
  async run({ query, workspace_ids, top_k, mode, filter }, { rest }) {
    type Hit = { document_id: string; filename: string; chunk_index: number; score: number; content: string; metadata: Record<string, unknown> };
    const { body } = await rest.json<{ results: Hit[] }>('POST', '/v1/kb/query', { body: { query, workspace_ids, top_k, mode, filter } });
    const { kept, truncated } = fitting(body.results.map((hit) => ({ ...hit, page: pageOf(hit.metadata) })));
    return { results: kept.map(({ document_id, filename, page, chunk_index, score, content, metadata }) => ({ document_id, filename, page, chunk_index, score, content, metadata })), truncated };
  },
});

const ask = define({
  name: 'ask',
  title: 'Ask the research agent',
  description:
    'Answers a question from the documents with citations, as the service\'s agent: it searches, reads and writes a cited answer. Costs credits: fast (default) is cheap; deep does multi-hop research for comparisons and questions of several steps and costs more. Pass session_id to follow up. Prefer search when passages are enough.',
  input: z.object({
    question: z.string().describe('The question'),
    workspace_ids: workspaceIds.describe('Workspaces to research'),
    mode: z.enum(['fast', 'deep']).default('fast'),
    session_id: id.optional().describe('A previous answer\'s session_id, to continue that conversation'),
  }),
  output: z.object({
    answer: z.string(),
    sources: z.array(json),
    session_id: z.string(),
    job_id: z.string(),
    credits_used: z.number(),
    support_score: z.number().nullable(),
    reasoning: z.array(json),
  }),
  operations: [RestAgentStream],
  annotations: { readOnlyHint: false, openWorldHint: false, destructiveHint: false, idempotentHint: false },
  async run({ question, workspace_ids, mode, session_id }, { rest, progress }) {
    const events = await rest.events('/agent/stream', { message: question, workspaceIds: workspace_ids, sessionId: session_id, mode });
    let answer = '';
    let sources: Record<string, unknown>[] = [];
    const reasoning: Record<string, unknown>[] = [];
    let lastReported = 0;
    for await (const event of events) {
      switch (event.type) {
        case 'job_started':
          await progress(`research started (run ${String(event.jobId)})`);
          break;
        case 'reasoning':
          for (const step of event.steps as { index: number; kind: string; queries: string[]; found: unknown[]; reason: string }[]) {
            reasoning.push(step);
            await progress(`step ${step.index} ${step.kind}: ${step.queries.join(' | ')} → ${step.found.length} found; ${step.reason}`);
          }
          break;
        case 'token':
          answer += String(event.content);
          // Partial text now and then, not per token.
          if (performance.now() - lastReported > 250) {
            lastReported = performance.now();
            await progress(`writing: ${answer.length > 500 ? `…${answer.slice(-500)}` : answer}`);
          }
          break;
        case 'sources':
          sources = event.sources as Record<string, unknown>[];
          break;
        case 'done':
          return {
            answer,
            sources,
            session_id: event.sessionId,
            job_id: event.jobId,
            credits_used: event.creditsUsed,
            support_score: (event.support_score as number | null | undefined) ?? null,
            reasoning,
          };
        case 'error':
          throw new AgentRunFailed(String(event.code ?? 'internal_error'), String(event.message));
      }
    }
    throw new AgentRunFailed('internal_error', 'the answer stream ended without a done event');
  },
});

/** An `error` event of the agent's stream: the run ended without an answer (and was not charged). */
export class AgentRunFailed extends Error {
  override name = 'AgentRunFailed';
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

const listWorkspaces = define({
  name: 'list_workspaces',
  title: 'List workspaces',
  description: "Lists the user's workspaces (id, name), newest first. Call it to find the workspace ids the other tools take.",
  input: z.object({ limit: limit(50, 1000), cursor }),
  output: z.object({ workspaces: z.array(json), next_cursor: z.string().optional() }),
  operations: [RestListWorkspaces],
  annotations: { readOnlyHint: true, openWorldHint: false },
  async run({ limit, cursor }, { rest }) {
    const { body, next } = await rest.json<Record<string, unknown>[]>('GET', '/v1/kb/workspaces', { query: { limit, cursor } });
    return { workspaces: body, ...(next && { next_cursor: next }) };
  },
});

const listDocuments = define({
  name: 'list_documents',
  title: 'List documents',
  description: "Lists a workspace's documents, newest first, with processing status (queued, processing, ready, failed) and stage.",
  input: z.object({ workspace_id: id, limit: limit(50, 1000), cursor }),
  output: z.object({ documents: z.array(documentFields), next_cursor: z.string().optional() }),
  operations: [RestListDocuments],
  annotations: { readOnlyHint: true, openWorldHint: false },
  async run({ workspace_id, limit, cursor }, { rest }) {
    const { body, next } = await rest.json<DocumentFields[]>('GET', `/v1/kb/workspaces/${encodeURIComponent(workspace_id)}/documents`, { query: { limit, cursor } });
    return { documents: body.map((document) => documentFields.parse(document)), ...(next && { next_cursor: next }) };
  },
});


const addDocument = define({
  name: 'add_document',
  title: 'Add a document',
  description:
    'Saves a document into a workspace: text (content) or a file\'s bytes (content_base64: PDF, DOCX, XLSX, PPTX, EPUB, HTML...). It is processed in the background; list_documents shows when it is ready to search.',
  input: z.object({
    workspace_id: id,
    filename: z.string().min(1).describe('With its extension, which tells the format'),
    content: z.string().optional().describe('The text'),
    content_base64: z.string().optional().describe("Or the file's bytes, base64"),
    metadata: json.optional(),
  }),
  output: z.object({ document: documentFields }),
  operations: [RestUploadDocuments],
  annotations: { readOnlyHint: false, openWorldHint: false, destructiveHint: false, idempotentHint: false },
  async run({ workspace_id, filename, content, content_base64, metadata }, { rest }) {
    if ((content === undefined) === (content_base64 === undefined)) throw new ToolInputError('give exactly one of content and content_base64');
    const path = `/v1/kb/workspaces/${encodeURIComponent(workspace_id)}/documents`;
    let created: DocumentFields | DocumentFields[];
    if (content !== undefined) created = (await rest.json<DocumentFields[]>('POST', path, { body: { filename, content, metadata } })).body;
    else {
      if (!/^[A-Za-z0-9+/]*={0,2}$/.test(content_base64!.replace(/\s+/g, ''))) throw new ToolInputError('content_base64: is not base64');
      // The upload as a client would send it: the file's bytes with its name as given, and the metadata.
      const file = new File([Buffer.from(content_base64!, 'base64')], filename);
      const upload = multipartBlob([{ name: 'file', file }, ...(metadata === undefined ? [] : [{ name: 'metadata', value: JSON.stringify(metadata) }])]);
      created = (await rest.json<DocumentFields[]>('POST', path, upload)).body;
    }
    return { document: documentFields.parse(Array.isArray(created) ? created[0] : created) };
  },
});

/** An argument the tool itself refuses (the REST layer refuses the rest). */
export class ToolInputError extends Error {
  override name = 'ToolInputError';
}

export const tools: Tool[] = [search, ask, listWorkspaces, listDocuments, readDocument, chunkContext, grep, addDocument];
