/** Every string reachable from `value` (messages, stacks, causes, own properties), as one JSON text. */
export function deepText(value: unknown): string {
  const seen = new WeakSet<object>();
  const walk = (item: unknown, depth: number): unknown => {
    if (depth > 8) return '…';
    if (typeof item === 'bigint') return String(item);
    if (typeof item !== 'object' || item === null) return item;
    if (seen.has(item)) return '[cycle]';
    seen.add(item);
    if (Array.isArray(item)) return item.map((entry) => walk(entry, depth + 1));
    const out: Record<string, unknown> = {};
    if (item instanceof Error) {
      out.name = item.name;
      out.message = item.message;
      out.stack = item.stack;
      out.cause = walk(item.cause, depth + 1);
    }
    for (const key of Object.getOwnPropertyNames(item)) {
      if (key in out) continue;
      out[key] = walk((item as Record<string, unknown>)[key], depth + 1);
    }
    return out;
  };
  return JSON.stringify(walk(value, 0)) ?? '';
}

/** Captures everything written through console.* and process.stdout/stderr until `stop()`. */
export function captureOutput(): { text(): string; stop(): void } {
  const lines: string[] = [];
  const methods = ['log', 'info', 'warn', 'error', 'debug', 'trace'] as const;
  const originals = methods.map((method) => console[method]);
  for (const method of methods) {
    console[method] = (...args: unknown[]) => {
      lines.push(args.map((arg) => (typeof arg === 'string' ? arg : deepText(arg))).join(' '));
    };
  }
  const writeOut = process.stdout.write;
  const writeErr = process.stderr.write;
  const tap =
    (original: typeof process.stdout.write, stream: NodeJS.WriteStream) =>
    (chunk: unknown, ...rest: unknown[]): boolean => {
      lines.push(String(chunk));
      return (original as (...args: unknown[]) => boolean).call(stream, chunk, ...rest);
    };
  process.stdout.write = tap(writeOut, process.stdout) as typeof process.stdout.write;
  process.stderr.write = tap(writeErr, process.stderr) as typeof process.stderr.write;
  return {
    text: () => lines.join('\n'),
    stop() {
      methods.forEach((method, i) => {
        console[method] = originals[i] as (typeof console)[typeof method];
      });
      process.stdout.write = writeOut;
      process.stderr.write = writeErr;
    },
  };
}
