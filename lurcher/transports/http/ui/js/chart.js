// A small live line chart drawn on <canvas>: a fixed window of samples per series, scaled
// to the largest visible value. No library.

const COLORS = ['#2f7de1', '#e0731f', '#2aa876', '#b34fc4'];

export class LineChart {
  constructor(canvas, series, windowSize = 150) {
    this.canvas = canvas;
    this.series = series.map((name, i) => ({ name, color: COLORS[i % COLORS.length], points: [] }));
    this.windowSize = windowSize;
  }

  push(values) {
    this.series.forEach((s, i) => {
      s.points.push(values[i]);
      if (s.points.length > this.windowSize) s.points.shift();
    });
    this.canvas.dataset.samples = String(this.series[0].points.length);
    this.draw();
  }

  draw() {
    const { canvas } = this;
    const ratio = window.devicePixelRatio || 1;
    const width = canvas.clientWidth || 600;
    const height = canvas.clientHeight || 200;
    canvas.width = width * ratio;
    canvas.height = height * ratio;
    const ctx = canvas.getContext('2d');
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, height);
    const top = Math.max(1, ...this.series.flatMap(s => s.points));
    this.grid(ctx, width, height, top);
    for (const s of this.series) this.line(ctx, s, width, height, top);
  }

  grid(ctx, width, height, top) {
    ctx.strokeStyle = '#ddd';
    ctx.fillStyle = '#777';
    ctx.font = '11px sans-serif';
    for (let i = 0; i <= 4; i += 1) {
      const y = 10 + (height - 20) * (i / 4);
      ctx.beginPath(); ctx.moveTo(40, y); ctx.lineTo(width, y); ctx.stroke();
      ctx.fillText(short(top * (1 - i / 4)), 2, y + 4);
    }
  }

  line(ctx, s, width, height, top) {
    if (!s.points.length) return;
    const step = (width - 40) / Math.max(1, this.windowSize - 1);
    const start = width - step * (s.points.length - 1);
    ctx.strokeStyle = s.color;
    ctx.lineWidth = 2;
    ctx.beginPath();
    s.points.forEach((v, i) => {
      const x = start + i * step;
      const y = 10 + (height - 20) * (1 - v / top);
      if (i) ctx.lineTo(x, y); else ctx.moveTo(x, y);
    });
    ctx.stroke();
  }
}

function short(n) {
  if (n >= 1e9) return `${(n / 1e9).toFixed(1)}G`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)}M`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)}k`;
  return n.toFixed(n < 10 ? 1 : 0);
}
