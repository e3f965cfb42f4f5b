import type { ComponentChildren } from 'preact';
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { call, ConsoleNotice, formatDate, listAll, type ChatMessage, type ChatSession, type ChatSessionSummary, type ReasoningStep, type Source } from '../api.js';
import { Checklist, Empty, ErrorNotice, href, navigate, useAccount, useLoad, useRoute, useWorkspaces } from '../ui.js';
import { citationHref } from './document.js';

type Mode = 'fast' | 'deep';

/** What this tab saw of an answer while it streamed: kept for the tab, by the stored message's id. */
type AnswerFacts = { creditsUsed: number; mode: Mode; steps: ReasoningStep[]; supportScore: number | null };
const factsKey = (messageId: string) => `kb-console-answer:${messageId}`;
const readFacts = (messageId: string): AnswerFacts | null => {
  try {
    return JSON.parse(sessionStorage.getItem(factsKey(messageId)) ?? 'null') as AnswerFacts | null;
  } catch {
    return null;
  }
};

type LiveTurn = {
  question: string;
  workspaceIds: string[];
  mode: Mode;
  answer: string;
  steps: ReasoningStep[];
  sources: Source[];
  state: 'asking' | 'streaming' | 'done' | 'failed';
  creditsUsed: number | null;
  error?: unknown;
};

export function ChatScreen({ sessionId }: { sessionId: string | null }) {
  const { api, refresh } = useAccount();
  const route = useRoute();
  const workspaces = useWorkspaces();
  const sessions = useLoad(
    (signal) => listAll<ChatSessionSummary>((cursor) => api.GET('/v1/chat/sessions', { params: { query: { limit: 100, ...(cursor && { cursor }) } }, signal }), 200),
    [api],
  );
  const session = useLoad<ChatSession | null>(
    (signal) => (sessionId ? call(api.GET('/v1/chat/sessions/{id}', { params: { path: { id: sessionId } }, signal })) : Promise.resolve(null)),
    [sessionId],
  );
  // The workspaces a new chat searches, once the user has chosen; until then the one named in
  // the link, or the only workspace there is. A session searches its own.
  const [picked, setPicked] = useState<string[] | null>(() => (route.query.get('workspace') ? [route.query.get('workspace')!] : null));
  const chosen = session.value?.workspace_ids ?? picked ?? (workspaces.value?.length === 1 ? [workspaces.value[0]!.id] : []);
  const [mode, setMode] = useState<Mode>('fast');
  const [question, setQuestion] = useState('');
  const [live, setLive] = useState<LiveTurn | null>(null);
  const controller = useRef<AbortController | null>(null);
  const conversation = useRef<HTMLDivElement>(null);

  useEffect(() => conversation.current?.scrollTo({ top: conversation.current.scrollHeight }), [live?.answer, live?.steps.length, live?.state, session.value]);
  useEffect(() => () => controller.current?.abort(), []);

  const ask = async (event: Event) => {
    event.preventDefault();
    const text = question.trim();
    if (!text || chosen.length === 0) return;
    const abort = new AbortController();
    controller.current = abort;
    const askedFrom = location.hash;
    let turn: LiveTurn = { question: text, workspaceIds: chosen, mode, answer: '', steps: [], sources: [], state: 'asking', creditsUsed: null };
    const update = (change: Partial<LiveTurn>) => setLive((turn = { ...turn, ...change }));
    update({});
    setQuestion('');
    try {
      // Not resumable: Stop ends the run at once, and a run stopped before it answers is not charged.
      const events = api.streamAgent({ message: text, workspaceIds: chosen, ...(sessionId && { sessionId }), mode }, { signal: abort.signal, resume: false });
      for await (const agentEvent of events) {
        switch (agentEvent.type) {
          case 'job_started':
            update({ state: 'streaming' });
            break;
          case 'reasoning': {
            const byIndex = new Map(turn.steps.map((step) => [step.index, step]));
            for (const step of agentEvent.steps) byIndex.set(step.index, step);
            update({ steps: [...byIndex.values()].sort((a, b) => a.index - b.index) });
            break;
          }
          case 'token':
            update({ answer: turn.answer + agentEvent.content });
            break;
          case 'sources':
            update({ sources: agentEvent.sources });
            break;
          case 'done': {
            update({ state: 'done', creditsUsed: agentEvent.creditsUsed });
            refresh();
            sessions.reload();
            // The answer is stored and charged: it stays on screen as streamed if the history cannot be read back.
            const stored = await call(api.GET('/v1/chat/sessions/{id}', { params: { path: { id: agentEvent.sessionId } } })).catch(() => null);
            const answer = stored && [...stored.messages].reverse().find((message) => message.role === 'assistant');
            if (answer) {
              const facts: AnswerFacts = { creditsUsed: agentEvent.creditsUsed, mode: turn.mode, steps: turn.steps, supportScore: agentEvent.support_score };
              sessionStorage.setItem(factsKey(answer.id), JSON.stringify(facts));
            }
            // A user who has moved on meanwhile (a citation of the streamed answer clicked) is left where they went.
            if (location.hash !== askedFrom) break;
            if (agentEvent.sessionId !== sessionId) navigate(href('chat', agentEvent.sessionId));
            else if (stored) {
              session.set(stored);
              setLive(null);
            }
            break;
          }
          case 'error':
            update({ state: 'failed', error: new ConsoleNotice('The run failed', `${agentEvent.message} (${agentEvent.code}). Nothing was charged for it.`) });
            break;
        }
      }
    } catch (error) {
      if (abort.signal.aborted) update({ state: 'failed', error: new ConsoleNotice('Stopped', 'A run stopped before it answered is not charged.') });
      else update({ state: 'failed', error });
      refresh();
    }
  };

  const remove = async () => {
    if (!sessionId || !confirm('Delete this chat session and its messages? The documents stay.')) return;
    try {
      await call(api.DELETE('/v1/chat/sessions/{id}', { params: { path: { id: sessionId } } }));
      sessions.reload();
      navigate(href('chat'));
    } catch (error) {
      setLive({ question: '', workspaceIds: chosen, mode, answer: '', steps: [], sources: [], state: 'failed', creditsUsed: null, error });
    }
  };

  const workspaceNames = new Map((workspaces.value ?? []).map((workspace) => [workspace.id, workspace.name]));
  const busy = live?.state === 'asking' || live?.state === 'streaming';
  return (
    <section class="chat">
      <aside class="sessions" aria-label="Chat sessions">
        <a class="button primary" href={href('chat')} aria-current={sessionId === null ? 'page' : undefined}>
          New chat
        </a>
        <ErrorNotice error={sessions.error} />
        <ul>
          {(sessions.value ?? []).map((item) => (
            <li key={item.id}>
              <a href={href('chat', item.id)} aria-current={item.id === sessionId ? 'page' : undefined}>
                <span class="title">{item.title ?? 'Untitled chat'}</span>
                <span class="muted">
                  {item.message_count} messages · {formatDate(item.updated_at)}
                </span>
              </a>
            </li>
          ))}
        </ul>
      </aside>
      <div class="conversation-column">
        <div class="heading-row">
          <h1 tabIndex={-1}>{session.value?.title ?? (sessionId ? 'Chat' : 'New chat')}</h1>
          {sessionId && (
            <button type="button" class="ghost danger" onClick={remove}>
              Delete chat
            </button>
          )}
        </div>
        <ErrorNotice error={session.error} />
        <div class="conversation" ref={conversation} aria-live="polite" aria-busy={busy}>
          {!sessionId && !live && <Empty>Choose the workspaces to search, then ask a question. Answers cite the passages they draw on; click a citation to open it.</Empty>}
          {(session.value?.messages ?? []).map((message) => (
            <Message key={message.id} message={message} workspaceIds={session.value!.workspace_ids} />
          ))}
          {live && <LiveAnswer turn={live} workspaceIds={live.workspaceIds} />}
        </div>
        <form class="ask" onSubmit={ask}>
          <Checklist
            class="workspace-choice"
            legend="Search in"
            disabled={Boolean(sessionId) || busy}
            options={(workspaces.value ?? []).map((workspace) => ({ value: workspace.id, label: workspace.name }))}
            chosen={chosen}
            onChange={setPicked}
          >
            {sessionId && chosen.some((id) => !workspaceNames.has(id)) && <span class="muted">(and workspaces no longer listed)</span>}
            {workspaces.value?.length === 0 && (
              <span>
                No workspace yet: <a href={href('workspaces')}>create one</a>.
              </span>
            )}
          </Checklist>
          <fieldset class="mode" disabled={busy}>
            <legend>Mode</legend>
            <label class="check">
              <input type="radio" name="mode" value="fast" checked={mode === 'fast'} onChange={() => setMode('fast')} /> Fast
            </label>
            <label class="check">
              <input type="radio" name="mode" value="deep" checked={mode === 'deep'} onChange={() => setMode('deep')} /> Deep (multi-step research, costs more)
            </label>
          </fieldset>
          <label for="question" class="visually-hidden">
            Question
          </label>
          <div class="ask-row">
            <textarea
              id="question"
              rows={2}
              value={question}
              maxLength={10_000}
              placeholder={chosen.length === 0 ? 'Choose a workspace above first' : 'Ask a question about your documents (Enter sends, Shift+Enter for a new line)'}
              onInput={(event) => setQuestion(event.currentTarget.value)}
              onKeyDown={(event) => {
                if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
                  event.preventDefault();
                  event.currentTarget.form?.requestSubmit();
                }
              }}
            />
            {/* One button that changes its part, so the focus stays on it while an answer streams. */}
            <button
              type={busy ? 'button' : 'submit'}
              class={busy ? undefined : 'primary'}
              onClick={busy ? (event) => (event.preventDefault(), controller.current?.abort()) : undefined}
              disabled={!busy && (question.trim() === '' || chosen.length === 0)}
            >
              {busy ? 'Stop' : 'Ask'}
            </button>
          </div>
        </form>
      </div>
    </section>
  );
}

/** Citation numbers in an answer (`[2]`, `[1, 3]`) as links to the passages they cite. */
function AnswerText({ text, sources, workspaceIds }: { text: string; sources: Source[]; workspaceIds: string[] }) {
  // Each sentence that cites [n] has its own passage, in the answer's order: the k-th [n] of the
  // text opens the k-th passage cited as n (the last one when the text has more markers).
  const passages = new Map<number, { source: Source; passage: Source['passages'][number] }[]>();
  for (const source of sources) {
    for (const passage of [...source.passages].sort((a, b) => a.citation - b.citation)) passages.set(passage.citation, [...(passages.get(passage.citation) ?? []), { source, passage }]);
  }
  const seen = new Map<number, number>();
  const citedAt = (number: number) => {
    const cited = passages.get(number);
    if (!cited) return undefined;
    const occurrence = seen.get(number) ?? 0;
    seen.set(number, occurrence + 1);
    return cited[Math.min(occurrence, cited.length - 1)];
  };
  const parts: ComponentChildren[] = [];
  let at = 0;
  for (const match of text.matchAll(/\[(\d+(?:\s*,\s*\d+)*)\]/g)) {
    parts.push(text.slice(at, match.index));
    const numbers = match[1]!.split(',').map((value) => Number(value.trim()));
    parts.push(
      <sup key={match.index} class="citation">
        [
        {numbers.map((number, index) => {
          const cited = citedAt(number);
          return (
            <>
              {index > 0 && ', '}
              {cited ? (
                <a
                  href={documentHref(cited.source.doc_id, workspaceIds, { chunk: cited.passage.chunk_index, start: cited.passage.start, end: cited.passage.end, page: cited.passage.page })}
                  title={`${cited.source.filename}${cited.passage.page !== null ? `, page ${cited.passage.page}` : ''}: “${cited.passage.quote.slice(0, 160)}”`}
                  data-testid="citation"
                >
                  {number}
                </a>
              ) : (
                number
              )}
            </>
          );
        })}
        ]
      </sup>,
    );
    at = match.index + match[0].length;
  }
  parts.push(text.slice(at));
  return <div class="answer-text">{parts}</div>;
}

/** A cited document's link, under the chat's first workspace: the document screen moves to the document's own when it is another. */
const documentHref = (documentId: string, workspaceIds: string[], citation: Parameters<typeof citationHref>[2]) => citationHref(workspaceIds[0] ?? '-', documentId, citation);

/** The passages cited, by citation number (one number may cite several passages). */
function SourcesList({ sources, workspaceIds }: { sources: Source[]; workspaceIds: string[] }) {
  const byCitation = new Map<number, { source: Source; passage: Source['passages'][number] }[]>();
  for (const source of sources) {
    for (const passage of source.passages) byCitation.set(passage.citation, [...(byCitation.get(passage.citation) ?? []), { source, passage }]);
  }
  if (byCitation.size === 0) return null;
  return (
    <div class="sources">
      <h3>Sources</h3>
      <ol>
        {[...byCitation.entries()]
          .sort(([a], [b]) => a - b)
          .map(([citation, cited]) => (
            <li key={citation} value={citation}>
              {cited.map(({ source, passage }) => (
                <div key={`${source.doc_id}:${passage.chunk_index}:${passage.start}`} class="source">
                  <a href={documentHref(source.doc_id, workspaceIds, { chunk: passage.chunk_index, start: passage.start, end: passage.end, page: passage.page })}>
                    {source.filename}
                    {passage.page !== null && `, page ${passage.page}`}
                  </a>
                  <blockquote>{passage.quote}</blockquote>
                </div>
              ))}
            </li>
          ))}
      </ol>
    </div>
  );
}

function Steps({ steps, open }: { steps: ReasoningStep[]; open: boolean }) {
  if (steps.length === 0) return null;
  return (
    <details class="steps" open={open}>
      <summary>Research steps ({steps.length})</summary>
      <ol>
        {steps.map((step) => (
          <li key={step.index} data-testid="reasoning-step">
            <strong>{step.kind}</strong>
            {step.queries.length > 0 && <span> · {step.queries.map((query) => `“${query}”`).join(', ')}</span>}
            {step.found.length > 0 && (
              <span class="muted">
                {' '}
                · found {step.found.map((found) => `${found.filename}${found.page !== null ? ` p.${found.page}` : ''}`).join(', ')}
              </span>
            )}
            <div class="muted">
              {step.decision}: {step.reason}
            </div>
          </li>
        ))}
      </ol>
    </details>
  );
}

function Message({ message, workspaceIds }: { message: ChatMessage; workspaceIds: string[] }) {
  if (message.role === 'user') {
    return (
      <div class="message user">
        <div class="bubble">{message.content}</div>
      </div>
    );
  }
  const facts = useMemo(() => readFacts(message.id), [message.id]);
  const sources = Array.isArray(message.sources) ? (message.sources as Source[]) : [];
  return (
    <div class="message assistant">
      {facts && <Steps steps={facts.steps} open={false} />}
      <AnswerText text={message.content} sources={sources} workspaceIds={workspaceIds} />
      <SourcesList sources={sources} workspaceIds={workspaceIds} />
      {facts && (
        <p class="meta" data-testid="answer-credits">
          {facts.mode} answer · {facts.creditsUsed} credit{facts.creditsUsed === 1 ? '' : 's'}
          {facts.supportScore !== null && ` · ${Math.round(facts.supportScore * 100)}% of its sentences supported by their citations`}
        </p>
      )}
    </div>
  );
}

function LiveAnswer({ turn, workspaceIds }: { turn: LiveTurn; workspaceIds: string[] }) {
  return (
    <>
      {turn.question && (
        <div class="message user">
          <div class="bubble">{turn.question}</div>
        </div>
      )}
      <div class="message assistant" data-testid="live-answer" data-state={turn.state}>
        <Steps steps={turn.steps} open />
        {turn.state === 'asking' && <p class="loading">{turn.mode === 'deep' ? 'Researching…' : 'Searching…'}</p>}
        {turn.answer && <AnswerText text={turn.answer} sources={turn.sources} workspaceIds={workspaceIds} />}
        {turn.state === 'streaming' && <span class="cursor" aria-hidden="true" />}
        <SourcesList sources={turn.sources} workspaceIds={workspaceIds} />
        {turn.creditsUsed !== null && <p class="meta">{turn.creditsUsed} credits</p>}
        {turn.error ? <ErrorNotice error={turn.error} /> : null}
      </div>
    </>
  );
}
