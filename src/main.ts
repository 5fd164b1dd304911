import { isMainThread, workerData } from 'node:worker_threads';

// One bundle, two roles: the command line on the main thread, the flusher in its worker thread.
// Imported lazily so that each thread loads only the modules of its own role.
if (isMainThread) {
  const { runCli } = await import('./cli/index.js');
  await runCli(process.argv.slice(2));
} else {
  const { runFlusherWorker } = await import('./flusher/flusher-worker.js');
  await runFlusherWorker(workerData as import('./flusher/flusher-worker.js').FlusherWorkerData);
}
