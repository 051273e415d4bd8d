// The Web Crypto API is global on every runtime the bindings support (Node >= 20, Cloudflare
// Workers, Vercel Edge, Deno, Bun); typed locally so the package needs neither DOM nor Node types.
interface WebCrypto {
  getRandomValues<T extends Uint8Array>(array: T): T;
  readonly subtle?: { digest(algorithm: string, data: Uint8Array): Promise<ArrayBuffer> };
}

function webCrypto(): WebCrypto {
  const crypto = (globalThis as { crypto?: WebCrypto }).crypto;
  if (crypto === undefined || typeof crypto.getRandomValues !== 'function') {
    throw new TypeError('@stampede/redis-protocol needs the Web Crypto API (globalThis.crypto)');
  }
  return crypto;
}

function hex(bytes: Uint8Array): string {
  let out = '';
  for (const byte of bytes) out += byte.toString(16).padStart(2, '0');
  return out;
}

/** 16 random bytes as hex: a fill lock's owner token. */
export function randomToken(): string {
  return hex(webCrypto().getRandomValues(new Uint8Array(16)));
}

/** The SHA-1 of `text` as hex (what EVALSHA wants), or `undefined` where SubtleCrypto is missing. */
export async function webSha1(text: string): Promise<string | undefined> {
  const subtle = webCrypto().subtle;
  if (subtle === undefined) return undefined;
  return hex(new Uint8Array(await subtle.digest('SHA-1', new TextEncoder().encode(text))));
}
