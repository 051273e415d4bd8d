import { setFlagsFromString } from 'node:v8';

// V8 stores an object's properties either in a hidden class (fast mode: a property read is a fixed
// offset, checked by one map compare) or in a hash table (dictionary mode: every read is a lookup).
// An object literal that holds a `get x() {}` accessor is made in dictionary mode; the adapters add
// such fields as accessors shared by every cache instead (memory's `defineLiveFields`,
// redis-protocol's `defineFillLockMembers`, the tiered cache's `LIVE` slot), and these tests keep
// them there.

let probe: ((object: object) => boolean) | undefined;

/**
 * Whether V8 keeps `object`'s properties in fast mode (a hidden class), by `%HasFastProperties`:
 * the runtime function is enabled for code compiled after this first call.
 */
export function hasFastProperties(object: object): boolean {
  if (probe === undefined) {
    setFlagsFromString('--allow-natives-syntax');
    probe = new Function('object', 'return %HasFastProperties(object);') as (object: object) => boolean;
  }
  return probe(object);
}
