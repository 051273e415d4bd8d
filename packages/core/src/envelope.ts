import type { CacheEntry } from './cache.js';
import { buildEntry } from './entry.js';
import { kindOf } from './errors.js';

/**
 * Turns values into text and back, for caches that store text (Redis, Upstash). The shape of the
 * `JSON` global, so `JSON`, `superjson` and `devalue` plug in as they are.
 *
 * @example
 * import superjson from 'superjson';
 * createRedisCache({ client, serializer: superjson }); // Dates, Maps, Sets and BigInts survive
 */
export interface Serializer {
  /** Text for `value`; throws (or returns a non-string) for a value it cannot represent. */
  stringify(value: unknown): string;
  /** The value for `text`; throws for text it did not produce. */
  parse(text: string): unknown;
}

/**
 * The serializer shape of the first release, `{ serialize, deserialize }`: still accepted wherever
 * a {@link Serializer} is, and used as one.
 *
 * @deprecated pass a `{ stringify, parse }` {@link Serializer} (`JSON`, `superjson`, `devalue`)
 */
export interface LegacySerializer {
  /** Text for `value`; throws for a value it cannot represent. */
  serialize(value: unknown): string;
  /** The value for `text`; throws for text it did not produce. */
  deserialize(text: string): unknown;
}

/** What a `serializer` option accepts: a {@link Serializer}, or the older {@link LegacySerializer}. */
export type SerializerOption = Serializer | LegacySerializer;

/** The default {@link Serializer}: `JSON.stringify` / `JSON.parse`. */
export const jsonSerializer: Serializer = {
  stringify(value) {
    return JSON.stringify(value);
  },
  parse(text) {
    return JSON.parse(text);
  },
};

function hasMethods(value: unknown, a: string, b: string): boolean {
  if ((typeof value !== 'object' && typeof value !== 'function') || value === null) return false;
  const candidate = value as Record<string, unknown>;
  return typeof candidate[a] === 'function' && typeof candidate[b] === 'function';
}

/**
 * `option` as a {@link Serializer}: a `{ stringify, parse }` object as it is (called as its methods,
 * so a class such as `superjson` keeps its `this`), a `{ serialize, deserialize }` one wrapped,
 * `undefined` as {@link jsonSerializer}.
 *
 * @param name - the option's name, for the error message
 * @throws TypeError naming `name` when `option` has neither shape
 */
export function toSerializer(option: unknown, name = 'serializer'): Serializer {
  if (option === undefined) return jsonSerializer;
  if (hasMethods(option, 'stringify', 'parse')) return option as Serializer;
  if (hasMethods(option, 'serialize', 'deserialize')) {
    const legacy = option as LegacySerializer;
    return {
      stringify: (value) => legacy.serialize(value),
      parse: (text) => legacy.deserialize(text),
    };
  }
  throw new TypeError(
    `${name} must have stringify and parse functions (JSON, superjson and devalue fit as they are)`,
  );
}

/**
 * The payload text of `value`.
 *
 * @throws TypeError when the serializer answers something other than a string (`JSON.stringify`
 * returns `undefined` for `undefined`, a function or a symbol), or whatever it throws (a BigInt, a cycle)
 */
export function stringifyValue(value: unknown, serializer: SerializerOption = jsonSerializer): string {
  const kind = typeof value;
  // Never a cached value: superjson writes `{}` for one, which reads back as `undefined`.
  if (kind === 'function' || kind === 'symbol') {
    throw new TypeError(`the serializer cannot represent a ${kind}: a cached value is data`);
  }
  const text = toSerializer(serializer).stringify(value);
  if (typeof text !== 'string') {
    if (quietIfThenable(text)) {
      throw new TypeError(
        "the serializer's stringify returned a promise: a serializer must be synchronous (devalue's stringify, not stringifyAsync)",
      );
    }
    const article = kind === 'object' || kind === 'undefined' ? 'an' : 'a';
    throw new TypeError(`the serializer cannot represent ${article} ${kind} (it returned ${typeof text})`);
  }
  return text;
}

/**
 * True when `value` is a thenable, whose rejection is then handled (an asynchronous serializer's
 * promise, refused: left alone it would end the process when it rejects). A `then` that throws
 * counts as one too.
 */
function quietIfThenable(value: unknown): boolean {
  if ((typeof value !== 'object' && typeof value !== 'function') || value === null) return false;
  try {
    const then = (value as { then?: unknown }).then;
    if (typeof then !== 'function') return false;
    then.call(value, undefined, () => {});
  } catch {}
  return true;
}

/**
 * The value for payload `text`.
 *
 * @throws TypeError when the payload decodes to `undefined` (never a cached value), or whatever the
 * serializer throws
 */
export function parseValue(text: string, serializer: SerializerOption = jsonSerializer): unknown {
  const value = toSerializer(serializer).parse(text);
  if (value === undefined) throw new TypeError('stampede envelope: payload decodes to undefined');
  if (quietIfThenable(value)) {
    throw new TypeError(
      "stampede envelope: the serializer's parse returned a promise (a serializer must be synchronous)",
    );
  }
  return value;
}

// What every serializer writes for this value tells its format apart: JSON's text, superjson's
// `{"json":...}`, devalue's flattened array.
const FORMAT_PROBE = { stampede: [1, 'a', true, null], at: 1.5 };
const JSON_PROBE_TEXT = JSON.stringify(FORMAT_PROBE);
// A mark as {@link formatMark} makes it: `~`, eight hex digits, `~` (never the start of JSON text).
const MARK = /^~[0-9a-f]{8}~/;
const formatMarks = new WeakMap<object, string>();

/**
 * The mark an entry's payload starts with under `serializer`, so that an entry another serializer
 * wrote reads as a miss (a `decode` error) rather than as a wrong value: JSON's reader takes
 * superjson's text for an object `{ json, meta }`, and devalue's reader takes JSON's `[1,2]` for `1`.
 * `''` for JSON (the default) and for any serializer that writes JSON's text; otherwise `~` and a hash
 * of the text the serializer writes for a fixed probe value, and `~` (unreadable as JSON, so an
 * older release's JSON reader misses it too). A serializer that writes different text for the same
 * value on two calls (a random IV), or cannot write the probe, gets no mark.
 */
export function formatMark(serializer: SerializerOption = jsonSerializer): string {
  if (serializer === jsonSerializer || serializer === JSON) return '';
  const known = formatMarks.get(serializer);
  if (known !== undefined) return known;
  let mark = '';
  try {
    const resolved = toSerializer(serializer);
    const first: unknown = resolved.stringify(FORMAT_PROBE);
    const second: unknown = resolved.stringify(FORMAT_PROBE);
    quietIfThenable(first);
    quietIfThenable(second);
    if (typeof first === 'string' && first === second && first !== JSON_PROBE_TEXT) mark = `~${hash(first)}~`;
  } catch {}
  formatMarks.set(serializer, mark);
  return mark;
}

/** FNV-1a (32 bits) of `text`'s UTF-16 code units, as eight hex digits. */
function hash(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0).toString(16).padStart(8, '0');
}

/** The serializer's text inside `payload`, or a TypeError when another serializer's mark (or none) heads it. */
function unmarked(payload: string, serializer: SerializerOption): string {
  const mark = formatMark(serializer);
  if (mark === '' ? !MARK.test(payload) : payload.startsWith(mark)) return payload.slice(mark.length);
  throw new TypeError('stampede envelope: the entry was written with another serializer');
}

/**
 * `value` as a cache that stores `serializer`'s text gives it back: through the serializer and back
 * (under JSON a `Date` becomes its ISO string, `NaN` becomes `null`, a `Map` becomes `{}`). Remote
 * adapters implement `Cache.roundTrip` with it, so the callers of a fill get what later hits return.
 *
 * @throws whatever {@link stringifyValue} or {@link parseValue} throws (a BigInt under JSON, a cycle)
 */
export function roundTripValue(value: unknown, serializer: SerializerOption = jsonSerializer): unknown {
  const resolved = toSerializer(serializer);
  return parseValue(stringifyValue(value, resolved), resolved);
}

/**
 * The envelope format's newest version. Version 2 adds the fill's duration (`delta`) to the header;
 * an entry without a `delta` is still written as version 1, which every release reads. Each version
 * has a tagged form (`s1t`, `s2t`) for entries with tags. Versions 1 and 2, tagged or not, decode;
 * any other reads as a miss.
 */
export const ENVELOPE_VERSION = 2;

/** A decoded envelope: a {@link CacheEntry}. */
export type Envelope<T = unknown> = CacheEntry<T>;

// The four headers: version 1 or 2 (with the fill's `delta`), each with a `t` form carrying tags
// (`s1t|c|f|s|tags|payload`, `s2t|c|f|s|delta|tags|payload`). A reader that predates tags takes a
// `t` form for an unknown format, a miss, rather than misreading the tags as the payload.
const PREFIX_V1 = 's1|';
const PREFIX_V2 = 's2|';
const PREFIX_V1_TAGGED = 's1t|';
const PREFIX_V2_TAGGED = 's2t|';

// `%`, the envelope's separators and Redis Cluster's hash-tag braces, and lone surrogates (UTF-8 has
// no bytes for them: clients would turn each into U+FFFD and two tags would collide).
const TAG_UNSAFE = /[%|,{}\r\n]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * A tag as the envelope writes it: `%`, `|`, `,`, `{`, `}`, CR and LF percent-encoded (lone
 * surrogates as `%uXXXX`). Injective, and safe inside a Redis key's hash tag, so a Redis-protocol
 * adapter names a tag's key from this text as it stands in the envelope (its Lua read needs no
 * decoding); and on one line, so it travels intact through a line-based stream (Upstash's pub/sub is
 * server-sent events). The tiered cache's bus writes keys the same way.
 *
 * @example
 * encodeTag('user|42,{a}') // 'user%7C42%2C%7Ba%7D'
 */
export function encodeTag(tag: string): string {
  return tag.replace(TAG_UNSAFE, (char) => {
    if (char.length === 1 && char.charCodeAt(0) < 0x80) {
      return `%${char.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`;
    }
    return `%u${char.charCodeAt(0).toString(16).toUpperCase()}`;
  });
}

/** The tag {@link encodeTag} encoded. */
export function decodeTag(text: string): string {
  return text.replace(
    /%u([0-9A-F]{4})|%([0-9A-F]{2})/g,
    (_match, unit: string | undefined, byte: string | undefined) =>
      String.fromCharCode(Number.parseInt((unit ?? byte) as string, 16)),
  );
}

/**
 * A time (or a count of milliseconds) as plain decimal digits, whatever its size: `String(1e21)` is
 * `'1e+21'`, which neither Redis (`PX`) nor the Lua write guard's header pattern reads as an
 * integer. Every finite double is an integer once rounded, and BigInt spells it out exactly, so
 * `Number(integerText(x))` gives back `Math.round(x)`.
 */
export function integerText(value: number): string {
  const rounded = Math.round(value);
  if (Number.isSafeInteger(rounded)) return String(rounded);
  // NaN, an infinity or a non-number has no digits (BigInt would say "cannot be converted").
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw new RangeError(`integerText needs a finite number; got ${String(value)}`);
  }
  return BigInt(rounded).toString();
}

function time(value: number, field: string): string {
  if (value === Number.POSITIVE_INFINITY) return '';
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw new RangeError(
      `stampede envelope: the entry's ${field} must be a finite number (or Infinity); got ${String(value)}`,
    );
  }
  return integerText(value);
}

function parseTime(text: string | undefined, field: string): number {
  if (text === '') return Number.POSITIVE_INFINITY;
  const value = Number(text);
  if (text === undefined || !Number.isFinite(value)) throw new TypeError(`stampede envelope: bad ${field}`);
  return value;
}

/**
 * Encodes an entry as `s2|createdAt|freshUntil|staleUntil|delta|payload`, or, for an entry without
 * a `delta` (a `setValue`), as `s1|createdAt|freshUntil|staleUntil|payload`, the first release's
 * format. An entry with tags is `s2t|createdAt|freshUntil|staleUntil|delta|tags|payload` (or
 * `s1t|createdAt|freshUntil|staleUntil|tags|payload` without a `delta`), its tags
 * {@link encodeTag}-ed and joined by `,`; an entry without tags keeps the untagged forms. The times
 * are whole milliseconds in plain digits (`''` for never), `delta` whole milliseconds, and the
 * payload is the serializer's text (after its {@link formatMark}, none under JSON). The header is never valid JSON, so a client that JSON-parses
 * every reply (Upstash's `automaticDeserialization`) hands it back untouched.
 *
 * @throws whatever the serializer throws for a value it cannot represent
 */
export function encodeEnvelope(entry: CacheEntry, serializer: SerializerOption = jsonSerializer): string {
  const payload = formatMark(serializer) + stringifyValue(entry.value, serializer);
  const times = `${time(entry.createdAt, 'createdAt')}|${time(entry.freshUntil, 'freshUntil')}|${time(entry.staleUntil, 'staleUntil')}|`;
  const delta = entry.delta;
  const hasDelta = delta !== undefined && delta >= 0 && delta < Number.POSITIVE_INFINITY;
  const tags = entry.tags;
  const tagText = tags === undefined || tags.length === 0 ? undefined : tags.map(encodeTag).join(',');
  if (tagText === undefined) {
    return hasDelta
      ? `${PREFIX_V2}${times}${integerText(delta)}|${payload}`
      : `${PREFIX_V1}${times}${payload}`;
  }
  return hasDelta
    ? `${PREFIX_V2_TAGGED}${times}${integerText(delta)}|${tagText}|${payload}`
    : `${PREFIX_V1_TAGGED}${times}${tagText}|${payload}`;
}

/**
 * Decodes what {@link encodeEnvelope} wrote, in any of its four forms (an `s1|` or `s1t|` entry has
 * no `delta`; an untagged one no `tags`).
 *
 * @throws TypeError for text that is not an envelope of a version this release reads, or whose
 * payload the serializer rejects (callers count it as a miss and a `decode` backend error)
 */
export function decodeEnvelope(text: unknown, serializer: SerializerOption = jsonSerializer): CacheEntry {
  if (typeof text !== 'string')
    throw new TypeError(`stampede envelope: expected a string, got ${kindOf(text)}`);
  let withDelta: boolean;
  let tagged: boolean;
  let at: number;
  if (text.startsWith(PREFIX_V2)) [withDelta, tagged, at] = [true, false, PREFIX_V2.length];
  else if (text.startsWith(PREFIX_V1)) [withDelta, tagged, at] = [false, false, PREFIX_V1.length];
  else if (text.startsWith(PREFIX_V2_TAGGED)) [withDelta, tagged, at] = [true, true, PREFIX_V2_TAGGED.length];
  else if (text.startsWith(PREFIX_V1_TAGGED))
    [withDelta, tagged, at] = [false, true, PREFIX_V1_TAGGED.length];
  else throw new TypeError('stampede envelope: unknown format or version');
  const fields: string[] = [];
  const count = 3 + (withDelta ? 1 : 0) + (tagged ? 1 : 0);
  for (let i = 0; i < count; i++) {
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
  const value = parseValue(unmarked(text.slice(at), serializer), serializer);
  const delta = withDelta ? parseDelta(fields[3]) : undefined;
  if (!tagged) return buildEntry(value, createdAt, freshUntil, staleUntil, delta);
  const tags = (fields[withDelta ? 4 : 3] ?? '')
    .split(',')
    .filter((tag) => tag.length !== 0)
    .map(decodeTag);
  return buildEntry(value, createdAt, freshUntil, staleUntil, delta, tags.length === 0 ? undefined : tags);
}

// Plain digits only, as the write guard's header pattern reads them.
const DIGITS = /^\d+$/;

function parseDelta(text: string | undefined): number {
  if (text === undefined || !DIGITS.test(text)) throw new TypeError('stampede envelope: bad delta');
  const delta = Number(text);
  if (!Number.isFinite(delta)) throw new TypeError('stampede envelope: bad delta');
  return delta;
}
