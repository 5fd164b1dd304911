import { workerData } from 'node:worker_threads';
import { type DeliveryWorkerData, runDeliveryWorker } from './sinks/delivery-worker.js';

// The delivery thread's own bundle (dist/delivery.mjs): the sinks and the queue's reading side,
// about half the size of the whole gateway's, so the thread's isolate holds less of it.
await runDeliveryWorker(workerData as DeliveryWorkerData);
