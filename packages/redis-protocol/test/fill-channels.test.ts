// The keys' channels on one subscriber connection (shared by the ioredis and node-redis bindings),
// against a connection that records what it was asked and acknowledges when told to.
import { describe, expect, it, vi } from 'vitest';
import { createFillChannels, type FillChannelsConnection, LINGERING_CHANNELS } from '../src/index.js';

function fakeConnection() {
  const acks = new Map<string, { resolve: () => void; reject: (error: Error) => void; late: () => void }>();
  const sent: string[] = [];
  const reported: unknown[] = [];
  let isOpen = true;
  const connection: FillChannelsConnection = {
    subscribe(channel, _key, late) {
      sent.push(`subscribe ${channel}`);
      return new Promise<void>((resolve, reject) => acks.set(channel, { resolve, reject, late }));
    },
    open: () => isOpen,
    unsubscribe(channel) {
      sent.push(`unsubscribe ${channel}`);
    },
    report: (_key, error) => reported.push(error),
  };
  const settle = async () => {
    for (let i = 0; i < 5; i++) await Promise.resolve();
  };
  return {
    connection,
    sent,
    reported,
    ack: async (channel: string) => {
      acks.get(channel)?.resolve();
      await settle();
    },
    fail: async (channel: string) => {
      acks.get(channel)?.reject(new Error('refused'));
      await settle();
    },
    /** The operation runner's time-out: the SUBSCRIBE is still on its way. */
    timeOut: async (channel: string) => {
      acks
        .get(channel)
        ?.reject(Object.assign(new Error('did not answer'), { code: 'E_STAMPEDE_BACKEND_TIMEOUT' }));
      await settle();
    },
    /** Redis acknowledges a SUBSCRIBE that had timed out (the runner's `onLate`). */
    lateAck: async (channel: string) => {
      acks.get(channel)?.late();
      await settle();
    },
    close: () => {
      isOpen = false;
    },
  };
}

const decode = (message: string) => (message === 'filled' ? { outcome: 'filled' as const } : undefined);

describe('createFillChannels', () => {
  it('subscribes once per channel, confirms waiters on the acknowledgement, and at once afterwards', async () => {
    const fake = fakeConnection();
    const channels = createFillChannels(fake.connection, decode);
    const early = vi.fn();
    channels.listen('c', 'k', () => {}, early);
    channels.listen('c', 'k', () => {});
    expect(fake.sent).toEqual(['subscribe c']);
    expect(channels.subscribed('c')).toBe(false);
    expect(early).not.toHaveBeenCalled();
    await fake.ack('c');
    expect(early).toHaveBeenCalledTimes(1);
    expect(channels.subscribed('c')).toBe(true);
    const late = vi.fn();
    channels.listen('c', 'k', () => {}, late);
    expect(late).toHaveBeenCalledTimes(1);
    expect(fake.sent).toEqual(['subscribe c']);
  });

  it('a SUBSCRIBE acknowledged after its time-out confirms its waiters then, and counts as subscribed', async () => {
    const fake = fakeConnection();
    const channels = createFillChannels(fake.connection, decode);
    const first = vi.fn();
    const stop = channels.listen('c', 'k', () => {}, first);
    await fake.timeOut('c');
    expect(fake.reported).toHaveLength(1);
    expect(first).not.toHaveBeenCalled();
    // A waiter that comes while it is still on its way waits for the same acknowledgement.
    const second = vi.fn();
    channels.listen('c', 'k', () => {}, second);
    await fake.lateAck('c');
    expect(first).toHaveBeenCalledTimes(1);
    expect(second).toHaveBeenCalledTimes(1);
    expect(channels.subscribed('c')).toBe(true);
    stop();
    // The key's later herds hear it at once, with no second SUBSCRIBE.
    const later = vi.fn();
    channels.listen('c', 'k', () => {}, later);
    expect(later).toHaveBeenCalledTimes(1);
    expect(fake.sent).toEqual(['subscribe c']);
  });

  it('a SUBSCRIBE that timed out after its last waiter left is confirmed for the next one when it lands', async () => {
    const fake = fakeConnection();
    const channels = createFillChannels(fake.connection, decode);
    channels.listen('c', 'k', () => {})();
    await fake.timeOut('c');
    const next = vi.fn();
    channels.listen('c', 'k', () => {}, next);
    await fake.lateAck('c');
    expect(next).toHaveBeenCalledTimes(1);
    expect(fake.sent).toEqual(['subscribe c']);
  });

  it('delivers decoded messages to the waiters only; a lingering channel stays subscribed, unread', async () => {
    const fake = fakeConnection();
    const channels = createFillChannels(fake.connection, decode);
    const heard = vi.fn();
    const stop = channels.listen('c', 'k', heard);
    await fake.ack('c');
    channels.deliver('c', 'filled');
    channels.deliver('c', 'garbled');
    expect(heard).toHaveBeenCalledTimes(1);
    expect(heard).toHaveBeenCalledWith('filled', undefined);
    stop();
    channels.deliver('c', 'filled');
    expect(heard).toHaveBeenCalledTimes(1);
    expect(channels.subscribed('c')).toBe(true);
    // The key's next waiter needs no SUBSCRIBE.
    channels.listen('c', 'k', () => {});
    expect(fake.sent).toEqual(['subscribe c']);
  });

  it(`keeps at most ${LINGERING_CHANNELS} lingering channels, unsubscribing the least recently used`, async () => {
    const fake = fakeConnection();
    const channels = createFillChannels(fake.connection, decode);
    for (let i = 0; i <= LINGERING_CHANNELS; i++) {
      const stop = channels.listen(`c${i}`, `k${i}`, () => {});
      await fake.ack(`c${i}`);
      stop();
      // c0 is waited on again once c1 lingers too: c1 becomes the least recently used.
      if (i === 1) channels.listen('c0', 'k0', () => {})();
    }
    expect(fake.sent.filter((line) => line.startsWith('unsubscribe'))).toEqual(['unsubscribe c1']);
    expect(channels.subscribed('c1')).toBe(false);
    expect(channels.subscribed('c0')).toBe(true);
  });

  it('forgets a channel whose SUBSCRIBE failed (reported), so the next waiter subscribes again', async () => {
    const fake = fakeConnection();
    const channels = createFillChannels(fake.connection, decode);
    const ready = vi.fn();
    const stop = channels.listen('c', 'k', () => {}, ready);
    stop();
    await fake.fail('c');
    expect(ready).not.toHaveBeenCalled();
    expect(fake.reported).toHaveLength(1);
    channels.listen('c', 'k', () => {});
    expect(fake.sent).toEqual(['subscribe c', 'subscribe c']);
  });

  it('lingers nothing once the connection is closed, and clear() forgets every channel', async () => {
    const fake = fakeConnection();
    const channels = createFillChannels(fake.connection, decode);
    const stop = channels.listen('c', 'k', () => {});
    await fake.ack('c');
    fake.close();
    stop();
    expect(channels.subscribed('c')).toBe(false);
    channels.listen('d', 'k', () => {});
    await fake.ack('d');
    channels.clear();
    expect(channels.subscribed('d')).toBe(false);
  });
});
