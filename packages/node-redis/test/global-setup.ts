import { fileURLToPath } from 'node:url';
import { buildIfStale } from '@stampede/test-support';

/** The fleet's processes import built packages: build those whose dist is missing or older than src. */
export default function setup(): void {
  buildIfStale(
    ['..', '../../redis-protocol', '../../redis', '../../upstash'].map((path) =>
      fileURLToPath(new URL(path, import.meta.url)),
    ),
  );
}
