import { render } from 'preact';
import { useCallback, useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { call, connect, storedKey, storeKey, type Api, type Credits, type Me } from './api.js';
import { UploadsProvider } from './uploads.js';
import { AccountContext, ErrorNotice, href, useRoute, type Account } from './ui.js';
import { ChatScreen } from './views/chat.js';
import { DocumentScreen } from './views/document.js';
import { KeysScreen } from './views/keys.js';
import { SearchScreen } from './views/search.js';
import { WorkspaceScreen } from './views/workspace.js';
import { WorkspacesScreen } from './views/workspaces.js';

function SignIn({ onSignedIn }: { onSignedIn: (api: Api, me: Me) => void }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    const api = connect(key.trim());
    try {
      const me = await call(api.GET('/v1/user/me'));
      storeKey(api.key);
      onSignedIn(api, me);
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="sign-in">
      <h1>Knowledge base</h1>
      <p>Upload documents into workspaces, search them, and ask questions answered with citations.</p>
      <form onSubmit={submit}>
        <label for="api-key">API key</label>
        <input
          id="api-key"
          name="api-key"
          type="password"
          autoComplete="off"
          spellcheck={false}
          placeholder="sk_..."
          value={key}
          onInput={(event) => setKey(event.currentTarget.value)}
          required
        />
        <p class="hint">
          Paste the key the server printed when it started (a line starting with <code>sk_</code>), or any key made on the API keys page. It is
          kept in this tab only and forgotten when the tab closes.
        </p>
        <button type="submit" class="primary" disabled={busy || key.trim() === ''}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
      <ErrorNotice error={error} />
    </main>
  );
}

const sections = [
  { id: 'workspaces', label: 'Workspaces', target: href('workspaces') },
  { id: 'search', label: 'Search', target: href('search') },
  { id: 'chat', label: 'Chat', target: href('chat') },
  { id: 'keys', label: 'API keys', target: href('keys') },
];

function Shell({ account }: { account: Account }) {
  const route = useRoute();
  const [section = 'workspaces', ...rest] = route.path;
  let screen;
  if (section === 'workspaces' && rest.length === 0) screen = <WorkspacesScreen />;
  // Keyed screens start afresh for another workspace, document or session: nothing of the last one carries over.
  else if (section === 'workspaces' && rest.length === 1) screen = <WorkspaceScreen key={rest[0]} workspaceId={rest[0]!} />;
  else if (section === 'workspaces' && rest[1] === 'documents' && rest[2]) screen = <DocumentScreen key={rest[2]} workspaceId={rest[0]!} documentId={rest[2]} query={route.query} />;
  else if (section === 'search') screen = <SearchScreen initialWorkspace={route.query.get('workspace')} />;
  else if (section === 'chat') screen = <ChatScreen key={rest[0] ?? 'new'} sessionId={rest[0] ?? null} />;
  else if (section === 'keys') screen = <KeysScreen />;
  else screen = <p role="alert">There is no page at {location.hash}. Use the menu above.</p>;

  const firstScreen = useRef(true);
  useEffect(() => {
    // After moving to another screen, its heading takes focus (a screen reader reads it, and Tab
    // goes on from there); on the first screen, the focus stays at the top for the skip link.
    if (firstScreen.current) firstScreen.current = false;
    else document.querySelector<HTMLElement>('main h1')?.focus({ preventScroll: false });
  }, [route.path.join('/')]);

  const balance = account.credits?.balance ?? account.me.creditsBalance;
  return (
    <>
      <a class="skip" href="#main" onClick={(event) => (event.preventDefault(), document.getElementById('main')?.focus())}>
        Skip to content
      </a>
      <header class="top">
        <a class="brand" href={href('workspaces')}>
          Knowledge base
        </a>
        <nav aria-label="Sections">
          {sections.map((item) => (
            <a key={item.id} href={item.target} aria-current={section === item.id ? 'page' : undefined}>
              {item.label}
            </a>
          ))}
        </nav>
        <div class="account" aria-live="polite">
          <span class="name" title={account.me.email}>
            {account.me.name}
          </span>
          <span class="balance" data-testid="credit-balance" title="Credit balance">
            {balance.toLocaleString()} credit{balance === 1 ? '' : 's'}
          </span>
          <button type="button" class="ghost" onClick={account.signOut}>
            Sign out
          </button>
        </div>
      </header>
      <main id="main" tabIndex={-1}>
        {screen}
      </main>
    </>
  );
}

function App() {
  const [session, setSession] = useState<{ api: Api; me: Me } | null>(null);
  const [credits, setCredits] = useState<Credits | null>(null);
  const [restoring, setRestoring] = useState(() => storedKey() !== null);
  const [error, setError] = useState<unknown>(null);

  useEffect(() => {
    const key = storedKey();
    if (!key) return;
    const api = connect(key);
    call(api.GET('/v1/user/me'))
      .then((me) => setSession({ api, me }))
      .catch((failure) => {
        // A key revoked since, or a server reset: back to the sign-in screen, saying why.
        storeKey(null);
        setError(failure);
      })
      .finally(() => setRestoring(false));
  }, []);

  const refresh = useCallback(() => {
    if (!session) return;
    Promise.all([call(session.api.GET('/v1/user/me')), call(session.api.GET('/v1/user/me/credits')).catch(() => null)]).then(
      ([me, balance]) => {
        setSession((current) => (current ? { ...current, me } : current));
        setCredits(balance);
      },
      () => undefined,
    );
  }, [session?.api]);

  useEffect(() => {
    if (!session) return;
    refresh();
    // The balance changes elsewhere too (other keys, grants): read it again now and then.
    const timer = setInterval(refresh, 30_000);
    return () => clearInterval(timer);
  }, [session?.api]);

  const account = useMemo<Account | null>(
    () =>
      session && {
        api: session.api,
        me: session.me,
        credits,
        refresh,
        signOut: () => {
          storeKey(null);
          setSession(null);
          setCredits(null);
          location.hash = '';
        },
      },
    [session, credits, refresh],
  );

  if (restoring) return <p class="loading">Signing in…</p>;
  if (!account) {
    return (
      <>
        {error ? <ErrorNotice error={error} onDismiss={() => setError(null)} /> : null}
        <SignIn onSignedIn={(api, me) => (setError(null), setSession({ api, me }))} />
      </>
    );
  }
  return (
    <AccountContext.Provider value={account}>
      <UploadsProvider apiKey={account.api.key}>
        <Shell account={account} />
      </UploadsProvider>
    </AccountContext.Provider>
  );
}

render(<App />, document.getElementById('app')!);
