// One-line logs, tagged with who wrote them.

/**
 * @param {number} replica - 0 for a single process or the supervisor
 * @returns {{ info: (message: string) => void, error: (message: string) => void }}
 */
export function createLog(replica) {
  const tag = replica > 0 ? `[replica ${replica}]` : '[demo]';
  return {
    info: (message) => console.log(`${tag} ${message}`),
    error: (message) => console.error(`${tag} ${message}`),
  };
}
