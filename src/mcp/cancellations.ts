import type { StoreSignals } from '../db/database.js';

const channel = 'kb_mcp_cancel';

type Call = { controller: AbortController };
type Cancellation = { session: string; request: string | number; userId: string };

/**
 * The MCP tool calls this process runs, by session and JSON-RPC id, so that a client's
 * `notifications/cancelled` (a POST of its own, which may reach another process) stops its call:
 * a call not running here is signalled to the other processes through the store. Only the user
 * who made a call can cancel it.
 */
export class McpCalls {
  readonly #calls = new Map<string, Call>();
  readonly #signals: StoreSignals | undefined;

  constructor(signals: StoreSignals | undefined) {
    this.#signals = signals;
  }

  /** Listens for cancellations sent by other processes. */
  async listen() {
    await this.#signals?.listen(channel, (message) => {
      if (!message) return;
      try {
        const cancellation = JSON.parse(message) as Cancellation;
        this.#cancelHere(cancellation);
      } catch {
        // Not one of ours: ignored.
      }
    });
  }

  /** Registers a running call; the returned function ends its registration. */
  track(session: string, request: string | number, userId: string, controller: AbortController): () => void {
    const key = keyOf(userId, session, request);
    const call = { controller };
    this.#calls.set(key, call);
    return () => {
      if (this.#calls.get(key) === call) this.#calls.delete(key);
    };
  }

  cancel(cancellation: Cancellation) {
    if (!this.#cancelHere(cancellation)) this.#signals?.send(channel, JSON.stringify(cancellation));
  }

  #cancelHere({ session, request, userId }: Cancellation): boolean {
    const call = this.#calls.get(keyOf(userId, session, request));
    if (!call) return false;
    call.controller.abort(new Error('the client cancelled the call'));
    return true;
  }
}

// The user is part of the key: a session id is whatever a client sends, and another user's call
// under the same session and request id must neither replace nor cancel this one.
const keyOf = (userId: string, session: string, request: string | number) => `${userId}\n${session}\n${JSON.stringify(request)}`;
