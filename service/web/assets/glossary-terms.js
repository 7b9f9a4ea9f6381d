// Which glossary terms a translation used (/v1/translate's glossary_terms): the target terms
// highlighted in the translation, the source terms in the text, and the terms listed, those the
// text says but the translation does not use apart.
//
// A textarea cannot highlight part of its text: the source terms are marked on a layer under it
// (the box is transparent) that holds the same text in the same font, wrapping and scroll position.
// Spans count characters as the service does, in code points; JavaScript strings count UTF-16 units.

const $ = (id) => document.getElementById(id);

// `text` as text nodes and <mark> elements, one for each span [start, end) of `spans`
// ({start, end, term}: code-point offsets and the index of the term); a span out of the text, or
// overlapping one before it, is left unmarked.
export function marked(text, spans) {
  const chars = [...text];
  const nodes = [];
  let at = 0;
  for (const { start, end, term } of [...spans].sort((a, b) => a.start - b.start)) {
    if (!(Number.isInteger(start) && Number.isInteger(end)) || start < at || end <= start || end > chars.length) {
      continue;
    }
    if (start > at) nodes.push(chars.slice(at, start).join(""));
    const mark = document.createElement("mark");
    mark.className = "term";
    mark.dataset.term = term;
    mark.textContent = chars.slice(start, end).join("");
    nodes.push(mark);
    at = end;
  }
  if (at < chars.length) nodes.push(chars.slice(at).join(""));
  return nodes;
}

function spans(terms, side) {
  return terms.flatMap((term, i) => {
    const span = term[`${side}_span`];
    return Array.isArray(span) ? [{ start: span[0], end: span[1], term: i }] : [];
  });
}

const quoted = (term) => `“${term}”`;

function count(n) {
  return `${n.toLocaleString("en")} glossary ${n === 1 ? "term" : "terms"}`;
}

export class TermView {
  // `output`: the translation's element; `textarea`: the text's box, over `layer`.
  constructor(output, textarea, layer) {
    this.output = output;
    this.textarea = textarea;
    this.layer = layer;
    this.terms = null; // the first translation's glossary_terms; null without a glossary
    this.source = ""; // the text translated
    this.ui = {
      section: $("glossary-terms"),
      summary: $("glossary-summary"),
      used: $("glossary-used"),
      usedList: $("glossary-used-list"),
      unused: $("glossary-unused"),
      unusedList: $("glossary-unused-list"),
      note: $("glossary-note"),
    };
    textarea.addEventListener("scroll", () => this.follow());
    // Edited, the text no longer has the terms where the service found them.
    textarea.addEventListener("input", () => this.layer.replaceChildren());
  }

  // A translation ({text, glossary_terms?}) of `source`, or null for none.
  show(translation, source) {
    this.terms = translation?.glossary_terms ?? null;
    this.source = source ?? "";
    this.showOutput(translation?.text ?? "", this.terms);
    this.showSource();
    this.showList(this.terms);
    this.ui.note.textContent = "";
  }

  // The alternative `text` chosen instead (`first`: the translation itself), with its own terms if
  // the service gave them; else the terms stay those of the translation, and a note says so.
  showAlternative(text, terms, first) {
    const own = first ? this.terms : (terms ?? null);
    this.showOutput(text, own);
    if (own) this.showList(own);
    this.ui.note.textContent =
      !own && this.terms?.length ? "The terms highlighted and listed are those of the first translation." : "";
  }

  showOutput(text, terms) {
    if (!terms) {
      this.output.textContent = text;
      return;
    }
    const nodes = marked(text, spans(terms, "target"));
    for (const mark of nodes) {
      if (typeof mark === "string") continue;
      const term = terms[Number(mark.dataset.term)];
      mark.title = `Glossary term: ${quoted(term.source)} → ${quoted(term.target)}`;
    }
    this.output.replaceChildren(...nodes);
  }

  // The source terms under the text box, while it holds the text that was translated.
  showSource() {
    if (!this.terms || this.textarea.value !== this.source) {
      this.layer.replaceChildren();
      return;
    }
    // A final line break is a line in the box: a space after it makes it one in the layer too.
    this.layer.replaceChildren(...marked(this.source, spans(this.terms, "source")), " ");
    this.follow();
  }

  follow() {
    this.layer.scrollTop = this.textarea.scrollTop;
    this.layer.scrollLeft = this.textarea.scrollLeft;
  }

  // The terms the text says, those the translation uses and those it does not, each term once
  // (with how many times when more).
  showList(terms) {
    this.ui.section.hidden = !terms;
    if (!terms) return;
    const groups = new Map();
    for (const term of terms) {
      const key = JSON.stringify([term.source, term.target, Boolean(term.used)]);
      const group = groups.get(key) ?? { ...term, used: Boolean(term.used), times: 0 };
      group.times += 1;
      groups.set(key, group);
    }
    const item = (term) => {
      const element = document.createElement("li");
      // The target term marked as in the translation, where the translation has it.
      const target = document.createElement(term.used ? "mark" : "span");
      target.className = "term";
      target.textContent = term.target;
      element.append(`${quoted(term.source)} → “`, target, "”");
      if (term.times > 1) element.append(` (${term.times} times)`);
      return element;
    };
    const all = [...groups.values()];
    const used = all.filter((t) => t.used);
    const unused = all.filter((t) => !t.used);
    this.ui.usedList.replaceChildren(...used.map(item));
    this.ui.unusedList.replaceChildren(...unused.map(item));
    this.ui.used.hidden = !used.length;
    this.ui.unused.hidden = !unused.length;
    const said = terms.length;
    const applied = terms.filter((t) => t.used).length;
    this.ui.summary.textContent = !said
      ? "The text says none of the glossary's terms."
      : applied === said
        ? `The text says ${count(said)}, and the translation uses ${said === 1 ? "it" : "all of them"}.`
        : `The text says ${count(said)}; the translation uses ${applied.toLocaleString("en")} of them.`;
  }
}
