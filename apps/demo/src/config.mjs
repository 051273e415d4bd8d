// Every setting of the demo comes from the environment; this is the one place that reads it.
import { fileURLToPath } from 'node:url';

export const DEFAULT_DATA_DIR = fileURLToPath(new URL('../data/', import.meta.url));
export const HERD_MAX = 2000;

/**
 * @typedef {object} Config
 * @property {string} host
 * @property {number} port
 * @property {'memory' | 'redis'} cache
 * @property {string} redisUrl
 * @property {string} redisPrefix
 * @property {number} replicas
 * @property {string} cacheTtl - a Duration string ('30s') or milliseconds as a string
 * @property {string | undefined} cacheSwr - undefined when stale-while-revalidate is off
 * @property {string} localTtl - CACHE=redis: how long an L1 copy lives at most after it came from Redis
 * @property {boolean} lock - use the distributed fill lock (always false without CACHE=redis)
 * @property {string} dataDir
 * @property {number} seedRows
 * @property {number} dbLatencyMs
 * @property {number} dbPool
 * @property {number} replicaId - 0 for a single process, 1..n for replicas
 * @property {string[]} peers - base URLs of every replica (this one included), empty when single
 */

/** The env vars the demo reads, their defaults and what they do (the README table mirrors this). */
/** @type {Record<string, { default: string, about: string }>} */
export const ENV_VARS = {
  HOST: { default: '127.0.0.1', about: 'interface to bind' },
  PORT: { default: '3000', about: 'HTTP port (replica i listens on PORT + i - 1)' },
  CACHE: { default: 'memory', about: '`memory` or `redis`' },
  REDIS_URL: { default: 'redis://127.0.0.1:6379', about: 'Redis to use when CACHE=redis' },
  REDIS_PREFIX: { default: 'stampede-demo:', about: 'prefix of every Redis key the demo writes' },
  REPLICAS: { default: '1', about: 'server processes to start (1-16)' },
  CACHE_TTL: { default: '30s', about: 'how long a count is fresh' },
  CACHE_SWR: { default: '0', about: 'stale-while-revalidate grace (`0` = off)' },
  LOCAL_TTL: { default: '1m', about: 'CACHE=redis: longest life of an L1 copy after it came from Redis' },
  LOCK: { default: '1', about: 'CACHE=redis: fill lock for requests without ?lock= (`0` = off)' },
  DATA_DIR: { default: 'apps/demo/data', about: 'where bookmarks.sqlite lives' },
  SEED_ROWS: { default: '200000', about: 'bookmarks seeded on first start' },
  DB_LATENCY_MS: { default: '100', about: 'network round trip added to each query' },
  DB_POOL: { default: '25', about: 'database connections per replica (queries beyond wait)' },
};

const DURATION = /^\d+(?:\.\d+)?\s*(?:ms|s|m|h|d)?$/;

/** @param {string} name @param {string} message */
function invalid(name, message) {
  return new Error(`${name} ${message}`);
}

/** @param {NodeJS.ProcessEnv} env @param {string} name @param {number} min @param {number} max */
function integer(env, name, min, max) {
  const text = env[name] ?? ENV_VARS[name].default;
  const value = Number(text);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw invalid(name, `must be an integer from ${min} to ${max}; got '${text}'`);
  }
  return value;
}

/** @param {NodeJS.ProcessEnv} env @param {string} name */
function duration(env, name) {
  const text = (env[name] ?? ENV_VARS[name].default).trim();
  if (!DURATION.test(text)) throw invalid(name, `must look like '500ms', '30s' or '5m'; got '${text}'`);
  return /\d$/.test(text) ? `${text}ms` : text;
}

/** @param {string} value @param {string} name */
function positive(value, name) {
  if (Number.parseFloat(value) === 0) throw invalid(name, `must be more than 0; got '${value}'`);
  return value;
}

/** @param {NodeJS.ProcessEnv} env @param {string} name */
function flag(env, name) {
  const text = env[name] ?? ENV_VARS[name].default;
  if (text !== '0' && text !== '1') throw invalid(name, `must be 0 or 1; got '${text}'`);
  return text === '1';
}

/**
 * Reads the demo's settings from `env`.
 * @param {NodeJS.ProcessEnv} [env]
 * @returns {Config}
 * @throws {Error} naming the variable at fault
 */
export function loadConfig(env = process.env) {
  const cache = env.CACHE ?? ENV_VARS.CACHE.default;
  if (cache !== 'memory' && cache !== 'redis')
    throw invalid('CACHE', `must be memory or redis; got '${cache}'`);
  const swr = duration(env, 'CACHE_SWR');
  return {
    host: env.HOST || ENV_VARS.HOST.default,
    port: integer(env, 'PORT', 0, 65535),
    cache,
    redisUrl: env.REDIS_URL || ENV_VARS.REDIS_URL.default,
    redisPrefix: env.REDIS_PREFIX || ENV_VARS.REDIS_PREFIX.default,
    replicas: integer(env, 'REPLICAS', 1, 16),
    cacheTtl: duration(env, 'CACHE_TTL'),
    cacheSwr: Number.parseFloat(swr) === 0 ? undefined : swr,
    localTtl: positive(duration(env, 'LOCAL_TTL'), 'LOCAL_TTL'),
    // Checked in every mode, like LOCAL_TTL, so a typo fails now rather than when CACHE=redis is
    // added; without Redis there is no fill lock to use, and a valid value is ignored.
    lock: flag(env, 'LOCK') && cache === 'redis',
    dataDir: env.DATA_DIR || DEFAULT_DATA_DIR,
    seedRows: integer(env, 'SEED_ROWS', 1, 10_000_000),
    dbLatencyMs: integer(env, 'DB_LATENCY_MS', 0, 60_000),
    dbPool: integer(env, 'DB_POOL', 1, 1000),
    replicaId: env.STAMPEDE_DEMO_REPLICA_ID ? Number(env.STAMPEDE_DEMO_REPLICA_ID) : 0,
    peers: env.STAMPEDE_DEMO_PEERS ? env.STAMPEDE_DEMO_PEERS.split(',') : [],
  };
}

/**
 * A URL safe to print: the password (and a user name used as one) replaced by `***`.
 * @param {string} url
 */
export function redactUrl(url) {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    else if (parsed.username) parsed.username = '***';
    return parsed.toString();
  } catch {
    return '<unparseable URL>';
  }
}
