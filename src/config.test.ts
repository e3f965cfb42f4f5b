import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from './config.js';

describe('configuration', () => {
  it('takes ELASTICSEARCH_URL as one node or a comma-separated list, keeping a replica when several nodes are named', () => {
    expect(loadConfig({}).elasticsearch).toBeUndefined();
    expect(loadConfig({ ELASTICSEARCH_URL: 'http://127.0.0.1:9200' }).elasticsearch).toEqual({ nodes: ['http://127.0.0.1:9200'], shards: 1, replicas: 0, sniff: false });
    expect(loadConfig({ ELASTICSEARCH_URL: ' http://a:9200, http://b:9200 ,http://c:9200' }).elasticsearch).toEqual({
      nodes: ['http://a:9200', 'http://b:9200', 'http://c:9200'],
      shards: 1,
      replicas: 1,
      sniff: false,
    });
    expect(loadConfig({ ELASTICSEARCH_URL: 'http://a:9200,http://b:9200', KB_ES_SHARDS: '3', KB_ES_REPLICAS: '0', KB_ES_SNIFF: 'on' }).elasticsearch).toEqual({
      nodes: ['http://a:9200', 'http://b:9200'],
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
    ] as const) {
      expect(() => loadConfig(environment)).toThrow(ConfigError);
      expect(() => loadConfig(environment)).toThrow(new RegExp(variable));
    }
  });

  it('names this process for its metrics by KB_INSTANCE, else by host name and port', () => {
    expect(loadConfig({ KB_INSTANCE: 'api-2' }).instance).toBe('api-2');
    expect(loadConfig({ PORT: '3100' }).instance).toMatch(/^.+:3100$/);
    expect(loadConfig({ PORT: '0' }).instance).toBe(loadConfig({ PORT: '0' }).instance);
    expect(loadConfig({ PORT: '0' }).instance).toMatch(new RegExp(`:pid${process.pid}$`));
  });
});
