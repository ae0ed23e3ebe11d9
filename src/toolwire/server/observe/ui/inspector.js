// toolwire inspector: plain JavaScript, no build step.
//
// Lists the gateway's recent exchanges (GET /ui/api/exchanges) and shows one of them
// (GET /ui/api/exchanges/{id}) as its four sides: the client's request, the request sent
// upstream, the upstream's stream and what was sent back. Tool calls are highlighted and
// conversions marked. Everything an exchange holds is untrusted (model output, tool
// output): it is only ever written as text (textContent), never as markup.
"use strict";

(() => {
  const CALL_TYPES = new Set(["function_call", "custom_tool_call", "tool_search_call", "local_shell_call"]);
  const TOOL_ITEM_TYPES = new Set([
    ...CALL_TYPES,
    "function_call_output", "custom_tool_call_output", "tool_search_output", "local_shell_call_output",
  ]);
  const TOOL_EVENT = /function_call|custom_tool_call|tool_search_call/;
  const MAX_BLOCKS = 1500;
  const POLL_MS = 2000;

  const state = {
    items: [],
    selected: decodeURIComponent(location.hash.slice(1)) || null,
    shownOutcome: null,
    shownId: null,
    key: sessionStorage.getItem("toolwire.key") || "",
  };

  const $ = (id) => document.getElementById(id);

  // el("td", {class: "num", title: "x"}, child, "text", ...): children are nodes or text.
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (name === "class") node.className = value;
      else if (name.startsWith("data-")) node.setAttribute(name, value);
      else node[name] = value;
    }
    for (const child of children.flat()) {
      if (child === undefined || child === null || child === false) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  // ------------------------------------------------------------------ data

  async function getJSON(path) {
    const headers = state.key ? { Authorization: "Bearer " + state.key } : {};
    const response = await fetch(path, { headers, cache: "no-store" });
    if (response.status === 401) {
      $("key-form").hidden = false;
      throw new Error("a client key is needed");
    }
    const body = await response.json();
    if (!response.ok) throw new Error((body.error && body.error.message) || response.statusText);
    return body;
  }

  async function refresh() {
    let body;
    try {
      body = await getJSON("/ui/api/exchanges");
    } catch (error) {
      $("status").textContent = error.message;
      return;
    }
    $("key-form").hidden = true;
    state.items = body.data;
    const kept = body.kept;
    $("status").textContent =
      `${kept.exchanges} kept (${formatBytes(kept.bytes)} of ${formatBytes(kept.max_bytes)}) · ` +
      new Date().toLocaleTimeString();
    renderList();
    if (state.selected) {
      const current = state.items.find((item) => item.request_id === state.selected);
      if (current && current.outcome !== state.shownOutcome) await select(state.selected);
    }
  }

  async function select(id) {
    state.selected = id;
    history.replaceState(null, "", "#" + encodeURIComponent(id));
    for (const row of document.querySelectorAll("#exchanges tbody tr")) {
      row.classList.toggle("selected", row.dataset.id === id);
    }
    let record;
    try {
      record = await getJSON("/ui/api/exchanges/" + encodeURIComponent(id));
    } catch (error) {
      $("status").textContent = error.message;
      return;
    }
    if (state.selected !== id) return; // another row was clicked meanwhile
    state.shownOutcome = record.outcome;
    renderDetail(record);
  }

  // ------------------------------------------------------------------ the list

  function matches(item) {
    if ($("only-tools").checked && !item.tool_calls.length) return false;
    if ($("only-problems").checked && ["completed", "pending"].includes(item.outcome)) return false;
    const needle = $("filter").value.trim().toLowerCase();
    if (!needle) return true;
    const haystack = [
      item.request_id, item.model, item.upstream, item.upstream_model, item.outcome, String(item.status),
      ...item.tool_calls.map(toolLabel), ...item.conversions, item.error || "",
    ].join("\n").toLowerCase();
    return haystack.includes(needle);
  }

  function renderList() {
    const body = $("exchanges").tBodies[0];
    const rows = state.items.filter(matches).map((item) => {
      const tokens = item.input_tokens == null ? "" : `${item.input_tokens} / ${item.output_tokens ?? ""}`;
      return el("tr", { "data-id": item.request_id, class: item.request_id === state.selected ? "selected" : "" },
        el("td", { title: item.time }, new Date(item.time).toLocaleTimeString()),
        el("td", { class: "id", title: item.request_id }, shortId(item.request_id)),
        el("td", {}, item.model ?? ""),
        el("td", { title: item.upstream_model ? "upstream model: " + item.upstream_model : "" }, item.upstream ?? ""),
        el("td", {}, item.status),
        el("td", {}, outcomeBadge(item.outcome)),
        el("td", { class: "num" }, formatMs(item.latency_ms)),
        el("td", { class: "num" }, formatMs(item.ttft_ms)),
        el("td", { class: "num" }, tokens),
        el("td", {}, item.tool_calls.map((call) => toolChip(call, []))),
        el("td", { title: item.conversions.join("\n") },
          item.conversions.length ? el("span", { class: "mark" }, String(item.conversions.length)) : ""),
      );
    });
    body.replaceChildren(...rows);
    $("empty").hidden = state.items.length > 0;
  }

  // ------------------------------------------------------------------ one exchange

  function renderDetail(record) {
    $("detail").hidden = false;
    $("detail-title").textContent = record.request_id;
    const facts = [
      ["time", record.time], ["model", record.model],
      ["upstream", record.upstream + (record.upstream_model ? ` (${record.upstream_model})` : "")],
      ["stream", String(record.stream)], ["status", record.status], ["outcome", outcomeBadge(record.outcome)],
      ["latency", formatMs(record.latency_ms)], ["time to first token", formatMs(record.ttft_ms)],
      ["tokens in / out", record.input_tokens == null ? "" : `${record.input_tokens} / ${record.output_tokens}`],
    ];
    $("detail-facts").replaceChildren(
      ...facts.map(([name, value]) => el("div", {}, el("dt", {}, name), el("dd", {}, value ?? ""))),
    );
    const conversions = record.conversions || [];
    $("detail-tools").replaceChildren(
      el("span", { class: "label" }, "tool calls"),
      ...orNone(record.tool_calls.map((call) => toolChip(call, conversionsFor(conversions, call.name, call.namespace)))),
    );
    $("detail-conversions").replaceChildren(
      el("span", { class: "label" }, "conversions"),
      ...orNone(conversions.map((label) => el("span", { class: "chip conversion" }, label))),
    );
    const notes = [];
    if (record.error) notes.push(el("li", { class: "error" }, `${record.error_kind || "error"}: ${record.error}`));
    for (const warning of record.warnings || []) notes.push(el("li", { class: "warning" }, warning));
    if (record.traffic_omitted) notes.push(el("li", { class: "warning" }, "traffic not shown: " + record.traffic_omitted));
    $("detail-notes").replaceChildren(...notes);

    const calledHere = new Set(record.tool_calls.map((call) => call.name));
    const calledUpstream = upstreamCalledNames(record.upstream_chunks || []);
    const sides = {
      client_request: clientRequestBlocks(record.client_request, calledHere),
      upstream_request: upstreamRequestBlocks(record.upstream_request, calledUpstream),
      upstream_chunks: upstreamBlocks(record.upstream_chunks || []),
      sent: sentBlocks(record, conversions),
    };
    const responsesUpstream = isResponsesRequest(record.upstream_request);
    document.querySelector('.side[data-side="upstream_request"] small').textContent =
      responsesUpstream ? "Responses request" : "Chat Completions request";
    document.querySelector('.side[data-side="upstream_chunks"] small').textContent =
      !record.stream ? (responsesUpstream ? "Responses response" : "Chat Completions response")
        : responsesUpstream ? "Responses events" : "Chat Completions stream (after #0, fields equal to #0 left out)";
    document.querySelector('.side[data-side="sent"] small').textContent =
      (record.events || []).length ? "Responses events" : "Responses response";
    const fresh = state.shownId !== record.request_id;
    state.shownId = record.request_id;
    for (const side of document.querySelectorAll(".side")) {
      const container = side.querySelector(".blocks");
      container.replaceChildren(...renderBlocks(sides[side.dataset.side] || []));
      const firstTool = container.querySelector(".block.tool");
      if (fresh) container.scrollTop = firstTool ? Math.max(0, firstTool.offsetTop - 40) : 0;
    }
  }

  // A block: {name, note, value, tool, compact, collapsed, marks}.
  function renderBlocks(blocks) {
    if (!blocks.length) return [el("div", { class: "none" }, "nothing")];
    const shown = blocks.slice(0, MAX_BLOCKS).map((block) => {
      const text = block.compact ? JSON.stringify(block.value) : pretty(block.value);
      const head = el("div", { class: "head" },
        el("span", { class: "name" }, block.name),
        block.note ? el("span", {}, block.note) : null,
        (block.marks || []).map((mark) => el("span", { class: "mark", title: "conversion applied" }, mark)),
      );
      const body = block.collapsed
        ? el("details", {}, el("summary", {}, "show"), el("pre", {}, text))
        : el("pre", {}, text);
      return el("div", { class: "block" + (block.tool ? " tool" : "") + (block.compact ? " compact" : "") }, head, body);
    });
    if (blocks.length > MAX_BLOCKS) {
      shown.push(el("div", { class: "none" }, `… and ${blocks.length - MAX_BLOCKS} more`));
    }
    return shown;
  }

  // The declarations of the tools that were called, each in a block of its own.
  function declarationBlocks(tools, declared, called) {
    const blocks = [];
    tools.forEach((tool, index) => {
      const names = declared(tool).filter((name) => called.has(name));
      if (names.length) blocks.push({ name: `tools[${index}]`, note: `declares ${names.join(", ")} (called)`, value: tool, tool: true });
    });
    return blocks;
  }

  function clientDeclared(tool) {
    if (tool.type === "namespace" && Array.isArray(tool.tools)) return tool.tools.map((inner) => inner.name);
    return [tool.name || (tool.type === "tool_search" ? "tool_search" : tool.type)];
  }

  function upstreamDeclared(tool) {
    return [(tool.function && tool.function.name) || tool.type];
  }

  function hasCall(response) {
    return (response.output || []).some((item) => CALL_TYPES.has(item.type));
  }

  function upstreamCalledNames(chunks) {
    const names = new Set();
    for (const chunk of chunks) {
      const item = chunk && (chunk.item || null);
      if (item && CALL_TYPES.has(item.type) && item.name) names.add(item.name);
      for (const output of (chunk && chunk.object === "response" && chunk.output) || []) {
        if (CALL_TYPES.has(output.type) && output.name) names.add(output.name);
      }
      for (const choice of (chunk && chunk.choices) || []) {
        const calls = (choice.delta && choice.delta.tool_calls) || (choice.message && choice.message.tool_calls) || [];
        for (const call of calls) if (call.function && call.function.name) names.add(call.function.name);
      }
    }
    return names;
  }

  function clientRequestBlocks(request, called) {
    if (request === null || request === undefined) return [];
    if (typeof request !== "object" || Array.isArray(request)) return [{ name: "body (not a request)", value: request }];
    const { input, tools, ...rest } = request;
    const blocks = [{ name: "request", value: rest }];
    if (Array.isArray(tools) && tools.length) {
      const names = tools.flatMap(clientDeclared);
      blocks.push({ name: `tools (${names.length})`, note: names.join(", "), value: tools, collapsed: true });
      blocks.push(...declarationBlocks(tools, clientDeclared, called));
    }
    if (typeof input === "string") blocks.push({ name: "input", value: input });
    else if (Array.isArray(input)) {
      input.forEach((item, index) => {
        const type = item && item.type ? item.type : "message";
        const label = [type, item && item.role, item && item.name].filter(Boolean).join(" · ");
        blocks.push({ name: `input[${index}]`, note: label, value: item, tool: TOOL_ITEM_TYPES.has(type) });
      });
    }
    return blocks;
  }

  // A Responses upstream gets a Responses request and answers with Responses events.
  function isResponsesRequest(request) {
    return Boolean(request && typeof request === "object" && !("messages" in request) && "input" in request);
  }

  function upstreamRequestBlocks(request, called) {
    if (!request || typeof request !== "object") return [];
    if (isResponsesRequest(request)) return clientRequestBlocks(request, called);
    const { messages, tools, ...rest } = request;
    const blocks = [{ name: "request", value: rest }];
    if (Array.isArray(tools) && tools.length) {
      const names = tools.flatMap(upstreamDeclared);
      blocks.push({ name: `tools (${tools.length})`, note: names.join(", "), value: tools, collapsed: true });
      blocks.push(...declarationBlocks(tools, upstreamDeclared, called));
    }
    (messages || []).forEach((message, index) => {
      const calls = (message && message.tool_calls) || [];
      const called = calls.map((call) => call.function && call.function.name).filter(Boolean);
      const note = [message.role, ...called].join(" · ");
      blocks.push({ name: `messages[${index}]`, note, value: message, tool: message.role === "tool" || calls.length > 0 });
    });
    return blocks;
  }

  // Chunks repeat their envelope (id, model, created...): after #0 only what differs is shown.
  function withoutEnvelope(chunk, first) {
    if (!chunk || !first || chunk === first || typeof chunk !== "object") return chunk;
    const trimmed = {};
    for (const [key, value] of Object.entries(chunk)) {
      if (key === "choices" || JSON.stringify(value) !== JSON.stringify(first[key])) trimmed[key] = value;
    }
    return trimmed;
  }

  function upstreamBlocks(chunks) {
    return chunks.map((chunk, index) => {
      if (chunk && chunk.object === "response") return { name: "response", value: chunk, tool: hasCall(chunk) };
      if (chunk && typeof chunk.type === "string") return eventBlock(chunk, [], true);
      const choices = (chunk && chunk.choices) || [];
      const message = choices[0] && choices[0].message;
      if (message) { // a whole completion: the request did not stream
        return { name: "completion", value: chunk, tool: Boolean(message.tool_calls && message.tool_calls.length) };
      }
      const delta = (choices[0] && choices[0].delta) || {};
      const notes = [];
      if (delta.tool_calls) notes.push("tool_calls " + delta.tool_calls.map((c) => (c.function && c.function.name) || `#${c.index}`).join(", "));
      if (delta.content) notes.push("content");
      if (delta.reasoning_content || delta.reasoning) notes.push("reasoning");
      if (choices[0] && choices[0].finish_reason) notes.push("finish: " + choices[0].finish_reason);
      if (chunk && chunk.usage) notes.push("usage");
      if (chunk && chunk.error) notes.push("error");
      return {
        name: `#${index}`, note: notes.join(" · "), value: withoutEnvelope(chunk, chunks[0]), compact: true,
        tool: Boolean(delta.tool_calls),
      };
    });
  }

  function sentBlocks(record, conversions) {
    const events = record.events || [];
    if (events.length) return events.map((event) => eventBlock(event, conversions, true));
    if (record.response) return responseBlocks(record.response, conversions);
    if (record.error) return [{ name: `error (HTTP ${record.status})`, value: { kind: record.error_kind, message: record.error } }];
    return [];
  }

  // One Responses stream event; ``compact`` for the long streams sent to clients.
  function eventBlock(event, conversions, compact) {
    const item = event.item;
    const isCall = Boolean(item && CALL_TYPES.has(item.type));
    const marks = isCall && event.type === "response.output_item.done"
      ? conversionsFor(conversions, item.name, item.namespace) : [];
    return {
      name: event.type, note: isCall ? toolLabel(item) : "", value: event, compact,
      tool: isCall || TOOL_EVENT.test(event.type || ""), marks,
    };
  }

  function responseBlocks(response, conversions) {
    const { output, ...rest } = response;
    const blocks = [{ name: "response", value: rest }];
    (output || []).forEach((item, index) => {
      const isCall = CALL_TYPES.has(item.type);
      blocks.push({
        name: `output[${index}]`, note: [item.type, isCall ? toolLabel(item) : item.role].filter(Boolean).join(" · "),
        value: item, tool: isCall, marks: isCall ? conversionsFor(conversions, item.name, item.namespace) : [],
      });
    });
    return blocks;
  }

  // ------------------------------------------------------------------ helpers

  function orNone(nodes) {
    return nodes.length ? nodes : [el("span", { class: "muted" }, "none")];
  }

  function conversionsFor(conversions, name, namespace) {
    return conversions.filter((label) => (name && label.includes(name)) || (namespace && label.includes(namespace)));
  }

  function toolLabel(call) {
    const name = call.name || (call.type === "tool_search_call" ? "tool_search" : "?");
    return call.namespace ? `${call.namespace}.${name}` : name;
  }

  function toolChip(call, marks) {
    return el("span", { class: "chip tool-call", title: call.type },
      el("span", { class: "kind" }, call.type.replace(/_call$/, "") + " "), toolLabel(call),
      marks.length ? el("span", { class: "mark", title: marks.join("\n") }, marks.length) : null,
    );
  }

  function outcomeBadge(outcome) {
    return el("span", { class: "outcome " + outcome }, outcome);
  }

  function pretty(value) {
    return typeof value === "string" ? value : JSON.stringify(value, null, 2);
  }

  function shortId(id) {
    return id.length > 16 ? id.slice(0, 5) + "…" + id.slice(-8) : id;
  }

  function formatMs(ms) {
    if (ms === null || ms === undefined) return "";
    return ms >= 1000 ? (ms / 1000).toFixed(2) + " s" : Math.round(ms) + " ms";
  }

  function formatBytes(bytes) {
    if (bytes >= 1 << 20) return (bytes / (1 << 20)).toFixed(1) + " MiB";
    if (bytes >= 1 << 10) return (bytes / (1 << 10)).toFixed(1) + " KiB";
    return bytes + " B";
  }

  // ------------------------------------------------------------------ wiring

  document.addEventListener("DOMContentLoaded", () => {
    $("exchanges").tBodies[0].addEventListener("click", (event) => {
      const row = event.target.closest("tr[data-id]");
      if (row) select(row.dataset.id);
    });
    $("filter").addEventListener("input", renderList);
    for (const id of ["only-tools", "only-problems"]) $(id).addEventListener("change", renderList);
    $("key-form").addEventListener("submit", (event) => {
      event.preventDefault();
      state.key = $("key").value.trim();
      sessionStorage.setItem("toolwire.key", state.key);
      refresh();
    });
    setInterval(() => { if ($("live").checked) refresh(); }, POLL_MS);
    refresh(); // also opens the exchange named in the URL's #fragment
  });
})();
