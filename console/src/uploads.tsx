// The upload queue lives above the screens: files keep uploading (and their refusals stay to
// be read) while the user looks at other screens, each into the workspace it was dropped on.
import { createContext, type ComponentChildren } from 'preact';
import { useContext, useEffect, useState } from 'preact/hooks';
import { uploadFile } from './api.js';

export type Upload = {
  id: string;
  workspaceId: string;
  file: File;
  sent: number;
  total: number;
  state: 'waiting' | 'uploading' | 'sent' | 'refused';
  error?: unknown;
};

type Uploads = {
  uploads: Upload[];
  add(workspaceId: string, files: FileList | File[]): void;
  dismiss(id: string): void;
};

const UploadsContext = createContext<Uploads | null>(null);
const uploadsAtOnce = 2;

export function useUploads(): Uploads {
  const uploads = useContext(UploadsContext);
  if (!uploads) throw new Error('useUploads outside UploadsProvider');
  return uploads;
}

export function UploadsProvider({ apiKey, children }: { apiKey: string; children: ComponentChildren }) {
  const [uploads, setUploads] = useState<Upload[]>([]);

  useEffect(() => {
    const running = uploads.filter((upload) => upload.state === 'uploading').length;
    const next = uploads.filter((upload) => upload.state === 'waiting').slice(0, Math.max(0, uploadsAtOnce - running));
    for (const upload of next) {
      const update = (change: Partial<Upload>) => setUploads((current) => current.map((item) => (item.id === upload.id ? { ...item, ...change } : item)));
      update({ state: 'uploading' });
      uploadFile(apiKey, upload.workspaceId, upload.file, (sent, total) => update({ sent, total })).then(
        () => update({ state: 'sent', sent: 1, total: 1 }),
        (error) => update({ state: 'refused', error }),
      );
    }
  }, [uploads]);

  // Closing the tab would cut the uploads off: the browser asks first.
  const active = uploads.some((upload) => upload.state === 'waiting' || upload.state === 'uploading');
  useEffect(() => {
    if (!active) return;
    const warn = (event: BeforeUnloadEvent) => event.preventDefault();
    addEventListener('beforeunload', warn);
    return () => removeEventListener('beforeunload', warn);
  }, [active]);

  const value: Uploads = {
    uploads,
    add(workspaceId, files) {
      const added = [...files].map((file): Upload => ({ id: crypto.randomUUID(), workspaceId, file, sent: 0, total: file.size, state: 'waiting' }));
      // Finished uploads of this workspace make room for the new ones; refusals stay until dismissed.
      if (added.length > 0) setUploads((current) => [...current.filter((upload) => upload.state !== 'sent' || upload.workspaceId !== workspaceId), ...added]);
    },
    dismiss(id) {
      setUploads((current) => current.filter((upload) => upload.id !== id));
    },
  };
  return <UploadsContext.Provider value={value}>{children}</UploadsContext.Provider>;
}
