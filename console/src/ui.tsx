// Small parts every screen uses: the error notice, progress bars, the confirmation dialog,
// hash routing, and the signed-in context.
import { createContext, type ComponentChildren } from 'preact';
import { useContext, useEffect, useRef, useState } from 'preact/hooks';
import { describeError, listAll, type Api, type Credits, type Me, type Workspace } from './api.js';

export type Account = {
  api: Api;
  me: Me;
  credits: Credits | null;
  /** Reads the name and balance again (after an answer, a grant elsewhere). */
  refresh(): void;
  signOut(): void;
};

export const AccountContext = createContext<Account | null>(null);

export function useAccount(): Account {
  const account = useContext(AccountContext);
  if (!account) throw new Error('useAccount outside a signed-in console');
  return account;
}

/** The hash route (`#/chat/123?x=1`) as a path and its query. */
export type Route = { path: string[]; query: URLSearchParams };

const routeOf = (hash: string): Route => {
  const [path = '', query = ''] = hash.replace(/^#/, '').split('?');
  const decode = (segment: string) => {
    try {
      return decodeURIComponent(segment);
    } catch {
      return segment; // a stray `%` typed into the address: shown as typed, and not found
    }
  };
  return { path: path.split('/').filter(Boolean).map(decode), query: new URLSearchParams(query) };
};

export function useRoute(): Route {
  const [route, setRoute] = useState(() => routeOf(location.hash));
  useEffect(() => {
    const changed = () => setRoute(routeOf(location.hash));
    addEventListener('hashchange', changed);
    return () => removeEventListener('hashchange', changed);
  }, []);
  return route;
}

export const href = (...segments: (string | number)[]) => `#/${segments.map((segment) => encodeURIComponent(String(segment))).join('/')}`;

export function navigate(target: string) {
  location.hash = target;
}

/** An API error (or any error), said in words, with the request id to quote to an operator. */
export function ErrorNotice({ error, onDismiss }: { error: unknown; onDismiss?: () => void }) {
  if (!error) return null;
  const { title, detail, requestId } = describeError(error);
  return (
    <div class="notice error" role="alert">
      <div>
        <strong>{title}.</strong> {detail}
        {requestId && <div class="request-id">Request id: <code>{requestId}</code></div>}
      </div>
      {onDismiss && (
        <button type="button" class="ghost" onClick={onDismiss} aria-label="Dismiss this message">
          ×
        </button>
      )}
    </div>
  );
}

export function ProgressBar({ value, label }: { value: number | null; label: string }) {
  return (
    <div
      class={`progress${value === null ? ' indeterminate' : ''}`}
      role="progressbar"
      aria-label={label}
      aria-valuemin={0}
      aria-valuemax={100}
      {...(value !== null && { 'aria-valuenow': Math.round(value * 100) })}
    >
      <div class="bar" style={value === null ? undefined : { width: `${Math.round(value * 100)}%` }} />
    </div>
  );
}

/**
 * A modal dialog (the native <dialog>: focus moves into it, Escape closes it, the page behind
 * is inert). `onClose` runs however it closes.
 */
export function Dialog({ title, children, onClose }: { title: string; children: ComponentChildren; onClose: () => void }) {
  const dialog = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const element = dialog.current!;
    element.showModal();
    const closed = () => onClose();
    element.addEventListener('close', closed);
    return () => {
      element.removeEventListener('close', closed);
      if (element.open) element.close();
    };
  }, []);
  return (
    <dialog ref={dialog} aria-labelledby="dialog-title">
      <h2 id="dialog-title">{title}</h2>
      {children}
    </dialog>
  );
}

/**
 * Runs `load` now and whenever `dependencies` change; keeps its result, error and loading state.
 * New dependencies clear the last result (it belonged to other inputs); `reload()` keeps it on
 * screen until the new one arrives.
 */
export function useLoad<Value>(load: (signal: AbortSignal) => Promise<Value>, dependencies: unknown[]) {
  const [state, setState] = useState<{ value?: Value; error?: unknown; loading: boolean }>({ loading: true });
  const [generation, setGeneration] = useState(0);
  const loadedFor = useRef<unknown[] | null>(null);
  useEffect(() => {
    const controller = new AbortController();
    const sameInputs = loadedFor.current !== null && loadedFor.current.length === dependencies.length && loadedFor.current.every((value, index) => Object.is(value, dependencies[index]));
    loadedFor.current = dependencies;
    setState((previous) => (sameInputs ? { value: previous.value, loading: true } : { loading: true }));
    load(controller.signal).then(
      (value) => !controller.signal.aborted && setState({ value, loading: false }),
      (error) => !controller.signal.aborted && setState((previous) => ({ ...(sameInputs && { value: previous.value }), error, loading: false })),
    );
    return () => controller.abort();
  }, [...dependencies, generation]);
  return { ...state, reload: () => setGeneration((value) => value + 1), set: (value: Value) => setState({ value, loading: false }) };
}

/** The caller's workspaces, every page of them. */
export function useWorkspaces() {
  const { api } = useAccount();
  return useLoad(
    (signal) => listAll<Workspace>((cursor) => api.GET('/v1/kb/workspaces', { params: { query: { limit: 100, ...(cursor && { cursor }) } }, signal })),
    [api],
  );
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <p class="empty">{children}</p>;
}

export function CopyButton({ text, label = 'Copy' }: { text: string; label?: string }) {
  const [copied, setCopied] = useState<'yes' | 'no' | null>(null);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
      setCopied('yes');
    } catch {
      // Clipboard access is refused on plain http from another host: select the text instead.
      setCopied('no');
    }
  };
  return (
    <button type="button" onClick={copy} aria-live="polite">
      {copied === 'yes' ? 'Copied' : copied === 'no' ? 'Select and copy by hand' : label}
    </button>
  );
}

/** Text with the ranges [start, end) wrapped in <mark>. */
export function Highlighted({ text, ranges }: { text: string; ranges: { start: number; end: number }[] }) {
  const sorted = [...ranges].filter((range) => range.end > range.start).sort((a, b) => a.start - b.start);
  const parts: ComponentChildren[] = [];
  let at = 0;
  sorted.forEach((range, index) => {
    const start = Math.max(range.start, at);
    if (range.end <= start) return;
    if (start > at) parts.push(text.slice(at, start));
    parts.push(<mark key={index}>{text.slice(start, range.end)}</mark>);
    at = range.end;
  });
  if (at < text.length) parts.push(text.slice(at));
  return <>{parts}</>;
}

/** A fieldset of checkboxes choosing some of `options` (their values in `chosen`). */
export function Checklist<Value extends string>({
  legend,
  options,
  chosen,
  onChange,
  disabled = false,
  class: className,
  children,
}: {
  legend: string;
  options: { value: Value; label: ComponentChildren }[];
  chosen: Value[];
  onChange: (chosen: Value[]) => void;
  disabled?: boolean;
  class?: string;
  children?: ComponentChildren;
}) {
  return (
    <fieldset class={className} disabled={disabled}>
      <legend>{legend}</legend>
      {options.map((option) => (
        <label key={option.value} class="check">
          <input
            type="checkbox"
            checked={chosen.includes(option.value)}
            onChange={(event) => onChange(event.currentTarget.checked ? [...chosen, option.value] : chosen.filter((value) => value !== option.value))}
          />{' '}
          {option.label}
        </label>
      ))}
      {children}
    </fieldset>
  );
}
