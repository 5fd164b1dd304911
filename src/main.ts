import { isMainThread, workerData } from 'node:worker_threads';

// One bundle, two roles: the command line on the main thread, the sinks in their worker thread.
// Imported lazily so that each thread loads only the modules of its own role. The delivery thread
// runs this file, the bundle's entry: the modules of the rest are chunks beside it.
if (isMainThread) {
  const { runCli } = await import('./cli/index.js');
  await runCli(process.argv.slice(2), new URL(import.meta.url));
} else {
  const { runDeliveryWorker } = await import('./sinks/delivery-worker.js');
  await runDeliveryWorker(workerData as import('./sinks/delivery-worker.js').DeliveryWorkerData);
}
