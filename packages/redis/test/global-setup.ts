import { fileURLToPath } from 'node:url';
import { buildIfStale } from '@stampede/test-support';

/** The replica processes import the built package: build it when dist is missing or older than src. */
export default function setup(): void {
  buildIfStale([fileURLToPath(new URL('..', import.meta.url))]);
}
