// Entry point: `node src/server.mjs`. One process by default; REPLICAS=n starts a fleet.
import { loadConfig } from './config.mjs';
import { createLog } from './log.mjs';
import { runReplica } from './replica.mjs';
import { runSupervisor } from './replicas.mjs';

const log = createLog(Number(process.env.STAMPEDE_DEMO_REPLICA_ID ?? 0));
try {
  const config = loadConfig();
  if (config.replicas > 1 && config.replicaId === 0) await runSupervisor(config);
  else await runReplica(config);
} catch (error) {
  log.error(`cannot start: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
}
