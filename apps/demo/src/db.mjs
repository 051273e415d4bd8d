// The database behind the demo: a real SQLite file of bookmarks, seeded once, and the one query
// the seed's `bookmark_count` example runs. Every query is counted.
import { existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import Database from 'better-sqlite3';

const FILE_NAME = 'bookmarks.sqlite';
const BATCH = 20_000;

/** @param {string} dataDir */
export function databaseFile(dataDir) {
  return join(dataDir, FILE_NAME);
}

/**
 * Creates the database with `rows` bookmarks unless it exists. Seeds into a temporary file and
 * renames it at the end, so an interrupted seed never leaves a half-filled database behind.
 * @param {string} dataDir
 * @param {number} rows
 * @param {(message: string) => void} log
 * @returns {string} the database file
 */
export function ensureSeeded(dataDir, rows, log) {
  const file = databaseFile(dataDir);
  if (existsSync(file)) return file;
  mkdirSync(dataDir, { recursive: true });
  const partial = `${file}.seeding`;
  rmSync(partial, { force: true });
  log(`seeding ${rows.toLocaleString('en-US')} bookmarks into ${file} (first start only)`);
  const started = performance.now();
  const db = new Database(partial);
  try {
    db.pragma('journal_mode = DELETE');
    db.pragma('synchronous = OFF');
    db.exec(`CREATE TABLE bookmarks (
      id INTEGER PRIMARY KEY,
      user_id INTEGER NOT NULL,
      url TEXT NOT NULL,
      title TEXT NOT NULL,
      created_at INTEGER NOT NULL
    )`);
    const insert = db.prepare('INSERT INTO bookmarks (user_id, url, title, created_at) VALUES (?, ?, ?, ?)');
    const insertBatch = db.transaction((/** @type {number} */ from, /** @type {number} */ to) => {
      for (let i = from; i < to; i++) {
        const user = (i * 7919) % 5_000;
        insert.run(user, `https://example.com/${user}/${i}`, `Bookmark ${i}`, 1_700_000_000 + i * 13);
      }
    });
    for (let from = 0; from < rows; from += BATCH) {
      const to = Math.min(rows, from + BATCH);
      insertBatch(from, to);
      log(
        `  seeded ${to.toLocaleString('en-US')} / ${rows.toLocaleString('en-US')} (${Math.round((to / rows) * 100)}%)`,
      );
    }
    db.exec('CREATE INDEX bookmarks_user ON bookmarks (user_id)');
  } finally {
    db.close();
  }
  renameSync(partial, file);
  log(`seeded in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  return file;
}

/** What the "database outage" switch does to queries: nothing, fail them, or stall them. */
/** @typedef {'off' | 'error' | 'stall'} Outage */
export const OUTAGES = /** @type {const} */ (['off', 'error', 'stall']);

/**
 * How long a stalled query hangs before it fails, as a database driver's statement timeout would
 * end it. A stalled query that sees the outage end before then completes normally.
 */
export const STALL_LIMIT_MS = 5_000;

/**
 * @typedef {object} DbStats
 * @property {number} queries - COUNT queries started (failed ones included)
 * @property {number} failedQueries - queries that failed because of the outage switch
 * @property {number} inFlight
 * @property {number} peakInFlight
 * @property {number} rows - bookmarks when the database was opened, plus this replica's inserts
 * @property {number} writes - bookmarks this replica added
 * @property {Outage} outage
 */

/**
 * @typedef {object} BookmarkDb
 * @property {() => Promise<number>} countBookmarks - one counted query (after the simulated round trip)
 * @property {() => number} addBookmark - inserts one bookmark; returns the new total
 * @property {(outage: Outage) => void} setOutage
 * @property {() => DbStats} stats
 * @property {() => void} close
 */

/**
 * Opens the seeded database (every replica may open the same file; SQLite serialises the rare
 * writes). Queries behave as they would against a database server: each holds one of `pool`
 * connections for a network round trip of `latencyMs`, so a herd of queries queues and every extra
 * query costs real time. The outage switch makes queries fail after their round trip (`error`) or
 * hang until the outage ends or {@link STALL_LIMIT_MS} passes (`stall`).
 * @param {string} file
 * @param {{ latencyMs: number, pool: number }} options
 * @returns {BookmarkDb}
 */
export function openDatabase(file, { latencyMs, pool }) {
  // Another replica may hold the write lock for a moment: wait for it rather than fail.
  const db = new Database(file, { fileMustExist: true, timeout: 2_000 });
  const count = db.prepare('SELECT COUNT(*) AS n FROM bookmarks').pluck();
  const insert = db.prepare('INSERT INTO bookmarks (user_id, url, title, created_at) VALUES (?, ?, ?, ?)');
  let rows = /** @type {number} */ (count.get());
  let queries = 0;
  let failedQueries = 0;
  let writes = 0;
  let inFlight = 0;
  let peakInFlight = 0;
  let busy = 0;
  /** @type {Outage} */
  let outage = 'off';
  /** Wakes the queries stalled by the current outage. @type {Set<() => void>} */
  const stalled = new Set();
  /** @type {(() => void)[]} */
  const waiting = [];

  /** Hangs until the outage ends (true) or the statement timeout passes (false). */
  const stall = () =>
    new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        stalled.delete(wake);
        resolve(true);
      };
      const timer = setTimeout(() => {
        stalled.delete(wake);
        resolve(false);
      }, STALL_LIMIT_MS);
      stalled.add(wake);
    });

  return {
    async countBookmarks() {
      queries++;
      inFlight++;
      peakInFlight = Math.max(peakInFlight, inFlight);
      if (busy >= pool) await new Promise((resolve) => waiting.push(() => resolve(undefined)));
      busy++;
      try {
        if (latencyMs > 0) await sleep(latencyMs);
        if (outage === 'stall' && !(await stall())) {
          failedQueries++;
          throw new Error(`database query timed out after ${STALL_LIMIT_MS} ms (the outage switch is on)`);
        }
        // Also a stalled query woken by a switch from 'stall' to 'error'.
        if (outage !== 'off') {
          failedQueries++;
          throw new Error('database unavailable (the outage switch is on)');
        }
        return /** @type {number} */ (count.get());
      } finally {
        busy--;
        inFlight--;
        waiting.shift()?.();
      }
    },
    addBookmark() {
      const i = Date.now();
      insert.run(
        0,
        `https://example.com/demo/${i}`,
        `Added from the demo page at ${new Date(i).toISOString()}`,
        Math.floor(i / 1000),
      );
      writes++;
      rows = /** @type {number} */ (count.get());
      return rows;
    },
    setOutage(next) {
      if (!OUTAGES.includes(next))
        throw new TypeError(`outage must be one of ${OUTAGES.join(', ')}; got '${next}'`);
      outage = next;
      if (next !== 'stall') for (const wake of [...stalled]) wake();
    },
    stats: () => ({ queries, failedQueries, inFlight, peakInFlight, rows, writes, outage }),
    close: () => db.close(),
  };
}
