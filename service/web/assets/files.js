// Translating a file (/frontend/settings' supportedFilesFormat) with POST /v1/translate_file, which
// answers with the translated file: offered for download under the name of the upload.

import { describe, postForm } from "./api.js";

const $ = (id) => document.getElementById(id);

// `pair()`: the languages chosen on the page; `glossary()`: the id of the glossary chosen there, or
// null; `apiKey()`: the key typed in, if any.
export function setUpFileTranslation(formats, { pair, glossary, apiKey, languageName }) {
  const input = $("file-input");
  const status = $("file-status");
  const message = $("file-message");
  let download = null; // the object URL of the last translated file, released for the next
  $("file-translation").hidden = !formats.length;
  input.accept = formats.join(",");
  $("file-formats").textContent =
    `${formats.join(", ")}: translated between the languages chosen above, with the glossary chosen there if any.`;

  $("file-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const file = input.files[0];
    message.textContent = file ? "" : "Choose a file to translate.";
    if (!file) return;
    const { source, target } = pair();
    const form = new FormData();
    form.append("file", file);
    form.append("source_lang", source);
    form.append("target_lang", target);
    const glossaryId = glossary();
    if (glossaryId) form.append("glossary", glossaryId);
    status.textContent = `Translating ${file.name}…`;
    try {
      const translated = await postForm("v1/translate_file", form, { apiKey: apiKey() });
      if (download) URL.revokeObjectURL(download);
      download = URL.createObjectURL(translated);
      const link = document.createElement("a");
      link.href = download;
      link.download = file.name;
      link.textContent = `Download ${file.name} in ${languageName(target)}`;
      status.replaceChildren(link);
    } catch (error) {
      status.textContent = "";
      message.textContent = describe(error, { apiKey: apiKey(), languageName });
    }
  });
}
