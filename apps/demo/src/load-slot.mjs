// One herd or steady load at a time in the whole fleet. Each run measures the change in every
// replica's counters (`fleetTotal`), so two runs at once, even started on different replicas, would
// count each other's requests. A single process keeps the slot itself; in replica mode the
// supervisor keeps it for the fleet, and replicas ask for it over the IPC channel they were forked
// with (the same channel that tells them where their peers are).
import { randomUUID } from 'node:crypto';

/** How long a replica waits for the supervisor to answer before giving up on the run. */
const ASK_TIMEOUT_MS = 2_000;

/** @typedef {'herd' | 'steady load'} LoadKind */

/**
 * @typedef {object} Holder
 * @property {LoadKind} what
 * @property {number} replica - 0 for a single process
 */

/**
 * @typedef {object} LoadSlot
 * @property {(what: LoadKind) => Promise<{ release: () => void } | { busy: Holder }>} take -
 *   the slot, to release once the run is over, or who holds it now
 */

/**
 * The slot of a process that is the whole fleet.
 * @returns {LoadSlot}
 */
export function localSlot() {
  /** @type {Holder | undefined} */
  let holder;
  return {
    async take(what) {
      if (holder !== undefined) return { busy: holder };
      holder = { what, replica: 0 };
      return {
        release: () => {
          holder = undefined;
        },
      };
    },
  };
}

/**
 * A replica's view of the slot the supervisor keeps.
 * @param {NodeJS.Process} channel - a process forked with an IPC channel
 * @param {number} replica - this replica's id
 * @returns {LoadSlot}
 */
export function supervisedSlot(channel, replica) {
  return {
    take(what) {
      const id = randomUUID();
      const release = () => {
        if (channel.connected) channel.send?.({ type: 'load-release', id });
      };
      return new Promise((resolve, reject) => {
        /** @param {{ type?: string, id?: string, granted?: boolean, holder?: Holder }} message */
        const onMessage = (message) => {
          if (message?.type !== 'load-slot' || message.id !== id) return;
          clearTimeout(timer);
          channel.off('message', onMessage);
          resolve(message.granted ? { release } : { busy: message.holder ?? { what: 'herd', replica: 0 } });
        };
        const timer = setTimeout(() => {
          channel.off('message', onMessage);
          // Should the grant come after all, it must not keep the slot for a run that never started.
          release();
          reject(new Error(`the supervisor did not answer within ${ASK_TIMEOUT_MS} ms (load slot)`));
        }, ASK_TIMEOUT_MS);
        channel.on('message', onMessage);
        channel.send?.({ type: 'load-take', id, what, replica });
      });
    },
  };
}

/**
 * The supervisor's side: grants the slot to one replica's run at a time, and frees it when that
 * run ends or when the replica running it exits (a crashed run never keeps it).
 */
export function createSlotKeeper() {
  /** @type {{ child: import('node:child_process').ChildProcess, id: string, holder: Holder } | undefined} */
  let current;
  return {
    /**
     * Answers the slot messages of one replica.
     * @param {import('node:child_process').ChildProcess} child
     */
    serve(child) {
      child.on(
        'message',
        (/** @type {{ type?: string, id?: string, what?: LoadKind, replica?: number }} */ m) => {
          if (m?.type === 'load-take' && typeof m.id === 'string') {
            const granted = current === undefined;
            if (granted)
              current = { child, id: m.id, holder: { what: m.what ?? 'herd', replica: m.replica ?? 0 } };
            if (child.connected) {
              child.send({
                type: 'load-slot',
                id: m.id,
                granted,
                holder: granted ? undefined : current?.holder,
              });
            }
          } else if (m?.type === 'load-release' && current?.child === child && current.id === m.id) {
            current = undefined;
          }
        },
      );
      child.on('exit', () => {
        if (current?.child === child) current = undefined;
      });
    },
  };
}
