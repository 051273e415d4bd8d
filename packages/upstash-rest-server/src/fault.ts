/**
 * A fault the server injects into every request while it is set (for tests of client resilience):
 *
 * - `'500'`: answer 500 with a JSON `{ error }` body (the client throws an `UpstashError`);
 * - `'garbage'`: answer 200 with a body that is not JSON;
 * - `'hang'`: never answer (the request stays open until the fault is cleared or the server closes);
 * - `'reset'`: destroy the connection without an answer (the client sees a network error).
 */
export type Fault = '500' | 'garbage' | 'hang' | 'reset';

/** Every {@link Fault}. */
export const FAULTS: readonly Fault[] = ['500', 'garbage', 'hang', 'reset'];
