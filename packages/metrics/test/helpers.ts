/** The value of one sample line, e.g. `sample(text, 'stampede_fills_total', { cache: 'herd' })`. */
export function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  const wanted = Object.entries(labels).map(([label, value]) => `${label}="${value}"`);
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    const close = line.indexOf('} ');
    const parts = line.slice(name.length + 1, close).split(',');
    if (parts.length === wanted.length && wanted.every((part) => parts.includes(part)))
      return Number(line.slice(close + 2));
  }
  return undefined;
}

/** A promise and the function that resolves it. */
export function deferred<T>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((settle) => {
    resolve = settle;
  });
  return { promise, resolve };
}
