// The word alignment drawn as links between the source and target words, and the words each
// word is aligned to highlighted on hover, tap or focus.
//
// The words are laid out in segments: runs of source words and of target words that no link
// leaves. Sentences are translated independently, so a segment never spans two of them, and
// monotone stretches split into single words: the segments wrap like the words of a paragraph,
// each one with its source words above, its links and its target words below.

const SVG = "http://www.w3.org/2000/svg";
const OTHER = { source: "target", target: "source" };

// [{source: [start, end), target: [start, end)}] for `pairs` of [source index, target index].
export function segments(nSource, nTarget, pairs) {
  const firstTarget = new Array(nSource).fill(Infinity);
  const lastTarget = new Array(nSource).fill(-1);
  for (const [s, t] of pairs) {
    firstTarget[s] = Math.min(firstTarget[s], t);
    lastTarget[s] = Math.max(lastTarget[s], t);
  }
  const suffixFirst = new Array(nSource + 1).fill(Infinity);
  for (let s = nSource - 1; s >= 0; s--) suffixFirst[s] = Math.min(firstTarget[s], suffixFirst[s + 1]);
  const found = [];
  let start = { source: 0, target: 0 };
  let prefixLast = -1;
  // A cut before source word s and target word t is one no link crosses; each segment keeps at
  // least one word on both sides, so a source word linked to nothing joins the segment after it.
  for (let s = 1; s < nSource; s++) {
    prefixLast = Math.max(prefixLast, lastTarget[s - 1]);
    const t = prefixLast + 1;
    if (t > start.target && t < nTarget && prefixLast < suffixFirst[s]) {
      found.push({ source: [start.source, s], target: [start.target, t] });
      start = { source: s, target: t };
    }
  }
  found.push({ source: [start.source, nSource], target: [start.target, nTarget] });
  return found;
}

export class WordLinks {
  constructor(container, readout) {
    this.container = container;
    this.readout = readout;
    this.focused = null;
    this.linksOf = new WeakMap(); // segment element -> the links drawn in it
    // A segment's links are drawn once it has a size, and again when it changes (fonts, a panel shown).
    this.resizes = new ResizeObserver((entries) => {
      for (const { target } of entries) this.draw(target, this.linksOf.get(target));
    });
    container.addEventListener("keydown", (event) => this.onKey(event));
  }

  show(alignment) {
    const words = { source: alignment.source_words, target: alignment.target_words };
    this.words = words;
    this.aligned = { source: words.source.map(() => []), target: words.target.map(() => []) }; // word -> words
    this.chips = { source: [], target: [] };
    this.lines = [];
    this.focused = null;
    this.readout.textContent = "";
    this.resizes.disconnect();
    this.container.replaceChildren();
    const pairs = alignment.word_alignment;
    for (const [s, t] of pairs) {
      this.aligned.source[s].push(t);
      this.aligned.target[t].push(s);
    }
    for (const segment of segments(words.source.length, words.target.length, pairs)) {
      this.container.append(this.segment(segment, pairs));
    }
    const first = this.chips.target[0] || this.chips.source[0];
    if (first) first.tabIndex = 0;
  }

  segment(segment, pairs) {
    const element = document.createElement("div");
    element.className = "segment";
    const rows = {};
    for (const side of ["source", "target"]) {
      rows[side] = document.createElement("div");
      rows[side].className = `words ${side}`;
      const [start, end] = segment[side];
      for (let i = start; i < end; i++) rows[side].append(this.chip(side, i));
    }
    // The box between the rows is sized by the words around it, the drawing inside it by the box.
    const gap = document.createElement("div");
    gap.className = "links";
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("aria-hidden", "true");
    gap.append(svg);
    const [start, end] = segment.source;
    const drawn = pairs
      .filter(([s]) => s >= start && s < end)
      .map(([s, t]) => {
        const line = document.createElementNS(SVG, "line");
        svg.append(line);
        const link = { source: s, target: t, line };
        this.lines.push(link);
        return link;
      });
    element.append(rows.source, gap, rows.target);
    this.linksOf.set(element, drawn);
    this.resizes.observe(element);
    return element;
  }

  chip(side, index) {
    const chip = document.createElement("span");
    chip.className = `word ${side}`;
    chip.textContent = this.words[side][index];
    chip.dataset.side = side;
    chip.dataset.index = index;
    chip.tabIndex = -1; // one word in the tab order (roving tabindex); the arrow keys move between them
    chip.addEventListener("pointerenter", () => this.highlight(side, index));
    chip.addEventListener("pointerleave", () => this.highlightFocused());
    chip.addEventListener("focus", () => {
      this.focused = { side, index };
      this.highlight(side, index);
    });
    chip.addEventListener("blur", () => {
      this.focused = null;
      this.highlight(null);
    });
    this.chips[side][index] = chip;
    return chip;
  }

  draw(segment, links) {
    const box = segment.querySelector("svg").getBoundingClientRect();
    for (const { source, target, line } of links) {
      const from = this.chips.source[source].getBoundingClientRect();
      const to = this.chips.target[target].getBoundingClientRect();
      line.setAttribute("x1", from.left + from.width / 2 - box.left);
      line.setAttribute("y1", 0);
      line.setAttribute("x2", to.left + to.width / 2 - box.left);
      line.setAttribute("y2", box.height);
    }
  }

  highlightFocused() {
    if (this.focused) this.highlight(this.focused.side, this.focused.index);
    else this.highlight(null);
  }

  // The word `index` of `side`, the words it is aligned to and the links between; none if side is null.
  highlight(side, index) {
    for (const chip of this.container.querySelectorAll(".word.active, .word.linked")) {
      chip.classList.remove("active", "linked");
    }
    for (const { line } of this.lines) line.classList.remove("active");
    if (side === null) {
      this.readout.textContent = "";
      return;
    }
    const other = OTHER[side];
    const aligned = this.aligned[side][index];
    this.chips[side][index].classList.add("active");
    for (const i of aligned) this.chips[other][i].classList.add("linked");
    for (const link of this.lines) if (link[side] === index) link.line.classList.add("active");
    const word = `“${this.words[side][index]}”`;
    const to = aligned.map((i) => `“${this.words[other][i]}”`).join(", ");
    this.readout.textContent = aligned.length
      ? `${side === "source" ? "Source" : "Target"} word ${word} is aligned to ${to}.`
      : `${side === "source" ? "Source" : "Target"} word ${word} is aligned to no word.`;
  }

  onKey(event) {
    const chip = event.target.closest(".word");
    if (!chip) return;
    const side = chip.dataset.side;
    const index = Number(chip.dataset.index);
    const last = this.chips[side].length - 1;
    // Across: to the first word aligned to this one, else to the word at the same place.
    const across = [OTHER[side], this.aligned[side][index][0] ?? Math.min(index, this.chips[OTHER[side]].length - 1)];
    const moves = {
      ArrowLeft: [side, Math.max(index - 1, 0)],
      ArrowRight: [side, Math.min(index + 1, last)],
      Home: [side, 0],
      End: [side, last],
      ArrowUp: side === "target" ? across : null,
      ArrowDown: side === "source" ? across : null,
    };
    const move = moves[event.key];
    const next = move && this.chips[move[0]][move[1]];
    if (!next) return;
    event.preventDefault();
    chip.tabIndex = -1;
    next.tabIndex = 0;
    next.focus();
  }
}
