// Glossaries (/v1/glossaries): the one to translate with, chosen among those of the language pair
// chosen above, and a small manager to create one from pasted "source<TAB>target" lines and to
// delete one. Which terms a translation used is drawn by glossary-terms.js.

import { ApiError, deleteResource, describe, getJson, postJson } from "./api.js";

const AUTO = "auto";
const NONE = "";

const $ = (id) => document.getElementById(id);

// The entries of "source<TAB>target" lines (a spreadsheet's cells pasted, or a .tsv file's text);
// a line without a tab may separate its terms by " = ", which a keyboard can type into the box.
// Blank lines are skipped and terms trimmed; an Error names the first line that is not a pair.
export function parseEntries(text, caseSensitive) {
  const entries = [];
  text.split(/\r\n|\r|\n/).forEach((line, i) => {
    if (!line.trim()) return;
    const tab = line.indexOf("\t");
    const separator = tab >= 0 ? "\t" : " = ";
    const at = tab >= 0 ? tab : line.indexOf(separator);
    const source = at >= 0 ? line.slice(0, at).trim() : "";
    const target = at >= 0 ? line.slice(at + separator.length).trim() : "";
    if (!source || !target || target.includes("\t")) {
      throw new Error(`Line ${i + 1} is not a source term, a tab (or “ = ”) and a target term: “${line.trim()}”.`);
    }
    entries.push(caseSensitive ? { source, target, case_sensitive: true } : { source, target });
  });
  if (!entries.length) throw new Error("Enter at least one term: a source term, a tab (or “ = ”) and a target term.");
  return entries;
}

const same = (a, b) => a.toLowerCase() === b.toLowerCase();

function terms(count) {
  return `${count.toLocaleString("en")} ${count === 1 ? "term" : "terms"}`;
}

export class Glossaries {
  // `pair()`: the languages chosen on the page ({source, target}, source "auto" when detected);
  // `apiKey()`: the key typed in; `onChange()`: the glossary to translate with changed.
  constructor({ pair, apiKey, languageName, onChange }) {
    this.pair = pair;
    this.apiKey = apiKey;
    this.languageName = languageName;
    this.onChange = onChange;
    this.list = []; // the caller's glossaries, as /v1/glossaries last listed them
    this.chosen = new Map(); // "source>target" -> the glossary last chosen for that pair
    this.loaded = 0; // the number of the last listing asked for: an older answer is dropped
    this.state = "loading"; // "ready", "unauthorized", "failed"
    this.ui = {
      row: $("glossary-row"),
      select: $("glossary"),
      hint: $("glossary-hint"),
      manager: $("glossary-manager"),
      status: $("glossary-status"),
      message: $("glossary-message"),
      items: $("glossary-list"),
      empty: $("glossary-empty"),
      form: $("glossary-form"),
      formPair: $("glossary-form-pair"),
      name: $("glossary-name"),
      entries: $("glossary-entries"),
      caseSensitive: $("glossary-case"),
      create: $("create-glossary"),
    };
    this.ui.select.addEventListener("change", () => {
      this.chosen.set(this.pairKey(), this.ui.select.value);
      this.onChange();
    });
    this.ui.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.create();
    });
  }

  // The id of the glossary to translate with, or null.
  selected() {
    return this.ui.select.disabled ? null : this.ui.select.value || null;
  }

  pairKey() {
    const { source, target } = this.pair();
    return `${source}>${target}`;
  }

  // The languages changed: the glossaries of the new pair at once (so that the next translation
  // uses one of them or none), then the list as the service has it now.
  pairChanged() {
    this.fill();
    this.refresh();
  }

  // The list from the service; true when the glossary to translate with changed.
  async refresh() {
    const number = ++this.loaded;
    let state;
    let list = this.list;
    try {
      list = (await getJson("v1/glossaries", { apiKey: this.apiKey() })).glossaries;
      state = "ready";
    } catch (error) {
      if (number !== this.loaded) return false;
      // A service without the routes (an older one): no glossary controls at all.
      const absent = error instanceof ApiError && (error.status === 404 || error.status === 405);
      state = absent ? "absent" : error instanceof ApiError && error.status === 401 ? "unauthorized" : "failed";
      list = state === "failed" ? this.list : []; // on a failure, the glossaries as last listed
      if (state === "failed") this.ui.message.textContent = describe(error, this.context());
    }
    if (number !== this.loaded) return false;
    if (state !== "failed" && this.state === "failed") this.ui.message.textContent = "";
    this.state = state;
    this.list = list;
    this.ui.row.hidden = this.ui.manager.hidden = state === "absent";
    this.showList();
    return this.fill();
  }

  context() {
    return { apiKey: this.apiKey(), languageName: this.languageName };
  }

  // The selector: "None" and the glossaries of the chosen pair, keeping the choice made for the
  // pair; true when the glossary to translate with changed.
  fill() {
    const before = this.selected();
    const { source, target } = this.pair();
    const pairName = source === AUTO ? "" : `${this.languageName(source)} → ${this.languageName(target)}`;
    const matching =
      source === AUTO ? [] : this.list.filter((g) => same(g.source_lang, source) && same(g.target_lang, target));
    const options = matching.map((g) => {
      const element = document.createElement("option");
      element.value = g.glossary_id;
      element.textContent = `${g.name} (${terms(g.entry_count)})`;
      return element;
    });
    const none = document.createElement("option");
    none.value = NONE;
    none.textContent = "None";
    this.ui.select.replaceChildren(none, ...options);
    const wanted = this.chosen.get(this.pairKey()) ?? NONE;
    this.ui.select.value = matching.some((g) => g.glossary_id === wanted) ? wanted : NONE;
    this.ui.select.disabled = source === AUTO || !matching.length;
    this.ui.hint.textContent =
      this.state === "unauthorized"
        ? "Enter your API key to use your glossaries."
        : this.state === "failed"
          ? "The glossaries cannot be listed right now."
          : source === AUTO
            ? "Choose the language of the text (not Detect language) to use a glossary."
            : !matching.length
              ? `No glossary for ${pairName}: create one under “Glossaries” below.`
              : "A glossary's terms are used wherever the text says them.";
    this.ui.formPair.textContent =
      source === AUTO
        ? "Choose the language of the text above (not Detect language): a glossary is for one language pair."
        : `For ${pairName}, the languages chosen above.`;
    this.ui.create.disabled = source === AUTO;
    return this.selected() !== before;
  }

  // Every glossary, of whichever pair, with a button to delete it.
  showList() {
    this.ui.empty.hidden = this.list.length > 0 || this.state !== "ready";
    this.ui.items.replaceChildren(
      ...this.list.map((glossary) => {
        const item = document.createElement("li");
        const name = document.createElement("span");
        name.className = "glossary-name";
        name.textContent = glossary.name;
        const about = document.createElement("span");
        about.className = "hint";
        about.textContent =
          `${this.languageName(glossary.source_lang)} → ${this.languageName(glossary.target_lang)}, ` +
          terms(glossary.entry_count);
        const remove = document.createElement("button");
        remove.type = "button";
        remove.className = "secondary";
        remove.dataset.glossary = glossary.glossary_id;
        const which = document.createElement("span");
        which.className = "visually-hidden";
        which.textContent = ` the glossary “${glossary.name}”`;
        remove.append("Delete", which);
        remove.addEventListener("click", () => this.remove(glossary, item));
        item.append(name, " ", about, " ", remove);
        return item;
      }),
    );
  }

  async create() {
    const { source, target } = this.pair();
    const name = this.ui.name.value.trim();
    this.ui.status.textContent = "";
    let entries;
    try {
      if (!name) throw new Error("Name the glossary.");
      entries = parseEntries(this.ui.entries.value, this.ui.caseSensitive.checked);
    } catch (error) {
      this.ui.message.textContent = error.message;
      (name ? this.ui.entries : this.ui.name).focus();
      return;
    }
    this.ui.message.textContent = "";
    this.ui.create.disabled = true;
    try {
      const glossary = await postJson(
        "v1/glossaries",
        { name, source_lang: source, target_lang: target, entries },
        { apiKey: this.apiKey() },
      );
      this.ui.name.value = "";
      this.ui.entries.value = "";
      this.ui.status.textContent = `Created the glossary “${glossary.name}” (${terms(glossary.entry_count)}).`;
      // The new glossary is the one to translate with, if the languages are still the same.
      this.chosen.set(`${source}>${target}`, glossary.glossary_id);
      if (await this.refresh()) this.onChange();
    } catch (error) {
      this.ui.message.textContent =
        error instanceof ApiError && (error.status === 400 || error.status === 422)
          ? `The glossary was not created: ${error.message}.`
          : describe(error, this.context());
    } finally {
      this.ui.create.disabled = this.pair().source === AUTO;
    }
  }

  async remove(glossary, item) {
    if (!confirm(`Delete the glossary “${glossary.name}”?`)) return;
    this.ui.status.textContent = "";
    this.ui.message.textContent = "";
    // Focus goes where the button was: the next glossary's button, else the form.
    const next = item.nextElementSibling?.querySelector("button")?.dataset.glossary;
    try {
      await deleteResource(`v1/glossaries/${encodeURIComponent(glossary.glossary_id)}`, { apiKey: this.apiKey() });
      this.ui.status.textContent = `Deleted the glossary “${glossary.name}”.`;
    } catch (error) {
      // Already gone (deleted elsewhere) is what was asked for.
      if (!(error instanceof ApiError && error.status === 404)) {
        this.ui.message.textContent = describe(error, this.context());
        return;
      }
      this.ui.status.textContent = `Deleted the glossary “${glossary.name}”.`;
    }
    const changed = await this.refresh();
    const button = [...this.ui.items.querySelectorAll("button")].find((b) => b.dataset.glossary === next);
    (button ?? this.ui.name).focus();
    if (changed) this.onChange();
  }
}
