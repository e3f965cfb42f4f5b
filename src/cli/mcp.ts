import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/**
 * `kb mcp`: MCP on stdin and stdout for a local client (Claude Desktop, Cursor), forwarded
 * message by message to a running server's /mcp with the given API key. Nothing is answered
 * here: the server's tools, limits and errors are the ones the client gets.
 */
export async function bridgeStdioToServer(serverUrl: string, apiKey: string): Promise<void> {
  const local = new StdioServerTransport();
  const remote = new StreamableHTTPClientTransport(new URL('/mcp', serverUrl), { requestInit: { headers: { authorization: `Bearer ${apiKey}` } } });
  const initializeIds = new Set<string | number>();
  const closed = new Promise<void>((resolve) => {
    local.onclose = () => {
      void remote.close().finally(resolve);
    };
  });
  local.onmessage = (message: JSONRPCMessage) => {
    const request = message as { id?: string | number; method?: string };
    if (request.method === 'initialize' && request.id !== undefined) initializeIds.add(request.id);
    remote.send(message).catch((error: unknown) => {
      // A request the server could not be asked (down, 401): answered here so the client is not left waiting.
      if (request.id === undefined || request.method === undefined) return;
      void local.send({ jsonrpc: '2.0', id: request.id, error: { code: -32000, message: `kb mcp: ${serverUrl}: ${(error as Error).message}` } });
    });
  };
  remote.onmessage = (message: JSONRPCMessage) => {
    const response = message as { id?: string | number; result?: { protocolVersion?: unknown } };
    if (response.id !== undefined && initializeIds.delete(response.id) && typeof response.result?.protocolVersion === 'string') {
      // Later requests carry the negotiated version, as the SDK's client would send it.
      remote.setProtocolVersion(response.result.protocolVersion);
    }
    void local.send(message);
  };
  remote.onerror = (error) => process.stderr.write(`kb mcp: ${error.message}\n`);
  await remote.start();
  await local.start();
  // The client closing its end of stdin is the end of the session.
  process.stdin.once('end', () => void local.close());
  await closed;
}
