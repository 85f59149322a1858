/* global require */
// The preload script: the only bridge between the sandboxed page and the main process. It
// exposes one small API as `window.api` (electron/bridge-api.ts types it) and nothing else: no
// ipcRenderer, no Electron event objects, only the allowlisted channels (electron/policy.ts;
// a test checks the two lists agree). Sandboxed preloads are CommonJS and may only require
// 'electron', hence the plain JS and the repeated channel names.
'use strict';

// eslint-disable-next-line @typescript-eslint/no-require-imports -- a sandboxed preload is CommonJS
const { contextBridge, ipcRenderer } = require('electron');

const EVENT_CHANNEL = 'baton:events';
const RESYNC_CHANNEL = 'baton:resync';

function invoke(channel) {
  return (...args) => ipcRenderer.invoke(channel, ...args);
}

function listen(channel) {
  return (listener) => {
    if (typeof listener !== 'function') throw new TypeError('listener must be a function');
    // Hand over the payload only: the IPC event object would leak the sender to the page.
    const wrapped = (_event, payload) => listener(payload);
    ipcRenderer.on(channel, wrapped);
    return () => ipcRenderer.removeListener(channel, wrapped);
  };
}

contextBridge.exposeInMainWorld('api', Object.freeze({
  onEvents: listen(EVENT_CHANNEL),
  onResync: listen(RESYNC_CHANNEL),
  snapshot: invoke('baton:snapshot'),
  simWorkers: invoke('baton:sim-workers'),
  simAction: invoke('baton:sim-action'),
  addWorker: invoke('baton:add-worker'),
  removeWorker: invoke('baton:remove-worker'),
  drainWorker: invoke('baton:drain-worker'),
  traffic: invoke('baton:traffic'),
  setTraffic: invoke('baton:set-traffic'),
  exportTraces: invoke('baton:export-traces'),
  requestOutput: invoke('baton:request-output'),
  live: invoke('baton:live'),
  traceRows: invoke('baton:trace-rows'),
  requestBody: invoke('baton:request-body'),
  uiConfig: invoke('baton:ui-config'),
}));
