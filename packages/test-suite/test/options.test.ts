import { describe, expect, it } from 'vitest';
import { describeCacheConformance } from '../src/index.js';
import type { ConformanceOptions } from '../src/options.js';
import { createMapCache } from './map-cache.js';

const valid: ConformanceOptions = {
  name: 'map',
  clock: 'fake',
  capabilities: { lock: false, extend: false, push: false, sync: true, roundTrip: false },
  create: () => createMapCache(),
};

// A declaration mistake fails when the suite is registered, naming the option, before any case.
describe('describeCacheConformance options', () => {
  it.each([
    ['no options', undefined, /options must be an object/],
    ['an empty name', { ...valid, name: '' }, /options\.name/],
    ['another clock', { ...valid, clock: 'wall' }, /options\.clock must be 'fake' or 'real'/],
    ['no create', { ...valid, create: undefined }, /options\.create must be a function/],
    ['a replica that is not a function', { ...valid, replica: {} }, /options\.replica/],
    ['a non-boolean replicaLag', { ...valid, replicaLag: 'yes' }, /options\.replicaLag/],
    ['no capabilities', { ...valid, capabilities: undefined }, /options\.capabilities must be an object/],
    [
      'a required capability left out',
      { ...valid, capabilities: { lock: false, extend: false, push: false, sync: true } },
      /options\.capabilities\.roundTrip must be a boolean/,
    ],
    [
      'an optional capability that is not a boolean',
      { ...valid, capabilities: { ...valid.capabilities, tags: 1 } },
      /options\.capabilities\.tags/,
    ],
    [
      'a misspelt capability (its cases would be skipped)',
      { ...valid, capabilities: { ...valid.capabilities, tag: true } },
      /options\.capabilities\.tag is not a capability/,
    ],
    [
      'a misspelt option (a replicaLag written otherwise would be ignored)',
      { ...valid, replicalag: true },
      "options.replicalag is not an option (did you mean 'replicaLag'?)",
    ],
  ])('rejects %s with a TypeError', (_label, options, message) => {
    expect(() => describeCacheConformance(options as unknown as ConformanceOptions)).toThrow(TypeError);
    expect(() => describeCacheConformance(options as unknown as ConformanceOptions)).toThrow(message);
  });
});
