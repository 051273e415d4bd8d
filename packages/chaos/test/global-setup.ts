import { fileURLToPath } from 'node:url';
import { buildIfStale } from '@stampede/test-support';

/** The app processes and the soak import the BUILT packages: build any whose dist is missing or stale. */
export default function setup(): void {
  buildIfStale(['core', 'redis'].map((name) => fileURLToPath(new URL(`../../${name}`, import.meta.url))));
}
