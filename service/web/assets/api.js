// The service's HTTP API as the page uses it. URLs are relative: the document's <base> holds the
// path prefix the page was served under.

export class ApiError extends Error {
  constructor(status, error, retryAfter) {
    super(error.message || `HTTP ${status}`);
    this.status = status;
    this.details = error; // the service's {"type", "message", ...}
    this.retryAfter = retryAfter;
  }
}

export async function getJson(path, { apiKey } = {}) {
  return (await send(path, {}, apiKey)).json();
}

export async function postJson(path, body, { apiKey, signal } = {}) {
  const init = { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body), signal };
  return (await send(path, init, apiKey)).json();
}

// DELETE, answered with no body (204).
export async function deleteResource(path, { apiKey } = {}) {
  await send(path, { method: "DELETE" }, apiKey);
}

// A multipart form (a file upload); the answer is a file.
export async function postForm(path, form, { apiKey } = {}) {
  return (await send(path, { method: "POST", body: form }, apiKey)).blob();
}

async function send(path, init, apiKey) {
  const headers = { Accept: "application/json", ...init.headers };
  if (apiKey) headers.Authorization = `Bearer ${apiKey}`;
  const response = await fetch(path, { ...init, headers });
  if (response.ok) return response;
  const body = await response.json().catch(() => ({}));
  throw new ApiError(response.status, body.error || {}, response.headers.get("Retry-After"));
}

// What to tell the user about a failed request; `languageName` turns a code into a name.
export function describe(error, { apiKey, languageName }) {
  if (!(error instanceof ApiError)) return "The service cannot be reached. Check your connection and try again.";
  switch (error.status) {
    case 400:
      if (error.details.detected_language) {
        return `The text seems to be in ${languageName(error.details.detected_language)}, which this service does not translate from. Choose the source language if it is another one.`;
      }
      return `This language pair is not available: ${error.message}.`;
    case 401:
      return apiKey
        ? "The API key was not accepted. Check it and try again."
        : "This service needs an API key: enter yours in the API key field.";
    case 413:
      return `This is too large for the service: ${error.message}.`;
    case 415:
      return `This file cannot be translated: ${error.message}.`;
    case 429: {
      const wait = error.retryAfter ? ` in ${error.retryAfter} s` : " in a moment";
      return `The service is busy. Please try again${wait}.`;
    }
    case 503:
      return `The service cannot translate this right now: ${error.message}. Please try again later.`;
    case 504:
      return "The translation took too long and was stopped. Try a shorter text, or try again in a moment.";
    default:
      return `The request failed (${error.status}): ${error.message}.`;
  }
}
