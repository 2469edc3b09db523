// Long-running commands (serve, worker): run until SIGTERM or SIGINT, then say so and drain before returning.

/** Resolves once SIGTERM or SIGINT has come and `drain` has finished (or failed). */
export function drainOnSignal(command: string, draining: string, drain: () => Promise<void>): Promise<void> {
  return new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      console.error(`planc ${command}: ${signal}: ${draining}`);
      drain().then(resolve, resolve);
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
}
