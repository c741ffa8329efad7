// Small live line charts on a <canvas>: the last `points` values, drawn by hand (no
// library), rescaled to the largest value shown.
export class Chart {
  constructor(canvas, { points = 90, color = '#2b5d8a', digits = 0 } = {}) {
    this.canvas = canvas;
    this.points = points;
    this.color = color;
    this.digits = digits;
    this.values = [];
  }

  push(value) {
    this.values.push(Number.isFinite(value) ? value : 0);
    if (this.values.length > this.points) this.values.shift();
    this.draw();
  }

  draw() {
    const c = this.canvas;
    const g = c.getContext('2d');
    const w = c.width, h = c.height, pad = 4, top = 14;
    g.clearRect(0, 0, w, h);
    const max = Math.max(1, ...this.values);
    // A grid line at the top value, labelled.
    g.strokeStyle = '#dde1e8';
    g.lineWidth = 1;
    g.beginPath();
    g.moveTo(0, top + 0.5);
    g.lineTo(w, top + 0.5);
    g.moveTo(0, h - pad + 0.5);
    g.lineTo(w, h - pad + 0.5);
    g.stroke();
    g.fillStyle = '#6b7485';
    g.font = '10px system-ui, sans-serif';
    g.fillText(max.toFixed(this.digits), 2, top - 3);
    if (this.values.length < 2) return;
    const step = (w - 2 * pad) / (this.points - 1);
    const x0 = w - pad - step * (this.values.length - 1);
    const y = (v) => h - pad - (v / max) * (h - pad - top);
    g.beginPath();
    this.values.forEach((v, i) => {
      if (i === 0) g.moveTo(x0, y(v));
      else g.lineTo(x0 + i * step, y(v));
    });
    g.strokeStyle = this.color;
    g.lineWidth = 1.5;
    g.stroke();
    // The area under the line, faintly.
    g.lineTo(x0 + (this.values.length - 1) * step, h - pad);
    g.lineTo(x0, h - pad);
    g.closePath();
    g.globalAlpha = 0.12;
    g.fillStyle = this.color;
    g.fill();
    g.globalAlpha = 1;
  }
}

// Turns the node's cumulative counters into the charts' series: a rate per second for
// steps, the gauges as they are (waiting; failures: procedures that ended FAILED or
// ROLLEDBACK since the node started, docs/metrics.md).
export class MetricsSeries {
  constructor(charts) {
    this.charts = charts;
    this.last = null;
  }

  add(m) {
    let rate = 0;
    if (this.last && m.at_ms > this.last.at_ms) {
      const delta = m.steps_total - this.last.steps_total;
      rate = delta > 0 ? (delta * 1000) / (m.at_ms - this.last.at_ms) : 0;
    }
    this.last = m;
    const values = {
      steps: rate,
      waiting: m.waiting,
      failures: m.failures_total,
    };
    for (const [name, chart] of Object.entries(this.charts)) chart.push(values[name]);
    return values;
  }
}
