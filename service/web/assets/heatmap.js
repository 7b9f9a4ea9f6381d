// The subword cross-attention matrix (target × source, rows sum to 1) as a heatmap on a canvas,
// with the cell under the pointer or the keyboard cursor read out.

const CELL_PX = 16;
const MIN_CELL_PX = 3;
// Canvases have a size limit, and a long text's matrix has thousands of rows: cells shrink to fit.
const MAX_CELLS_PX = 4000;
const LABELS_MIN_CELL_PX = 12; // token labels only where cells are tall enough to read them
const FONT = "12px system-ui, sans-serif";
const INK = [11, 87, 208]; // the page's accent colour; a cell's opacity is its weight

export class Heatmap {
  constructor(canvas, readout) {
    this.canvas = canvas;
    this.readout = readout;
    this.cursor = null;
    canvas.addEventListener("pointermove", (event) => this.point(event));
    canvas.addEventListener("pointerleave", () => this.select(null));
    canvas.addEventListener("focus", () => this.select(this.cursor || [0, 0]));
    canvas.addEventListener("blur", () => this.select(null));
    canvas.addEventListener("keydown", (event) => this.onKey(event));
  }

  show(alignment) {
    this.rows = alignment.target_tokens;
    this.columns = alignment.source_tokens;
    this.weights = alignment.weights;
    this.cursor = null;
    this.readout.textContent = "";
    const cell = Math.max(
      MIN_CELL_PX,
      Math.min(CELL_PX, Math.floor(MAX_CELLS_PX / Math.max(this.rows.length, this.columns.length, 1))),
    );
    const labelled = cell >= LABELS_MIN_CELL_PX;
    const measure = this.canvas.getContext("2d");
    measure.font = FONT;
    const widest = (tokens) => Math.max(0, ...tokens.map((t) => measure.measureText(t).width));
    this.layout = {
      cell,
      left: labelled ? Math.ceil(widest(this.rows)) + 8 : 0,
      top: labelled ? Math.ceil(widest(this.columns)) + 8 : 0,
    };
    this.width = this.layout.left + this.columns.length * cell;
    this.height = this.layout.top + this.rows.length * cell;
    this.base = this.render(labelled);
    this.canvas.setAttribute(
      "aria-label",
      `Cross-attention heatmap: ${this.rows.length} target subwords by ${this.columns.length} source subwords`,
    );
    this.paint();
  }

  // The matrix and its labels, drawn once on an offscreen canvas; the cursor is drawn over a copy.
  render(labelled) {
    const scale = window.devicePixelRatio || 1;
    const canvas = document.createElement("canvas");
    canvas.width = Math.ceil(this.width * scale);
    canvas.height = Math.ceil(this.height * scale);
    const ctx = canvas.getContext("2d");
    ctx.scale(scale, scale);
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, this.width, this.height);
    const { cell, left, top } = this.layout;
    this.weights.forEach((row, r) => {
      row.forEach((weight, c) => {
        ctx.fillStyle = `rgba(${INK.join(",")},${weight})`;
        ctx.fillRect(left + c * cell, top + r * cell, cell, cell);
      });
    });
    if (labelled) {
      ctx.fillStyle = "#1a1a1a";
      ctx.font = FONT;
      ctx.textBaseline = "middle";
      ctx.textAlign = "right";
      this.rows.forEach((token, r) => ctx.fillText(token, left - 4, top + (r + 0.5) * cell));
      ctx.textAlign = "left";
      ctx.rotate(-Math.PI / 2);
      this.columns.forEach((token, c) => ctx.fillText(token, -(top - 4), left + (c + 0.5) * cell));
    }
    return canvas;
  }

  paint() {
    const scale = window.devicePixelRatio || 1;
    this.canvas.width = this.base.width;
    this.canvas.height = this.base.height;
    this.canvas.style.width = `${this.width}px`;
    this.canvas.style.height = `${this.height}px`;
    const ctx = this.canvas.getContext("2d");
    ctx.drawImage(this.base, 0, 0);
    if (!this.cursor) return;
    const { cell, left, top } = this.layout;
    const [r, c] = this.cursor;
    ctx.scale(scale, scale);
    ctx.strokeStyle = "#d93025";
    ctx.lineWidth = 2;
    ctx.strokeRect(left + c * cell, top + r * cell, cell, cell);
  }

  point(event) {
    const { cell, left, top } = this.layout;
    const r = Math.floor((event.offsetY - top) / cell);
    const c = Math.floor((event.offsetX - left) / cell);
    const inside = r >= 0 && c >= 0 && r < this.rows.length && c < this.columns.length;
    this.select(inside ? [r, c] : null);
  }

  select(cell) {
    this.cursor = cell && this.rows.length && this.columns.length ? cell : null;
    this.paint();
    if (!this.cursor) {
      this.readout.textContent = "";
      return;
    }
    const [r, c] = this.cursor;
    const weight = this.weights[r][c].toFixed(3);
    this.readout.textContent = `Target subword “${this.rows[r]}” (row ${r + 1}) attends to source subword “${this.columns[c]}” (column ${c + 1}) with weight ${weight}.`;
  }

  onKey(event) {
    const steps = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
    const step = steps[event.key];
    if (!step || !this.cursor) return;
    event.preventDefault();
    const clamp = (value, size) => Math.min(Math.max(value, 0), size - 1);
    const [r, c] = this.cursor;
    this.select([clamp(r + step[0], this.rows.length), clamp(c + step[1], this.columns.length)]);
    this.reveal();
  }

  // Scroll the cursor's cell into view in the scrolling box around the canvas.
  reveal() {
    const box = this.canvas.parentElement;
    const { cell, left, top } = this.layout;
    const [r, c] = this.cursor;
    const x = left + c * cell;
    const y = top + r * cell;
    if (x < box.scrollLeft || x + cell > box.scrollLeft + box.clientWidth) box.scrollLeft = x - box.clientWidth / 2;
    if (y < box.scrollTop || y + cell > box.scrollTop + box.clientHeight) box.scrollTop = y - box.clientHeight / 2;
  }
}
