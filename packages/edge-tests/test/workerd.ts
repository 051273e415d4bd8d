import { Log, LogLevel, Miniflare } from 'miniflare';

/** Miniflare's own log, kept in memory instead of printed. */
class CapturedLog extends Log {
  constructor(private readonly lines: string[]) {
    super(LogLevel.DEBUG);
  }

  override logWithLevel(level: LogLevel, message: string): void {
    this.lines.push(`miniflare ${LogLevel[level]}: ${message}`);
  }
}

/** A bundled worker running in its own workerd isolate. */
export interface Worker {
  /** Miniflare's log and everything the runtime printed (console output, runtime warnings). */
  readonly logs: string[];
  /** One request to the worker. */
  fetch(path?: string, init?: { signal?: AbortSignal }): Promise<Response>;
  /**
   * Resolves once no log line has arrived for 150 ms (at most 3 s): lines reach Node after the
   * responses (request lines over a loopback, the runtime's output over a pipe), so read `logs`
   * after this.
   */
  quiet(): Promise<void>;
  dispose(): Promise<void>;
}

/** Starts `script` (an ESM bundle) in workerd through miniflare, with `bindings` as its `env`. */
export async function startWorker(script: string, bindings: Record<string, string> = {}): Promise<Worker> {
  const logs: string[] = [];
  const mf = new Miniflare({
    modules: true,
    script,
    compatibilityDate: '2025-01-01',
    bindings,
    // No request.cf lookup (it would leave this machine).
    cf: false,
    log: new CapturedLog(logs),
    handleStructuredLogs: ({ level, message }: { level: string; message: string }) => {
      logs.push(`workerd ${level}: ${message}`);
    },
  });
  await mf.ready;
  return {
    logs,
    fetch: (path = '/', init = {}) =>
      mf.dispatchFetch(
        `http://worker.test${path}`,
        init.signal ? { signal: init.signal } : {},
      ) as unknown as Promise<Response>,
    async quiet() {
      const until = Date.now() + 3000;
      let seen = -1;
      while (seen !== logs.length && Date.now() < until) {
        seen = logs.length;
        await new Promise((resolve) => setTimeout(resolve, 150));
      }
    },
    dispose: () => mf.dispose(),
  };
}

/**
 * The lines that mean workerd refused what the code did: a promise settled from another request's
 * context, a request cancelled as hung, an uncaught error, a request answered 5xx.
 */
export function runtimeProblems(logs: readonly string[]): string[] {
  return logs.filter((line) =>
    /different request context|hung|canceled|cancelled|uncaught|error|warn| 5\d\d /i.test(line),
  );
}
