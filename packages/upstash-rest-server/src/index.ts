export type { Fault } from './fault.js';
export {
  startUpstashRestServer,
  type UpstashRestServer,
  type UpstashRestServerOptions,
  type UpstashRestServerStats,
} from './server.js';
