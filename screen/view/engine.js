// assent screen view: the engine. It reads an Omni IR stream line by line,
// checks each line with the rules of the Go reader (package screen), checks
// fields as package screen/field does and draws the screen with the markup
// of package screen/render, so a screen drawn in an agent's host looks and
// behaves as it does in the web UI.
//
// The catalog, limits, reserved words, issue severities, field messages and
// the renderer's words are not written here: the page carries them as JSON
// made by the Go packages (view.Page), so this reader cannot disagree with
// the Go one about them. The test that runs the conformance cases feeds each
// case to both readers and compares what they made of it.
//
// It sets one global, omniScreen, with open(config) -> session; see Session.
var omniScreen = (function () {
  "use strict";
  const T = JSON.parse(document.getElementById("view-tables").textContent);
  const L = T.limits;
  const RESERVED = new Set(T.reserved);
  const ROOT = "root";

  // --- values ---------------------------------------------------------------

  // A $key used as a value; in JSON {"state": "$key"}, as the Go reader
  // writes it.
  class StateRef {
    constructor(key) { this.key = key; }
    toJSON() { return { state: this.key }; }
  }
  // A bare identifier used as a value: a component id.
  class Ref { constructor(id) { this.id = id; } }
  // A list written as plain ids (a children list).
  class IdList { constructor(ids) { this.ids = ids; } }
  // A call written inside a value: always rejected (not_flat).
  class Call { constructor(name) { this.name = name; } }
  // An object literal as written, before its keys are checked.
  class RawObject { constructor() { this.keys = []; this.vals = []; } }
  // An object after its keys were checked: McpMutation params.
  class Params {
    constructor() { this.m = new Map(); }
    toJSON() {
      const o = Object.create(null);
      for (const [k, v] of this.m) o[k] = v;
      return o;
    }
  }

  // q quotes s as Go's %q does, so that messages read alike: printable
  // characters as they are, others escaped.
  const PRINTABLE = /[\p{L}\p{M}\p{N}\p{P}\p{S} ]/u;
  const ESCAPES = { 7: "\\a", 8: "\\b", 12: "\\f", 10: "\\n", 13: "\\r", 9: "\\t", 11: "\\v", 34: "\\\"", 92: "\\\\" };
  function q(s) {
    let out = "\"";
    for (const ch of String(s)) {
      const c = ch.codePointAt(0);
      if (ESCAPES[c]) out += ESCAPES[c];
      else if (c < 0x20 || c === 0x7f) out += "\\x" + c.toString(16).padStart(2, "0");
      else if (PRINTABLE.test(ch)) out += ch;
      else if (c < 0x10000) out += "\\u" + c.toString(16).padStart(4, "0");
      else out += "\\U" + c.toString(16).padStart(8, "0");
    }
    return out + "\"";
  }
  const fmtNum = function (f) { return Object.is(f, -0) ? "0" : String(f); };

  function clip(s) {
    if (s.length <= 40) return s;
    let i = 40;
    const c = s.charCodeAt(i - 1);
    if (c >= 0xd800 && c <= 0xdbff) i--;
    return s.slice(0, i) + "…";
  }
  function plural(n) { return n === 1 ? "" : "s"; }
  function utf16Len(s) { return s.length; }

  // --- lines (SPEC 3.1–3.7) ---------------------------------------------------

  class LineReader {
    constructor(limit, onLine, onOverflow) {
      this.limit = limit;
      this.onLine = onLine;
      this.onOverflow = onOverflow;
      this.buf = "";
      this.line = 1;
      this.started = false;
      this.discarding = false;
    }
    write(s) {
      if (!this.started && s.length > 0) {
        this.started = true;
        if (s.charCodeAt(0) === 0xfeff) s = s.slice(1);
      }
      let i = 0;
      while (i <= s.length) {
        const nl = s.indexOf("\n", i);
        const part = nl < 0 ? s.slice(i) : s.slice(i, nl);
        if (!this.discarding && part) {
          this.buf += part;
          const n = this.buf.length - (this.buf.endsWith("\r") ? 1 : 0);
          if (n > this.limit) this.overflow();
        }
        if (nl < 0) break;
        if (this.discarding) this.discarding = false; else this.emit();
        this.line++;
        i = nl + 1;
      }
    }
    end() {
      if (this.discarding) { this.discarding = false; return; }
      if (this.buf.length > 0) this.emit();
    }
    overflow() {
      this.discarding = true;
      this.buf = "";
      this.onOverflow(this.line);
    }
    emit() {
      let b = this.buf;
      if (b.endsWith("\r")) b = b.slice(0, -1);
      this.buf = "";
      if (b.toWellFormed) b = b.toWellFormed();
      this.onLine(this.line, b);
    }
  }

  // --- the grammar (SPEC 4) ---------------------------------------------------

  const isIdentStart = function (c) { return c === "_" || (c >= "a" && c <= "z") || (c >= "A" && c <= "Z"); };
  const isDigit = function (c) { return c >= "0" && c <= "9"; };
  const isIdentChar = function (c) { return isIdentStart(c) || isDigit(c); };
  const isBlank = function (s) { return /^\s*(#|$)/.test(s); };
  const skipSpace = function (s, i) { while (i < s.length && /\s/.test(s[i])) i++; return i; };

  class LineError {
    constructor(code, msg) { this.code = code; this.msg = msg; }
  }
  function errAt(code, col, msg) { return new LineError(code, "column " + col + ": " + msg); }

  // Grammar reads one line; it throws LineError.
  class Grammar {
    // col is the 1-based column of line[i] in bytes of UTF-8, as the Go
    // reader counts it.
    col(i) { return this.ascii ? i + 1 : utf8Len(this.line.slice(0, i)) + 1; }

    parseLine(line) {
      this.warnings = [];
      this.line = line;
      this.ascii = !/[^\x00-\x7f]/.test(line);
      const st = { target: "", isState: false, call: "", args: null, value: null };
      let i = skipSpace(line, 0);
      const start = i;
      if (i < line.length && line[i] === "$") { st.isState = true; i++; }
      this.target = "";
      if (i >= line.length || !isIdentStart(line[i])) throw errAt("syntax", this.col(i), "expected name = Component(…) or $name = value");
      while (i < line.length && isIdentChar(line[i])) i++;
      st.target = this.target = line.slice(start, i);
      i = skipSpace(line, i);
      if (i >= line.length || line[i] !== "=" || line[i + 1] === "=") throw errAt("syntax", this.col(i), "expected name = Component(…) or $name = value");
      i = skipSpace(line, i + 1);
      this.tokenize(line, i);
      const toks = this.toks;
      this.pos = 0;
      if (st.isState) {
        if (toks.length === 0) throw errAt("syntax", this.col(line.length), "expected a value after =");
        st.value = this.value(0);
      } else {
        if (toks.length < 2 || toks[0].kind !== "ident" || !isPunct(toks[1], "(")) {
          throw errAt("syntax", toks.length > 0 ? toks[0].col : this.col(line.length), "expected a component call such as Text(\"…\")");
        }
        st.call = toks[0].text;
        this.pos = 1;
        st.args = this.args(0);
      }
      if (this.pos < toks.length) throw errAt("syntax", toks[this.pos].col, "unexpected text after the statement; write one statement per line");
      return st;
    }

    tokenize(line, i) {
      const toks = this.toks = [];
      while (i < line.length) {
        const c = line[i];
        if (c === " " || c === "\t") { i++; continue; }
        if (c === "#") return;
        if (c === "\"") { i = this.str(line, i); continue; }
        if (c === "'") throw errAt("syntax", this.col(i), "strings must use double quotes");
        if (c === "$") {
          let j = i + 1;
          if (j >= line.length || !isIdentStart(line[j])) throw errAt("syntax", this.col(i), "expected a state key after $");
          while (j < line.length && isIdentChar(line[j])) j++;
          toks.push({ kind: "state", col: this.col(i), text: line.slice(i, j) });
          i = j;
          continue;
        }
        if (isDigit(c) || c === "." || c === "-") {
          const j = scanNumber(line, i);
          if (j === i) throw errAt("syntax", this.col(i), "malformed number");
          if (j < line.length && isIdentChar(line[j])) throw errAt("syntax", this.col(i), "a number can't be followed directly by a letter, digit or _");
          let f = Number(line.slice(i, j));
          if (f === 0) f = 0; // negative zero is zero ([4.9])
          toks.push({ kind: "number", col: this.col(i), num: f });
          i = j;
          continue;
        }
        if (isIdentStart(c)) {
          let j = i + 1;
          while (j < line.length && isIdentChar(line[j])) j++;
          toks.push({ kind: "ident", col: this.col(i), text: line.slice(i, j) });
          i = j;
          continue;
        }
        if ("()[]{},=:".indexOf(c) >= 0) {
          toks.push({ kind: "punct", col: this.col(i), p: c });
          i++;
          continue;
        }
        throw errAt("syntax", this.col(i), "unexpected character " + q(String.fromCodePoint(line.codePointAt(i))));
      }
    }

    str(line, i) {
      const start = i;
      i++;
      let out = "";
      while (i < line.length) {
        const j = indexOfAny(line, i);
        if (j < 0) break;
        out += line.slice(i, j);
        i = j;
        if (line[i] === "\"") {
          this.toks.push({ kind: "string", col: this.col(start), text: out });
          return i + 1;
        }
        if (i + 1 >= line.length) break;
        const e = line[i + 1];
        if (e === "\"" || e === "\\") out += e;
        else if (e === "n") out += "\n";
        else {
          const ch = String.fromCodePoint(line.codePointAt(i + 1));
          out += "\\" + ch;
          this.warnings.push("column " + this.col(i) + ": " + q("\\" + ch) + " is not an escape and was kept as written; write \\\\ for a backslash");
          i += 1 + ch.length;
          continue;
        }
        i += 2;
      }
      throw errAt("unterminated_string", this.col(start), "the string has no closing double quote");
    }

    peek() { return this.pos < this.toks.length ? this.toks[this.pos] : null; }
    endCol() { return this.toks.length === 0 ? 1 : this.toks[this.toks.length - 1].col + 1; }
    colHere() { const t = this.peek(); return t ? t.col : this.endCol(); }

    args(depth) {
      this.pos++; // (
      const out = [];
      let named = false;
      for (;;) {
        let t = this.peek();
        if (!t) throw errAt("syntax", this.endCol(), "missing )");
        if (isPunct(t, ")")) { this.pos++; return out; }
        const a = { name: "", col: t.col, val: null };
        if (t.kind === "ident" && this.pos + 1 < this.toks.length && isPunct(this.toks[this.pos + 1], "=")) {
          a.name = t.text;
          named = true;
          this.pos += 2;
        } else if (named) {
          throw errAt("syntax", t.col, "positional arguments must come before named ones");
        }
        a.val = this.value(depth);
        out.push(a);
        t = this.peek();
        if (!t) throw errAt("syntax", this.endCol(), "missing )");
        if (isPunct(t, ",")) this.pos++;
        else if (!isPunct(t, ")")) throw errAt("syntax", t.col, "expected , or )");
      }
    }

    value(depth) {
      const t = this.peek();
      if (!t) throw errAt("syntax", this.endCol(), "expected a value");
      switch (t.kind) {
        case "string": this.pos++; return t.text;
        case "number": this.pos++; return t.num;
        case "state": this.pos++; return new StateRef(t.text);
        case "ident": {
          this.pos++;
          if (t.text === "true") return true;
          if (t.text === "false") return false;
          if (t.text === "null") return null;
          const n = this.peek();
          if (n && isPunct(n, "(")) {
            if (depth + 1 > L.nesting) throw errAt("syntax", n.col, "values may nest at most " + L.nesting + " levels deep");
            this.args(depth + 1);
            return new Call(t.text);
          }
          return new Ref(t.text);
        }
      }
      if (isPunct(t, "[")) {
        if (depth + 1 > L.nesting) throw errAt("syntax", t.col, "values may nest at most " + L.nesting + " levels deep");
        this.pos++;
        let list = [];
        const ids = [];
        let plain = true;
        for (;;) {
          let n = this.peek();
          if (!n) throw errAt("syntax", this.endCol(), "missing ]");
          if (isPunct(n, "]")) {
            this.pos++;
            if (plain && ids.length > 0) return new IdList(ids);
            return list;
          }
          if (plain && n.kind === "ident" && !isLiteralWord(n.text) && !(this.pos + 1 < this.toks.length && isPunct(this.toks[this.pos + 1], "("))) {
            this.pos++;
            ids.push(n.text);
          } else {
            if (plain) {
              plain = false;
              list = ids.map(function (id) { return new Ref(id); });
            }
            list.push(this.value(depth + 1));
          }
          n = this.peek();
          if (!n) throw errAt("syntax", this.endCol(), "missing ]");
          if (isPunct(n, ",")) this.pos++;
          else if (!isPunct(n, "]")) throw errAt("syntax", n.col, "expected , or ]");
        }
      }
      if (isPunct(t, "{")) {
        if (depth + 1 > L.nesting) throw errAt("syntax", t.col, "values may nest at most " + L.nesting + " levels deep");
        this.pos++;
        const obj = new RawObject();
        for (;;) {
          let n = this.peek();
          if (!n) throw errAt("syntax", this.endCol(), "missing }");
          if (isPunct(n, "}")) { this.pos++; return obj; }
          if (n.kind !== "ident" && n.kind !== "string") throw errAt("syntax", n.col, "expected a key");
          const key = n.text;
          this.pos++;
          const c = this.peek();
          if (!c || !isPunct(c, ":")) throw errAt("syntax", this.colHere(), "expected : after the key");
          this.pos++;
          const v = this.value(depth + 1);
          obj.keys.push(key);
          obj.vals.push(v);
          n = this.peek();
          if (!n) throw errAt("syntax", this.endCol(), "missing }");
          if (isPunct(n, ",")) this.pos++;
          else if (!isPunct(n, "}")) throw errAt("syntax", n.col, "expected , or }");
        }
      }
      throw errAt("syntax", t.col, "expected a value");
    }
  }

  // utf8Len counts s in bytes of UTF-8.
  function utf8Len(s) {
    let n = 0;
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c < 0x80) n += 1;
      else if (c < 0x800) n += 2;
      else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) { n += 4; i++; }
      else n += 3;
    }
    return n;
  }

  function isPunct(t, c) { return t.kind === "punct" && t.p === c; }
  function isLiteralWord(s) { return s === "true" || s === "false" || s === "null"; }
  function indexOfAny(s, i) {
    for (; i < s.length; i++) if (s[i] === "\"" || s[i] === "\\") return i;
    return -1;
  }

  // scanNumber matches -?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)? at s[i:].
  function scanNumber(s, i) {
    let j = i;
    if (s[j] === "-") j++;
    const d = j;
    while (j < s.length && isDigit(s[j])) j++;
    if (j > d) {
      if (s[j] === ".") { j++; while (j < s.length && isDigit(s[j])) j++; }
    } else {
      if (s[j] !== ".") return i;
      j++;
      const f = j;
      while (j < s.length && isDigit(s[j])) j++;
      if (j === f) return i;
    }
    if (s[j] === "e" || s[j] === "E") {
      let k = j + 1;
      if (s[k] === "+" || s[k] === "-") k++;
      const e = k;
      while (k < s.length && isDigit(s[k])) k++;
      if (k > e) j = k;
    }
    return j;
  }

  function hasCall(v) {
    if (v instanceof Call) return true;
    if (Array.isArray(v)) return v.some(hasCall);
    if (v instanceof RawObject) return v.vals.some(hasCall);
    return false;
  }

  // --- schemas (the catalog's JSON Schema subset) -----------------------------

  const isLowerIdent = function (s) { return /^[a-z][A-Za-z0-9_]*$/.test(s); };
  const isAssetName = function (s) { return /^[a-z0-9][a-z0-9-]*$/.test(s); };
  const isDate = function (s) { return /^[0-9]{4}-[0-9]{2}-[0-9]{2}$/.test(s); };
  const patterns = {
    ident: function (s) { return /^[A-Za-z_][A-Za-z0-9_]*$/.test(s); },
    stateKey: function (s) { return /^\$[A-Za-z_][A-Za-z0-9_]*$/.test(s); },
    asset: isAssetName,
    action: isLowerIdent,
    tool: function (s) { return /^[a-z][A-Za-z0-9_]*(\.[a-z][A-Za-z0-9_]*)+$/.test(s); },
    date: isDate,
    currency: function (s) { return /^[A-Z]{3}$/.test(s); },
  };

  function check(s, v) {
    if (s.anyOf) return s.anyOf.some(function (a) { return check(a, v); });
    switch (s.kind) {
      case "string": {
        if (typeof v !== "string") return false;
        if (s.minLength || s.maxLength) {
          const n = utf16Len(v);
          if (n < (s.minLength || 0) || (s.maxLength && n > s.maxLength)) return false;
        }
        if (s.pattern && !patterns[s.pattern](v)) return false;
        if (s.enum && s.enum.indexOf(v) < 0) return false;
        return true;
      }
      case "number": case "integer":
        if (typeof v !== "number" || !isFinite(v)) return false;
        if (s.kind === "integer" && v !== Math.trunc(v)) return false;
        if ("const" in s && v !== s.const) return false;
        if (("min" in s && v < s.min) || ("max" in s && v > s.max)) return false;
        return true;
      case "bool": return typeof v === "boolean";
      case "null": return v === null;
      case "state": return v instanceof StateRef;
      case "ref": return v instanceof Ref;
      case "array": {
        if (v instanceof IdList) {
          if (v.ids.length < (s.minItems || 0) || (s.maxItems && v.ids.length > s.maxItems)) return false;
          return !s.items || s.items.kind === "ref";
        }
        if (!Array.isArray(v)) return false;
        if (v.length < (s.minItems || 0) || (s.maxItems && v.length > s.maxItems)) return false;
        return !s.items || v.every(function (x) { return check(s.items, x); });
      }
      case "object": {
        if (!(v instanceof Params)) return false;
        for (const [k, x] of v.m) {
          if (s.keys && !check(s.keys, k)) return false;
          if (s.values && !check(s.values, x)) return false;
        }
        return true;
      }
    }
    return false;
  }

  // describe says in words what a schema accepts, for messages.
  function describe(s) {
    if (s.anyOf) return s.anyOf.map(describe).join(" or ");
    switch (s.kind) {
      case "string":
        if (s.enum) return "one of " + s.enum.map(function (e) { return q(e); }).join(", ");
        switch (s.pattern) {
          case "asset": return "a picture name (lowercase letters, digits and hyphens)";
          case "action": return "an action name (a lower-case letter, then letters, digits and _)";
          case "tool": return "a tool name such as payments.confirm";
          case "date": return "a date \"YYYY-MM-DD\"";
          case "currency": return "a 3-letter currency code such as USD";
          case "ident": return "an identifier";
        }
        if (s.minLength && s.maxLength) return "text of " + s.minLength + " to " + s.maxLength + " characters";
        if (s.maxLength) return "text of at most " + s.maxLength + " characters";
        return "text";
      case "number": case "integer": {
        const w = s.kind === "integer" ? "a whole number" : "a number";
        if ("const" in s) return fmtNum(s.const);
        if ("min" in s && "max" in s) return w + " from " + fmtNum(s.min) + " to " + fmtNum(s.max);
        if ("min" in s) return w + " of at least " + fmtNum(s.min);
        if ("max" in s) return w + " of at most " + fmtNum(s.max);
        return w;
      }
      case "bool": return "true or false";
      case "null": return "null";
      case "state": return "a $key";
      case "ref": return "a component id";
      case "array": {
        let w = s.items ? "a list of " + describe(s.items) : "a list";
        if (s.maxItems) w += " (" + (s.minItems || 0) + " to " + s.maxItems + " items)";
        return w;
      }
      case "object": return "{key: value or $key, …}";
    }
    return "something else";
  }

  // --- the app's components and pictures ([5.27]–[5.30]) ---------------------

  const HOLD_WORDS = {
    text: "text", date: "a \"YYYY-MM-DD\" date or \"\"", bool: "true or false",
    appText: "text or null", appNumber: "a number or null", appBool: "true, false or null",
  };
  function holdsOK(h, v) {
    switch (h) {
      case "text": return typeof v === "string";
      case "date": return typeof v === "string" && (v === "" || isDate(v));
      case "bool": return typeof v === "boolean";
      case "appText": return typeof v === "string" || v === null;
      case "appNumber": return typeof v === "number" || v === null;
      case "appBool": return typeof v === "boolean" || v === null;
    }
    return true;
  }
  function builtinHold(c) {
    switch (c) {
      case "Input": case "Select": return "text";
      case "DateInput": return "date";
      case "Switch": return "bool";
    }
    return "";
  }

  // declareComponents reads the app's component declarations; like the Go
  // reader, a declaration that is not valid makes the set empty.
  function declareComponents(decls) {
    const out = new Map();
    if (!decls || typeof decls !== "object") return out;
    try {
      for (const name of Object.keys(decls).sort()) {
        const d = decls[name];
        if (!/^[A-Z][A-Za-z0-9]{0,63}$/.test(name) || T.components[name] || name === "McpMutation" || name === "App") throw name;
        const c = { name: name, holds: "", pictures: [], schema: { positional: [], required: [], props: Object.create(null) } };
        const props = d.props || {};
        for (const pn of Object.keys(props).sort()) {
          const p = props[pn];
          if (!/^[a-z][A-Za-z0-9]{0,63}$/.test(pn) || ["children", "action", "required", "kind"].indexOf(pn) >= 0 || RESERVED.has(pn)) throw pn;
          c.schema.props[pn] = propSchema(pn, p);
          if (p.kind === "state") c.holds = { text: "appText", number: "appNumber", boolean: "appBool" }[p.holds];
          if (p.kind === "picture") c.pictures.push(pn);
          if (!p.optional) c.schema.required.push(pn);
        }
        if (d.children) {
          if (!(d.children.max >= 1 && d.children.max <= L.children)) throw "children";
          c.schema.props.children = { kind: "array", items: { kind: "ref" }, maxItems: d.children.max };
        }
        if (d.field) {
          if (!c.holds) throw "field";
          c.schema.props.required = { kind: "bool" };
        }
        const seen = new Set();
        for (const pn of d.positional || []) {
          if (!c.schema.props[pn] || pn === "required" || seen.has(pn)) throw pn;
          seen.add(pn);
        }
        c.schema.positional = (d.positional || []).slice();
        out.set(name, c);
      }
    } catch (e) {
      return new Map();
    }
    return out;
  }

  function propSchema(name, p) {
    const withState = function (s) { return p.state === false ? s : { anyOf: [s, { kind: "state" }] }; };
    switch (p.kind) {
      case "text": {
        const s = { kind: "string", maxLength: L.text };
        if (p.minLength !== undefined) s.minLength = p.minLength;
        if (p.maxLength !== undefined) s.maxLength = p.maxLength;
        if ((s.minLength || 0) > s.maxLength) throw name;
        return withState(s);
      }
      case "number": {
        const s = { kind: p.integer ? "integer" : "number" };
        if (typeof p.minimum === "number") s.min = p.minimum;
        if (typeof p.maximum === "number") s.max = p.maximum;
        return withState(s);
      }
      case "boolean": return { kind: "bool" };
      case "oneOf":
        if (!Array.isArray(p.values) || p.values.length < 1 || p.values.length > 50) throw name;
        return { kind: "string", enum: p.values.slice() };
      case "picture": return { kind: "string", maxLength: 64, pattern: "asset" };
      case "list": {
        const item = p.item === "text" ? { kind: "string", maxLength: L.text } : p.item === "number" ? { kind: "number" } : null;
        if (!item) throw name;
        return { kind: "array", items: item, maxItems: p.maxItems || 50 };
      }
      case "state":
        if (name !== "value" || ["text", "number", "boolean"].indexOf(p.holds) < 0) throw name;
        return { kind: "state" };
    }
    throw name;
  }

  function declarePictures(list) {
    const out = [];
    if (!Array.isArray(list)) return out;
    for (const p of list) {
      if (typeof p.prefix !== "string" || p.prefix.length < 2 || !isAssetName(p.prefix) || !p.prefix.endsWith("-")) return [];
      if (p.id !== "digits" && p.id !== "letters-digits") return [];
      const max = p.maxLength || 32;
      if (max < 1 || p.prefix.length + max > 64) return [];
      out.push({ prefix: p.prefix, letters: p.id === "letters-digits", max: max });
    }
    return out;
  }
  function familyMatch(f, name) {
    if (name.length <= f.prefix.length || !name.startsWith(f.prefix)) return false;
    const id = name.slice(f.prefix.length);
    if (id.length > f.max) return false;
    return (f.letters ? /^[a-z0-9]+$/ : /^[0-9]+$/).test(id);
  }

  // --- statements (SPEC 5.8–5.17, 5.24–5.30) ---------------------------------

  function invalid(msg) { return new LineError("invalid_props", msg); }
  function propOf(props, name) {
    for (const p of props) if (p[0] === name) return p;
    return null;
  }
  function prop1(props, name) { const p = propOf(props, name); return p ? p[1] : null; }
  function stmtID(s) { return s.kind === "c" ? s.node.id : s.kind === "m" ? s.mut.id : s.key; }
  function hasAction(s) { return !!s && !!s.node && !s.node.app && s.node.type === "Button" && !!propOf(s.props, "action"); }

  class Registry {
    constructor(opt) {
      this.tools = new Set(opt.tools || []);
      this.assets = new Set(opt.assets || []);
      this.components = opt.components || new Map();
      this.pictures = opt.pictures || [];
    }
    pictureKnown(name) {
      if (this.assets.has(name)) return true;
      return this.pictures.some(function (f) { return familyMatch(f, name); });
    }
    similar(name) {
      const low = name.toLowerCase();
      for (const n of Object.keys(T.components)) if (n.toLowerCase() === low) return n;
      for (const n of this.components.keys()) if (n.toLowerCase() === low) return n;
      return "";
    }

    // statement checks a parsed line on its own; it throws LineError.
    statement(raw, line) {
      if (raw.isState) return this.stateStmt(raw, line);
      const id = raw.target;
      if (id.length > L.id) throw invalid("the id " + q(clip(id)) + " is longer than " + L.id + " characters");
      if (RESERVED.has(id)) throw invalid(q(id) + " is a reserved word and can't be an id; choose another id");
      for (const a of raw.args) {
        if (hasCall(a.val)) throw new LineError("not_flat", "column " + a.col + ": a component call can't appear inside another; define it on its own line and refer to it by id");
      }
      if (raw.call === "McpMutation") return this.mutationStmt(raw, id, line);
      let cs = T.components[raw.call];
      let app = null;
      if (!cs) {
        app = this.components.get(raw.call) || null;
        if (!app) {
          let msg = q(clip(raw.call)) + " is not a component of this app's catalog";
          const alt = this.similar(raw.call);
          if (alt) msg += "; did you mean " + alt + "?";
          throw new LineError("unknown_component", msg);
        }
        cs = app.schema;
      }
      const r = this.collectProps(raw, cs);
      const props = r.props;
      if (!app) {
        if (raw.call === "Rating") {
          const v = prop1(props, "value");
          if (typeof v === "number") {
            const m = prop1(props, "max");
            const max = typeof m === "number" ? m : 5;
            if (v > max) throw invalid("Rating's value " + fmtNum(v) + " is more than its max " + fmtNum(max));
          }
        } else if (raw.call === "Input") {
          const lo = prop1(props, "minLength"), hi = prop1(props, "maxLength");
          if (typeof lo === "number" && typeof hi === "number" && lo > hi) throw invalid("Input's minLength " + fmtNum(lo) + " is more than its maxLength " + fmtNum(hi));
        }
      }
      const pics = app ? app.pictures : raw.call === "Image" ? ["asset"] : raw.call === "ListItem" ? ["image"] : [];
      for (const p of pics) {
        const name = prop1(props, p);
        if (typeof name === "string" && !this.pictureKnown(name)) throw new LineError("unknown_asset", p + ": no picture named " + q(name) + " is in the app's asset registry");
      }
      const node = { id: id, type: raw.call, app: !!app, props: null, children: [], line: line };
      if (r.kids instanceof IdList) node.children = r.kids.ids;
      else if (Array.isArray(r.kids)) node.children = r.kids.map(function (k) { return k.id; });
      const s = { kind: "c", line: line, node: node, props: props, stateRefs: r.refs, edits: "", holds: app ? app.holds : builtinHold(raw.call) };
      if (s.holds) {
        const k = prop1(props, "value");
        if (k instanceof StateRef) s.edits = k.key; else s.holds = "";
      }
      return s;
    }

    stateStmt(raw, line) {
      if (raw.target.length > L.stateKey) throw invalid("the state key " + q(clip(raw.target)) + " is longer than " + L.stateKey + " characters");
      const v = raw.value;
      if (hasCall(v)) throw new LineError("not_flat", "state holds a value, not a component; define the component on its own line");
      if (typeof v === "string") {
        if (utf16Len(v) > L.text) throw invalid("the text is longer than " + L.text + " characters");
      } else if (typeof v === "number") {
        if (!isFinite(v)) throw invalid("the number is too large to represent");
      } else if (typeof v !== "boolean" && v !== null) {
        throw invalid("state holds a string, a number, true, false or null");
      }
      return { kind: "s", line: line, key: raw.target, value: v, stateRefs: [], edits: "", holds: "" };
    }

    mutationStmt(raw, id, line) {
      const props = this.collectProps(raw, T.mutation).props;
      const tool = prop1(props, "tool");
      if (!this.tools.has(tool)) throw new LineError("unknown_tool", "no tool named " + q(tool) + " is in the app's tool registry");
      const p = prop1(props, "params");
      const m = { id: id, target: prop1(props, "target").id, tool: tool, params: p instanceof Params ? p : new Params(), line: line };
      const s = { kind: "m", line: line, mut: m, stateRefs: [], edits: "", holds: "" };
      for (const k of Array.from(m.params.m.keys()).sort()) {
        const v = m.params.m.get(k);
        if (v instanceof StateRef && s.stateRefs.indexOf(v.key) < 0) s.stateRefs.push(v.key);
      }
      return s;
    }

    collectProps(raw, cs) {
      const props = [];
      let kids = null, hasKids = false;
      const refs = [];
      let pos = 0;
      for (const a of raw.args) {
        let name = a.name;
        let positional = false;
        if (name === "") {
          if (pos >= cs.positional.length) throw invalid(raw.call + " takes " + cs.positional.length + " positional argument" + plural(cs.positional.length) + "; give the others by name");
          name = cs.positional[pos++];
          positional = true;
        }
        if (propOf(props, name) || (name === "children" && hasKids)) throw invalid(name + " is given twice");
        const v = convertValue(a.val);
        const sch = positional ? cs.props[name] : Object.prototype.hasOwnProperty.call(cs.props, name) ? cs.props[name] : null;
        if (!sch) throw invalid(raw.call + " has no prop " + q(clip(name)) + "; its props are " + propList(cs));
        if (!check(sch, v)) throw invalid(raw.call + "'s " + name + " must be " + describe(sch));
        if (name === "children") { kids = v; hasKids = true; } else props.push([name, v]);
        appendRefs(refs, v);
      }
      for (const name of cs.required) {
        if (!propOf(props, name) && !(name === "children" && hasKids)) throw invalid(raw.call + " needs " + name);
      }
      return { props: props, kids: kids, refs: refs };
    }
  }

  function propList(cs) {
    const names = Object.keys(cs.props).sort();
    return names.length ? names.join(", ") : "none";
  }

  function appendRefs(refs, v) {
    if (v instanceof StateRef) {
      if (refs.indexOf(v.key) < 0) refs.push(v.key);
    } else if (Array.isArray(v)) {
      for (const e of v) if (e instanceof StateRef && refs.indexOf(e.key) < 0) refs.push(e.key);
    }
  }

  // convertValue turns object literals into Params, refusing repeated and
  // reserved keys ([5.16]).
  function convertValue(v) {
    if (v instanceof RawObject) {
      const m = new Params();
      for (let i = 0; i < v.keys.length; i++) {
        const k = v.keys[i];
        if (RESERVED.has(k)) throw invalid(q(k) + " is a reserved word and can't be a key");
        if (m.m.has(k)) throw invalid("the key " + q(clip(k)) + " is repeated");
        m.m.set(k, convertValue(v.vals[i]));
      }
      return m;
    }
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        if (v[i] instanceof RawObject) v[i] = convertValue(v[i]);
        else if (Array.isArray(v[i])) convertValue(v[i]);
      }
    }
    return v;
  }

  // --- the document rules (SPEC 5.1–5.25) -------------------------------------

  class Index {
    constructor() {
      this.ids = new Map(); // id -> {id, def, parent}
      this.state = new Map();
      this.order = [];
      this.editors = new Map();
      this.users = new Map();
      this.mutByTarget = new Map();
      this.nComponents = 0;
      this.nState = 0;
    }
    get(id) { const e = this.ids.get(id); return e ? e.def : null; }
    entry(id) {
      let e = this.ids.get(id);
      if (!e) { e = { id: id, def: null, parent: null }; this.ids.set(id, e); }
      return e;
    }

    // check returns the first rule s breaks, as [code, message], or null.
    check(s) {
      if (s.kind === "s") {
        if (this.state.has(s.key)) return ["duplicate_id", s.key + " is already declared; a $key is assigned once and keeps its first value"];
        if (this.nState >= L.stateKeys) return ["document_too_large", "a screen may declare at most " + L.stateKeys + " $keys"];
        for (const f of this.editors.get(s.key) || []) {
          if (!holdsOK(f.holds, s.value)) return ["input_state_type", s.key + " is edited by " + f.node.type + " " + q(f.node.id) + " (line " + f.line + "), so it must hold " + HOLD_WORDS[f.holds]];
        }
        return null;
      }
      const id = stmtID(s);
      const e = this.ids.get(id) || null;
      if (e && e.def) return ["duplicate_id", q(id) + " is already defined on line " + e.def.line + "; an id is assigned once and keeps its first definition"];
      if (this.nComponents >= L.components) return ["document_too_large", "a screen may define at most " + L.components + " components"];
      if (s.kind === "m") {
        if (e && e.parent) return ["child_not_component", q(id) + " is listed as a child of " + q(e.parent.id) + ", so it must be a component, not an McpMutation"];
        const prev = this.mutByTarget.get(s.mut.target);
        if (prev) return ["duplicate_mutation", q(s.mut.target) + " is already governed by " + q(prev.mut.id) + " (line " + prev.line + "); a button has one McpMutation"];
        return null;
      }
      const n = s.node;
      const seen = new Set();
      for (const c of n.children) {
        if (seen.has(c)) return ["duplicate_child", q(c) + " is listed twice"];
        seen.add(c);
      }
      for (const c of n.children) {
        if (c === ROOT) return ["root_as_child", "root is the top of the screen and can't be a child"];
        const ce = this.ids.get(c);
        if (!ce) {
          if (c === id) return ["cycle", q(c) + " would contain itself"];
          continue;
        }
        if (ce.def && ce.def.kind === "m") return ["child_not_component", q(c) + " is an McpMutation, not a component; list only components as children"];
        if (ce === e || isAncestor(ce, e)) return ["cycle", q(c) + " would contain itself through its children"];
        if (ce.parent) return ["multiple_parents", q(c) + " is already a child of " + q(ce.parent.id) + "; a component has one parent"];
        if (ce.def) {
          const di = pairing(s, ce.def);
          if (di) return di;
        }
      }
      if (e && e.parent && e.parent.def) {
        const di = pairing(e.parent.def, s);
        if (di) return di;
      }
      if (s.edits) {
        const st = this.state.get(s.edits);
        if (st && !holdsOK(s.holds, st.value)) return ["input_state_type", n.type + " edits " + s.edits + ", which must hold " + HOLD_WORDS[s.holds] + " (it is declared on line " + st.line + ")"];
      }
      return null;
    }

    add(s) {
      this.order.push(s);
      for (const k of s.stateRefs) this.users.set(k, (this.users.get(k) || 0) + 1);
      if (s.kind === "s") {
        this.state.set(s.key, s);
        this.nState++;
        return;
      }
      if (s.kind === "m") {
        this.entry(s.mut.id).def = s;
        this.nComponents++;
        if (!this.mutByTarget.has(s.mut.target)) this.mutByTarget.set(s.mut.target, s);
        return;
      }
      const e = this.entry(s.node.id);
      e.def = s;
      this.nComponents++;
      for (const c of s.node.children) {
        if (c === ROOT) continue;
        const ce = this.entry(c);
        if (ce.parent || ce === e || isAncestor(ce, e)) continue;
        ce.parent = e;
      }
      if (s.edits) {
        if (!this.editors.has(s.edits)) this.editors.set(s.edits, []);
        this.editors.get(s.edits).push(s);
      }
    }

    // endIssues runs the end-of-stream checks (SPEC 5.1, 5.11, 5.13, 5.15,
    // 7.2, 7.3).
    endIssues() {
      const out = [];
      const missing = [];
      const add = function (line, code, id, msg) { out.push(issue(line, code, id, msg)); };
      const root = this.get(ROOT);
      if (!root) add(0, "missing_root", ROOT, "no root line arrived; the top component must have the id root");
      else if (root.kind === "m") add(root.line, "root_not_component", ROOT, "root is an McpMutation; root must be a component");
      for (const s of this.order) {
        if (s.kind === "c") {
          for (const c of s.node.children) {
            if (!this.get(c)) {
              missing.push(c);
              add(s.line, "dangling_ref", s.node.id, "child " + q(c) + " of " + q(s.node.id) + " never arrived");
            }
          }
          if (hasAction(s) && !this.mutByTarget.has(s.node.id)) {
            add(s.line, "ungoverned_mutation", s.node.id, q(s.node.id) + " has an action but no McpMutation governs it; add one naming a registered tool, or remove the action");
          }
        } else if (s.kind === "m") {
          const t = this.get(s.mut.target);
          if (!t) add(s.line, "dangling_ref", s.mut.id, "target " + q(s.mut.target) + " of " + q(s.mut.id) + " never arrived");
          else if (!hasAction(t)) add(s.line, "mutation_target_not_interactive", s.mut.id, q(s.mut.id) + " targets " + q(s.mut.target) + ", which is not a Button with an action");
        }
        for (const k of s.stateRefs) {
          if (!this.state.has(k)) {
            missing.push(k);
            add(s.line, "missing_state", stmtID(s), k + " is used by " + q(stmtID(s)) + " but never declared");
          }
        }
      }
      return { issues: out, missing: Array.from(new Set(missing)).sort(byUnits) };
    }
  }

  function byUnits(a, b) { return a < b ? -1 : a > b ? 1 : 0; }

  function isAncestor(a, b) {
    if (!a || !b || !a.def || !b.parent) return false;
    for (let p = b.parent; p; p = p.parent) if (p === a) return true;
    return false;
  }

  function listLen(v) { return Array.isArray(v) ? v.length : 0; }

  // pairing checks the container rules of [5.18], [5.21]–[5.23].
  function pairing(ps, cs) {
    if (!ps || !cs || !ps.node || !cs.node) return null;
    const p = ps.node, c = cs.node;
    const pt = p.app ? "" : p.type, ct = c.app ? "" : c.type;
    switch (pt) {
      case "List":
        if (ct !== "ListItem") return ["list_mismatch", "a List holds only ListItems, and " + q(c.id) + " is a " + c.type];
        break;
      case "Table": {
        if (ct !== "TableRow") return ["table_mismatch", "a Table holds only TableRows, and " + q(c.id) + " is a " + c.type];
        const cols = listLen(prop1(ps.props, "columns")), cells = listLen(prop1(cs.props, "cells"));
        if (cols !== cells) return ["table_mismatch", "row " + q(c.id) + " has " + cells + " cells but table " + q(p.id) + " has " + cols + " columns"];
        break;
      }
      case "Tabs":
        if (ct !== "Tab") return ["tabs_mismatch", "a Tabs holds only Tab components, and " + q(c.id) + " is a " + c.type];
        break;
      case "BarChart": case "LineChart": {
        if (ct !== "Series") return ["chart_mismatch", "a " + pt + " holds only Series, and " + q(c.id) + " is a " + c.type];
        const labels = listLen(prop1(ps.props, "labels")), values = listLen(prop1(cs.props, "values"));
        if (labels !== values) return ["chart_mismatch", "series " + q(c.id) + " has " + values + " values but chart " + q(p.id) + " has " + labels + " labels"];
        break;
      }
      case "PieChart":
        if (ct !== "Slice") return ["chart_mismatch", "a PieChart holds only Slices, and " + q(c.id) + " is a " + c.type];
        break;
    }
    switch (ct) {
      case "ListItem":
        if (pt !== "List") return ["list_mismatch", "ListItem " + q(c.id) + " must be a child of a List, not of a " + p.type];
        break;
      case "TableRow":
        if (pt !== "Table") return ["table_mismatch", "TableRow " + q(c.id) + " must be a child of a Table, not of a " + p.type];
        break;
      case "Tab":
        if (pt !== "Tabs") return ["tabs_mismatch", "Tab " + q(c.id) + " must be a child of a Tabs, not of a " + p.type];
        break;
      case "Series":
        if (pt !== "BarChart" && pt !== "LineChart") return ["chart_mismatch", "Series " + q(c.id) + " must be a child of a BarChart or LineChart, not of a " + p.type];
        break;
      case "Slice":
        if (pt !== "PieChart") return ["chart_mismatch", "Slice " + q(c.id) + " must be a child of a PieChart, not of a " + p.type];
        break;
    }
    return null;
  }

  function issue(line, code, id, msg) {
    return { line: line, code: code, message: msg, severity: T.severity[code] || "error", id: id || "" };
  }

  // --- the stream --------------------------------------------------------------

  // Doc is a screen as read so far.
  class Doc {
    constructor() {
      this.idx = new Index();
      this.issues = [];
      this.ended = false;
      this.newer = false;
      this.missing = null;
      this.errKeys = null;
    }
    node(id) {
      const s = this.idx.get(id);
      return s && s.node ? ready(s) : null;
    }
    nodes() {
      const out = [];
      for (const s of this.idx.order) if (s.node) out.push(ready(s));
      return out;
    }
    mutation(target) { const s = this.idx.mutByTarget.get(target); return s ? s.mut : null; }
    stateOf(key) { const s = this.idx.state.get(key); return s ? { value: s.value } : null; }
    setState(key, v) {
      const s = this.idx.state.get(key);
      if (!s) return false;
      if (typeof v !== "string" && typeof v !== "number" && typeof v !== "boolean" && v !== null) return false;
      s.value = v;
      this.errKeys = null;
      return true;
    }
    edits(id) { const s = this.idx.get(id); return s ? s.edits : ""; }
    fieldsReadBy(m) {
      const read = new Set();
      if (m) for (const v of m.params.m.values()) if (v instanceof StateRef) read.add(v.key);
      const out = [];
      if (read.size === 0) return out;
      for (const s of this.idx.order) if (s.node && s.edits && read.has(s.edits)) out.push(ready(s));
      return out;
    }
    // toJSON is the conformance shape {nodes, state, mutations, missing}.
    toJSON() {
      const nodes = {}, state = {}, muts = {};
      for (const s of this.idx.order) {
        if (s.node) {
          const n = ready(s);
          const j = { type: n.type, props: n.props, children: n.children };
          if (n.app) j.app = true;
          nodes[n.id] = j;
        } else if (!s.mut) state[s.key] = s.value;
      }
      for (const [t, s] of this.idx.mutByTarget) muts[t] = { id: s.mut.id, tool: s.mut.tool, params: s.mut.params };
      return { nodes: nodes, state: state, mutations: muts, missing: this.missing || [] };
    }
  }

  function ready(s) {
    if (!s.node.props) {
      const m = Object.create(null);
      for (const p of s.props) m[p[0]] = p[1];
      s.node.props = m;
    }
    return s.node;
  }

  function compareVersion(major, minor, format) {
    const trim = function (s) { s = s.replace(/^0+/, ""); return s || "0"; };
    major = trim(major);
    minor = trim(minor);
    if (major === "0" && (minor === "6" || minor === "7")) minor = "5";
    const f = format.split(".");
    const cmp = function (a, b) { return a.length !== b.length ? (a.length < b.length ? -1 : 1) : a < b ? -1 : a > b ? 1 : 0; };
    return cmp(major, f[0]) || cmp(minor, trim(f[1]));
  }
  function isNewerMarker(line) {
    const m = /^[ \t]*#[ \t]*omni-ir[ \t]+([0-9]+)\.([0-9]+)[ \t]*$/.exec(line);
    return !!m && compareVersion(m[1], m[2], T.format) > 0;
  }

  class Parser {
    constructor(opt) {
      this.reg = new Registry(opt);
      this.g = new Grammar();
      this.doc = new Doc();
      this.ended = false;
      const self = this;
      this.lr = new LineReader(L.line, function (n, t) { self.line(n, t); }, function (n) {
        self.issue(n, "line_too_long", "", "the line is longer than " + L.line + " characters and was skipped; split long text or shorten it");
      });
    }
    issue(line, code, id, msg) { this.doc.issues.push(issue(line, code, id, msg)); }
    write(s) { if (!this.ended) this.lr.write(s); }
    end() {
      if (this.ended) return this.doc;
      this.lr.end();
      this.ended = true;
      const r = this.doc.idx.endIssues();
      this.doc.issues.push.apply(this.doc.issues, r.issues);
      this.doc.missing = r.missing;
      this.doc.ended = true;
      return this.doc;
    }
    line(n, text) {
      if (n === 1 && isNewerMarker(text)) {
        this.doc.newer = true;
        this.issue(1, "newer_version", "", "this screen was written for a newer stream format than " + T.format + "; parts of it may not be shown");
      }
      if (isBlank(text)) return;
      let s = null, err = null;
      this.g.target = "";
      try {
        s = this.reg.statement(this.g.parseLine(text), n);
      } catch (e) {
        if (!(e instanceof LineError)) throw e;
        err = e;
      }
      const id = this.g.target;
      for (const w of this.g.warnings || []) {
        if (!err || (err.code !== "syntax" && err.code !== "unterminated_string")) this.issue(n, "unknown_escape", id, w);
      }
      if (err) { this.issue(n, err.code, id, err.msg); return; }
      const di = this.doc.idx.check(s);
      if (di) { this.issue(n, di[0], id, di[1]); return; }
      this.doc.idx.add(s);
    }

    // update applies a live update (SPEC 10.29–10.34) whole or not at all.
    update(text) {
      const doc = this.doc, reg = this.reg;
      const res = { applied: false, issues: [] };
      const fail = function (line, code, id, msg) { res.issues.push(issue(line, code, id, msg)); };
      let n = (text.match(/\n/g) || []).length;
      if (text !== "" && !text.endsWith("\n")) n++;
      if (n > L.updateLines) {
        fail(0, "update_too_large", "", "the update has " + n + " lines; an update holds at most " + L.updateLines + ", so send the changes in smaller updates");
        return res;
      }
      const old = doc.idx;
      const g = new Grammar();
      const stmts = [];
      const assigned = new Map();
      const conflict = function (key) { return key + " is edited by a field, so its value belongs to the person; an update can't set it"; };
      const lr = new LineReader(L.line, function (line, s) {
        if (isBlank(s)) return;
        let st = null;
        g.target = "";
        try {
          const raw = g.parseLine(s);
          for (const w of g.warnings) fail(line, "unknown_escape", raw.target, w);
          st = reg.statement(raw, line);
        } catch (e) {
          if (!(e instanceof LineError)) throw e;
          fail(line, e.code, g.target, e.msg);
          return;
        }
        const id = stmtID(st);
        if (assigned.has(id)) {
          fail(line, "duplicate_id", id, id + " is already assigned on line " + assigned.get(id) + " of this update; assign each id and $key once");
          return;
        }
        assigned.set(id, line);
        if (st.kind === "s" && old.state.has(id) && fieldEdits(old, stmts, id)) {
          fail(line, "live_field_conflict", id, conflict(id));
          return;
        }
        stmts.push(st);
      }, function (line) {
        fail(line, "line_too_long", "", "the line is longer than " + L.line + " characters");
      });
      lr.write(text);
      lr.end();
      for (const st of stmts) {
        if (st.kind === "s" && old.state.has(st.key) && fieldEdits(old, stmts, st.key) && !res.issues.some(function (i) { return i.id === st.key; })) {
          fail(st.line, "live_field_conflict", st.key, conflict(st.key));
        }
      }
      if (res.issues.some(isError)) return res;
      let order = old.order.slice();
      const pos = new Map();
      order.forEach(function (s, i) { pos.set(stmtID(s), i); });
      for (const st of stmts) {
        const i = pos.get(stmtID(st));
        if (i !== undefined) order[i] = st; else order.push(st);
      }
      order = reachable(order);
      if (!doc.errKeys) doc.errKeys = errorKeys(recheck(old.order).issues);
      const after = recheck(order);
      for (const i of after.issues) {
        if (doc.errKeys.has(i.code + "\u0000" + i.id)) continue;
        i.line = assigned.get(i.id) || 0;
        res.issues.push(i);
      }
      if (res.issues.some(isError)) return res;
      doc.idx = after.idx;
      doc.missing = after.missing;
      doc.errKeys = errorKeys(after.issues);
      res.applied = true;
      return res;
    }
  }

  function isError(i) { return i.severity === "error"; }
  function errorKeys(issues) { return new Set(issues.map(function (i) { return i.code + "\u0000" + i.id; })); }
  function fieldEdits(old, stmts, key) {
    if ((old.editors.get(key) || []).length > 0) return true;
    return stmts.some(function (s) { return s.edits === key; });
  }
  function reachable(order) {
    const byID = new Map();
    for (const s of order) if (s.kind !== "s") byID.set(stmtID(s), s);
    const keep = new Set();
    const r = byID.get(ROOT);
    if (r && r.kind === "c") {
      const stack = [ROOT];
      keep.add(ROOT);
      while (stack.length) {
        const s = byID.get(stack.pop());
        if (!s || s.kind !== "c") continue;
        for (const c of s.node.children) {
          const cs = byID.get(c);
          if (cs && cs.kind === "c" && !keep.has(c)) { keep.add(c); stack.push(c); }
        }
      }
    }
    return order.filter(function (s) {
      if (s.kind === "s") return true;
      if (s.kind === "c") return keep.has(s.node.id);
      return keep.has(s.mut.target) && hasAction(byID.get(s.mut.target));
    });
  }
  function recheck(order) {
    const x = new Index();
    const issues = [];
    for (const s of order) {
      const di = x.check(s);
      if (di) issues.push(issue(s.line, di[0], stmtID(s), di[1]));
      x.add(s);
    }
    const end = x.endIssues();
    return { idx: x, issues: issues.concat(end.issues), missing: end.missing };
  }

  // --- fields (SPEC 8; package screen/field) -----------------------------------

  const M = T.messages;

  function fieldCheck(component, props, value) {
    const required = props.required === true;
    const text = typeof value === "string" ? value.trim() : "";
    switch (component) {
      case "Input": {
        if (text === "") return required ? { message: "required" } : null;
        const f = props.format;
        if (typeof f === "string") {
          const key = checkFormat(f, text);
          if (key) return { message: key };
        }
        const lo = props.minLength, hi = props.maxLength;
        if (typeof lo !== "number" && typeof hi !== "number") return null;
        const points = Array.from(text).length;
        if (typeof lo === "number" && points < lo) return { message: "tooShort", values: { min: lo } };
        if (typeof hi === "number" && points > hi) return { message: "tooLong", values: { max: hi } };
        return null;
      }
      case "DateInput": {
        if (text === "") return required ? { message: "required" } : null;
        if (typeof props.min === "string" && text < props.min) return { message: "dateTooEarly", values: { min: props.min } };
        if (typeof props.max === "string" && text > props.max) return { message: "dateTooLate", values: { max: props.max } };
        return null;
      }
      case "Select":
        if (!required) return null;
        if (typeof value === "string" && Array.isArray(props.options) && props.options.indexOf(value) >= 0) return null;
        return { message: "chooseOption" };
      case "Switch":
        return required && value !== true ? { message: "turnOn" } : null;
    }
    return null;
  }
  function checkAppField(props, value) {
    if (props.required !== true) return null;
    if (value === null || value === undefined || value === false || (typeof value === "string" && value.trim() === "")) return { message: "required" };
    return null;
  }
  function dotted(host) {
    return host !== "" && host[0] !== "." && !host.endsWith(".") && host.indexOf("..") < 0 && host.indexOf(".", 1) > 0;
  }
  function checkFormat(f, s) {
    switch (f) {
      case "email": {
        const at = s.indexOf("@");
        if (at <= 0 || /\s/.test(s)) return "invalidEmail";
        const host = s.slice(at + 1);
        return host.indexOf("@") < 0 && dotted(host) ? "" : "invalidEmail";
      }
      case "number":
        return /^[+-]?[0-9]+([.,][0-9]+)?$/.test(s) ? "" : "invalidNumber";
      case "phone": {
        if (!/^\+?[0-9 ().-]+$/.test(s)) return "invalidPhone";
        const d = s.replace(/[^0-9]/g, "").length;
        return d >= 7 && d <= 15 ? "" : "invalidPhone";
      }
      case "url": {
        const m = /^https?:\/\//i.exec(s);
        if (!m) return "invalidUrl";
        const rest = s.slice(m[0].length);
        if (/\s/.test(rest)) return "invalidUrl";
        const cut = rest.search(/[/?#]/);
        return dotted(cut >= 0 ? rest.slice(0, cut) : rest) ? "" : "invalidUrl";
      }
    }
    return "";
  }
  function formatValue(v) {
    if (v === null || v === undefined) return "";
    if (typeof v === "string") return v;
    if (typeof v === "number") return fmtNum(v);
    if (typeof v === "boolean") return v ? "true" : "false";
    return JSON.stringify(v);
  }
  function fillTemplate(t, values) {
    if (!values) return t;
    return t.replace(/\{([A-Za-z]+)\}/g, function (all, k) { return k in values ? formatValue(values[k]) : all; });
  }
  function messageText(p) {
    if (!p) return "";
    return fillTemplate(M[p.message] || T.words.fieldFallback, p.values);
  }

  // --- drawing (package screen/render and its template) ------------------------

  const W = T.words;

  function esc(s) {
    return String(s).replace(/[&<>"'+\0]/g, function (c) {
      switch (c) {
        case "&": return "&amp;";
        case "<": return "&lt;";
        case ">": return "&gt;";
        case "\"": return "&#34;";
        case "'": return "&#39;";
        case "+": return "&#43;";
      }
      return "\uFFFD";
    });
  }

  function money(f, cur) {
    cur = cur || "USD";
    let sign = "";
    if (f < 0) { sign = "-"; f = -f; }
    const parts = f.toFixed(2).split(".");
    const amount = parts[0].replace(/\B(?=(\d{3})+(?!\d))/g, ",") + "." + parts[1];
    const sym = { USD: "$", EUR: "€", GBP: "£", JPY: "¥" }[cur];
    return sym ? sign + sym + amount : sign + amount + " " + cur;
  }

  const MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];
  function longDate(s) {
    const m = /^([0-9]{4})-([0-9]{2})-([0-9]{2})$/.exec(s.trim());
    if (!m) return "";
    const y = +m[1], mo = +m[2], d = +m[3];
    if (mo < 1 || mo > 12 || d < 1) return "";
    const days = [31, (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0 ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][mo - 1];
    if (d > days) return "";
    return MONTHS[mo - 1] + " " + d + ", " + m[1];
  }

  function title(doc) {
    for (const n of doc.nodes()) {
      if (n.type === "Heading" && typeof n.props.text === "string" && n.props.text.trim() !== "") return n.props.text.trim().split(/\s+/).join(" ");
    }
    return "Untitled screen";
  }

  // Builder walks a document into HTML, as the web UI's template draws it.
  class Builder {
    constructor(doc, opt) {
      this.doc = doc;
      this.opt = opt;
      this.seen = new Set();
    }
    slot(id) {
      if (this.doc.ended) return "<div class=\"o-slot o-missing\" id=\"n-" + esc(id) + "\" role=\"note\">" + esc(W.missing) + "</div>";
      return pendingSlot(id);
    }
    // child draws the component id, or its slot; slot reports which.
    // asPanel draws a Tab as its panel's content, as its Tabs shows it.
    child(id, depth, asPanel) {
      const n = this.doc.node(id);
      if (!n || this.seen.has(id) || depth > 64) return { slot: true, html: this.slot(id), label: W.loading };
      for (const k in n.props) {
        const v = n.props[k];
        if (v instanceof StateRef && !this.doc.stateOf(v.key)) return { slot: true, html: this.slot(id), label: W.loading };
      }
      this.seen.add(id);
      return { slot: false, node: n, html: this.node(n, depth, asPanel) };
    }
    kids(n, depth) {
      const self = this;
      return n.children.map(function (c) { return self.child(c, depth + 1); });
    }
    kidsHTML(n, depth) { return this.kids(n, depth).map(function (k) { return k.html; }).join(""); }
    text(v) {
      if (v instanceof StateRef) { const s = this.doc.stateOf(v.key); v = s ? s.value : null; }
      return formatValue(v);
    }
    str(n, p) { return this.text(n.props[p]); }
    num(n, p) {
      let v = n.props[p];
      if (v instanceof StateRef) { const s = this.doc.stateOf(v.key); v = s ? s.value : null; }
      return typeof v === "number" ? v : null;
    }
    node(n, depth, asPanel) {
      const id = esc(n.id);
      if (n.app) return "<div class=\"o-slot o-missing\" id=\"n-" + id + "\" role=\"note\">" + esc(W.unsupported) + "</div>";
      switch (n.type) {
        case "Stack":
          return "<div class=\"o-stack o-dir-" + esc(this.str(n, "direction") || "column") + " o-gap-" + esc(this.str(n, "gap") || "md") + " o-align-" + esc(this.str(n, "align") || "stretch") + "\" id=\"n-" + id + "\">" + this.kidsHTML(n, depth) + "</div>";
        case "Card": {
          const t = this.str(n, "title");
          return "<section class=\"o-card\" id=\"n-" + id + "\"" + (t ? " aria-label=\"" + esc(t) + "\"" : "") + ">" + (t ? "<p class=\"o-card-title\">" + esc(t) + "</p>" : "") + this.kidsHTML(n, depth) + "</section>";
        }
        case "Heading": {
          const l = this.num(n, "level");
          const level = l === null ? 1 : Math.trunc(l);
          const tag = level === 1 ? "h2" : level === 2 ? "h3" : "h4";
          return "<" + tag + " class=\"o-h" + (level === 1 || level === 2 ? level : 3) + "\" id=\"n-" + id + "\">" + esc(this.str(n, "text")) + "</" + tag + ">";
        }
        case "Text":
          return "<p class=\"o-text o-tone-" + esc(this.str(n, "tone") || "default") + "\" id=\"n-" + id + "\">" + esc(this.formatText(n)) + "</p>";
        case "Button": {
          const label = this.str(n, "label"), variant = this.str(n, "variant") || "secondary", action = this.str(n, "action");
          let attrs = "", blocked = false;
          if (action) {
            const m = this.doc.mutation(n.id);
            blocked = !!m && !this.opt.tools.has(m.tool);
            attrs = " data-press=\"" + id + "\"" + (!m || blocked ? " disabled aria-disabled=\"true\"" : "");
          }
          return "<div class=\"o-button\" id=\"n-" + id + "\"><button type=\"button\" id=\"b-" + id + "\" class=\"o-btn o-" + esc(variant) + "\"" + attrs + ">" + esc(label) + "</button>" + (blocked ? "<p class=\"o-msg\">" + esc(W.blocked) + "</p>" : "") + "</div>";
        }
        case "Divider": return "<hr class=\"o-divider\" id=\"n-" + id + "\">";
        case "Badge":
          return "<span class=\"o-badge o-tone-" + esc(this.str(n, "tone") || "neutral") + "\" id=\"n-" + id + "\">" + esc(this.str(n, "text")) + "</span>";
        case "Skeleton": {
          const l = this.num(n, "lines");
          return "<div class=\"o-skeleton\" id=\"n-" + id + "\" role=\"status\" aria-label=\"" + esc(W.loading) + "\">" + "<span class=\"o-skel-line\" aria-hidden=\"true\"></span>".repeat(l === null ? 3 : Math.trunc(l)) + "</div>";
        }
        case "Image": {
          const alt = esc(this.str(n, "alt")), ratio = esc(this.str(n, "ratio").replace(/:/g, "-") || "16-9");
          const name = n.props.asset;
          const src = typeof name === "string" ? this.opt.picture(name) : "";
          if (src) return "<img class=\"o-picture o-ratio-" + ratio + "\" id=\"n-" + id + "\" src=\"" + esc(src) + "\" alt=\"" + alt + "\" referrerpolicy=\"no-referrer\">";
          return "<div class=\"o-image o-ratio-" + ratio + "\" id=\"n-" + id + "\" role=\"img\" aria-label=\"" + alt + "\"><span aria-hidden=\"true\">" + alt + "</span></div>";
        }
        case "Rating": {
          const val = this.num(n, "value") || 0;
          const mx = this.num(n, "max");
          const max = mx === null ? 5 : mx;
          const full = Math.floor(Math.max(0, Math.min(val, max)));
          let stars = "";
          for (let i = 0; i < Math.trunc(max); i++) stars += i < full ? "★" : "☆";
          return "<p class=\"o-rating\" id=\"n-" + id + "\"><span class=\"o-stars\" aria-hidden=\"true\">" + stars + "</span> <span>" + esc("Rated " + fmtNum(val) + " out of " + fmtNum(max)) + "</span></p>";
        }
        case "List":
          return "<ul class=\"o-list\" id=\"n-" + id + "\">" + this.kids(n, depth).map(function (k) { return k.slot ? "<li>" + k.html + "</li>" : k.html; }).join("") + "</ul>";
        case "ListItem": {
          const d = this.str(n, "detail"), t = this.str(n, "trailing");
          return "<li class=\"o-item\" id=\"n-" + id + "\"><span class=\"o-item-main\"><span class=\"o-item-title\">" + esc(this.str(n, "title")) + "</span>" + (d ? "<span class=\"o-item-detail\">" + esc(d) + "</span>" : "") + "</span>" + (t ? "<span class=\"o-item-trailing\">" + esc(t) + "</span>" : "") + "</li>";
        }
        case "Message": {
          const from = this.str(n, "from");
          return "<div class=\"o-message o-from-" + esc(from) + "\" id=\"n-" + id + "\"><span class=\"o-from\">" + (from === "user" ? "You" : "Assistant") + "</span><p>" + esc(this.str(n, "text")) + "</p></div>";
        }
        case "Notice": {
          const t = this.str(n, "title");
          return "<div class=\"o-notice o-tone-" + esc(this.str(n, "tone") || "info") + "\" id=\"n-" + id + "\" role=\"note\" data-notice>" + (t ? "<p class=\"o-notice-title\">" + esc(t) + "</p>" : "") + "<p>" + esc(this.str(n, "text")) + "</p></div>";
        }
        case "Tabs": {
          const self0 = this;
          const kids = n.children.map(function (c) { return self0.child(c, depth + 1, true); });
          let list = "", panels = "";
          const self = this;
          kids.forEach(function (k, i) {
            const kid = esc(n.children[i]);
            const label = !k.slot ? self.str(k.node, "label") : self.doc.ended ? W.missing : W.loading;
            list += "<button type=\"button\" role=\"tab\" id=\"t-" + kid + "\" aria-controls=\"p-" + kid + "\" aria-selected=\"" + (i === 0) + "\" tabindex=\"" + (i === 0 ? 0 : -1) + "\">" + esc(label) + "</button>";
            panels += "<div role=\"tabpanel\" class=\"o-panel\" id=\"p-" + kid + "\" aria-labelledby=\"t-" + kid + "\" tabindex=\"0\"" + (i !== 0 ? " hidden" : "") + ">" + k.html + "</div>";
          });
          return "<div class=\"o-tabs\" id=\"n-" + id + "\" data-tabs=\"" + id + "\"><div role=\"tablist\" aria-label=\"Sections\">" + list + "</div>" + panels + "</div>";
        }
        case "Tab":
          // Drawn by its Tabs, whose panel holds the children; elsewhere
          // it is drawn as the web renderer draws it, an empty fallback.
          if (asPanel) return this.kidsHTML(n, depth);
          return "<div class=\"o-slot o-missing\" id=\"n-" + id + "\" role=\"note\"></div>";
        case "Table": {
          const cols = textList(n.props.columns).map(function (c) { return "<th scope=\"col\">" + esc(c) + "</th>"; }).join("");
          const rows = this.kids(n, depth).map(function (k) { return k.slot ? "<tr class=\"o-row-slot\"><td colspan=\"8\">" + k.html + "</td></tr>" : k.html; }).join("");
          return "<div class=\"o-table-wrap\" id=\"n-" + id + "\" role=\"region\" aria-label=\"Table\" tabindex=\"0\"><table class=\"o-table\"><thead><tr>" + cols + "</tr></thead><tbody>" + rows + "</tbody></table></div>";
        }
        case "TableRow": {
          const self = this;
          const cells = Array.isArray(n.props.cells) ? n.props.cells : [];
          return "<tr id=\"n-" + id + "\">" + cells.map(function (c) { return "<td" + (typeof c === "number" ? " class=\"o-num\"" : "") + ">" + esc(self.text(c)) + "</td>"; }).join("") + "</tr>";
        }
        case "BarChart": case "LineChart": case "PieChart":
          return this.chart(n);
        case "Input": case "DateInput": case "Select": case "Switch":
          return this.field(n);
      }
      return "<div class=\"o-slot o-missing\" id=\"n-" + id + "\" role=\"note\">" + esc(W.unsupported) + "</div>";
    }
    formatText(n) {
      let raw = n.props.text;
      if (raw instanceof StateRef) { const s = this.doc.stateOf(raw.key); raw = s ? s.value : null; }
      const f = this.str(n, "format");
      if (f === "currency" && typeof raw === "number") return money(raw, this.str(n, "currency"));
      if (f === "date" && typeof raw === "string") { const d = longDate(raw); if (d) return d; }
      return this.str(n, "text");
    }
    field(n) {
      const id = esc(n.id);
      const key = this.doc.edits(n.id);
      const label = esc(this.str(n, "label"));
      const required = n.props.required === true;
      const st = this.doc.stateOf(key);
      const val = st ? st.value : null;
      const message = this.opt.message(n);
      const req = required ? " aria-required=\"true\"" : "";
      const inv = message ? " aria-invalid=\"true\" aria-describedby=\"m-" + id + "\"" : "";
      const star = required ? "<span class=\"o-req\" aria-hidden=\"true\"> *</span>" : "";
      const ph = esc(this.str(n, "placeholder"));
      let h = "<div class=\"o-field o-field-" + esc(n.type) + "\" id=\"n-" + id + "\">";
      if (n.type === "Switch") {
        h += "<div class=\"o-switch-row\"><input type=\"checkbox\" role=\"switch\" id=\"f-" + id + "\" data-field=\"" + id + "\" data-kind=\"switch\"" + (val === true ? " checked" : "") + req + inv + "><label for=\"f-" + id + "\">" + label + star + "</label></div>";
      } else {
        h += "<label for=\"f-" + id + "\">" + label + star + "</label>";
        const text = typeof val === "string" ? esc(val) : "";
        if (n.type === "Select") {
          const opts = textList(n.props.options).map(function (o) { return "<option value=\"" + esc(o) + "\"" + (o === val ? " selected" : "") + ">" + esc(o) + "</option>"; }).join("");
          h += "<select id=\"f-" + id + "\" data-field=\"" + id + "\" data-kind=\"select\"" + req + inv + "><option value=\"\">" + ph + "</option>" + opts + "</select>";
        } else if (n.type === "DateInput") {
          const min = this.str(n, "min"), max = this.str(n, "max");
          h += "<input type=\"date\" id=\"f-" + id + "\" data-field=\"" + id + "\" data-kind=\"text\" value=\"" + text + "\"" + (min ? " min=\"" + esc(min) + "\"" : "") + (max ? " max=\"" + esc(max) + "\"" : "") + req + inv + ">";
        } else {
          const lines = this.num(n, "lines");
          const format = n.props.format;
          if (lines !== null && lines > 1) {
            h += "<textarea id=\"f-" + id + "\" data-field=\"" + id + "\" data-kind=\"text\" rows=\"" + Math.trunc(lines) + "\" placeholder=\"" + ph + "\"" + req + inv + ">" + text + "</textarea>";
          } else {
            const type = { email: "email", url: "url", phone: "tel" }[format] || "text";
            h += "<input type=\"" + type + "\" id=\"f-" + id + "\" data-field=\"" + id + "\" data-kind=\"text\" value=\"" + text + "\" placeholder=\"" + ph + "\" autocomplete=\"off\" spellcheck=\"false\"" + (format === "number" ? " inputmode=\"decimal\"" : "") + req + inv + ">";
          }
        }
      }
      h += "<p class=\"o-msg\" id=\"m-" + id + "\"" + (message ? "" : " hidden") + ">" + esc(message) + "</p></div>";
      return h;
    }
    chart(n) {
      const W2 = 560, H = 220;
      const labels = textList(n.props.labels);
      const format = this.str(n, "format"), cur = this.str(n, "currency");
      const show = function (f) { return format === "currency" ? money(f, cur) : format === "percent" ? fmtNum(f) + "%" : fmtNum(f); };
      const series = [];
      let pending = 0;
      for (const c of n.children) {
        const cn = this.doc.node(c);
        if (!cn) { pending++; continue; }
        this.seen.add(c);
        const name = typeof cn.props.name === "string" ? cn.props.name : "";
        if (cn.type === "Series") series.push({ name: name, vals: (Array.isArray(cn.props.values) ? cn.props.values : []).map(function (x) { return typeof x === "number" ? x : 0; }) });
        else if (cn.type === "Slice") series.push({ name: name, vals: [typeof cn.props.value === "number" ? cn.props.value : 0] });
      }
      let max = 0;
      for (const s of series) for (const f of s.vals) max = Math.max(max, f);
      if (max === 0) max = 1;
      const cls = function (i) { return "c" + (i % 8 + 1); };
      let svg = "", legend = "", table = "";
      const kind = n.type;
      if (kind === "BarChart") {
        const gw = Math.trunc(W2 / Math.max(1, labels.length));
        const bw = Math.trunc((gw - 12) / Math.max(1, series.length));
        svg = "<line class=\"o-axis\" x1=\"0\" y1=\"" + H + "\" x2=\"" + W2 + "\" y2=\"" + H + "\"></line>";
        series.forEach(function (s, si) {
          s.vals.forEach(function (f, li) {
            const h = Math.trunc(f / max * (H - 10));
            svg += "<rect class=\"" + cls(si) + "\" x=\"" + (li * gw + 6 + si * bw) + "\" y=\"" + (H - h) + "\" width=\"" + Math.max(1, bw - 2) + "\" height=\"" + h + "\"></rect>";
          });
        });
      } else if (kind === "LineChart") {
        const step = (W2 - 20) / Math.max(1, labels.length - 1);
        svg = "<line class=\"o-axis\" x1=\"0\" y1=\"" + H + "\" x2=\"" + W2 + "\" y2=\"" + H + "\"></line>";
        series.forEach(function (s, si) {
          const pts = s.vals.map(function (f, li) { return (10 + li * step).toFixed(1) + "," + (H - f / max * (H - 10)).toFixed(1); }).join(" ");
          svg += "<polyline class=\"o-line " + cls(si) + "\" points=\"" + pts + "\"></polyline>";
        });
      } else {
        let total = 0;
        for (const s of series) total += s.vals[0];
        let start = -Math.PI / 2;
        const cx = H / 2, cy = H / 2, r = H / 2 - 5;
        const f1 = function (x) { return x.toFixed(1); };
        series.forEach(function (s, i) {
          const v = s.vals[0];
          if (total > 0 && v > 0) {
            const a = v / total * 2 * Math.PI;
            let path;
            if (a >= 2 * Math.PI - 1e-9) {
              path = "M " + f1(cx) + " " + f1(cy) + " m -" + f1(r) + " 0 a " + f1(r) + " " + f1(r) + " 0 1 0 " + f1(2 * r) + " 0 a " + f1(r) + " " + f1(r) + " 0 1 0 -" + f1(2 * r) + " 0";
            } else {
              path = "M " + f1(cx) + " " + f1(cy) + " L " + f1(cx + r * Math.cos(start)) + " " + f1(cy + r * Math.sin(start)) + " A " + f1(r) + " " + f1(r) + " 0 " + (a > Math.PI ? 1 : 0) + " 1 " + f1(cx + r * Math.cos(start + a)) + " " + f1(cy + r * Math.sin(start + a)) + " Z";
            }
            svg += "<path class=\"" + cls(i) + "\" d=\"" + path + "\"></path>";
            start += a;
          }
        });
      }
      const showLegend = kind === "PieChart" ? series.length > 0 : series.length >= 2;
      if (showLegend) {
        legend = "<ul class=\"o-legend\">" + series.map(function (s, i) {
          return "<li><span class=\"o-swatch " + cls(i) + "\" aria-hidden=\"true\"></span>" + esc(s.name) + (kind === "PieChart" ? ": " + esc(show(s.vals[0])) : "") + "</li>";
        }).join("") + "</ul>";
      }
      if (kind === "PieChart") {
        table = "<thead><tr><th scope=\"col\">Slice</th><th scope=\"col\">Value</th></tr></thead><tbody>" + series.map(function (s) { return "<tr><th scope=\"row\">" + esc(s.name) + "</th><td>" + esc(show(s.vals[0])) + "</td></tr>"; }).join("") + "</tbody>";
      } else {
        table = "<thead><tr><th scope=\"col\">Series</th>" + labels.map(function (l) { return "<th scope=\"col\">" + esc(l) + "</th>"; }).join("") + "</tr></thead><tbody>" + series.map(function (s) { return "<tr><th scope=\"row\">" + esc(s.name) + "</th>" + s.vals.map(function (f) { return "<td>" + esc(show(f)) + "</td>"; }).join("") + "</tr>"; }).join("") + "</tbody>";
      }
      return "<figure class=\"o-chart\" id=\"n-" + esc(n.id) + "\"><figcaption class=\"o-chart-title\">" + esc(this.str(n, "title")) + "</figcaption>" +
        "<svg class=\"o-svg o-svg-" + kind + "\" viewBox=\"0 0 " + W2 + " " + H + "\" aria-hidden=\"true\" focusable=\"false\">" + svg + "</svg>" +
        (kind !== "PieChart" ? "<p class=\"o-chart-labels\" aria-hidden=\"true\">" + labels.map(function (l) { return "<span>" + esc(l) + "</span>"; }).join("") + "</p>" : "") +
        legend + "<table class=\"visually-hidden\">" + table + "</table>" +
        (pending ? "<p class=\"o-slot o-pending\" role=\"status\" aria-label=\"" + esc(W.loading) + "\"><span class=\"o-shimmer\" aria-hidden=\"true\"></span></p>" : "") + "</figure>";
    }
  }

  function pendingSlot(id) {
    return "<div class=\"o-slot o-pending\" id=\"n-" + esc(id) + "\" role=\"status\" aria-label=\"" + esc(W.loading) + "\"><span class=\"o-shimmer\" aria-hidden=\"true\"></span></div>";
  }

  function textList(v) { return Array.isArray(v) ? v.map(formatValue) : []; }

  // --- sessions ------------------------------------------------------------------

  // Session is one screen: open(config) with config
  // {tools, pictures, assets, components, families}.
  class Session {
    constructor(cfg) {
      cfg = cfg || {};
      this.tools = new Set(cfg.tools || []);
      this.pictures = cfg.pictures || {};
      this.opt = {
        tools: cfg.tools || [],
        assets: (cfg.assets || []).concat(Object.keys(this.pictures)),
        components: declareComponents(cfg.components),
        pictures: declarePictures(cfg.families),
      };
      this.reset();
    }
    reset() {
      this.p = new Parser(this.opt);
      this.touched = new Set();
    }
    get doc() { return this.p.doc; }
    write(text) { this.p.write(text); }
    end() { this.p.end(); }
    problem(n) {
      const s = this.doc.stateOf(this.doc.edits(n.id));
      const v = s ? s.value : null;
      if (n.app) return n.props.required === true ? checkAppField(n.props, v) : null;
      return fieldCheck(n.type, n.props, v);
    }
    // draw returns {html, ended, rejected, title, newer}.
    draw() {
      const self = this;
      const b = new Builder(this.doc, {
        tools: this.tools,
        picture: function (name) { const src = self.pictures[name]; return typeof src === "string" && src.startsWith("data:image/") ? src : ""; },
        message: function (n) { return self.touched.has(n.id) ? messageText(self.problem(n)) : ""; },
      });
      const html = b.child(ROOT, 0).html;
      return {
        html: html,
        ended: this.doc.ended,
        rejected: this.doc.issues.filter(isError).length,
        title: title(this.doc),
        newer: this.doc.newer ? W.newer : "",
      };
    }
    // input records a field's new value and returns its message.
    input(id, value, touched) {
      const n = this.doc.node(id);
      if (!n || (["Input", "DateInput", "Select", "Switch"].indexOf(n.type) < 0 && !n.app)) return "";
      if (!this.doc.setState(this.doc.edits(id), value)) return "";
      if (touched) this.touched.add(id);
      return this.touched.has(id) ? messageText(this.problem(n)) : "";
    }
    // press returns {tool, params} for a Button, {blocked: fieldID} when a
    // field it reads has a problem, or {refused: true}.
    press(id) {
      const n = this.doc.node(id);
      const m = this.doc.mutation(id);
      if (!n || n.type !== "Button" || !m) return { refused: true };
      for (const f of this.doc.fieldsReadBy(m)) {
        if (this.problem(f)) { this.touched.add(f.id); return { blocked: f.id }; }
      }
      const params = {};
      for (const [k, v] of m.params.m) {
        if (v instanceof StateRef) { const s = this.doc.stateOf(v.key); params[k] = s ? s.value : null; } else params[k] = v;
      }
      return { tool: m.tool, params: params };
    }
    update(text) {
      if (!this.p.ended) return { applied: false, issues: [], error: "an update applies only to a screen whose stream has ended" };
      return this.p.update(text);
    }
    // outline writes the screen as indented text for the model: each
    // component's kind and words, and each field's value as it stands,
    // with the value of a $key in secret written as hidden.
    outline(secret) {
      const doc = this.doc, lines = [], seen = new Set();
      const self = this;
      const words = function (n, p) {
        let v = n.props[p];
        if (v instanceof StateRef) {
          if (secret.has(v.key)) return W.hidden;
          const st = doc.stateOf(v.key);
          v = st ? st.value : null;
        }
        return formatValue(v);
      };
      (function walk(id, depth) {
        const n = doc.node(id);
        const pad = "  ".repeat(depth);
        if (!n || seen.has(id) || depth > 64) { lines.push(pad + (doc.ended ? "(missing)" : "(loading)")); return; }
        seen.add(id);
        let line = n.type;
        const key = doc.edits(id);
        if (key) {
          const st = doc.stateOf(key);
          const v = st ? st.value : null;
          const shown = secret.has(key) ? W.hidden : v === null || v === "" ? "(empty)" : JSON.stringify(v);
          line += ": " + (words(n, "label") || id) + " = " + shown;
          if (self.touched.has(id)) { const m = messageText(self.problem(n)); if (m) line += " — " + m; }
        } else {
          const text = ["text", "title", "label", "alt", "name"].map(function (p) { return words(n, p); }).filter(Boolean)[0];
          if (text) line += ": " + text;
          const m = n.type === "Button" ? doc.mutation(id) : null;
          if (m) line += " (runs " + m.tool + ")";
        }
        lines.push(pad + line);
        for (const c of n.children) walk(c, depth + 1);
      })(ROOT, 0);
      return lines.join("\n");
    }
    // outcome is the conformance shape of the document and its issues.
    outcome() {
      return JSON.parse(JSON.stringify({ doc: this.doc, issues: this.doc.issues }));
    }
  }

  return {
    version: T.format,
    open: function (cfg) { return new Session(cfg); },
    fieldCheck: fieldCheck,
    message: messageText,
  };
})();
