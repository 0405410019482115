// A small OpenAI-compatible chat server over node-llama-cpp (llama.cpp), for running simrun against a real model
// offline. The inference is llama.cpp's; this file only maps the wire format onto its chat API.
//
//   node server.mjs --model PATH.gguf [--port 0] [--threads 1] [--context 4096] [--name NAME]
//
// Prints `listening on http://127.0.0.1:PORT/v1` once the model is loaded. Requests are served one at a time on one
// context sequence, so a conversation that continues the previous prompt reuses its evaluated tokens.
import http from "node:http";
import { parseArgs } from "node:util";
import { getLlama, LlamaChat } from "node-llama-cpp";

const { values: args } = parseArgs({
  options: {
    model: { type: "string" },
    port: { type: "string", default: "0" },
    host: { type: "string", default: "127.0.0.1" },
    threads: { type: "string", default: "1" },
    context: { type: "string", default: "4096" },
    name: { type: "string", default: "smollm2-135m-instruct" },
  },
});
if (!args.model) {
  console.error("usage: node server.mjs --model PATH.gguf [--port 0] [--threads 1]");
  process.exit(2);
}

const llama = await getLlama({ gpu: false, build: "never", logLevel: "error" });
const model = await llama.loadModel({ modelPath: args.model });
const context = await model.createContext({
  contextSize: Number(args.context),
  threads: Number(args.threads),
  sequences: 1,
});
const chat = new LlamaChat({ contextSequence: context.getSequence() });
const grammars = new Map();

const KEEP = new Set([
  "type", "properties", "required", "additionalProperties", "items", "enum", "const", "oneOf",
  "$defs", "$ref", "description", "minItems", "maxItems", "minLength", "maxLength",
]);

// llama.cpp's JSON-schema grammar reads a subset of JSON Schema: `anyOf` becomes `oneOf`, annotations are dropped.
function grammarSchema(node) {
  if (Array.isArray(node)) return node.map(grammarSchema);
  if (node === null || typeof node !== "object") return node;
  const out = {};
  for (const [key, value] of Object.entries(node)) {
    const name = key === "anyOf" ? "oneOf" : key;
    if (!KEEP.has(name)) continue;
    if (name === "properties" || name === "$defs") {
      out[name] = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, grammarSchema(v)]));
    } else {
      out[name] = grammarSchema(value);
    }
  }
  return out;
}

async function grammarFor(format) {
  if (!format || format.type === "text") return undefined;
  const key = JSON.stringify(format);
  if (!grammars.has(key)) {
    const schema = format.type === "json_schema" ? format.json_schema?.schema : undefined;
    grammars.set(key, schema ? await llama.createGrammarForJsonSchema(grammarSchema(schema)) : await llama.getGrammarFor("json"));
  }
  return grammars.get(key);
}

function history(messages) {
  const items = messages.map((m) => {
    const text = typeof m.content === "string" ? m.content : (m.content ?? []).map((p) => p.text ?? "").join("");
    if (m.role === "assistant") return { type: "model", response: [text] };
    if (m.role === "system" || m.role === "developer") return { type: "system", text };
    return { type: "user", text };
  });
  items.push({ type: "model", response: [] });
  return items;
}

function tokens(text) {
  return model.tokenize(text).length;
}

async function complete(body) {
  if (!Array.isArray(body.messages) || body.messages.length === 0) throw new BadRequest("`messages` must be a non-empty list");
  const grammar = await grammarFor(body.response_format);
  const result = await chat.generateResponse(history(body.messages), {
    maxTokens: Number(body.max_tokens ?? body.max_completion_tokens ?? 512),
    temperature: Number(body.temperature ?? 0.7),
    topP: body.top_p === undefined ? undefined : Number(body.top_p),
    seed: body.seed === undefined ? 0 : Number(body.seed) >>> 0,
    grammar,
  });
  const text = result.response;
  const prompt = body.messages.reduce((n, m) => n + tokens(String(m.content ?? "")) + 4, 0);
  return {
    id: `chatcmpl-${Date.now().toString(36)}`,
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model: args.name,
    system_fingerprint: null,
    choices: [
      {
        index: 0,
        message: { role: "assistant", content: text, refusal: null },
        logprobs: null,
        finish_reason: result.metadata.stopReason === "maxTokens" ? "length" : "stop",
      },
    ],
    usage: { prompt_tokens: prompt, completion_tokens: tokens(text), total_tokens: prompt + tokens(text) },
  };
}

class BadRequest extends Error {}

let queue = Promise.resolve();
function serially(work) {
  const run = queue.then(work, work);
  queue = run.catch(() => undefined);
  return run;
}

function send(res, status, payload) {
  const data = JSON.stringify(payload);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(data) });
  res.end(data);
}

function error(res, status, message) {
  const type = status >= 500 ? "server_error" : "invalid_request_error";
  send(res, status, { error: { message, type, param: null, code: null } });
}

const server = http.createServer((req, res) => {
  const path = (req.url ?? "").split("?")[0];
  if (req.method === "GET" && path === "/v1/models") {
    send(res, 200, { object: "list", data: [{ id: args.name, object: "model", created: 0, owned_by: "llama.cpp" }] });
    return;
  }
  if (req.method !== "POST" || path !== "/v1/chat/completions") {
    error(res, 404, `no route ${req.method} ${path}`);
    return;
  }
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", () => {
    let body;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    } catch {
      error(res, 400, "the body is not JSON");
      return;
    }
    if (body.stream) {
      error(res, 400, "this server does not stream");
      return;
    }
    serially(() => complete(body)).then(
      (reply) => send(res, 200, reply),
      (exc) => error(res, exc instanceof BadRequest ? 400 : 500, String(exc?.message ?? exc).split("\n")[0]),
    );
  });
});

server.listen(Number(args.port), args.host, () => {
  const { port } = server.address();
  console.log(`listening on http://${args.host}:${port}/v1`);
});
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, () => {
    server.close();
    process.exit(0);
  });
}
