// The table docs/serializers.md shows: what a value reads back as through each serializer. The
// Redis and Upstash adapter tests store every row through a real server and check both the fill's
// callers and a later hit against it, so the page cannot drift from what the adapters do.

/** How a value came back, in the words of the docs table. */
export function describeValue(value: unknown): string {
  if (value instanceof Date) return 'Date';
  if (value instanceof Map) return `Map(${value.size})`;
  if (value instanceof Set) return `Set(${value.size})`;
  if (value instanceof RegExp) return `RegExp ${String(value)}`;
  if (value instanceof URL) return 'URL';
  if (value instanceof Error) return `Error(${value.message})`;
  if (value instanceof Uint8Array) return 'Uint8Array';
  if (typeof value === 'bigint') return 'BigInt';
  if (typeof value === 'number') return Object.is(value, -0) ? '-0' : String(value);
  if (typeof value === 'string') return `string ${value}`;
  if (Array.isArray(value)) {
    if (value.length === 2 && typeof value[0] === 'object' && value[0] !== null && value[0] === value[1])
      return 'shared';
    return `[${value.map((item) => (item === undefined ? 'undefined' : JSON.stringify(item))).join(',')}]`;
  }
  if (typeof value === 'object' && value !== null) {
    const record = value as Record<string, unknown>;
    if (record.self === value) return 'cycle';
    const keys = Object.keys(record);
    const body = keys
      .map((key) => `${key}:${record[key] === undefined ? 'undefined' : JSON.stringify(record[key])}`)
      .join(',');
    return `${Object.getPrototypeOf(value) === Object.prototype ? '' : 'instance '}{${body}}`;
  }
  return String(value);
}

/** Stands for "the serializer refuses it": the caller gets its own value and nothing is stored. */
export const NOT_STORABLE = 'not storable';

class Point {
  x = 1;
}

/** [label, make the value, JSON, superjson, devalue] */
export const SERIALIZER_TABLE: readonly [string, () => unknown, string, string, string][] = [
  ['Date', () => new Date('2024-01-02T03:04:05.000Z'), 'string 2024-01-02T03:04:05.000Z', 'Date', 'Date'],
  ['NaN', () => Number.NaN, 'null', 'NaN', 'NaN'],
  ['Infinity', () => Number.POSITIVE_INFINITY, 'null', 'Infinity', 'Infinity'],
  ['-0', () => -0, '0', '-0', '-0'],
  ['Map', () => new Map([['a', 1]]), '{}', 'Map(1)', 'Map(1)'],
  ['Set', () => new Set([1]), '{}', 'Set(1)', 'Set(1)'],
  ['undefined in an array', () => [undefined, 1], '[null,1]', '[undefined,1]', '[undefined,1]'],
  ['undefined property', () => ({ a: undefined, b: 1 }), '{b:1}', '{a:undefined,b:1}', '{a:undefined,b:1}'],
  ['BigInt', () => 10n, NOT_STORABLE, 'BigInt', 'BigInt'],
  ['RegExp', () => /ab+c/gi, '{}', 'RegExp /ab+c/gi', 'RegExp /ab+c/gi'],
  ['URL', () => new URL('https://example.com/x'), 'string https://example.com/x', 'URL', 'URL'],
  ['Error', () => new Error('boom'), '{}', 'Error(boom)', NOT_STORABLE],
  ['class instance', () => new Point(), '{x:1}', '{x:1}', NOT_STORABLE],
  ['Uint8Array', () => new Uint8Array([1, 2]), '{0:1,1:2}', 'Uint8Array', 'Uint8Array'],
  [
    'cycle',
    () => {
      const node: Record<string, unknown> = { n: 1 };
      node.self = node;
      return node;
    },
    NOT_STORABLE,
    'cycle',
    'cycle',
  ],
  [
    'shared reference',
    () => {
      const shared = { n: 1 };
      return [shared, shared];
    },
    '[{"n":1},{"n":1}]',
    'shared',
    'shared',
  ],
  ['function property', () => ({ f: () => 1, b: 1 }), '{b:1}', '{b:1}', NOT_STORABLE],
];
