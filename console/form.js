// The execution form, generated from a tool's JSON input schema: one labelled control per
// parameter, values checked in the page before anything is sent.

const LONG_TEXT = /^(sql|prompt|query|question|statement|text|csv|comment|data|content|description)$/;
const MODELS = {
  anthropic: ["claude-sonnet-4-5", "claude-haiku-4-5", "claude-opus-4-1"],
  openai: ["gpt-4o-mini", "gpt-4o", "gpt-4.1", "gpt-5"],
  google: ["gemini-2.5-flash", "gemini-2.5-pro"],
};

let nextFieldId = 1;

/** `schema` with `$ref`s resolved against `root` and optional wrappers (`anyOf` with null) removed. */
export function resolve(schema, root, depth = 0) {
  if (!schema || typeof schema !== "object" || depth > 20) return schema || {};
  if (schema.$ref) {
    const path = schema.$ref.replace(/^#\//, "").split("/");
    let target = root;
    for (const part of path) target = target?.[part];
    const { $ref, ...rest } = schema;
    return resolve({ ...(target || {}), ...rest }, root, depth + 1);
  }
  for (const key of ["anyOf", "oneOf"]) {
    const options = schema[key];
    if (!Array.isArray(options)) continue;
    const nonNull = options.filter((option) => !(option && option.type === "null"));
    if (nonNull.length === 1) {
      const { [key]: _, ...rest } = schema;
      return resolve({ ...rest, ...resolve(nonNull[0], root, depth + 1), nullable: true }, root, depth + 1);
    }
    const constants = nonNull.map((option) => resolve(option, root, depth + 1));
    if (constants.length && constants.every((option) => option.const !== undefined || (option.enum && option.enum.length === 1))) {
      const { [key]: _, ...rest } = schema;
      return { ...rest, type: "string", enum: constants.map((option) => option.const ?? option.enum[0]) };
    }
  }
  if (Array.isArray(schema.type)) {
    const types = schema.type.filter((type) => type !== "null");
    return { ...schema, type: types.length === 1 ? types[0] : types, nullable: types.length < schema.type.length };
  }
  return schema;
}

function kindOf(name, schema) {
  if (Array.isArray(schema.enum) && schema.enum.every((value) => typeof value === "string")) return "enum";
  switch (schema.type) {
    case "boolean": return "boolean";
    case "integer": return "integer";
    case "number": return "number";
    case "string": return LONG_TEXT.test(name) || (schema.maxLength ?? 0) > 200 ? "textarea" : "text";
    default: return "json";
  }
}

function element(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children) if (child) node.append(child);
  return node;
}
export { element };

/**
 * Build the form for `tool`. `onRun(arguments)` is called with the checked arguments when the
 * form is submitted (the "Run" button, or Enter in a one-line field, or Ctrl+Enter in a text area).
 */
export function buildForm(tool, onRun) {
  const root = tool.inputSchema || {};
  const required = new Set(root.required || []);
  const properties = Object.entries(root.properties || {});
  const form = element("form", { class: "tool-form", novalidate: true, "aria-label": `Parameters of ${tool.name}` });
  const fields = [];
  const providerSelects = [];
  for (const [name, raw] of properties) {
    const schema = resolve(raw, root);
    const kind = kindOf(name, schema);
    const id = `field-${nextFieldId++}`;
    const descriptionId = `${id}-description`;
    const label = element("label", { for: id }, element("span", { class: "param-name", text: name }));
    const notes = [];
    if (required.has(name)) notes.push("required");
    if (kind === "json") notes.push(schema.type === "array" ? "JSON array" : schema.type === "object" ? "JSON object" : "JSON value");
    if (schema.default !== undefined && schema.default !== null && kind !== "boolean") notes.push(`default ${JSON.stringify(schema.default)}`);
    if (schema.minimum !== undefined && schema.maximum !== undefined) notes.push(`${schema.minimum} to ${schema.maximum}`);
    else if (schema.minimum !== undefined) notes.push(`at least ${schema.minimum}`);
    else if (schema.maximum !== undefined) notes.push(`at most ${schema.maximum}`);
    const description = element("p", { id: descriptionId, class: "param-description" });
    description.textContent = [schema.description || raw.description || "", notes.length ? `(${notes.join(", ")})` : ""].filter(Boolean).join(" ");
    let control;
    const extras = [];
    if (kind === "enum") {
      control = element("select", { id, name, "aria-describedby": descriptionId });
      if (!required.has(name)) control.append(element("option", { value: "", text: schema.default != null ? `default (${schema.default})` : "default" }));
      for (const value of schema.enum) control.append(element("option", { value, text: value }));
      if (required.has(name) && schema.default !== undefined) control.value = schema.default;
      if (name === "llm_provider") providerSelects.push(control);
    } else if (kind === "boolean") {
      control = element("input", { id, name, type: "checkbox", "aria-describedby": descriptionId });
      control.checked = schema.default === true;
    } else if (kind === "integer" || kind === "number") {
      control = element("input", {
        id, name, type: "number", inputmode: kind === "integer" ? "numeric" : "decimal",
        step: kind === "integer" ? "1" : "any", min: schema.minimum, max: schema.maximum,
        placeholder: schema.default != null ? String(schema.default) : undefined,
        "aria-describedby": descriptionId,
      });
    } else if (kind === "textarea" || kind === "json") {
      control = element("textarea", {
        id, name, rows: kind === "json" ? 3 : name === "sql" || name === "prompt" ? 5 : 3, spellcheck: "false",
        placeholder: kind === "json" ? (schema.type === "array" ? "[ … ]" : "{ … }") : undefined,
        "aria-describedby": descriptionId,
      });
      if (kind === "textarea") control.classList.add(name === "sql" ? "code" : "prose");
      else control.classList.add("code");
    } else {
      control = element("input", { id, name, type: "text", spellcheck: "false", autocomplete: "off", "aria-describedby": descriptionId });
      if (schema.default != null) control.placeholder = String(schema.default);
      if (name === "llm_model") {
        const listId = `${id}-models`;
        control.setAttribute("list", listId);
        const list = element("datalist", { id: listId });
        for (const models of Object.values(MODELS)) for (const model of models) list.append(element("option", { value: model }));
        extras.push(list);
      }
    }
    if (required.has(name)) control.setAttribute("aria-required", "true");
    const error = element("p", { id: `${id}-error`, class: "error-text field-error", role: "alert" });
    const wrapper = element("div", { class: `field field-${kind}` });
    if (kind === "boolean") wrapper.append(element("div", { class: "check-row" }, control, label), description, error);
    else wrapper.append(label, control, ...extras, description, error);
    form.append(wrapper);
    fields.push({ name, schema, kind, control, error, required: required.has(name) });
  }
  // A model list that follows the chosen provider.
  for (const select of providerSelects) {
    const model = fields.find((field) => field.name === "llm_model");
    if (!model) continue;
    select.addEventListener("change", () => {
      const list = document.getElementById(model.control.getAttribute("list"));
      if (!list) return;
      list.replaceChildren(...(MODELS[select.value] ? MODELS[select.value] : Object.values(MODELS).flat()).map((value) => element("option", { value })));
    });
  }
  if (!properties.length) form.append(element("p", { class: "muted", text: "This tool takes no parameters." }));
  const run = element("button", { type: "submit", class: "primary run" }, "Run");
  const hint = element("span", { class: "muted keys" }, "Enter runs (Ctrl+Enter in a text area)");
  form.append(element("div", { class: "form-actions" }, run, hint));

  form.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && event.target.tagName === "TEXTAREA") {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const { args, firstInvalid } = collect(fields);
    if (firstInvalid) {
      firstInvalid.focus();
      return;
    }
    onRun(args);
  });
  return { form, run, fields };
}

/** The arguments from the fields, or the first control whose value is not acceptable. */
function collect(fields) {
  const args = {};
  let firstInvalid = null;
  const fail = (field, message) => {
    field.error.textContent = message;
    field.control.setAttribute("aria-invalid", "true");
    field.control.setAttribute("aria-describedby", `${field.error.id} ${field.control.id}-description`);
    if (!firstInvalid) firstInvalid = field.control;
  };
  for (const field of fields) {
    field.error.textContent = "";
    field.control.removeAttribute("aria-invalid");
    field.control.setAttribute("aria-describedby", `${field.control.id}-description`);
    const { name, schema, kind, control } = field;
    if (kind === "boolean") {
      if (control.checked !== (schema.default === true)) args[name] = control.checked;
      continue;
    }
    const text = control.value;
    if (text.trim() === "") {
      if (field.required) fail(field, `${name} is required`);
      continue;
    }
    if (kind === "integer" || kind === "number") {
      const value = Number(text);
      if (!Number.isFinite(value) || (kind === "integer" && !Number.isInteger(value))) fail(field, `${name} must be ${kind === "integer" ? "a whole number" : "a number"}`);
      else if (schema.minimum !== undefined && value < schema.minimum) fail(field, `${name} must be at least ${schema.minimum}`);
      else if (schema.maximum !== undefined && value > schema.maximum) fail(field, `${name} must be at most ${schema.maximum}`);
      else args[name] = value;
    } else if (kind === "json") {
      let value;
      try {
        value = JSON.parse(text);
      } catch (error) {
        fail(field, `${name} is not valid JSON: ${error.message}`);
        continue;
      }
      const types = Array.isArray(schema.type) ? schema.type : schema.type ? [schema.type] : [];
      const actual = Array.isArray(value) ? "array" : value === null ? "null" : typeof value === "number" ? (Number.isInteger(value) ? "integer" : "number") : typeof value;
      const accepted = types.length === 0 || types.includes(actual) || (actual === "integer" && types.includes("number"));
      if (!accepted) fail(field, `${name} must be a JSON ${types.join(" or ")}, not ${actual}`);
      else args[name] = value;
    } else {
      args[name] = text;
    }
  }
  return { args, firstInvalid };
}
