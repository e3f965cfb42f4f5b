import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from './config.js';
import { parseCpuList, planThreadPlacement, threadCpus } from './thread-placement.js';

describe('configuration', () => {
  it('takes ELASTICSEARCH_URL as one node or a comma-separated list, keeping a replica when several nodes are named', () => {
    expect(loadConfig({}).elasticsearch).toBeUndefined();
    expect(loadConfig({ ELASTICSEARCH_URL: 'http://127.0.0.1:9200' }).elasticsearch).toEqual({ nodes: ['http://127.0.0.1:9200'], index: 'kb_chunks', shards: 1, replicas: 0, sniff: false });
    expect(loadConfig({ ELASTICSEARCH_URL: ' http://a:9200, http://b:9200 ,http://c:9200' }).elasticsearch).toEqual({
      nodes: ['http://a:9200', 'http://b:9200', 'http://c:9200'],
      index: 'kb_chunks',
      shards: 1,
      replicas: 1,
      sniff: false,
    });
    expect(loadConfig({ ELASTICSEARCH_URL: 'http://a:9200,http://b:9200', KB_ES_SHARDS: '3', KB_ES_REPLICAS: '0', KB_ES_SNIFF: 'on', KB_ES_INDEX: 'team_a.chunks' }).elasticsearch).toEqual({
      nodes: ['http://a:9200', 'http://b:9200'],
      index: 'team_a.chunks',
      shards: 3,
      replicas: 0,
      sniff: true,
    });
  });

  it('refuses a list with something that is not a URL, and replica counts out of range, naming the variable', () => {
    for (const [environment, variable] of [
      [{ ELASTICSEARCH_URL: 'http://a:9200,,http://b:9200' }, 'ELASTICSEARCH_URL'],
      [{ ELASTICSEARCH_URL: 'http://a:9200;http://b:9200' }, 'ELASTICSEARCH_URL'],
      [{ ELASTICSEARCH_URL: 'http://a:9200', KB_ES_REPLICAS: '9' }, 'KB_ES_REPLICAS'],
      [{ ELASTICSEARCH_URL: 'http://a:9200', KB_ES_REPLICAS: '-1' }, 'KB_ES_REPLICAS'],
      [{ ELASTICSEARCH_URL: 'http://a:9200', KB_ES_SHARDS: '0' }, 'KB_ES_SHARDS'],
      [{ ELASTICSEARCH_URL: 'http://a:9200', KB_ES_INDEX: 'KB Chunks' }, 'KB_ES_INDEX'],
      [{ ELASTICSEARCH_URL: 'http://a:9200', KB_ES_INDEX: '_chunks' }, 'KB_ES_INDEX'],
    ] as const) {
      expect(() => loadConfig(environment)).toThrow(ConfigError);
      expect(() => loadConfig(environment)).toThrow(new RegExp(variable));
    }
  });

  it('names this process for its metrics by KB_INSTANCE, else by host name and port', () => {
    expect(loadConfig({ KB_INSTANCE: 'api-2' }).instance).toBe('api-2');
    expect(loadConfig({ PORT: '3100' }).instance).toMatch(/^.+:3100$/);
    expect(loadConfig({ PORT: '0' }).instance).toMatch(new RegExp(`:pid${process.pid}$`));
  });

  it('runs every role on PostgreSQL and only `all` on the embedded store, which one process holds', () => {
    const postgres = 'postgresql://kb@127.0.0.1:5432/kb';
    expect(loadConfig({}).role).toBe('all');
    expect(loadConfig({ DATABASE_URL: postgres, KB_ROLE: 'api' }).role).toBe('api');
    expect(loadConfig({ DATABASE_URL: postgres, KB_ROLE: 'worker' }).role).toBe('worker');
    expect(() => loadConfig({ KB_ROLE: 'worker' })).toThrow(/KB_ROLE: worker needs DATABASE_URL/);
    expect(() => loadConfig({ DATABASE_URL: postgres, KB_ROLE: 'scheduler' })).toThrow(/KB_ROLE/);
  });

  it('ends the runs of a dead process within seconds where there can be another process (PostgreSQL)', () => {
    expect(loadConfig({}).agent.leaseSeconds).toBe(60);
    expect(loadConfig({ DATABASE_URL: 'postgresql://kb@127.0.0.1:5432/kb' }).agent.leaseSeconds).toBe(15);
    expect(loadConfig({ DATABASE_URL: 'postgresql://kb@127.0.0.1:5432/kb', KB_AGENT_LEASE_SECONDS: '30' }).agent.leaseSeconds).toBe(30);
  });

  it('takes a variable set to nothing as unset', () => {
    const empty = loadConfig({ KB_ES_SHARDS: '', KB_ES_SNIFF: ' ', KB_INGEST_LEASE_SECONDS: '', KB_INGEST_POLL_SECONDS: '', KB_DRAIN_NOTICE_SECONDS: '', PORT: '', ELASTICSEARCH_URL: 'http://a:9200' });
    expect(empty).toMatchObject({ port: loadConfig({}).port, drainNoticeSeconds: 0, ingestion: { leaseSeconds: 60, pollSeconds: 5 } });
    expect(empty.elasticsearch).toMatchObject({ shards: 1, sniff: false });
  });

  it('migrates at start unless told not to, which needs PostgreSQL', () => {
    expect(loadConfig({}).migrate).toBe(true);
    expect(loadConfig({ DATABASE_URL: 'postgresql://kb@127.0.0.1:5432/kb', KB_MIGRATE: 'off' }).migrate).toBe(false);
    expect(() => loadConfig({ KB_MIGRATE: 'off' })).toThrow(/KB_MIGRATE: off needs DATABASE_URL/);
  });

  it('gives a load balancer notice of a drain only where there can be one (several processes need PostgreSQL)', () => {
    const postgres = 'postgresql://kb@127.0.0.1:5432/kb';
    expect(loadConfig({})).toMatchObject({ drainSeconds: 30, drainNoticeSeconds: 0 });
    expect(loadConfig({ DATABASE_URL: postgres })).toMatchObject({ drainSeconds: 30, drainNoticeSeconds: 2 });
    expect(loadConfig({ KB_DRAIN_SECONDS: '1', KB_DRAIN_NOTICE_SECONDS: '5' })).toMatchObject({ drainSeconds: 1, drainNoticeSeconds: 1 });
    expect(() => loadConfig({ KB_DRAIN_SECONDS: '-1' })).toThrow(/KB_DRAIN_SECONDS/);
  });

  it("saves keyword postings under the data directory unless told not to", () => {
    expect(loadConfig({ KB_DATA_DIR: '/srv/kb' }).indexSnapshotDir).toBe('/srv/kb/index-snapshots');
    expect(loadConfig({ KB_DATA_DIR: '/srv/kb', KB_INDEX_SNAPSHOTS: 'off' }).indexSnapshotDir).toBeUndefined();
    expect(() => loadConfig({ KB_INDEX_SNAPSHOTS: 'sometimes' })).toThrow(/KB_INDEX_SNAPSHOTS/);
  });

  it('places threads on the embedded store with two CPUs or more, the query embedding on the last one, unless told not to', () => {
    expect(parseCpuList('0-3,6')).toEqual([0, 1, 2, 3, 6]);
    expect(parseCpuList(' 5,1-2 ')).toEqual([1, 2, 5]);
    for (const list of ['', '3-1', 'a', '0,,1', '0-']) expect(parseCpuList(list)).toBeUndefined();
    expect(planThreadPlacement('auto', true, [0, 1])).toEqual({ mainCpus: [0], queryCpus: [1], allCpus: [0, 1] });
    expect(planThreadPlacement('auto', true, [2, 3, 8, 9])).toEqual({ mainCpus: [2, 3, 8], queryCpus: [9], allCpus: [2, 3, 8, 9] });
    expect(planThreadPlacement('auto', true, [4])).toBeUndefined();
    expect(planThreadPlacement('auto', true, undefined)).toBeUndefined();
    expect(planThreadPlacement('auto', false, [0, 1])).toBeUndefined();
    expect(planThreadPlacement('off', true, [0, 1])).toBeUndefined();
    const cpus = threadCpus();
    expect(loadConfig({}).threadPlacement).toEqual(planThreadPlacement('auto', true, cpus));
    expect(loadConfig({ DATABASE_URL: 'postgres://localhost/kb' }).threadPlacement).toBeUndefined();
    expect(loadConfig({ KB_THREAD_PLACEMENT: 'off' }).threadPlacement).toBeUndefined();
    expect(() => loadConfig({ KB_THREAD_PLACEMENT: 'pinned' })).toThrow(/KB_THREAD_PLACEMENT/);
  });
});
