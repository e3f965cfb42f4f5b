import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/** How long answers still on their way are waited for once the client has closed stdin. */
const closingGraceMs = 120_000;

type RequestId = string | number;

/**
 * `kb mcp`: MCP on stdin and stdout for a local client (Claude Desktop, Cursor), forwarded
 * message by message to a running server's /mcp with the given API key. Nothing is answered
 * here but what the server could not answer: a request it could not be sent (down, 401), one
 * whose answer stream broke, and a line that is no JSON-RPC message.
 */
export async function bridgeStdioToServer(serverUrl: string, apiKey: string): Promise<void> {
  const local = new StdioServerTransport();
  const remote = new StreamableHTTPClientTransport(new URL('/mcp', serverUrl), { requestInit: { headers: { authorization: `Bearer ${apiKey}` } } });
  const initializeIds = new Set<RequestId>();
  /** Requests sent to the server and not answered yet. */
  const pending = new Set<RequestId>();
  /** Requests answered here with an error: a late answer of the server to one of them is dropped (a request gets one answer). */
  const failed = new Set<RequestId>();
  let settled: (() => void) | undefined;
  const answered = (id: RequestId) => {
    pending.delete(id);
    if (pending.size === 0) settled?.();
  };
  const fail = (id: RequestId | null, code: number, message: string) => {
    if (id !== null) {
      answered(id);
      failed.add(id);
    }
    void local.send({ jsonrpc: '2.0', id, error: { code, message: `kb mcp: ${message}` } } as JSONRPCMessage);
  };

  const closed = new Promise<void>((resolve) => {
    local.onclose = () => {
      void remote.close().finally(resolve);
    };
  });
  local.onmessage = (message: JSONRPCMessage) => {
    const request = message as { id?: RequestId; method?: string };
    const isRequest = request.id !== undefined && request.method !== undefined;
    if (isRequest) pending.add(request.id!);
    if (request.method === 'initialize' && request.id !== undefined) initializeIds.add(request.id);
    remote.send(message).catch((error: unknown) => {
      if (isRequest) fail(request.id!, -32000, `${serverUrl}: ${(error as Error).message}`);
    });
  };
  local.onerror = (error) => {
    // A line that is not JSON, or JSON that is not one JSON-RPC message (a batch is not taken over stdio).
    process.stderr.write(`kb mcp: ${error.message}\n`);
    fail(null, error instanceof SyntaxError ? -32700 : -32600, `a line that is not a JSON-RPC message: ${error.message}`);
  };
  remote.onmessage = (message: JSONRPCMessage) => {
    const response = message as { id?: RequestId; method?: string; result?: { protocolVersion?: unknown } };
    if (response.id !== undefined && response.method === undefined) {
      if (failed.delete(response.id)) return;
      answered(response.id);
      if (initializeIds.delete(response.id) && typeof response.result?.protocolVersion === 'string') {
        // Later requests carry the negotiated version, as the SDK's client would send it.
        remote.setProtocolVersion(response.result.protocolVersion);
      }
    }
    void local.send(message);
  };
  remote.onerror = (error) => {
    process.stderr.write(`kb mcp: ${error.message}\n`);
    // A stream that broke before its answer leaves its request unanswered; which one is not said, so every one waiting is told.
    if (/stream|terminated|disconnected/i.test(error.message)) {
      for (const id of [...pending]) fail(id, -32000, `the server's answer stream broke (${error.message})`);
    }
  };
  await remote.start();
  await local.start();
  // The client closing stdin ends the session, once the answers on their way have arrived.
  process.stdin.once('end', () => {
    const allAnswered = pending.size === 0 ? Promise.resolve() : new Promise<void>((resolve) => (settled = resolve));
    const timer = setTimeout(() => settled?.(), closingGraceMs);
    void allAnswered.finally(() => {
      clearTimeout(timer);
      void local.close();
    });
  });
  await closed;
}
