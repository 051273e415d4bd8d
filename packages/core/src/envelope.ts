import type { CacheEntry } from './cache.js';

/** Turns values into text and back, for caches that store text (Redis, Upstash). */
export interface Serializer {
  /** Text for `value`; throws for a value it cannot represent (a BigInt, a cycle, ...). */
  serialize(value: unknown): string;
  /** The value for `text`; throws for text it did not produce. */
  deserialize(text: string): unknown;
}

/** The default {@link Serializer}: `JSON.stringify` / `JSON.parse`. */
export const jsonSerializer: Serializer = {
  serialize(value) {
    const text = JSON.stringify(value);
    if (text === undefined) throw new TypeError(`a ${typeof value} cannot be serialised as JSON`);
    return text;
  },
  deserialize(text) {
    return JSON.parse(text);
  },
};

/** The envelope format's version; an entry of another version reads as a miss. */
export const ENVELOPE_VERSION = 1;

/** A decoded envelope: a {@link CacheEntry}. */
export type Envelope<T = unknown> = CacheEntry<T>;

const PREFIX = `s${ENVELOPE_VERSION}|`;

function time(value: number): string {
  return value === Number.POSITIVE_INFINITY ? '' : String(Math.round(value));
}

function parseTime(text: string | undefined, field: string): number {
  if (text === '') return Number.POSITIVE_INFINITY;
  const value = Number(text);
  if (text === undefined || !Number.isFinite(value)) throw new TypeError(`stampede envelope: bad ${field}`);
  return value;
}

/**
 * Encodes an entry as `s1|createdAt|freshUntil|staleUntil|payload`, where the payload is the
 * serializer's text. The header is never valid JSON, so a client that JSON-parses every reply
 * (Upstash's `automaticDeserialization`) hands it back untouched.
 *
 * @throws whatever the serializer throws for a value it cannot represent
 */
export function encodeEnvelope(entry: CacheEntry, serializer: Serializer = jsonSerializer): string {
  const payload = serializer.serialize(entry.value);
  return `${PREFIX}${time(entry.createdAt)}|${time(entry.freshUntil)}|${time(entry.staleUntil)}|${payload}`;
}

/**
 * Decodes what {@link encodeEnvelope} wrote.
 *
 * @throws TypeError for text that is not an envelope of this version, or whose payload the
 * serializer rejects (callers count it as a miss and a `decode` backend error)
 */
export function decodeEnvelope(text: unknown, serializer: Serializer = jsonSerializer): CacheEntry {
  if (typeof text !== 'string')
    throw new TypeError(`stampede envelope: expected a string, got ${typeof text}`);
  if (!text.startsWith(PREFIX)) throw new TypeError('stampede envelope: unknown format or version');
  let at = PREFIX.length;
  const fields: string[] = [];
  for (let i = 0; i < 3; i++) {
    const bar = text.indexOf('|', at);
    if (bar === -1) throw new TypeError('stampede envelope: truncated header');
    fields.push(text.slice(at, bar));
    at = bar + 1;
  }
  const createdAt = parseTime(fields[0], 'createdAt');
  const freshUntil = parseTime(fields[1], 'freshUntil');
  const staleUntil = parseTime(fields[2], 'staleUntil');
  if (createdAt === Number.POSITIVE_INFINITY || staleUntil < freshUntil) {
    throw new TypeError('stampede envelope: inconsistent times');
  }
  const value = serializer.deserialize(text.slice(at));
  if (value === undefined) throw new TypeError('stampede envelope: payload decodes to undefined');
  return { value, createdAt, freshUntil, staleUntil };
}
