/**
 * Deletes what the service made under the alias `alias` on the node at `url`: every index named
 * `<alias>-<n>` and an index named like the alias itself (Elasticsearch deletes no index through
 * an alias, and refuses wildcards in deletions by default).
 */
export async function dropElasticsearchIndexes(url: string, alias: string) {
  const listed = await fetch(`${url}/_cat/indices/${alias},${alias}-*?format=json&h=index&expand_wildcards=all&ignore_unavailable=true`);
  const rows = listed.ok ? ((await listed.json()) as { index: string }[]) : [];
  const names = rows.map((row) => row.index).filter((name) => name === alias || /^\d+$/.test(name.slice(alias.length + 1)));
  if (names.length > 0) await fetch(`${url}/${names.join(',')}`, { method: 'DELETE' });
}
