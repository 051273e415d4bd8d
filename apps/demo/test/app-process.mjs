// Starts the demo as a real process (`node src/server.mjs`) on a free port in a temporary data
// directory, and stops it.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const SERVER = fileURLToPath(new URL('../src/server.mjs', import.meta.url));
const READY = /open (http:\/\/\S+)\/ in your browser/;
export const SEED_ROWS = 20_000;

/**
 * @typedef {object} DemoProcess
 * @property {string} url - base URL of the (first) replica
 * @property {() => string} output - stdout and stderr so far
 * @property {() => Promise<{ code: number | null, signal: string | null }>} stop - SIGTERM, then wait
 */

/**
 * Spawns the demo with `env` in a fresh data folder, collecting everything it prints.
 * @param {Record<string, string>} env
 */
function spawnDemo(env) {
  const dataDir = mkdtempSync(join(tmpdir(), 'stampede-demo-'));
  const child = spawn(process.execPath, [SERVER], {
    env: { ...process.env, PORT: '0', DATA_DIR: dataDir, SEED_ROWS: String(SEED_ROWS), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  return { child, dataDir, output: () => output };
}

/**
 * Runs the demo with `env` until it exits (for start-up failures).
 * @param {Record<string, string>} env
 * @returns {Promise<{ code: number | null, output: string }>}
 */
export function runToExit(env, timeoutMs = 20_000) {
  const { child, dataDir, output } = spawnDemo(env);
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  return new Promise((resolve) => {
    child.on('exit', (code) => {
      clearTimeout(timer);
      rmSync(dataDir, { recursive: true, force: true });
      resolve({ code, output: output() });
    });
  });
}

/**
 * Starts the demo and resolves once it prints the URL to open.
 * @param {Record<string, string>} [env]
 * @returns {Promise<DemoProcess>}
 */
export async function startDemo(env = {}, timeoutMs = 45_000) {
  const { child, dataDir, output } = spawnDemo(env);
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));

  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    const result = /** @type {{ code: number | null, signal: string | null }} */ (await exited);
    clearTimeout(timer);
    rmSync(dataDir, { recursive: true, force: true });
    return result;
  };

  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`demo not ready after ${timeoutMs} ms:\n${output()}`)),
      timeoutMs,
    );
    const check = () => {
      const match = READY.exec(output());
      if (match) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    };
    child.stdout.on('data', check);
    exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`demo exited before it was ready:\n${output()}`));
    });
  }).catch(async (error) => {
    await stop();
    throw error;
  });
  return { url, output, stop };
}

/**
 * @param {string} url
 * @param {RequestInit} [init]
 */
export async function json(url, init) {
  const response = await fetch(url, init);
  const body = await response.json();
  if (!response.ok)
    throw new Error(`${init?.method ?? 'GET'} ${url}: HTTP ${response.status} ${JSON.stringify(body)}`);
  return body;
}
