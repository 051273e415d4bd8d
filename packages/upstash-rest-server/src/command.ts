/** A Redis command as the REST API receives it: the name, then its arguments as text. */
export type RestCommand = readonly [name: string, ...args: string[]];

/** A request body that is not a valid command: answered with 400 and this message. */
export class BadCommandError extends Error {
  override readonly name = 'BadCommandError';
}

// Commands that would change the state of a shared connection (or block it) have their own
// endpoints or are not offered, as on Upstash.
const REFUSED = new Set([
  'subscribe',
  'psubscribe',
  'ssubscribe',
  'unsubscribe',
  'punsubscribe',
  'sunsubscribe',
  'monitor',
  'multi',
  'exec',
  'discard',
  'watch',
  'unwatch',
  'select',
  'quit',
  'reset',
  'client',
  'blpop',
  'brpop',
  'blmove',
  'brpoplpush',
  'bzpopmin',
  'bzpopmax',
  'bzmpop',
  'blmpop',
  'xread',
  'xreadgroup',
  'wait',
  'waitaof',
  'shutdown',
  'debug',
]);

function argText(value: unknown, index: number): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new BadCommandError(`ERR argument ${index} is not a finite number`);
    return String(value);
  }
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  throw new BadCommandError(
    `ERR argument ${index} must be a string, number or boolean; got ${value === null ? 'null' : typeof value}`,
  );
}

/** Checks one command (`["set","k","v"]`): a non-empty array of strings, numbers and booleans. */
export function parseCommand(value: unknown): RestCommand {
  if (!Array.isArray(value) || value.length === 0) {
    throw new BadCommandError('ERR a command must be a non-empty JSON array');
  }
  const [head, ...rest] = value as unknown[];
  if (typeof head !== 'string' || head === '')
    throw new BadCommandError('ERR the command name must be a string');
  const name = head.toLowerCase();
  if (REFUSED.has(name)) throw new BadCommandError(`ERR command '${name}' is not supported over REST`);
  return [name, ...rest.map((arg, i) => argText(arg, i + 1))];
}

/** Checks a batch (`[[...], [...]]`) for `/pipeline` and `/multi-exec`. */
export function parseBatch(value: unknown): RestCommand[] {
  if (!Array.isArray(value) || value.length === 0) {
    throw new BadCommandError('ERR a pipeline must be a non-empty JSON array of commands');
  }
  return value.map(parseCommand);
}
