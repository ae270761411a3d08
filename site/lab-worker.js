// The allocator lab's worker (`cargo xtask dist` fills in the simulator's file names and writes
// it content-hashed). The page sends the dropped file and the cells to replay; the simulator
// (site/alloclab, headroom-alloc compiled to wasm) runs here so the page stays responsive.
// Messages in: {type: "load", file, recoverable} | {type: "sweep", run, cells: [{conf, total, taken}]}
//   | {type: "cancel"} | {type: "detail", conf, total, taken, points} | {type: "check", conf}.
// Messages out: "read" (bytes so far), "parsed", "cell" (one outcome), "done", "detail", "check"
// (PyTorch's error for the setting, and the claims that caution against it), "error". Every
// answer from the simulator is JSON text. Nothing is sent anywhere else.
import init, { Lab, check_conf, conf_cautions } from "__ALLOCLAB_JS__";

const ready = init({ module_or_path: "__ALLOCLAB_WASM__" });
const CHUNK = 8 << 20;
let lab = null;
// The sweep in progress: a newer sweep or a cancel changes it, and the running loop stops
// at its next cell.
let current = 0;

const nextTask = () => new Promise((resolve) => setTimeout(resolve, 0));

self.onmessage = async (event) => {
  const m = event.data;
  try {
    await ready;
    if (m.type === "load") {
      current++;
      if (lab) lab.free();
      lab = new Lab(m.file.size);
      // Read in chunks (a snapshot can be hundreds of MB): the page shows how far it is.
      const reader = new FileReaderSync();
      for (let at = 0; at < m.file.size; at += CHUNK) {
        lab.push(new Uint8Array(reader.readAsArrayBuffer(m.file.slice(at, at + CHUNK))));
        self.postMessage({ type: "read", done: Math.min(at + CHUNK, m.file.size), total: m.file.size });
      }
      const started = performance.now();
      const json = lab.parse(m.recoverable || "");
      self.postMessage({ type: "parsed", json, ms: performance.now() - started });
    } else if (m.type === "sweep") {
      const run = ++current;
      const started = performance.now();
      for (let i = 0; i < m.cells.length; i++) {
        const c = m.cells[i];
        const json = lab.cell(c.conf, c.total, c.taken, c.fraction || 0);
        self.postMessage({ type: "cell", run: m.run, index: i, json, ms: performance.now() - started });
        // Let a cancel (or a newer sweep) in between cells.
        await nextTask();
        if (run !== current) return;
      }
      self.postMessage({ type: "done", run: m.run, ms: performance.now() - started });
    } else if (m.type === "cancel") {
      current++;
    } else if (m.type === "detail") {
      self.postMessage({ type: "detail", key: m.key, json: lab.detail(m.conf, m.total, m.taken, m.fraction || 0, m.points) });
    } else if (m.type === "check") {
      self.postMessage({ type: "check", conf: m.conf, error: check_conf(m.conf), cautions: conf_cautions(m.conf) });
    }
  } catch (e) {
    self.postMessage({ type: "error", message: String(e && e.message ? e.message : e) });
  }
};
