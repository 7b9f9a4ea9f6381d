// The translation page: languages from /languages, limits and the key requirement from
// /frontend/settings, what each model was trained on from /v1/models, translations (with
// alternatives, the alignment and the glossary terms used) from /v1/translate, glossaries from
// /v1/glossaries.

import { ApiError, describe, getJson, postJson } from "./api.js";
import { setUpFileTranslation } from "./files.js";
import { TermView } from "./glossary-terms.js";
import { Glossaries } from "./glossaries.js";
import { Heatmap } from "./heatmap.js";
import { WordLinks } from "./word-links.js";

const HYPOTHESES = 3; // the translation and two alternatives
// An alignment carries a target × source matrix over the whole text: for longer texts the
// response would grow to megabytes on every pause in typing.
const ALIGNMENT_MAX_CHARS = 1000;
const KEY_STORAGE = "mt-service.api-key";
const TARGET_STORAGE = "mt-service.target"; // the target the user chose, across visits
const AUTO = "auto";
const SOURCE_FIXES = 3; // languages offered in place of a guessed one

const $ = (id) => document.getElementById(id);
const ui = {
  form: $("translate-form"),
  keyRow: $("key-row"),
  key: $("api-key"),
  source: $("source-lang"),
  target: $("target-lang"),
  swap: $("swap"),
  detected: $("detected"),
  text: $("source-text"),
  count: $("char-count"),
  output: $("target-text"),
  copy: $("copy"),
  copyStatus: $("copy-status"),
  message: $("message"),
  alternatives: $("alternatives"),
  alternativeList: $("alternative-list"),
  alignment: $("alignment"),
  alignmentNote: $("alignment-note"),
  alignmentViews: $("alignment-views"),
  modelNote: $("model-note"),
};
const words = new WordLinks($("word-links"), $("word-readout"));
const heatmap = new Heatmap($("heatmap"), $("cell-readout"));
const terms = new TermView(ui.output, ui.text, $("source-marks"));
const glossaries = new Glossaries({
  pair: () => ({ source: ui.source.value, target: ui.target.value }),
  apiKey: () => ui.key.value,
  languageName,
  onChange: () => translate(),
});
const displayNames = new Intl.DisplayNames(["en"], { type: "language" });

let settings; // /frontend/settings: charLimit, frontendTimeout (the pause before translating), keyRequired
let languages = new Map(); // code -> {name, targets}
let cards = new Map(); // model id -> {version, card}
let chosenTarget = null; // the user's own choice, which a detected language may override for a text
let detectedLanguage = null;
let pending = null; // the debounce timer
let inFlight = null; // the AbortController of the request whose answer is awaited

function languageName(code) {
  try {
    return languages.get(code)?.name ?? displayNames.of(code) ?? code;
  } catch {
    return code; // not a language tag Intl knows
  }
}

function option(code, name) {
  const element = document.createElement("option");
  element.value = code;
  element.textContent = name;
  return element;
}

function byName(codes) {
  return [...codes].sort((a, b) => languageName(a).localeCompare(languageName(b)));
}

// The targets of the chosen source (of any source when it is to be detected), keeping the choice.
function fillTargets(preferred) {
  const source = ui.source.value;
  const targets =
    source === AUTO ? new Set([...languages.values()].flatMap((l) => l.targets)) : languages.get(source).targets;
  ui.target.replaceChildren(...byName(targets).map((code) => option(code, languageName(code))));
  if ([...targets].includes(preferred)) ui.target.value = preferred;
}

function updateSwap() {
  const from = ui.source.value === AUTO ? detectedLanguage : ui.source.value;
  ui.swap.disabled = !from || !languages.get(ui.target.value)?.targets.includes(from);
}

function showMessage(text) {
  ui.message.textContent = text;
}

// A guess (a text too short or unusual to identify, translated from the likeliest language served)
// says so, with one click to name the source instead.
function showDetected(code, confidence, guessed = false) {
  detectedLanguage = code;
  const share = confidence === undefined ? "" : ` (${Math.round(confidence * 100)}%)`;
  const text = code ? `${guessed ? "Guessed" : "Detected"}: ${languageName(code)}${share}` : "";
  ui.detected.replaceChildren(text, ...(code && guessed ? sourceFixes(code) : []));
  updateSwap();
}

// Buttons naming other source languages: the target's own first (a short text is often in it
// already), then the others by name.
function sourceFixes(guessed) {
  const sources = [...ui.source.options].map((o) => o.value).filter((code) => code !== AUTO && code !== guessed);
  const ordered = [...sources.filter((c) => c === ui.target.value), ...sources.filter((c) => c !== ui.target.value)];
  const buttons = ordered.slice(0, SOURCE_FIXES).map((code) => {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "link";
    button.textContent = languageName(code);
    button.addEventListener("click", () => {
      ui.source.value = code;
      ui.source.dispatchEvent(new Event("change"));
    });
    return button;
  });
  return buttons.length ? [" · From ", ...buttons.flatMap((button, i) => (i ? [", ", button] : [button]))] : [];
}

function updateCount() {
  const count = [...ui.text.value].length; // code points, as the service counts them
  const over = count > settings.charLimit;
  ui.count.textContent = `${count.toLocaleString("en")} / ${settings.charLimit.toLocaleString("en")}`;
  ui.count.classList.toggle("over", over);
  ui.text.setAttribute("aria-invalid", String(over));
  return count;
}

function scheduleTranslation() {
  clearTimeout(pending);
  updateCount();
  pending = setTimeout(translate, settings.frontendTimeout);
}

async function translate() {
  clearTimeout(pending);
  inFlight?.abort();
  inFlight = null;
  const text = ui.text.value;
  const count = updateCount();
  if (!text.trim()) {
    showMessage("");
    showResult(null);
    return;
  }
  if (count > settings.charLimit) {
    showMessage(
      `The text is ${count.toLocaleString("en")} characters long; this service translates at most ` +
        `${settings.charLimit.toLocaleString("en")} at a time.`,
    );
    showResult(null);
    return;
  }
  const request = {
    text,
    target_lang: ui.target.value,
    num_hypotheses: HYPOTHESES,
    return_alignments: count <= ALIGNMENT_MAX_CHARS,
  };
  if (ui.source.value !== AUTO) request.source_lang = ui.source.value;
  const glossary = glossaries.selected();
  if (glossary) request.glossary = glossary;
  const controller = new AbortController();
  inFlight = controller;
  ui.output.setAttribute("aria-busy", "true");
  try {
    const translation = await requestTranslation(request, controller.signal);
    if (inFlight === controller && retarget(translation)) return translate();
    showMessage("");
    showResult(translation, request);
  } catch (error) {
    if (error.name === "AbortError") return; // superseded by a newer request
    // A glossary deleted elsewhere, or one the service will not use for this text.
    const refused =
      request.glossary &&
      error instanceof ApiError &&
      (error.status === 404 || (error.status === 400 && /glossar/i.test(error.message)));
    showMessage(
      refused
        ? `The glossary cannot be used: ${error.message}. Choose another, or None.`
        : describe(error, { apiKey: ui.key.value, languageName }),
    );
    showResult(null);
    if (refused) glossaries.refresh().then((changed) => changed && translate());
    if (error instanceof ApiError && error.details.detected_language) showDetected(error.details.detected_language);
  } finally {
    if (inFlight === controller) {
      inFlight = null;
      ui.output.removeAttribute("aria-busy");
    }
  }
}

// The service refuses alignments for a pair it serves through a pivot language (422), and when
// the source language is detected only the service knows the route: a 422 that goes away when
// no alignment is asked for was that refusal.
async function requestTranslation(request, signal) {
  const options = { apiKey: ui.key.value, signal };
  try {
    const body = await postJson("v1/translate", request, options);
    return { ...body.translations[0], alignmentRefused: false };
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 422 && request.return_alignments)) throw error;
    const body = await postJson("v1/translate", { ...request, return_alignments: false }, options);
    return { ...body.translations[0], alignmentRefused: true };
  }
}

// With the source detected, the target follows the text as on DeepL's page: a text already in the
// target language goes to another target (the user's own choice when it differs from the text's
// language), and back to the user's choice once a text is in another language. True when the
// target changed and the text must be translated again.
function retarget(translation) {
  const detected = translation.detected_language?.language;
  // A guess is no reason to move the target: "Hallo" guessed English went into German ("Wole.").
  if (ui.source.value !== AUTO || translation.detected_language?.guessed || !languages.has(detected)) return false;
  const targets = languages.get(detected).targets.filter((code) => code !== detected);
  const wanted = targets.includes(chosenTarget) ? chosenTarget : byName(targets)[0];
  if (!wanted || wanted === ui.target.value) return false;
  ui.target.value = wanted;
  updateSwap();
  glossaries.pairChanged();
  return true;
}

// Which model translated, and what it is good for, from its model card.
function showModel(translation) {
  const id = translation?.model?.split(":")[0];
  const model = cards.get(id);
  ui.modelNote.hidden = !model?.card;
  if (!model?.card) return;
  const { card, version } = model;
  ui.modelNote.replaceChildren(
    `Translated by ${id} ${version}, trained on ${card.trained_on}: reliable for ${card.reliable_for}. ` +
      "For general text, serve an OPUS-MT or NLLB model (README, “Serve an OPUS-MT or NLLB model”).",
  );
  if (card.url) {
    const link = document.createElement("a");
    link.href = card.url;
    link.textContent = "Model card";
    ui.modelNote.append(" ", link);
  }
}

function showResult(translation, request) {
  showModel(translation);
  terms.show(translation, request?.text);
  ui.copy.disabled = !translation?.text;
  const detected = translation?.detected_language;
  showDetected(detected?.language ?? null, detected?.confidence, detected?.guessed);
  showAlternatives(translation ? [translation, ...(translation.alternatives ?? [])] : []);
  showAlignment(translation, request);
}

// The translation and its alternatives ({text, glossary_terms?}).
function showAlternatives(hypotheses) {
  ui.alternatives.hidden = hypotheses.length < 2;
  ui.alternativeList.replaceChildren(
    ...hypotheses.map(({ text, glossary_terms }, i) => {
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = text;
      button.setAttribute("aria-pressed", String(i === 0));
      button.addEventListener("click", () => {
        for (const other of ui.alternativeList.querySelectorAll("button")) {
          other.setAttribute("aria-pressed", String(other === button));
        }
        terms.showAlternative(text, glossary_terms, i === 0);
        if (!ui.alignmentViews.hidden) {
          ui.alignmentNote.textContent = i === 0 ? "" : "The alignment shown is that of the first translation.";
        }
      });
      const item = document.createElement("li");
      item.append(button);
      return item;
    }),
  );
}

function showAlignment(translation, request) {
  const alignment = translation?.alignment;
  ui.alignment.hidden = !translation;
  ui.alignmentViews.hidden = !alignment;
  if (alignment) {
    ui.alignmentNote.textContent = "";
    words.show(alignment);
    heatmap.show(alignment);
  } else if (translation) {
    ui.alignmentNote.textContent = translation.alignmentRefused
      ? "No alignment: this language pair is translated through an intermediate language."
      : !request.return_alignments
        ? `The alignment is shown for texts of up to ${ALIGNMENT_MAX_CHARS.toLocaleString("en")} characters.`
        : "No alignment: nothing in this text needed translating.";
  }
}

function swap() {
  const from = ui.source.value === AUTO ? detectedLanguage : ui.source.value;
  const translation = ui.output.textContent;
  ui.source.value = ui.target.value;
  fillTargets(from);
  if (translation) ui.text.value = translation;
  updateSwap();
  glossaries.pairChanged();
  translate();
}

async function copy() {
  const text = ui.output.textContent;
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    // No Clipboard API outside a secure context (plain http to a LAN address): copy the selection.
    getSelection().selectAllChildren(ui.output);
    document.execCommand("copy");
  }
  ui.copyStatus.textContent = "Copied";
  setTimeout(() => (ui.copyStatus.textContent = ""), 2000);
}

async function start() {
  let list;
  try {
    [settings, list] = await Promise.all([getJson("frontend/settings"), getJson("languages")]);
  } catch (error) {
    showMessage(describe(error, { apiKey: "", languageName }));
    return;
  }
  languages = new Map(list.map((l) => [l.code, { name: l.name, targets: l.targets }]));
  getJson("v1/models").then(
    (body) => (cards = new Map(body.models.map((m) => [m.id, { version: m.version, card: m.card }]))),
    () => {}, // the note is a courtesy: the page works without it
  );
  const sources = byName(list.filter((l) => l.targets.length).map((l) => l.code));
  ui.source.replaceChildren(option(AUTO, "Detect language"), ...sources.map((c) => option(c, languageName(c))));
  ui.source.value = languages.has(settings.language.source.code) ? settings.language.source.code : AUTO;
  const stored = localStorage.getItem(TARGET_STORAGE);
  chosenTarget = [...languages.values()].some((l) => l.targets.includes(stored)) ? stored : settings.language.target.code;
  fillTargets(chosenTarget);
  updateSwap();
  updateCount();
  ui.keyRow.hidden = !settings.keyRequired;
  ui.key.value = (settings.keyRequired && localStorage.getItem(KEY_STORAGE)) || "";

  ui.text.addEventListener("input", scheduleTranslation);
  ui.text.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      translate();
    }
  });
  ui.form.addEventListener("submit", (event) => {
    event.preventDefault();
    translate();
  });
  ui.source.addEventListener("change", () => {
    fillTargets(ui.target.value);
    showDetected(null);
    glossaries.pairChanged();
    translate();
  });
  ui.target.addEventListener("change", () => {
    chosenTarget = ui.target.value;
    localStorage.setItem(TARGET_STORAGE, chosenTarget);
    updateSwap();
    glossaries.pairChanged();
    translate();
  });
  ui.swap.addEventListener("click", swap);
  ui.copy.addEventListener("click", copy);
  setUpFileTranslation(settings.filesTranslation ? settings.supportedFilesFormat : [], {
    pair: () => ({ source: ui.source.value, target: ui.target.value }),
    glossary: () => glossaries.selected(),
    apiKey: () => ui.key.value,
    languageName,
  });
  ui.key.addEventListener("input", () => {
    localStorage.setItem(KEY_STORAGE, ui.key.value);
    scheduleTranslation();
  });
  // Each key has glossaries of its own: listed again once a key is entered.
  ui.key.addEventListener("change", () => glossaries.refresh().then((changed) => changed && translate()));
  await glossaries.refresh();
  ui.form.dataset.ready = "true"; // for tests and scripts: the controls are filled in
  if (ui.text.value) translate(); // a text the browser kept across a reload
}

start();
