import { useState } from 'preact/hooks';
import { allScopes, call, formatDate, listAll, type ApiKey, type NewApiKey, type Scope } from '../api.js';
import { Checklist, CopyButton, Dialog, Empty, ErrorNotice, useAccount, useLoad, useWorkspaces } from '../ui.js';

const scopeMeaning: Record<Scope, string> = {
  'user:read': 'read the account and its credits',
  'user:write': 'change the account and manage API keys',
  'kb:read': 'list, read and search documents',
  'kb:write': 'create workspaces and upload or delete documents',
  'chat:read': 'read chat sessions',
  'chat:write': 'ask the agent and write chat sessions',
};

/** The listed key this console signed in with (the list shows each key's first 7 and last 4 characters). */
const isThisKey = (key: ApiKey, raw: string) => key.display_key === `${raw.slice(0, 7)}...${raw.slice(-4)}`;

export function KeysScreen() {
  const { api } = useAccount();
  const keys = useLoad((signal) => listAll<ApiKey>((cursor) => api.GET('/v1/user/me/api-keys', { params: { query: { limit: 100, ...(cursor && { cursor }) } }, signal })), [api]);
  const workspaces = useWorkspaces();
  const [name, setName] = useState('');
  const [scopes, setScopes] = useState<Scope[]>(['kb:read', 'chat:write']);
  const [restrictTo, setRestrictTo] = useState<string[]>([]);
  const [created, setCreated] = useState<NewApiKey | null>(null);
  const [revoking, setRevoking] = useState<ApiKey | null>(null);
  const [error, setError] = useState<unknown>(null);

  const create = async (event: Event) => {
    event.preventDefault();
    setError(null);
    try {
      const body = { name: name.trim(), scopes, ...(restrictTo.length > 0 && { workspace_ids: restrictTo }) };
      setCreated(await call(api.POST('/v1/user/me/api-keys', { body, headers: { 'Idempotency-Key': crypto.randomUUID() } })));
      setName('');
      keys.reload();
    } catch (failure) {
      setError(failure);
    }
  };

  const names = new Map((workspaces.value ?? []).map((workspace) => [workspace.id, workspace.name]));
  return (
    <section>
      <h1 tabIndex={-1}>API keys</h1>
      <p class="lead">Keys let programs use the API. Give each the fewest scopes it needs; restrict it to workspaces when it should see only those.</p>
      <form class="stack card" onSubmit={create}>
        <h2>New key</h2>
        <label>
          Name
          <input value={name} maxLength={200} placeholder="e.g. nightly import" onInput={(event) => setName(event.currentTarget.value)} required />
        </label>
        <Checklist
          legend="Scopes"
          options={allScopes.map((scope) => ({
            value: scope,
            label: (
              <>
                <code>{scope}</code> <span class="muted">{scopeMeaning[scope]}</span>
              </>
            ),
          }))}
          chosen={scopes}
          onChange={setScopes}
        />
        {(workspaces.value?.length ?? 0) > 0 && (
          <Checklist
            legend="Workspaces (none chosen: every workspace)"
            options={workspaces.value!.map((workspace) => ({ value: workspace.id, label: workspace.name }))}
            chosen={restrictTo}
            onChange={setRestrictTo}
          />
        )}
        <div>
          <button type="submit" class="primary" disabled={name.trim() === '' || scopes.length === 0}>
            Create key
          </button>
        </div>
      </form>
      <ErrorNotice error={error} onDismiss={() => setError(null)} />
      <ErrorNotice error={keys.error} />
      <h2>Keys</h2>
      {keys.value?.length === 0 && <Empty>No keys.</Empty>}
      {keys.value && keys.value.length > 0 && (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Key</th>
                <th scope="col">Scopes</th>
                <th scope="col">Workspaces</th>
                <th scope="col">Last used</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {keys.value.map((key) => (
                <tr key={key.id} data-testid="api-key-row">
                  <th scope="row">{key.name}</th>
                  <td>
                    <code>{key.display_key}</code>
                    {isThisKey(key, api.key) && <span class="badge"> this console's key</span>}
                  </td>
                  <td>{key.scopes.join(', ')}</td>
                  <td>{key.workspace_ids ? key.workspace_ids.map((id) => names.get(id) ?? id).join(', ') : 'all'}</td>
                  <td>{key.last_used_at ? formatDate(key.last_used_at) : 'never'}</td>
                  <td>
                    <button type="button" class="danger" onClick={() => setRevoking(key)} aria-label={`Revoke ${key.name}`}>
                      Revoke
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {created && (
        <Dialog title="Your new key" onClose={() => setCreated(null)}>
          <p>
            This is the only time the key <strong>{created.name}</strong> is shown. Copy it now and keep it somewhere safe.
          </p>
          <div class="raw-key">
            <code data-testid="raw-key">{created.raw_key}</code>
            <CopyButton text={created.raw_key} label="Copy key" />
          </div>
          <div class="actions">
            <button type="button" class="primary" onClick={() => setCreated(null)} autoFocus>
              I have copied it
            </button>
          </div>
        </Dialog>
      )}
      {revoking && <RevokeDialog apiKey={revoking} onDone={() => (setRevoking(null), keys.reload())} />}
    </section>
  );
}

function RevokeDialog({ apiKey, onDone }: { apiKey: ApiKey; onDone: () => void }) {
  const { api, signOut } = useAccount();
  const [error, setError] = useState<unknown>(null);
  const revoke = async () => {
    try {
      await call(api.DELETE('/v1/user/me/api-keys/{id}', { params: { path: { id: apiKey.id } } }));
      if (isThisKey(apiKey, api.key)) signOut();
      else onDone();
    } catch (failure) {
      setError(failure);
    }
  };
  return (
    <Dialog title={`Revoke “${apiKey.name}”?`} onClose={onDone}>
      <p>
        Programs using <code>{apiKey.display_key}</code> will be refused from now on.{' '}
        {isThisKey(apiKey, api.key) && <strong>This console signed in with it: you will be signed out. </strong>}
        This cannot be undone.
      </p>
      <ErrorNotice error={error} />
      <div class="actions">
        <button type="button" onClick={onDone} autoFocus>
          Keep it
        </button>
        <button type="button" class="danger" onClick={revoke}>
          Revoke key
        </button>
      </div>
    </Dialog>
  );
}
