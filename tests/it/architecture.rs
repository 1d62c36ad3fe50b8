//! The layering rules, checked on the source tree: `src/policy/` is pure (no tokio, hyper,
//! rusqlite, ratatui or crossterm, never reads time), `src/console/` reaches live state only
//! through snapshots and `Control` (never the proxy or the store), nothing outside
//! `src/clock.rs` reads the time (`Instant::now`, `SystemTime::now`, or calling
//! `SystemClock`'s `now` / `wall` directly instead of the injected clock), and the imports
//! between the top-level modules of `src/` form no circle beyond the known ones listed in
//! [`KNOWN_CYCLES`].
//!
//! Test code is exempt: test files (`tests.rs`, `*_tests.rs`, files under a `tests/` folder,
//! files a `#[cfg(test)] mod x;` loads) and each `#[cfg(test)]` item (the attribute and the one item it applies to: a `mod` block or
//! declaration, a fn, an impl, a use, a field, a variant, a match arm). The rest of the file
//! after such an item is checked. Comments are never checked. Tests anchor manual clocks at
//! real time.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ops::Range;
use std::path::{Path, PathBuf};

/// The layers of `src/`, lowest first: a top-level module may import modules of its own
/// layer or a lower one, never a higher one (and, by the circle test, no two modules import
/// each other). Every top-level module of `src/lib.rs` must be listed.
#[rustfmt::skip] // one layer a line
const LAYERS: &[(&str, &[&str])] = &[
    ("time and small shared pieces", &["clock", "support"]),
    ("what the file says; the wire formats", &["config", "wire"]),
    ("pure decisions; pure dialect translation", &["policy", "translate"]),
    ("views of live state; persistence; metric families", &["snapshot", "store", "metrics"]),
    ("live state, written only by the core", &["core"]),
    ("I/O around the core: the proxy and the admin API", &["proxy", "admin"]),
    ("the operator's screen", &["console"]),
    ("the screen attached to a running sluice", &["remote"]),
    ("the command line and the wiring", &["cli", "app"]),
];

/// Files allowed to read time directly besides `src/clock.rs`. Empty: every other file takes
/// the injected clock. A new entry is a known debt and must name why.
const TIME_ALLOW_LIST: &[&str] = &[];

const TIME_READS: &[&str] = &[
    "Instant::now(",
    "SystemTime::now(",
    "SystemClock.now(",
    "SystemClock.wall(",
    "SystemClock::now(",
    "SystemClock::wall(",
];

const POLICY_FORBIDDEN: &[&str] = &[
    "tokio::",
    "use tokio",
    "hyper",
    "rusqlite",
    "ratatui",
    "crossterm",
    "SystemClock",
];

const CONSOLE_FORBIDDEN: &[&str] = &[
    "crate::proxy",
    "crate::store",
    "rusqlite",
    "hyper::",
    "use hyper",
];

/// The import circles between top-level modules that exist today: `(a, b, why)` allows the
/// circle `a → b → a` (each imports the other). A debt list, not a licence: it may only shrink.
/// Any other circle (a longer one included) fails the test, and so does an entry whose modules
/// no longer import each other (delete it then).
#[rustfmt::skip] // one entry a line
const KNOWN_CYCLES: &[(&str, &str, &str)] = &[];

/// The most lines a function of `src/` may span (its signature's line to its closing brace's),
/// unless it is a table of data marked `// long-table: <why>` right above its `fn`.
const MAX_FN_LINES: usize = 80;

/// The functions over [`MAX_FN_LINES`] lines today: `(file, fn name, why)`. A debt list, not a
/// licence: it may only shrink. A new long function fails the test, and so does an entry that
/// is no longer over the limit (delete it then).
#[rustfmt::skip] // one entry a line
const LONG_FUNCTIONS: &[(&str, &str, &str)] = &[
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn is_test_file(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    name == "tests.rs" || name.ends_with("_tests.rs") || rel.contains("/tests/")
}

/// `(relative path, text)` of every non-test source file under `src/`, sorted by path: not a
/// test file by name, and not loaded by a `#[cfg(test)] mod x;` declaration.
fn source_files() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    assert!(files.len() > 50, "found only {} source files", files.len());
    let mut all: Vec<(String, String)> = files
        .into_iter()
        .map(|path| {
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            (rel, std::fs::read_to_string(&path).unwrap())
        })
        .collect();
    all.sort();
    let test_modules: Vec<String> = all
        .iter()
        .flat_map(|(rel, text)| test_module_files(rel, text))
        .collect();
    let is_test_module = |rel: &str| {
        test_modules.iter().any(|m| {
            rel == m
                || m.strip_suffix(".rs")
                    .is_some_and(|dir| rel.starts_with(&format!("{dir}/")))
        })
    };
    all.into_iter()
        .filter(|(rel, _)| !is_test_file(rel) && !is_test_module(rel))
        .collect()
}

/// The files (relative paths) that the `#[cfg(test)] mod x;` declarations of the file `rel`
/// load: `#[path = "…"]` relative to its folder, else `x.rs` or `x/mod.rs` in its module's
/// folder.
fn test_module_files(rel: &str, text: &str) -> Vec<String> {
    let (dir, file) = rel.rsplit_once('/').unwrap_or(("", rel));
    let children = match file {
        "mod.rs" | "lib.rs" | "main.rs" => dir.to_string(),
        _ => format!("{dir}/{}", file.trim_end_matches(".rs")),
    };
    let class = classify(text);
    let structure: Vec<u8> = text
        .bytes()
        .enumerate()
        .map(|(i, c)| if class[i] == Class::Comment { b' ' } else { c })
        .collect();
    let mut out = Vec::new();
    for item in test_items(&blank_literals(&structure, &class)) {
        let item = std::str::from_utf8(&structure[item]).unwrap_or("");
        let Some(decl) = item.trim_end().strip_suffix(';') else {
            continue;
        };
        let Some(name) = decl.rsplit_once("mod ").map(|(_, n)| n.trim()) else {
            continue;
        };
        if !name.bytes().all(is_ident) {
            continue;
        }
        let path = item
            .split_once("#[path = \"")
            .and_then(|(_, rest)| rest.split_once('"'))
            .map(|(p, _)| format!("{dir}/{p}"));
        match path {
            Some(p) => out.push(p),
            None => {
                out.push(format!("{children}/{name}.rs"));
                out.push(format!("{children}/{name}/mod.rs"));
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The scanner: what of a file is non-test code.

/// What a byte of source text is part of.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Code,
    /// A line, block (nested) or doc comment.
    Comment,
    /// The inside of a string, raw string or char literal (its quotes are code).
    Literal,
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The class of every byte of `text`.
fn classify(text: &str) -> Vec<Class> {
    let b = text.as_bytes();
    let mut class = vec![Class::Code; b.len()];
    let at = |i: usize| b.get(i).copied().unwrap_or(0);
    let mut i = 0;
    while i < b.len() {
        let prev = if i == 0 { 0 } else { b[i - 1] };
        match b[i] {
            b'/' if at(i + 1) == b'/' => {
                let end = text[i..].find('\n').map_or(b.len(), |n| i + n);
                class[i..end].fill(Class::Comment);
                i = end;
            }
            b'/' if at(i + 1) == b'*' => {
                let (mut j, mut depth) = (i + 2, 1);
                while j < b.len() && depth > 0 {
                    if b[j] == b'/' && at(j + 1) == b'*' {
                        depth += 1;
                        j += 2;
                    } else if b[j] == b'*' && at(j + 1) == b'/' {
                        depth -= 1;
                        j += 2;
                    } else {
                        j += 1;
                    }
                }
                class[i..j].fill(Class::Comment);
                i = j;
            }
            // A raw string: `r"…"`, `r#"…"#`, `br"…"` (not the end of an identifier).
            b'r' if !is_ident(prev) || (prev == b'b' && (i < 2 || !is_ident(b[i - 2]))) => {
                let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
                if at(i + 1 + hashes) != b'"' {
                    i += 1;
                    continue;
                }
                let start = i + 2 + hashes;
                let close = format!("\"{}", "#".repeat(hashes));
                let end = text[start..].find(&close).map_or(b.len(), |n| start + n);
                class[start..end].fill(Class::Literal);
                i = (end + close.len()).min(b.len());
            }
            b'"' => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                let end = j.min(b.len());
                class[i + 1..end].fill(Class::Literal);
                i = end + 1;
            }
            // A char literal (`'x'`, `'\n'`, `'\u{7b}'`, `'{'`), not a lifetime or label.
            b'\'' => {
                let end = if at(i + 1) == b'\\' {
                    let from = (i + 3).min(b.len());
                    b[from..].iter().position(|&c| c == b'\'').map(|n| from + n)
                } else {
                    let width = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                    (at(i + 1 + width) == b'\'').then_some(i + 1 + width)
                };
                match end {
                    Some(end) => {
                        class[i + 1..end].fill(Class::Literal);
                        i = end + 1;
                    }
                    None => i += 1,
                }
            }
            _ => i += 1,
        }
    }
    class
}

fn skip_ws(s: &[u8], mut i: usize) -> usize {
    while i < s.len() && s[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// The identifier starting at `i` (empty if none).
fn word_at(s: &[u8], i: usize) -> &str {
    let len = s[i.min(s.len())..]
        .iter()
        .take_while(|&&c| is_ident(c))
        .count();
    std::str::from_utf8(&s[i..i + len]).unwrap_or("")
}

/// Index just past the bracket that closes the one at `open`.
fn past_matching(s: &[u8], open: usize) -> usize {
    let mut depth = 0usize;
    for (i, &c) in s.iter().enumerate().skip(open) {
        match c {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
    }
    s.len()
}

/// How an item ends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ends {
    /// `fn`, `impl`, `mod`, `struct`, `enum`, `trait`, `union`, `macro_rules!`: at its closing
    /// brace or a `;`.
    Block,
    /// `use`, `static`, `const`, `type`, `let`, `extern crate`: at a `;`.
    Semicolon,
    /// A field, variant, match arm, statement or macro call: at a `,` or `;`, or at a closing
    /// brace that nothing (`=>`, `else`, `.`, `?`) continues.
    Other,
}

fn item_ends(s: &[u8], mut i: usize) -> Ends {
    if word_at(s, i) == "pub" {
        i = skip_ws(s, i + 3);
        if s.get(i) == Some(&b'(') {
            i = skip_ws(s, past_matching(s, i));
        }
    }
    loop {
        let w = word_at(s, i);
        let next = skip_ws(s, i + w.len());
        match w {
            "unsafe" | "async" | "default" | "auto" => i = next,
            "extern" if s.get(next) == Some(&b'"') => {
                let close = s[next + 1..].iter().position(|&c| c == b'"');
                i = skip_ws(s, close.map_or(s.len(), |n| next + n + 2));
            }
            "extern" if word_at(s, next) == "crate" => return Ends::Semicolon,
            "extern" => i = next,
            "const" if matches!(word_at(s, next), "fn" | "unsafe" | "async" | "extern") => {
                i = next;
            }
            "fn" | "impl" | "mod" | "struct" | "enum" | "trait" | "union" | "macro_rules" => {
                return Ends::Block;
            }
            "use" | "static" | "const" | "type" | "let" => return Ends::Semicolon,
            _ => return Ends::Other,
        }
    }
}

/// Index just past the item that starts at `i` (after an attribute): its own further
/// attributes, then the item. Ends early, never late, at the closing bracket of the block
/// around it.
fn item_end(s: &[u8], i: usize) -> usize {
    let mut i = skip_ws(s, i);
    while s[i..].starts_with(b"#[") {
        i = skip_ws(s, past_matching(s, i + 1));
    }
    let ends = item_ends(s, i);
    let mut depth = 0usize;
    while i < s.len() {
        match s[i] {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' if depth == 0 => return i,
            b')' | b']' => depth -= 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    let n = skip_ws(s, i + 1);
                    let rest = &s[n..];
                    match ends {
                        Ends::Block => return i + 1,
                        Ends::Semicolon => {}
                        Ends::Other if rest.starts_with(b",") || rest.starts_with(b";") => {
                            return n + 1;
                        }
                        Ends::Other => {
                            let continued = rest.starts_with(b"=>")
                                || rest.starts_with(b".")
                                || rest.starts_with(b"?")
                                || word_at(s, n) == "else";
                            if !continued {
                                return i + 1;
                            }
                        }
                    }
                }
            }
            b';' if depth == 0 => return i + 1,
            b',' if depth == 0 && ends == Ends::Other => return i + 1,
            _ => {}
        }
        i += 1;
    }
    s.len()
}

/// The byte ranges of the `#[cfg(test)]` items of `code` (comments and literals blanked):
/// each attribute with the one item it applies to. `#![cfg(test)]` makes the whole file test.
fn test_items(code: &[u8]) -> Vec<Range<usize>> {
    const INNER: &[u8] = b"#![cfg(test)]";
    const OUTER: &[u8] = b"#[cfg(test)]";
    if code.windows(INNER.len()).any(|w| w == INNER) {
        let whole: Range<usize> = 0..code.len();
        return vec![whole];
    }
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(n) = code[i..].windows(OUTER.len()).position(|w| w == OUTER) {
        let start = i + n;
        let end = item_end(code, start + OUTER.len());
        out.push(start..end);
        i = end;
    }
    out
}

/// `code` with the insides of literals blanked to spaces (newlines kept).
fn blank_literals(code: &[u8], class: &[Class]) -> Vec<u8> {
    code.iter()
        .zip(class)
        .map(|(&c, &k)| {
            if k == Class::Literal && c != b'\n' {
                b' '
            } else {
                c
            }
        })
        .collect()
}

/// `text` with its comments and `#[cfg(test)]` items blanked to spaces (newlines kept, so
/// lines keep their numbers); with `literals_too`, the insides of literals too.
fn code_view(text: &str, literals_too: bool) -> String {
    let class = classify(text);
    let mut out: Vec<u8> = text
        .bytes()
        .zip(&class)
        .map(|(c, &k)| {
            if k == Class::Comment && c != b'\n' {
                b' '
            } else {
                c
            }
        })
        .collect();
    let structure = blank_literals(&out, &class);
    for r in test_items(&structure) {
        for c in &mut out[r] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    }
    if literals_too {
        out = blank_literals(&out, &class);
    }
    String::from_utf8(out).unwrap()
}

/// `(line number, code)` of the lines of a source file that hold non-test code, comments
/// removed (string literals kept).
fn code_lines(text: &str) -> Vec<(usize, String)> {
    code_view(text, false)
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| (i + 1, l.to_string()))
        .collect()
}

/// Every `(file, line, needle)` in `src/` (relative paths) whose code contains a needle,
/// restricted to files for which `applies` holds.
fn violations(applies: impl Fn(&str) -> bool, needles: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for (rel, text) in source_files() {
        if !applies(&rel) {
            continue;
        }
        for (n, code) in code_lines(&text) {
            for needle in needles {
                if code.contains(needle) {
                    found.push(format!("{rel}:{n}: `{needle}` in `{}`", code.trim()));
                }
            }
        }
    }
    found
}

// ---------------------------------------------------------------------------------------------
// The import graph between the top-level modules of `src/`.

/// A token of code, as the path reader needs it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Tok<'a> {
    Word(&'a str),
    PathSep,
    Open,
    Close,
    Comma,
    Other,
}

/// `(token, line)` of `code` (comments, literals and test items already blanked).
fn tokens(code: &str) -> Vec<(Tok<'_>, usize)> {
    let s = code.as_bytes();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < s.len() {
        let c = s[i];
        if c == b'\n' {
            line += 1;
            i += 1;
        } else if c.is_ascii_whitespace() {
            i += 1;
        } else if is_ident(c) {
            let w = word_at(s, i);
            out.push((Tok::Word(w), line));
            i += w.len();
        } else if s[i..].starts_with(b"::") {
            out.push((Tok::PathSep, line));
            i += 2;
        } else {
            let t = match c {
                b'{' => Tok::Open,
                b'}' => Tok::Close,
                b',' => Tok::Comma,
                _ => Tok::Other,
            };
            out.push((t, line));
            i += 1;
        }
    }
    out
}

/// The module path of a source file: `src/core/report.rs` → `["core", "report"]`,
/// `src/core/mod.rs` → `["core"]`.
fn module_of(rel: &str) -> Vec<String> {
    let p = rel
        .strip_prefix("src/")
        .unwrap()
        .strip_suffix(".rs")
        .unwrap();
    let mut path: Vec<String> = p.split('/').map(String::from).collect();
    if path.last().is_some_and(|l| l == "mod") {
        path.pop();
    }
    path
}

/// `(first segment, line)` of each path in `code` that starts at the crate root:
/// `crate::x…` (also `$crate::x…` and `pub(in crate::x)`), each item of `crate::{x…, y…}`,
/// and `super::…` climbing to the root from `module` (the file's module path; inline
/// `mod m { … }` blocks count as one more level).
fn root_paths<'a>(code: &'a str, module: &[String]) -> Vec<(&'a str, usize)> {
    paths_under(code, module, &[])
}

/// [`root_paths`] below the module `prefix` (e.g. `["proxy"]`): the first segment after
/// `crate::proxy::…`, or after `super::…` climbing to `proxy` from `module`.
fn paths_under<'a>(code: &'a str, module: &[String], prefix: &[&str]) -> Vec<(&'a str, usize)> {
    let toks = tokens(code);
    let tok = |i: usize| toks.get(i).map(|t| t.0);
    let mut out = Vec::new();
    let mut inline_depths: Vec<usize> = Vec::new();
    let mut depth = 0usize;
    for k in 0..toks.len() {
        match toks[k].0 {
            Tok::Open => depth += 1,
            Tok::Close => {
                depth = depth.saturating_sub(1);
                if inline_depths.last() == Some(&depth) {
                    inline_depths.pop();
                }
            }
            Tok::Word("mod")
                if matches!(tok(k + 1), Some(Tok::Word(_))) && tok(k + 2) == Some(Tok::Open) =>
            {
                inline_depths.push(depth);
            }
            _ => {}
        }
        if k > 0 && toks[k - 1].0 == Tok::PathSep {
            continue;
        }
        let root = match toks[k].0 {
            Tok::Word("crate") if tok(k + 1) == Some(Tok::PathSep) => {
                let under = prefix.iter().enumerate().all(|(n, p)| {
                    tok(k + 2 + 2 * n) == Some(Tok::Word(p))
                        && tok(k + 3 + 2 * n) == Some(Tok::PathSep)
                });
                under.then_some(k + 2 + 2 * prefix.len())
            }
            Tok::Word("super") => {
                let (mut j, mut up) = (k, 0);
                while tok(j) == Some(Tok::Word("super")) && tok(j + 1) == Some(Tok::PathSep) {
                    up += 1;
                    j += 2;
                }
                let levels = (module.len() + inline_depths.len()).checked_sub(prefix.len());
                (up > 0 && Some(up) == levels).then_some(j)
            }
            _ => None,
        };
        let Some(j) = root else { continue };
        match tok(j) {
            Some(Tok::Word(w)) => out.push((w, toks[j].1)),
            Some(Tok::Open) => {
                // A group: the first segment of each of its items.
                let mut group_depth = 0;
                let mut item_start = true;
                for &(t, line) in &toks[j..] {
                    match t {
                        Tok::Open => group_depth += 1,
                        Tok::Close => group_depth -= 1,
                        Tok::Word(w) if group_depth == 1 && item_start => out.push((w, line)),
                        _ => {}
                    }
                    if group_depth == 0 {
                        break;
                    }
                    item_start = group_depth == 1 && matches!(t, Tok::Comma | Tok::Open);
                }
            }
            _ => {}
        }
    }
    out
}

/// The top-level modules `src/lib.rs` declares.
fn top_level_modules() -> BTreeSet<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    let code = code_view(&lib, true);
    let toks = tokens(&code);
    let mods: BTreeSet<String> = toks
        .windows(2)
        .filter_map(|w| match (w[0].0, w[1].0) {
            (Tok::Word("mod"), Tok::Word(name)) => Some(name.to_string()),
            _ => None,
        })
        .collect();
    assert!(
        mods.len() > 10,
        "found only {} top-level modules",
        mods.len()
    );
    mods
}

/// `from → to → where` (the first `file:line` that imports `to` into `from`) over the
/// non-test code of `src/`, between distinct top-level modules.
type Graph = BTreeMap<String, BTreeMap<String, String>>;

fn import_graph() -> Graph {
    let tops = top_level_modules();
    let mut graph = Graph::new();
    for (rel, text) in source_files() {
        if rel == "src/lib.rs" || rel == "src/main.rs" {
            continue;
        }
        let module = module_of(&rel);
        let code = code_view(&text, true);
        for (to, line) in root_paths(&code, &module) {
            if tops.contains(to) && to != module[0] {
                graph
                    .entry(module[0].clone())
                    .or_default()
                    .entry(to.to_string())
                    .or_insert_with(|| format!("{rel}:{line}"));
            }
        }
    }
    graph
}

/// Every elementary circle of `graph` (each once, starting at its smallest module), at most
/// `limit` of them.
fn circles(graph: &Graph, limit: usize) -> Vec<Vec<String>> {
    let nodes: BTreeSet<&str> = graph
        .iter()
        .flat_map(|(a, tos)| std::iter::once(a.as_str()).chain(tos.keys().map(String::as_str)))
        .collect();
    let next = |a: &str| -> Vec<&str> {
        graph
            .get(a)
            .map(|tos| tos.keys().map(String::as_str).collect())
            .unwrap_or_default()
    };
    // reach[a]: every module a path from `a` arrives at.
    let reach: BTreeMap<&str, BTreeSet<&str>> = nodes
        .iter()
        .map(|&a| {
            let mut seen = BTreeSet::new();
            let mut queue = VecDeque::from(next(a));
            while let Some(b) = queue.pop_front() {
                if seen.insert(b) {
                    queue.extend(next(b));
                }
            }
            (a, seen)
        })
        .collect();
    let mut out = Vec::new();
    for &start in &nodes {
        // Depth-first over modules above `start` that lead back to it.
        let mut path = vec![start];
        let mut stack = vec![next(start)];
        while let Some(options) = stack.last_mut() {
            let Some(b) = options.pop() else {
                stack.pop();
                path.pop();
                continue;
            };
            if b == start {
                out.push(path.iter().map(|m| m.to_string()).collect());
                if out.len() >= limit {
                    return out;
                }
            } else if b > start && !path.contains(&b) && reach[b].contains(start) {
                path.push(b);
                stack.push(next(b));
            }
        }
    }
    out.sort();
    out
}

/// `a → b (file:line) → … → a (file:line)`: a circle with where each step is imported.
fn describe(graph: &Graph, circle: &[String]) -> String {
    let mut s = circle[0].clone();
    for (i, from) in circle.iter().enumerate() {
        let to = &circle[(i + 1) % circle.len()];
        s.push_str(&format!(" → {to} ({})", graph[from][to]));
    }
    s
}

fn is_known(circle: &[String]) -> bool {
    circle.len() == 2
        && KNOWN_CYCLES
            .iter()
            .any(|(a, b, _)| circle.contains(&a.to_string()) && circle.contains(&b.to_string()))
}

// ---------------------------------------------------------------------------------------------
// The lengths of the functions of `src/`.

/// A `fn` item with a body in non-test code.
#[derive(Clone, Debug, PartialEq, Eq)]
struct FnSpan {
    /// The function's name.
    name: String,
    /// The line of its `fn` keyword (1-based).
    line: usize,
    /// Lines from the `fn` keyword's line to its closing brace's, both included.
    lines: usize,
    /// Marked `// long-table: <why>` in the comments and attributes right above it.
    long_table: bool,
}

/// Index of the `{` that opens the body of the fn whose signature continues at `i`, or `None`
/// for a fn without a body (a `;` first).
fn body_open(s: &[u8], mut i: usize) -> Option<usize> {
    while i < s.len() {
        match s[i] {
            b'(' | b'[' => i = past_matching(s, i),
            b'{' => return Some(i),
            b';' | b'}' => return None,
            _ => i += 1,
        }
    }
    None
}

/// Whether a line among the comments and attributes right above line `line` (1-based) of
/// `text` is a `// long-table:` marker.
fn marked_long_table(text: &str, line: usize) -> bool {
    text.lines()
        .take(line.saturating_sub(1))
        .collect::<Vec<_>>()
        .iter()
        .rev()
        .map(|l| l.trim())
        .take_while(|l| l.starts_with("//") || l.starts_with("#["))
        .any(|l| l.starts_with("// long-table:"))
}

/// Every `fn` item with a body in the non-test code of `text`, in order (a fn nested in
/// another counts on its own, and within the other).
fn functions(text: &str) -> Vec<FnSpan> {
    let code = code_view(text, true);
    let s = code.as_bytes();
    let newlines: Vec<usize> = s
        .iter()
        .enumerate()
        .filter(|&(_, &c)| c == b'\n')
        .map(|(i, _)| i)
        .collect();
    let line_of = |i: usize| newlines.partition_point(|&n| n < i) + 1;
    let mut out = Vec::new();
    for (at, _) in code.match_indices("fn") {
        let before = at.checked_sub(1).map(|p| s[p]);
        if before.is_some_and(|c| is_ident(c) || c == b'#')
            || s.get(at + 2).is_some_and(|&c| is_ident(c))
        {
            continue;
        }
        let name_at = skip_ws(s, at + 2);
        let name = word_at(s, name_at);
        if name.is_empty() {
            continue;
        }
        let Some(open) = body_open(s, name_at + name.len()) else {
            continue;
        };
        let line = line_of(at);
        let close = past_matching(s, open).saturating_sub(1);
        out.push(FnSpan {
            name: name.to_string(),
            line,
            lines: line_of(close) - line + 1,
            long_table: marked_long_table(text, line),
        });
    }
    out
}

/// `(file, fn)` of every fn item in the non-test code of `src/`.
fn all_functions() -> Vec<(String, FnSpan)> {
    source_files()
        .into_iter()
        .flat_map(|(rel, text)| functions(&text).into_iter().map(move |f| (rel.clone(), f)))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The rules.

#[test]
fn policy_is_pure() {
    let v = violations(|f| f.starts_with("src/policy/"), POLICY_FORBIDDEN);
    assert!(
        v.is_empty(),
        "src/policy/ must stay pure:\n{}",
        v.join("\n")
    );
    let v = violations(|f| f.starts_with("src/policy/"), TIME_READS);
    assert!(
        v.is_empty(),
        "src/policy/ never reads time:\n{}",
        v.join("\n")
    );
}

/// What `src/core/` never names: the core keeps state in memory and reaches files only
/// through the store (the database and the files beside it) and the config (read at load).
const CORE_FORBIDDEN: &[&str] = &["std::fs", "fs::File", "File::open", "OpenOptions"];

#[test]
fn the_core_reads_and_writes_no_files_itself() {
    let v = violations(|f| f.starts_with("src/core/"), CORE_FORBIDDEN);
    assert!(
        v.is_empty(),
        "src/core/ reaches files only through the store or the config:\n{}",
        v.join("\n")
    );
}

#[test]
fn console_reaches_state_only_through_snapshots_and_control() {
    let v = violations(|f| f.starts_with("src/console/"), CONSOLE_FORBIDDEN);
    assert!(
        v.is_empty(),
        "src/console/ must not reach into the proxy or the store:\n{}",
        v.join("\n")
    );
}

#[test]
fn only_the_clock_reads_time() {
    let v = violations(
        |f| f != "src/clock.rs" && !TIME_ALLOW_LIST.contains(&f),
        TIME_READS,
    );
    assert!(
        v.is_empty(),
        "read time through the injected `Clock` instead:\n{}",
        v.join("\n")
    );
}

#[test]
fn operator_doors_reach_the_core_only_through_control_methods() {
    // The console and the admin API act through named `Control` methods; only the core itself,
    // the request path (src/proxy/) and the wiring (src/app.rs) hold a `Core`.
    let v = violations(
        |f| !f.starts_with("src/core/") && !f.starts_with("src/proxy/") && f != "src/app.rs",
        &[".core()"],
    );
    assert!(
        v.is_empty(),
        "use a named `Control` method instead of `.core()`:\n{}",
        v.join("\n")
    );
    // And `Control` offers no way around its methods.
    const CONTROL: &str = "src/core/operator/control.rs";
    assert!(
        source_files().iter().any(|(rel, _)| rel == CONTROL),
        "{CONTROL} moved: point this check at the file that defines `Control`"
    );
    let v = violations(|f| f == CONTROL, &["fn core("]);
    assert!(
        v.is_empty(),
        "`Control` must not hand out its `Core`:\n{}",
        v.join("\n")
    );
}

#[test]
fn top_level_modules_import_only_their_own_layer_or_lower_ones() {
    let layer_of = |m: &str| LAYERS.iter().position(|(_, ms)| ms.contains(&m));
    let tops = top_level_modules();
    let unlisted: Vec<&String> = tops.iter().filter(|m| layer_of(m).is_none()).collect();
    assert!(
        unlisted.is_empty(),
        "top-level modules missing from LAYERS: {unlisted:?}"
    );
    let graph = import_graph();
    let mut upward = Vec::new();
    for (from, tos) in &graph {
        for (to, at) in tos {
            if let (Some(a), Some(b)) = (layer_of(from), layer_of(to))
                && b > a
            {
                upward.push(format!(
                    "{from} ({}) imports {to} ({}) at {at}",
                    LAYERS[a].0, LAYERS[b].0
                ));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports from a lower layer into a higher one:\n{}",
        upward.join("\n")
    );
}

/// The files and folders directly in `src/proxy/` (a stage or a shared piece each): `from →
/// to → where` of the imports between them, in non-test code.
fn proxy_graph() -> Graph {
    let mut graph = Graph::new();
    for (rel, text) in source_files() {
        let module = module_of(&rel);
        if module.first().map(String::as_str) != Some("proxy") || module.len() < 2 {
            continue;
        }
        let code = code_view(&text, true);
        for (to, line) in paths_under(&code, &module, &["proxy"]) {
            let known = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("src/proxy")
                .join(to);
            let exists = known.is_dir() || known.with_extension("rs").is_file();
            if exists && to != module[1] {
                graph
                    .entry(module[1].clone())
                    .or_default()
                    .entry(to.to_string())
                    .or_insert_with(|| format!("{rel}:{line}"));
            }
        }
    }
    graph
}

#[test]
fn the_stages_of_the_proxy_import_each_other_in_no_circle() {
    let graph = proxy_graph();
    assert!(
        graph.len() > 6,
        "found imports of only {} proxy files or folders",
        graph.len()
    );
    let found: Vec<String> = circles(&graph, 20)
        .iter()
        .map(|c| describe(&graph, c))
        .collect();
    assert!(
        found.is_empty(),
        "import circles between the files of src/proxy/ (a stage imports the stages after it or the shared pieces below it, never back):\n{}",
        found.join("\n")
    );
}

#[test]
fn top_level_modules_import_each_other_in_no_new_circle() {
    let graph = import_graph();
    let found = circles(&graph, 1000);
    eprintln!(
        "import circles between top-level modules of src/: {} ({} known in KNOWN_CYCLES)",
        found.len(),
        KNOWN_CYCLES.len()
    );
    for circle in &found {
        eprintln!("  {}", describe(&graph, circle));
    }
    assert!(
        found.len() < 1000,
        "1000 import circles or more: listing stopped"
    );
    let new: Vec<String> = found
        .iter()
        .filter(|c| !is_known(c))
        .map(|c| describe(&graph, c))
        .collect();
    assert!(
        new.is_empty(),
        "new import circle between top-level modules of src/ (each step names one import's \
         file:line); break it by moving what both need into the lower module instead:\n{}",
        new.join("\n")
    );
    let gone: Vec<String> = KNOWN_CYCLES
        .iter()
        .filter(|(a, b, _)| {
            !found
                .iter()
                .any(|c| c.len() == 2 && c.contains(&a.to_string()) && c.contains(&b.to_string()))
        })
        .map(|(a, b, _)| format!("({a:?}, {b:?})"))
        .collect();
    assert!(
        gone.is_empty(),
        "these import circles are gone, delete their entries from KNOWN_CYCLES: {}",
        gone.join(", ")
    );
    let tops = top_level_modules();
    for (a, b, why) in KNOWN_CYCLES {
        assert!(
            tops.contains(*a) && tops.contains(*b),
            "KNOWN_CYCLES names no module: {a}, {b}"
        );
        assert!(
            !why.trim().is_empty(),
            "KNOWN_CYCLES entry ({a}, {b}) must say why"
        );
    }
}

#[test]
fn no_function_is_over_80_lines() {
    let mut all = all_functions();
    all.sort_by(|a, b| {
        b.1.lines
            .cmp(&a.1.lines)
            .then_with(|| (&a.0, a.1.line).cmp(&(&b.0, b.1.line)))
    });
    eprintln!("the 10 longest functions of src/ (non-test code):");
    for (rel, f) in all.iter().take(10) {
        eprintln!("  {rel}:{} fn {} ({} lines)", f.line, f.name, f.lines);
    }
    let over: Vec<&(String, FnSpan)> = all
        .iter()
        .filter(|(_, f)| f.lines > MAX_FN_LINES && !f.long_table)
        .collect();
    let known = |rel: &str, name: &str| {
        LONG_FUNCTIONS
            .iter()
            .any(|(file, n, _)| *file == rel && *n == name)
    };
    let new: Vec<String> = over
        .iter()
        .filter(|(rel, f)| !known(rel, &f.name))
        .map(|(rel, f)| format!("{rel}:{} fn {} ({} lines)", f.line, f.name, f.lines))
        .collect();
    assert!(
        new.is_empty(),
        "functions over {MAX_FN_LINES} lines: split each into named steps (a table of data may \
         instead be marked `// long-table: <why>` right above its `fn`):\n{}",
        new.join("\n")
    );
    let gone: Vec<String> = LONG_FUNCTIONS
        .iter()
        .filter(|(file, name, _)| !over.iter().any(|(rel, f)| rel == file && f.name == *name))
        .map(|(file, name, _)| format!("({file:?}, {name:?})"))
        .collect();
    assert!(
        gone.is_empty(),
        "these functions are no longer over {MAX_FN_LINES} lines (or gone), delete their \
         entries from LONG_FUNCTIONS: {}",
        gone.join(", ")
    );
    for (file, name, why) in LONG_FUNCTIONS {
        assert!(
            !why.trim().is_empty(),
            "LONG_FUNCTIONS entry ({file}, {name}) must say why"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The checks themselves.

#[test]
fn the_checks_see_what_they_look_for() {
    // The scanner: a needle in code is found, in a comment or a test module it is not.
    let text = "use tokio::sync;\n// tokio:: in a comment\nfn f() {}\n#[cfg(test)]\nmod t { use tokio::x; }\n";
    let lines = code_lines(text);
    let hits: Vec<usize> = lines
        .iter()
        .filter(|(_, c)| c.contains("tokio::"))
        .map(|(n, _)| *n)
        .collect();
    assert_eq!(hits, vec![1]);
    assert!(is_test_file("src/policy/breaker/tests.rs"));
    assert!(is_test_file("src/console/app_tests.rs"));
    assert!(!is_test_file("src/policy/breaker.rs"));
    // What a `#[cfg(test)] mod x;` loads is test code too.
    let decl =
        "#[cfg(test)]\nmod support;\n#[cfg(test)]\n#[path = \"b_prop.rs\"]\nmod prop;\nmod real;\n";
    assert_eq!(
        test_module_files("src/a/b.rs", decl),
        [
            "src/a/b/support.rs",
            "src/a/b/support/mod.rs",
            "src/a/b_prop.rs"
        ]
    );
    assert_eq!(
        test_module_files("src/a/mod.rs", decl)[0],
        "src/a/support.rs"
    );
    let files: Vec<String> = source_files().into_iter().map(|(f, _)| f).collect();
    assert!(files.iter().any(|f| f == "src/core/mod.rs"));
    assert!(!files.iter().any(|f| f == "src/core/test_support.rs"));
    assert!(!files.iter().any(|f| f == "src/proxy/body_prop.rs"));
    // The allow-listed files really still read time (so the list cannot go stale silently).
    let stale: Vec<&&str> = TIME_ALLOW_LIST
        .iter()
        .filter(|f| violations(|x| x == **f, TIME_READS).is_empty())
        .collect();
    assert!(
        stale.is_empty(),
        "no longer reads time, remove from TIME_ALLOW_LIST: {stale:?}"
    );
}

/// The `tokio::…` names left in the non-test code of `text`, in order.
fn tokio_names(text: &str) -> Vec<String> {
    let code = code_view(text, true);
    code.match_indices("tokio::")
        .map(|(i, m)| word_at(code.as_bytes(), i + m.len()).to_string())
        .collect()
}

#[test]
fn the_scanner_skips_only_the_test_item_and_goes_on_after_it() {
    let text = r##"use tokio::a;
#[cfg(test)]
mod tests {
    fn f() {
        let s = "}}"; let c = '}'; let r = r#"} "#; /* } /* } */ */ // }
        let e = "\"}"; let b = b'{'; let l: &'static str = "{";
        use tokio::no;
    }
}
fn after() { tokio::b(); }
#[cfg(test)]
#[path = "x_tests.rs"]
mod x_tests;
const C: &str = "{{{"; fn g() { tokio::c(); }
#[cfg(test)]
pub(crate) fn helper() -> Vec<u8> { tokio::no(); vec![] }
#[cfg(test)]
use tokio::no;
#[cfg(test)] impl X { fn t() { tokio::no(); } }
impl X { #[cfg(test)] pub fn t() { tokio::no(); } fn real() { tokio::d(); } }
enum E { #[cfg(test)] A { x: tokio::no }, B(tokio::e) }
fn m() { match m { #[cfg(test)] M::A { x } => { tokio::no(); } M::B => tokio::f(), } }
struct S { #[cfg(test)] x: tokio::no, y: tokio::g }
fn h() { #[cfg(test)] let x: tokio::no = 1; tokio::h(); }
"##;
    assert_eq!(tokio_names(text), ["a", "b", "c", "d", "e", "f", "g", "h"]);
    // Line numbers survive the blanking.
    let lines = code_lines(text);
    let after = lines.iter().find(|(_, c)| c.contains("fn after")).unwrap();
    assert_eq!(after.0, 10);
    // String literals stay in what the needles are matched against; comments do not.
    assert!(
        code_lines("let s = \"http://x\"; Instant::now();")
            .iter()
            .any(|(_, c)| c.contains("Instant::now("))
    );
    assert!(
        code_lines("/* Instant::now() */ let x = 1;")
            .iter()
            .all(|(_, c)| !c.contains("Instant"))
    );
    // A file that is test code as a whole.
    assert!(code_lines("#![cfg(test)]\nuse tokio::no;\n").is_empty());
}

#[test]
fn the_import_reader_sees_crate_and_super_paths() {
    let text = r#"use crate::a::X;
use crate::{b::Y, c, self as me};
use super::super::d::Z;
use super::same_module;
// use crate::no;
const S: &str = "crate::no";
macro_rules! m { () => { $crate::e::f() }; }
mod inner { use super::super::super::g; use super::super::no; }
pub(in crate::h) fn v() {}
#[cfg(test)]
mod tests { use crate::no; }
fn w() { crate::i::j(); }
"#;
    let code = code_view(text, true);
    let found: Vec<&str> = root_paths(&code, &["m".into(), "n".into()])
        .into_iter()
        .map(|(m, _)| m)
        .collect();
    assert_eq!(found, ["a", "b", "c", "self", "d", "e", "g", "h", "i"]);
    assert_eq!(module_of("src/core/mod.rs"), ["core"]);
    assert_eq!(module_of("src/proxy/sse/hold.rs"), ["proxy", "sse", "hold"]);

    // The circle finder: each elementary circle once, none through a one-way edge.
    let mut graph = Graph::new();
    for (a, b) in [
        ("a", "b"),
        ("b", "a"),
        ("b", "c"),
        ("c", "d"),
        ("d", "b"),
        ("d", "e"),
    ] {
        graph
            .entry(a.into())
            .or_default()
            .insert(b.into(), format!("src/{a}.rs:1"));
    }
    let found = circles(&graph, 100);
    assert_eq!(found, [vec!["a", "b"], vec!["b", "c", "d"]]);
    assert_eq!(
        describe(&graph, &found[0]),
        "a → b (src/a.rs:1) → a (src/b.rs:1)"
    );
}

#[test]
fn the_function_scanner_counts_lines_of_items_with_bodies() {
    let text = r#"fn one() {}
/// Doc.
// long-table: names to values
#[inline]
pub(crate) fn table(x: u8) -> &'static str {
    match x { 0 => "}", _ => "{" }
}
trait T { fn decl(&self); fn with_default(&self) -> [u8; 2] {
    [0; 2]
} }
fn outer<F: Fn(u8) -> u8>(f: F) where F: Copy {
    // fn in_a_comment() {
    let p: fn(u8) -> u8 = f;
    fn inner() {}
    let s = "fn in_a_string() {";
}
#[cfg(test)]
fn a_test() {
}
impl X { async fn method() {
} }
"#;
    let found: Vec<(String, usize, usize, bool)> = functions(text)
        .into_iter()
        .map(|f| (f.name, f.line, f.lines, f.long_table))
        .collect();
    assert_eq!(
        found,
        [
            ("one".to_string(), 1, 1, false),
            ("table".to_string(), 5, 3, true),
            ("with_default".to_string(), 8, 3, false),
            ("outer".to_string(), 11, 6, false),
            ("inner".to_string(), 14, 1, false),
            ("method".to_string(), 20, 2, false),
        ]
    );
    // The real tree: the binary's entry point is seen, a test file's functions are not.
    let all = all_functions();
    assert!(
        all.iter()
            .any(|(rel, f)| rel == "src/main.rs" && f.name == "main")
    );
    assert!(!all.iter().any(|(rel, _)| rel == "src/core/test_support.rs"));
}
