import { expect } from 'vitest';
import { serverBed, type TestServer, type TestUser } from './server.js';

export type SessionBody = { id: string; title: string | null; created_at: string; updated_at: string; message_count: number };
export type MessageBody = { id: string; role: string; content: string; sources: unknown; created_at: string };

/** Chat helpers over REST for the chat module's test files, reading their server and owner when called. */
function chatHelpers(bed: () => { server: TestServer; owner: TestUser }) {
  async function createSession(json: unknown = {}, key = bed().owner.key) {
    const response = await bed().server.request('POST', '/v1/chat/sessions', { key, json });
    expect(response.status, response.text).toBe(201);
    return response.body as SessionBody;
  }

  async function sendMessage(sessionId: string, content: string, role = 'user', key = bed().owner.key) {
    const response = await bed().server.request('POST', `/v1/chat/sessions/${sessionId}/messages`, { key, json: { content, role } });
    expect(response.status, response.text).toBe(201);
    return response.body as MessageBody;
  }

  return { createSession, sendMessage };
}

/**
 * The chat module's test files' setup: a server and its owner (serverBed), handed to `started`,
 * and the helpers over them.
 */
export function chatBed(started: (bed: { server: TestServer; owner: TestUser }) => void) {
  let bed: { server: TestServer; owner: TestUser } | undefined;
  serverBed(({ server, user }) => started((bed = { server, owner: user })));
  return chatHelpers(() => bed!);
}
