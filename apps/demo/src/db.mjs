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

/**
 * @typedef {object} BookmarkDb
 * @property {() => Promise<number>} countBookmarks - one counted query (after the simulated round trip)
 * @property {() => {queries: number, inFlight: number, peakInFlight: number, rows: number}} stats
 * @property {() => void} close
 */

/**
 * Opens the seeded database read-only (every replica may open the same file). Queries behave as
 * they would against a database server: each holds one of `pool` connections for a network round
 * trip of `latencyMs`, so a herd of queries queues and every extra query costs real time.
 * @param {string} file
 * @param {{ latencyMs: number, pool: number }} options
 * @returns {BookmarkDb}
 */
export function openDatabase(file, { latencyMs, pool }) {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  const count = db.prepare('SELECT COUNT(*) AS n FROM bookmarks').pluck();
  const rows = /** @type {number} */ (count.get());
  let queries = 0;
  let inFlight = 0;
  let peakInFlight = 0;
  let busy = 0;
  /** @type {(() => void)[]} */
  const waiting = [];
  return {
    async countBookmarks() {
      queries++;
      inFlight++;
      peakInFlight = Math.max(peakInFlight, inFlight);
      if (busy >= pool) await new Promise((resolve) => waiting.push(() => resolve(undefined)));
      busy++;
      try {
        if (latencyMs > 0) await sleep(latencyMs);
        return /** @type {number} */ (count.get());
      } finally {
        busy--;
        inFlight--;
        waiting.shift()?.();
      }
    },
    stats: () => ({ queries, inFlight, peakInFlight, rows }),
    close: () => db.close(),
  };
}
