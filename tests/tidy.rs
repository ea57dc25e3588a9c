//! Tidy: rules about the source tree that the compiler does not enforce, checked by reading
//! the sources (rust-analyzer keeps its own rules the same way). Seven rules:
//!
//! * **layering** — a module of `src/` may only use modules of its own top-level module or of
//!   a lower layer of [`LAYERS`], read from `crate::…` paths (in `use` lines and in code,
//!   `use crate::{a, b::c}` groups included) and from `super::` paths that climb out of the
//!   top-level module. Modules of one layer are independent of each other. `src/bin/` sits
//!   above every layer and `src/lib.rs` only declares them. Inside the folders of
//!   [`INNER_LAYERS`] (a top-level module's folder, or a folder inside one, such as
//!   `gpu/backend`) the same holds between the folder's child modules (a file, or a
//!   subfolder with its files), read from `crate::folder::child` and from `super::` paths
//!   that climb to the folder's root; what a child takes from the root itself (its
//!   `mod.rs`, or the file beside the folder: the daemon's `Context`, say) is not checked,
//!   and the root may use any child. A file in a nested folder answers to each listed folder
//!   it is inside of.
//! * **circles** — in every folder of `src/` (`src/` itself and the folders [`INNER_LAYERS`]
//!   does not order included) no child modules use each other in a circle. A file inside one
//!   child (in the child's file, its subfolder or an inline `mod`) that names another child
//!   with a `crate::…`, `super::…` or `self::` path, test code included, draws an arrow from
//!   its child to the other; each circle of arrows is one violation, naming the file, line and
//!   path of the use behind each arrow. Like the inner layers, what a child takes from the
//!   folder's root is no arrow, nor is a child reached through the root's `pub use`.
//! * **length** — no function of `src/` is over [`MAX_FN_LINES`] lines, from its `fn` line to
//!   its closing brace, except those named in [`LONG_FUNCTIONS`] with the reason. The
//!   generated gRPC code is not read.
//! * **env** — only `src/bin/` reads or changes the environment (`env::var`, `env::var_os`,
//!   `env::vars`, `env::vars_os`, `env::set_var`, `env::remove_var`, and tracing-subscriber's
//!   `EnvFilter::from_env` and its kin): the library takes its settings as values, so that
//!   `cuzkd --check-config` shows every one of them. clap's `#[arg(env = "…")]` is not
//!   flagged: like the arguments themselves, such a variable is read by the `Parser::parse`
//!   call, which is in `src/bin/`.
//! * **print** — library code does not print (`println!`, `eprintln!`, `print!`, `eprint!`,
//!   `dbg!`): it logs through `tracing` or returns values. Allowed in `src/bin/` and in
//!   `src/cli/`, the command line's library half, whose job is printing results for a human.
//! * **safety** — every `unsafe` block, `unsafe impl` and `unsafe extern` block has a
//!   `// SAFETY:` comment right above the statement or item that holds it (attributes and
//!   other comment lines may come between; a blank line or the end of an earlier statement
//!   may not). An `unsafe fn` or `unsafe trait` may instead carry a `# Safety` section in its
//!   doc comment; an `unsafe fn` inside a trait, a trait impl or a `macro_rules!` body is
//!   covered by the trait's own `# Safety` section. Checked in `src/`, `tests/` and `benches/`.
//! * **vacuous** — a `#[test]` function never prints and then returns (`eprintln!("skipped:
//!   …"); return;`), and never prints that it skipped anything: such a test passes without
//!   testing. A test that cannot run here is `#[ignore = "reason"]`d and asserts what it
//!   needs, so that it is reported as ignored, and fails where it is asked for and cannot run.
//!   Checked in `src/`, `tests/` and `benches/`.
//!
//! Code inside `#[cfg(test)]` items (and in files declared by `#[cfg(test)] mod x;`) is test
//! code: the env and print rules do not apply to it; the layering, circles and safety rules do.
//! Comments and string and character literals are blanked out before any rule looks at the
//! code, so a `"println!"` in a string or a `crate::gpu` in a doc comment is not a use.
//!
//! Known limits, on purpose (this is a lint, not a compiler): a `super::` path is resolved by
//! counting the file's module depth (a file included with `#[path = "…"]` takes the module path
//! of its declaration) and the inline `mod x { … }` blocks around it; macros are not expanded;
//! `use std::env::var as v` followed by `v(…)` is caught at the `use` line only.
//!
//! Known violations that other work is removing are listed in [`ALLOWED`], by file and rule;
//! the list can only shrink, as an entry that no longer matches anything fails the test.
//!
//! [`planted_violations_are_found`] checks the checker: every file under
//! `tests/tidy_fixtures/` says which path it pretends to be and marks each line that must be
//! flagged with `tidy-expect: RULE`; the checker must flag exactly those lines.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

/// The layers of the library, lowest first; a module may use its own layer's top-level module
/// and the modules of the layers below it. This is the one place the order is written down:
/// ARCHITECTURE.md's "Layers" section draws it ([`layers_are_drawn_in_architecture_md`]
/// checks the drawing), and every top-level module of `src/lib.rs` must appear here.
/// `params_gen` and `sealing` (test parameters and test sectors, behind the `scaffolding`
/// feature) sit just below `cli` so that nothing `cuzkd` links can reach them.
const LAYERS: &[&[&str]] = &[
    &["config", "srs", "synth", "topology"],
    &["prover"],
    &["gpu"],
    &["pipeline"],
    &["proofs"],
    &["engine"],
    &["proto"],
    &["daemon"],
    &["params_gen", "sealing"],
    &["cli"],
];

/// The layers inside folders of `src/`, lowest first, as [`LAYERS`] orders the top-level
/// modules: a child module may use the children of lower layers (and its own submodules),
/// and those of one layer are independent of each other. A folder is named by its path under
/// `src/` (`gpu/backend` is the folder of `src/gpu/backend.rs`'s children). Every child of a
/// listed folder must be placed. ARCHITECTURE.md's code map follows this order.
const INNER_LAYERS: &[(&str, &[&[&str]])] = &[
    (
        "pipeline",
        &[
            &["progress", "recorded"],
            &["control"],
            &["stages"],
            &["service"],
            &["partitions"],
        ],
    ),
    (
        "proofs",
        &[
            &["bytes", "proof_types", "shapes", "verdict"],
            &["inputs", "porep"],
            &["binary"],
            &["post", "snap"],
            &["registry"],
            &["request"],
        ],
    ),
    (
        "daemon",
        &[
            &[
                "access",
                "cli",
                "fdinput",
                "host",
                "listener",
                "logging",
                "notify",
                "privileges",
                "ratelimit",
                "service",
                "trace",
                "wire",
            ],
            &["frames", "journal"],
            &["admission", "metrics"],
            &["handler", "textfile"],
            &["grpc", "watchers"],
            &["connection"],
            &["server"],
        ],
    ),
    (
        "gpu",
        &[
            &["budget", "bytes", "compile", "error", "pinned"],
            &["kernels"],
            &["device"],
            &["msm", "ntt", "setup"],
            &["options", "plan", "r1cs"],
            &["backend"],
            &["selftest"],
        ],
    ),
    (
        "gpu/backend",
        &[
            &["critical", "host", "refit"],
            &["residency"],
            &["turns"],
            &["sums"],
            &["planned"],
            &["prepared"],
        ],
    ),
];

/// The most lines a function of `src/` may have (see the **length** rule).
const MAX_FN_LINES: usize = 100;

/// Functions of `src/` allowed over [`MAX_FN_LINES`]: (file, function, why). Like
/// [`ALLOWED`], an entry that no longer matches a function over the limit fails the test.
const LONG_FUNCTIONS: &[(&str, &str, &str)] = &[];

/// A rule of this file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Rule {
    Layering,
    Length,
    Env,
    Print,
    Safety,
    Vacuous,
    Circles,
}

impl Rule {
    fn name(self) -> &'static str {
        match self {
            Rule::Layering => "layering",
            Rule::Length => "length",
            Rule::Env => "env",
            Rule::Print => "print",
            Rule::Safety => "safety",
            Rule::Vacuous => "vacuous",
            Rule::Circles => "circles",
        }
    }

    fn parse(s: &str) -> Option<Rule> {
        [
            Rule::Layering,
            Rule::Length,
            Rule::Env,
            Rule::Print,
            Rule::Safety,
            Rule::Vacuous,
            Rule::Circles,
        ]
        .into_iter()
        .find(|r| r.name() == s)
    }
}

/// Today's known violations, tolerated until the work that removes them lands. Each entry
/// must still match at least one violation, so the list can only shrink: when a fix lands,
/// [`tree_is_tidy`] fails until its entry is deleted here.
const ALLOWED: &[(&str, Rule)] = &[];

/// One finding.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Violation {
    path: String,
    /// 1-based.
    line: usize,
    rule: Rule,
    what: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: [{}] {}",
            self.path,
            self.line,
            self.rule.name(),
            self.what
        )
    }
}

// ---- lexing -------------------------------------------------------------------------------

/// A file split, line by line, into its code (comments removed, string and character literals
/// emptied: `"…"` becomes `""`) and its comments.
struct Lexed {
    code: Vec<String>,
    comments: Vec<String>,
}

impl Lexed {
    fn new_line(&mut self) {
        self.code.push(String::new());
        self.comments.push(String::new());
    }
    fn code(&mut self, c: char) {
        if let Some(l) = self.code.last_mut() {
            l.push(c);
        }
    }
    fn comment(&mut self, c: char) {
        if let Some(l) = self.comments.last_mut() {
            l.push(c);
        }
    }
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn lex(text: &str) -> Lexed {
    let s: Vec<char> = text.chars().collect();
    let at = |i: usize| s.get(i).copied();
    let mut out = Lexed {
        code: vec![String::new()],
        comments: vec![String::new()],
    };
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        let prev_ident = i > 0 && is_ident_char(s[i - 1]);
        if c == '\n' {
            out.new_line();
            i += 1;
        } else if c == '/' && at(i + 1) == Some('/') {
            while i < s.len() && s[i] != '\n' {
                out.comment(s[i]);
                i += 1;
            }
        } else if c == '/' && at(i + 1) == Some('*') {
            // Block comments nest in Rust.
            let mut depth = 0usize;
            while i < s.len() {
                if s[i] == '/' && at(i + 1) == Some('*') {
                    depth += 1;
                    out.comment('/');
                    out.comment('*');
                    i += 2;
                } else if s[i] == '*' && at(i + 1) == Some('/') {
                    depth -= 1;
                    out.comment('*');
                    out.comment('/');
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if s[i] == '\n' {
                        out.new_line();
                    } else {
                        out.comment(s[i]);
                    }
                    i += 1;
                }
            }
        } else if let Some(end) = (!prev_ident).then(|| raw_string_end(&s, i)).flatten() {
            for &ch in &s[i..end] {
                if ch == '\n' {
                    out.new_line();
                }
            }
            out.code('"');
            out.code('"');
            i = end;
        } else if c == '"' {
            i += 1;
            while i < s.len() && s[i] != '"' {
                if s[i] == '\\' {
                    i += 1;
                }
                if at(i) == Some('\n') {
                    out.new_line();
                }
                i += 1;
            }
            i += 1;
            out.code('"');
            out.code('"');
        } else if c == '\'' && at(i + 1) == Some('\\') {
            // An escaped character literal: '\n', '\'', '\u{…}'. The character after the
            // backslash is part of the escape even when it is a quote.
            i += 3;
            while i < s.len() && s[i] != '\'' && s[i] != '\n' {
                i += 1;
            }
            i += 1;
            out.code('\'');
            out.code('\'');
        } else if c == '\'' && at(i + 2) == Some('\'') {
            i += 3;
            out.code('\'');
            out.code('\'');
        } else {
            // Everything else, lifetimes and labels ('a) included, is code.
            out.code(c);
            i += 1;
        }
    }
    out
}

/// If a raw string literal (`r"…"`, `r#"…"#`, `br"…"`, `cr"…"`) starts at `i`, the index just
/// past its end.
fn raw_string_end(s: &[char], i: usize) -> Option<usize> {
    let mut j = i;
    if matches!(s.get(j), Some('b' | 'c')) {
        j += 1;
    }
    if s.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let mut hashes = 0;
    while s.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    if s.get(j) != Some(&'"') {
        return None; // r#ident, or just an identifier starting with r
    }
    j += 1;
    while j < s.len() {
        if s[j] == '"' && (1..=hashes).all(|k| s.get(j + k) == Some(&'#')) {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(s.len())
}

// ---- tokens and the structure around them -------------------------------------------------

/// What a `{ … }` block is, as far as the rules care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Block {
    /// `mod x { … }`.
    Mod,
    /// `trait X { … }`.
    Trait,
    /// `impl X for Y { … }`.
    TraitImpl,
    /// `macro_rules! m { … }`.
    Macro,
    Other,
}

#[derive(Debug)]
struct Tok {
    text: String,
    /// 0-based line.
    line: usize,
    /// Inside a `#[cfg(test)]` item.
    test: bool,
    /// How many inline `mod x { … }` blocks enclose it.
    mod_depth: usize,
    /// Inside a trait, a trait impl or a macro body (for `unsafe fn`).
    in_trait_or_macro: bool,
}

fn tokenize(lexed: &Lexed) -> Vec<Tok> {
    let mut toks = Vec::new();
    for (line, code) in lexed.code.iter().enumerate() {
        let cs: Vec<char> = code.chars().collect();
        let mut i = 0;
        while i < cs.len() {
            let c = cs[i];
            if c.is_whitespace() {
                i += 1;
                continue;
            }
            let start = i;
            if is_ident_char(c) {
                while i < cs.len() && is_ident_char(cs[i]) {
                    i += 1;
                }
            } else if c == ':' && cs.get(i + 1) == Some(&':') {
                i += 2;
            } else {
                i += 1;
            }
            toks.push(Tok {
                text: cs[start..i].iter().collect(),
                line,
                test: false,
                mod_depth: 0,
                in_trait_or_macro: false,
            });
        }
    }
    annotate(&mut toks);
    toks
}

/// Whether the attribute tokens (between `#[` and `]`) gate on `test`: `cfg(test)`,
/// `cfg(all(test, …))`.
fn is_cfg_test(attr: &[&str]) -> bool {
    attr.first() == Some(&"cfg") && attr.contains(&"test") && !attr.contains(&"not")
}

/// Fills in `test`, `mod_depth` and `in_trait_or_macro`.
fn annotate(toks: &mut [Tok]) {
    // The block stack: what each open brace is, and whether it opened a test item.
    let mut stack: Vec<(Block, bool)> = Vec::new();
    // The tokens of the current item's header (since the last `;`, `{` or `}`).
    let mut header: Vec<String> = Vec::new();
    // A `#[cfg(test)]` was seen; the next item is test code.
    let mut pending_test = false;
    // A test item has started and not yet opened its block (it may end at `;` instead).
    let mut in_test_item = false;
    let mut i = 0;
    while i < toks.len() {
        let in_test = stack.iter().any(|&(_, t)| t) || in_test_item || pending_test;
        let mod_depth = stack.iter().filter(|&&(b, _)| b == Block::Mod).count();
        let in_trait_or_macro = stack
            .iter()
            .any(|&(b, _)| matches!(b, Block::Trait | Block::TraitImpl | Block::Macro));
        toks[i].test = in_test;
        toks[i].mod_depth = mod_depth;
        toks[i].in_trait_or_macro = in_trait_or_macro;
        let t = toks[i].text.clone();
        // Attributes: `#[…]` (outer) and `#![…]` (inner).
        if t == "#" {
            let mut j = i + 1;
            if toks.get(j).is_some_and(|x| x.text == "!") {
                j += 1;
            }
            if toks.get(j).is_some_and(|x| x.text == "[") {
                let mut depth = 0usize;
                let mut k = j;
                let mut attr = Vec::new();
                while k < toks.len() {
                    match toks[k].text.as_str() {
                        "[" => depth += 1,
                        "]" => {
                            depth = depth.saturating_sub(1);
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    if k > j {
                        attr.push(toks[k].text.clone());
                    }
                    k += 1;
                }
                let attr_refs: Vec<&str> = attr.iter().map(String::as_str).collect();
                let inner = toks.get(i + 1).is_some_and(|x| x.text == "!");
                for tok in toks.iter_mut().take(k + 1).skip(i) {
                    tok.test = in_test;
                    tok.mod_depth = mod_depth;
                    tok.in_trait_or_macro = in_trait_or_macro;
                }
                if !inner && is_cfg_test(&attr_refs) {
                    pending_test = true;
                }
                i = k + 1;
                continue;
            }
        }
        match t.as_str() {
            "{" => {
                let h: Vec<&str> = header.iter().map(String::as_str).collect();
                let kind = classify(&h);
                let opens_test = in_test_item || pending_test;
                in_test_item = false;
                pending_test = false;
                stack.push((kind, opens_test));
                header.clear();
            }
            "}" => {
                stack.pop();
                header.clear();
            }
            ";" => {
                // A test item without a block (`#[cfg(test)] use …;`) ends here.
                in_test_item = false;
                pending_test = false;
                header.clear();
            }
            _ => {
                if pending_test {
                    // A `#[cfg(test)]` item starts: it lasts until its `;` or its block ends.
                    pending_test = false;
                    in_test_item = true;
                }
                header.push(t);
            }
        }
        i += 1;
    }
}

/// What block an item header (the tokens before its `{`) opens.
fn classify(header: &[&str]) -> Block {
    if header.contains(&"macro_rules") {
        return Block::Macro;
    }
    let first = header
        .iter()
        .position(|t| !matches!(*t, "pub" | "(" | ")" | "crate" | "super" | "in" | "unsafe"))
        .map(|p| header[p]);
    match first {
        Some("mod") => Block::Mod,
        Some("trait") => Block::Trait,
        Some("impl") if header.contains(&"for") => Block::TraitImpl,
        _ => Block::Other,
    }
}

// ---- the rules ----------------------------------------------------------------------------

/// What a file is to the rules.
struct FileCtx<'a> {
    /// Relative to the repository root, with `/`.
    path: &'a str,
    /// Declared by `#[cfg(test)] mod x;`: all of it is test code.
    test_file: bool,
    /// Its module path when a `#[path = "…"]` declaration gives it one other than its file
    /// name says (`src/prover/ntt_ifma.rs` is `prover::ntt::ifma`).
    module: Option<Vec<String>>,
}

impl FileCtx<'_> {
    fn in_src(&self) -> bool {
        self.path.starts_with("src/")
    }
    fn in_bin(&self) -> bool {
        self.path.starts_with("src/bin/")
    }
    fn module_path(&self) -> Vec<String> {
        self.module
            .clone()
            .unwrap_or_else(|| module_path_of(self.path))
    }
}

/// The module path a file of `src/` has by its name: `src/prover/pippenger/sum.rs` →
/// `[prover, pippenger, sum]`, `src/srs/mod.rs` → `[srs]`, `src/lib.rs` → `[]`.
fn module_path_of(path: &str) -> Vec<String> {
    let rel = path.trim_start_matches("src/").trim_end_matches(".rs");
    let mut parts: Vec<String> = rel.split('/').map(str::to_string).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// The files that `#[path = "FILE"] mod NAME;` lines in `path` declare, with the module path
/// each gets. Read from the raw text, as the lexer empties string literals.
fn path_attr_children(path: &str, text: &str) -> Vec<(String, Vec<String>)> {
    let dir = Path::new(path).parent().unwrap_or(Path::new(""));
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let mut out = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        let Some(file) = line
            .strip_prefix("#[path = \"")
            .and_then(|r| r.split('"').next())
        else {
            continue;
        };
        let decl = lines[n + 1..].iter().find(|l| !l.starts_with("#["));
        let name = decl.and_then(|l| {
            let l = l.strip_prefix("pub ").unwrap_or(l);
            let l = l.strip_prefix("pub(crate) ").unwrap_or(l);
            l.strip_prefix("mod ")?.strip_suffix(';')
        });
        if let Some(name) = name {
            let mut module = module_path_of(path);
            module.push(name.trim().to_string());
            let file = dir.join(file).to_string_lossy().replace('\\', "/");
            out.push((file, module));
        }
    }
    out
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

/// The names a path continues with at `toks[i]` (just after a `::`): one identifier, or the
/// first identifier of each element of a `{ … }` group.
fn path_heads(toks: &[Tok], i: usize) -> Vec<(String, usize)> {
    match toks.get(i) {
        Some(t) if t.text == "{" => {
            let mut out = Vec::new();
            let mut depth = 0usize;
            let mut expect_head = true;
            for t in &toks[i..] {
                match t.text.as_str() {
                    "{" => {
                        depth += 1;
                        if depth > 1 {
                            expect_head = false;
                        }
                    }
                    "}" => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    "," if depth == 1 => expect_head = true,
                    s if depth == 1 && expect_head => {
                        if s.chars().all(is_ident_char) {
                            out.push((s.to_string(), t.line));
                        }
                        expect_head = false;
                    }
                    _ => {}
                }
            }
            out
        }
        Some(t) if t.text.chars().all(is_ident_char) => vec![(t.text.clone(), t.line)],
        _ => Vec::new(),
    }
}

/// The length of the `super::` chain that starts at `toks[i]`, and the index of the token
/// after it.
fn super_chain(toks: &[Tok], i: usize) -> (usize, usize) {
    let mut k = 0;
    let mut j = i;
    while toks.get(j).is_some_and(|x| x.text == "super")
        && toks.get(j + 1).is_some_and(|x| x.text == "::")
    {
        k += 1;
        j += 2;
    }
    (k, j)
}

fn check_layering(ctx: &FileCtx, toks: &[Tok], out: &mut Vec<Violation>) {
    if !ctx.in_src() || ctx.in_bin() {
        return;
    }
    let here = ctx.module_path();
    let Some(own) = here.first().map(String::as_str) else {
        return; // src/lib.rs only declares the modules
    };
    let check = |target: &str, line: usize, out: &mut Vec<Violation>| {
        if matches!(target, "self" | "super" | "crate") || target == own {
            return;
        }
        let what = match (layer_of(own), layer_of(target)) {
            (None, _) => format!("module `{own}` is not in LAYERS (tests/tidy.rs)"),
            (_, None) => format!("`{own}` uses `crate::{target}`, which is not in LAYERS"),
            (Some(a), Some(b)) if b > a => {
                format!("`{own}` (layer {a}) uses `crate::{target}` (layer {b}), a higher layer")
            }
            (Some(a), Some(b)) if a == b => {
                format!("`{own}` uses `crate::{target}` of its own layer {a}; they are independent")
            }
            _ => return,
        };
        out.push(Violation {
            path: ctx.path.to_string(),
            line: line + 1,
            rule: Rule::Layering,
            what,
        });
    };
    for (i, t) in toks.iter().enumerate() {
        let prev = i.checked_sub(1).map(|p| toks[p].text.as_str());
        let next_is_path = toks.get(i + 1).is_some_and(|n| n.text == "::");
        if !next_is_path || prev == Some("::") || prev == Some("$") {
            continue;
        }
        if t.text == "crate" {
            for (target, line) in path_heads(toks, i + 2) {
                check(&target, line, out);
            }
        } else if t.text == "super" {
            // Count the `super::` chain and see whether it climbs to the crate root.
            let (k, j) = super_chain(toks, i);
            if k == here.len() + t.mod_depth {
                for (target, line) in path_heads(toks, j) {
                    check(&target, line, out);
                }
            }
        }
    }
}

/// The layering rule inside the folders of [`INNER_LAYERS`]: each folder the file is inside
/// of, checked on its own (a file of `gpu/backend/` is a child of `gpu/backend` and, as part
/// of `backend`, of `gpu`).
fn check_inner_layering(ctx: &FileCtx, toks: &[Tok], out: &mut Vec<Violation>) {
    if !ctx.in_src() || ctx.in_bin() {
        return;
    }
    let here = ctx.module_path();
    for &(folder, layers) in INNER_LAYERS {
        let folder: Vec<&str> = folder.split('/').collect();
        let inside = here.len() > folder.len() && here.iter().zip(&folder).all(|(h, f)| h == f);
        if inside {
            check_in_folder(ctx, toks, &here, &folder, layers, out);
        }
    }
}

/// [`check_inner_layering`] for one folder (`names`, its module path) that the file's module
/// `here` is inside of.
fn check_in_folder(
    ctx: &FileCtx,
    toks: &[Tok],
    here: &[String],
    names: &[&str],
    layers: &[&[&str]],
    out: &mut Vec<Violation>,
) {
    let own = here[names.len()].as_str();
    let folder = names.join("::");
    let layer = |m: &str| layers.iter().position(|l| l.contains(&m));
    let mut flag = |line: usize, what: String| {
        out.push(Violation {
            path: ctx.path.to_string(),
            line: line + 1,
            rule: Rule::Layering,
            what,
        })
    };
    // An unplaced child is reported by `every_child_is_placed`.
    let Some(a) = layer(own) else {
        return;
    };
    let mut check = |target: &str, line: usize| {
        let what = match layer(target) {
            Some(b) if b > a => format!(
                "`{folder}::{own}` (layer {a}) uses `{folder}::{target}` (layer {b}), a higher layer"
            ),
            Some(b) if b == a && target != own => format!(
                "`{folder}::{own}` uses `{folder}::{target}` of its own layer {a}; they are independent"
            ),
            // A lower child, itself, or an item of the folder's root.
            _ => return,
        };
        flag(line, what);
    };
    for (i, t) in toks.iter().enumerate() {
        let prev = i.checked_sub(1).map(|p| toks[p].text.as_str());
        let next_is_path = toks.get(i + 1).is_some_and(|n| n.text == "::");
        if !next_is_path || prev == Some("::") || prev == Some("$") {
            continue;
        }
        let heads = if t.text == "crate" {
            // `crate::` then each name of the folder's path, each followed by `::`.
            let into_folder = names.iter().enumerate().all(|(n, name)| {
                toks.get(i + 2 + 2 * n).is_some_and(|x| x.text == *name)
                    && toks.get(i + 3 + 2 * n).is_some_and(|x| x.text == "::")
            });
            if !into_folder {
                continue;
            }
            path_heads(toks, i + 2 + 2 * names.len())
        } else if t.text == "super" {
            // Whether the `super::` chain climbs to the folder's root.
            let (k, j) = super_chain(toks, i);
            if k + names.len() != here.len() + t.mod_depth {
                continue;
            }
            path_heads(toks, j)
        } else {
            continue;
        };
        for (target, line) in heads {
            check(&target, line);
        }
    }
}

/// Functions over [`MAX_FN_LINES`] lines, each named in its violation as ``fn `name` ``.
fn check_fn_length(ctx: &FileCtx, toks: &[Tok], out: &mut Vec<Violation>) {
    if !ctx.in_src() || ctx.path == GENERATED {
        return;
    }
    for (i, t) in toks.iter().enumerate() {
        let named = toks
            .get(i + 1)
            .is_some_and(|n| n.text.chars().all(is_ident_char) && !n.text.is_empty());
        if t.text != "fn" || !named {
            continue;
        }
        let Some(open) = (i..toks.len()).find(|&k| matches!(toks[k].text.as_str(), "{" | ";"))
        else {
            continue;
        };
        if toks[open].text != "{" {
            continue;
        }
        let lines = toks[closing(toks, open)].line - t.line + 1;
        if lines > MAX_FN_LINES {
            out.push(Violation {
                path: ctx.path.to_string(),
                line: t.line + 1,
                rule: Rule::Length,
                what: format!(
                    "fn `{}` is {lines} lines, over {MAX_FN_LINES}: split it, or name it in LONG_FUNCTIONS (tests/tidy.rs) with the reason",
                    toks[i + 1].text
                ),
            });
        }
    }
}

/// The generated gRPC code (tonic-build's output, committed).
const GENERATED: &str = "src/proto/grpc/cuzk.v1.rs";

/// Whether `v` is a long function that [`LONG_FUNCTIONS`] names.
fn long_allowed(v: &Violation) -> bool {
    v.rule == Rule::Length
        && LONG_FUNCTIONS
            .iter()
            .any(|&(path, name, _)| v.path == path && v.what.starts_with(&format!("fn `{name}` ")))
}

const ENV_FNS: &[&str] = &["var", "var_os", "vars", "vars_os", "set_var", "remove_var"];
/// tracing-subscriber's constructors that read a variable.
const ENV_FILTER_FNS: &[&str] = &[
    "from_env",
    "try_from_env",
    "from_default_env",
    "try_from_default_env",
    "from_env_lossy",
];
const PRINT_MACROS: &[&str] = &["println", "eprintln", "print", "eprint", "dbg"];

fn check_env_and_print(ctx: &FileCtx, toks: &[Tok], out: &mut Vec<Violation>) {
    if !ctx.in_src() || ctx.in_bin() || ctx.test_file {
        return;
    }
    let printing_allowed = ctx.path.starts_with("src/cli/");
    for (i, t) in toks.iter().enumerate() {
        if t.test {
            continue;
        }
        let prev = i.checked_sub(1).map(|p| toks[p].text.as_str());
        if t.text == "env" && prev != Some(".") && toks.get(i + 1).is_some_and(|n| n.text == "::") {
            for (f, line) in path_heads(toks, i + 2) {
                if ENV_FNS.contains(&f.as_str()) {
                    out.push(Violation {
                        path: ctx.path.to_string(),
                        line: line + 1,
                        rule: Rule::Env,
                        what: format!(
                            "`env::{f}` in library code: take the setting as a value \
                             (only src/bin/ reads the environment)"
                        ),
                    });
                }
            }
        }
        if ENV_FILTER_FNS.contains(&t.text.as_str())
            && prev == Some("::")
            && i >= 2
            && toks[i - 2].text == "EnvFilter"
        {
            out.push(Violation {
                path: ctx.path.to_string(),
                line: t.line + 1,
                rule: Rule::Env,
                what: format!(
                    "`EnvFilter::{}` reads the environment in library code: take the filter \
                     as a value (only src/bin/ reads the environment)",
                    t.text
                ),
            });
        }
        if !printing_allowed
            && PRINT_MACROS.contains(&t.text.as_str())
            && prev != Some(".")
            && toks.get(i + 1).is_some_and(|n| n.text == "!")
        {
            out.push(Violation {
                path: ctx.path.to_string(),
                line: t.line + 1,
                rule: Rule::Print,
                what: format!(
                    "`{}!` in library code: log with `tracing` or return the value",
                    t.text
                ),
            });
        }
    }
}

/// Whether a `// SAFETY:` comment (or, for an unsafe fn or trait, a `# Safety` doc section)
/// sits right above line `line`: walking up, comment lines and attributes are passed over, as
/// are the earlier lines of the same statement (code that does not end with `;`, `{` or `}`);
/// a blank line or the end of an earlier statement or block stops the search. One form covers
/// a run of statements: `// SAFETY (the three closures): …` holds for every statement below
/// it up to the next blank line or brace.
fn has_safety_comment(lexed: &Lexed, line: usize, doc_allowed: bool) -> bool {
    let mut crossed_statement = false;
    for j in (0..line).rev() {
        let comment = lexed.comments[j].as_str();
        let code = lexed.code[j].trim();
        if comment.contains("SAFETY (") {
            return true;
        }
        if !crossed_statement
            && (comment.contains("SAFETY:") || (doc_allowed && comment.contains("# Safety")))
        {
            return true;
        }
        if code.is_empty() {
            if comment.trim().is_empty() {
                return false; // a blank line
            }
            continue; // another comment line of the same block
        }
        if code.starts_with("#[") || code.starts_with("#![") {
            continue;
        }
        if code.ends_with('{') || code.ends_with('}') {
            return false;
        }
        if code.ends_with(';') {
            crossed_statement = true;
        }
    }
    false
}

fn check_safety(ctx: &FileCtx, lexed: &Lexed, toks: &[Tok], out: &mut Vec<Violation>) {
    for (i, t) in toks.iter().enumerate() {
        if t.text != "unsafe" {
            continue;
        }
        let next = toks.get(i + 1).map_or("", |n| n.text.as_str());
        // `unsafe fn`, `unsafe extern "C" fn` (an item); `unsafe extern "C" {` is a block.
        let after_abi = toks[i + 1..]
            .iter()
            .find(|x| !matches!(x.text.as_str(), "extern" | "\""))
            .map_or("", |x| x.text.as_str());
        let fn_like = next == "fn" || (next == "extern" && after_abi == "fn");
        let prev = i.checked_sub(1).map_or("", |p| toks[p].text.as_str());
        // A function pointer type (`f: unsafe fn(…)`, `-> unsafe extern "C" fn(…)`) declares
        // nothing.
        if fn_like && matches!(prev, ":" | ">" | "<" | "(" | "," | "=" | "&" | "*") {
            continue;
        }
        let (kind, doc_allowed) = match next {
            "{" => ("`unsafe` block", false),
            "impl" => ("`unsafe impl`", false),
            "trait" => ("`unsafe trait`", true),
            _ if fn_like => {
                if t.in_trait_or_macro {
                    continue; // the trait's `# Safety` section holds the contract
                }
                ("`unsafe fn`", true)
            }
            "extern" => ("`unsafe extern` block", false),
            _ => ("`unsafe`", false),
        };
        if !has_safety_comment(lexed, t.line, doc_allowed) {
            let want = if doc_allowed {
                "a `// SAFETY:` comment or a `# Safety` doc section"
            } else {
                "a `// SAFETY:` comment"
            };
            out.push(Violation {
                path: ctx.path.to_string(),
                line: t.line + 1,
                rule: Rule::Safety,
                what: format!("{kind} without {want} right above it"),
            });
        }
    }
}

/// The index of the token that closes the bracket opened at `open` (`(`, `[` or `{`), or the
/// last token where it is never closed.
fn closing(toks: &[Tok], open: usize) -> usize {
    let mut depth = 0usize;
    for (k, t) in toks.iter().enumerate().skip(open) {
        match t.text.as_str() {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return k;
                }
            }
            _ => {}
        }
    }
    toks.len().saturating_sub(1)
}

/// The bodies of the `#[test]` functions: the indices of their `{` and `}`.
fn test_bodies(toks: &[Tok]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for i in 0..toks.len().saturating_sub(3) {
        let attr = ["#", "[", "test", "]"];
        if !(0..4).all(|k| toks[i + k].text == attr[k]) {
            continue;
        }
        let Some(f) = (i + 4..toks.len()).find(|&k| toks[k].text == "fn") else {
            continue;
        };
        let Some(open) = (f..toks.len()).find(|&k| matches!(toks[k].text.as_str(), "{" | ";"))
        else {
            continue;
        };
        if toks[open].text == "{" {
            out.push((open, closing(toks, open)));
        }
    }
    out
}

/// Tests that pass without testing: in a `#[test]` body, a print followed by `return`; in
/// any test code (a test's helpers too), a print whose text says it skipped.
fn check_vacuous(ctx: &FileCtx, text: &str, toks: &[Tok], out: &mut Vec<Violation>) {
    let raw: Vec<&str> = text.lines().collect();
    let bodies = test_bodies(toks);
    let all_test =
        ctx.test_file || ctx.path.starts_with("tests/") || ctx.path.starts_with("benches/");
    for (i, t) in toks.iter().enumerate() {
        let is_print = PRINT_MACROS.contains(&t.text.as_str())
            && toks.get(i + 1).is_some_and(|n| n.text == "!")
            && toks.get(i + 2).is_some_and(|n| n.text == "(");
        if !is_print {
            continue;
        }
        let end = closing(toks, i + 2);
        let said: String = raw
            .get(t.line..=toks[end].line)
            .unwrap_or_default()
            .join("\n")
            .to_lowercase();
        let in_test_body = bodies.iter().any(|&(open, close)| open < i && i < close);
        let then_returns = toks.get(end + 1).is_some_and(|x| x.text == ";")
            && toks.get(end + 2).is_some_and(|x| x.text == "return");
        let what = if in_test_body && then_returns {
            "a test prints and returns: it passes without testing"
        } else if (all_test || t.test) && said.contains("skip") {
            "test code prints that it skipped: its test passes without testing"
        } else {
            continue;
        };
        out.push(Violation {
            path: ctx.path.to_string(),
            line: t.line + 1,
            rule: Rule::Vacuous,
            what: format!(
                "{what}; `#[ignore = \"reason\"]` the test and assert what it needs, so that \
                 it is reported as ignored and fails where it is asked for and cannot run"
            ),
        });
    }
}

/// Every rule on one file.
fn check_file(ctx: &FileCtx, text: &str) -> Vec<Violation> {
    let lexed = lex(text);
    let toks = tokenize(&lexed);
    let mut out = Vec::new();
    check_layering(ctx, &toks, &mut out);
    check_inner_layering(ctx, &toks, &mut out);
    check_fn_length(ctx, &toks, &mut out);
    check_env_and_print(ctx, &toks, &mut out);
    check_safety(ctx, &lexed, &toks, &mut out);
    check_vacuous(ctx, text, &toks, &mut out);
    out.sort();
    out.dedup();
    out
}

/// The files that `#[cfg(test)] mod x;` in `path` declares (repository-relative).
fn test_children(path: &str, text: &str) -> Vec<String> {
    let lexed = lex(text);
    let toks = tokenize(&lexed);
    let dir =
        if path.ends_with("/mod.rs") || path.ends_with("/lib.rs") || path.ends_with("/main.rs") {
            Path::new(path).parent().map(Path::to_path_buf)
        } else {
            Some(PathBuf::from(path.trim_end_matches(".rs")))
        };
    let Some(dir) = dir else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for w in toks.windows(3) {
        if w[0].text == "mod" && w[2].text == ";" && w[1].test && w[0].mod_depth == 0 {
            for f in [format!("{}.rs", w[1].text), format!("{}/mod.rs", w[1].text)] {
                out.push(dir.join(f).to_string_lossy().replace('\\', "/"));
            }
        }
    }
    out
}

// ---- import circles -----------------------------------------------------------------------

/// A path a file of `src/` names with `crate::`, `super::` or `self::`: the module path it
/// leads to, from the crate root, with the items after it; and its 0-based line.
struct Use {
    target: Vec<String>,
    line: usize,
}

/// The paths that go on at `toks[i]` (just after a `::`), each as its segments: one per
/// element of a `{ … }` group, nested groups included. `self` in a group and a glob `*` end a
/// path at the module before them; an `as` or anything but `::` after a name ends it there.
fn path_tails(toks: &[Tok], i: usize) -> Vec<(Vec<String>, usize)> {
    let Some(t) = toks.get(i) else {
        return Vec::new();
    };
    match t.text.as_str() {
        "{" => {
            let end = closing(toks, i);
            let mut out = Vec::new();
            let mut k = i + 1;
            while k < end {
                out.extend(path_tails(toks, k));
                // On to the element after the next comma of this group.
                let mut depth = 0usize;
                while k < end {
                    match toks[k].text.as_str() {
                        "{" | "(" | "[" => depth += 1,
                        "}" | ")" | "]" => depth = depth.saturating_sub(1),
                        "," if depth == 0 => {
                            k += 1;
                            break;
                        }
                        _ => {}
                    }
                    k += 1;
                }
            }
            out
        }
        "self" | "*" => vec![(Vec::new(), t.line)],
        name if !name.is_empty() && name.chars().all(is_ident_char) => {
            let rest = if toks.get(i + 1).is_some_and(|n| n.text == "::") {
                path_tails(toks, i + 2)
            } else {
                Vec::new()
            };
            if rest.is_empty() {
                return vec![(vec![name.to_string()], t.line)];
            }
            rest.into_iter()
                .map(|(mut p, line)| {
                    p.insert(0, name.to_string());
                    (p, line)
                })
                .collect()
        }
        _ => Vec::new(),
    }
}

/// The paths a file names with `crate::`, `super::` or `self::` (in `use` lines and in code,
/// test code included), each resolved from the crate root. A `super::` that climbs no higher
/// than the inline `mod x { … }` blocks around it, and a `self::` inside one, stay in the file
/// and are left out.
fn module_uses(ctx: &FileCtx, toks: &[Tok]) -> Vec<Use> {
    let here = ctx.module_path();
    let mut out = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        let prev = i.checked_sub(1).map(|p| toks[p].text.as_str());
        let next_is_path = toks.get(i + 1).is_some_and(|n| n.text == "::");
        // `$crate::`, the middle of a path, and `pub(in crate::x)` are no uses.
        if !next_is_path || matches!(prev, Some("::" | "$" | "in")) {
            continue;
        }
        let (base, at) = match t.text.as_str() {
            "crate" => (Vec::new(), i + 2),
            "super" => {
                let (k, j) = super_chain(toks, i);
                let up = k.saturating_sub(t.mod_depth);
                match here.len().checked_sub(up) {
                    Some(keep) if up > 0 => (here[..keep].to_vec(), j),
                    _ => continue,
                }
            }
            "self" if t.mod_depth == 0 => (here.clone(), i + 2),
            _ => continue,
        };
        for (tail, line) in path_tails(toks, at) {
            let mut target = base.clone();
            target.extend(tail);
            out.push(Use { target, line });
        }
    }
    out
}

/// An arrow between two children of one folder: the use that draws it (the file, its 0-based
/// line, and the path used, from the child it names on).
#[derive(Clone)]
struct Arrow {
    path: String,
    line: usize,
    name: String,
}

/// Each folder's arrows between its child modules (folder → from → to → the use).
type FolderArrows = BTreeMap<Vec<String>, BTreeMap<String, BTreeMap<String, Arrow>>>;

/// The arrows of every folder of `src/` from the files' uses: a file inside child `a` of a
/// folder that uses child `b` of it (a file or a subfolder of `modules`, not an item of the
/// folder's root) draws `a → b`. `files` are (path, module path, uses), in path order.
fn folder_arrows(files: &[(String, Vec<String>, Vec<Use>)]) -> FolderArrows {
    let modules: BTreeSet<&[String]> = files
        .iter()
        .flat_map(|(_, here, _)| (1..=here.len()).map(|n| &here[..n]))
        .collect();
    let mut arrows = FolderArrows::new();
    for (path, here, uses) in files {
        for u in uses {
            for d in 0..here.len() {
                let t = &u.target;
                let sibling = t.len() > d
                    && t[..d] == here[..d]
                    && t[d] != here[d]
                    && modules.contains(&t[..=d]);
                if !sibling {
                    continue;
                }
                let to = arrows
                    .entry(here[..d].to_vec())
                    .or_default()
                    .entry(here[d].clone())
                    .or_default();
                let arrow = Arrow {
                    path: path.clone(),
                    line: u.line,
                    name: t[d..].join("::"),
                };
                // The first use, unless it names only the module (`b::{self as x}`) and a
                // later one names something in it.
                let first = to.entry(t[d].clone()).or_insert_with(|| arrow.clone());
                if !first.name.contains("::") && arrow.name.contains("::") {
                    *first = arrow;
                }
            }
        }
    }
    arrows
}

/// The nodes `from` reaches in `graph` (itself only through a circle).
fn reachable(graph: &BTreeMap<String, BTreeSet<String>>, from: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![from.to_string()];
    while let Some(n) = todo.pop() {
        for m in graph.get(&n).into_iter().flatten() {
            if seen.insert(m.clone()) {
                todo.push(m.clone());
            }
        }
    }
    seen
}

/// The circles of `graph`: through each node that lies on one, a shortest circle (found
/// breadth first), each starting at its least node and listed once. Every node of a tangle
/// of several circles is on one that is listed, without listing every circle of it (their
/// number can grow exponentially); breaking those listed shows the rest.
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let reach: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|n| (n, reachable(graph, n))).collect();
    let mut out = BTreeSet::new();
    for (&start, from_start) in &reach {
        if !from_start.contains(start) {
            continue;
        }
        // Breadth first from `start`, through the nodes that lie on a circle with it.
        let on_circle = |m: &String| reach.get(m).is_some_and(|r| r.contains(start));
        let mut parent: BTreeMap<String, String> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start.clone()]);
        let last = 'search: loop {
            let Some(n) = queue.pop_front() else {
                unreachable!("{start} reaches itself");
            };
            for m in graph.get(&n).into_iter().flatten() {
                if m == start {
                    break 'search n;
                }
                if on_circle(m) && !parent.contains_key(m) {
                    parent.insert(m.clone(), n.clone());
                    queue.push_back(m.clone());
                }
            }
        };
        let mut circle = vec![last];
        while let Some(p) = parent.get(circle.last().unwrap_or(start)) {
            circle.push(p.clone());
        }
        circle.reverse();
        let least = circle
            .iter()
            .enumerate()
            .min_by_key(|(_, n)| *n)
            .map_or(0, |(k, _)| k);
        circle.rotate_left(least);
        out.insert(circle);
    }
    out.into_iter().collect()
}

/// The circles between the child modules of any folder of `src/`, one violation each, named
/// by the files and the path each arrow uses.
fn circle_violations(files: &[(String, Vec<String>, Vec<Use>)]) -> Vec<Violation> {
    let mut out = Vec::new();
    for (folder, arrows) in folder_arrows(files) {
        let graph: BTreeMap<String, BTreeSet<String>> = arrows
            .iter()
            .map(|(from, to)| (from.clone(), to.keys().cloned().collect()))
            .collect();
        let dir = folder.iter().map(|s| format!("{s}/")).collect::<String>();
        for circle in circles(&graph) {
            let steps: Vec<&Arrow> = (0..circle.len())
                .map(|k| &arrows[&circle[k]][&circle[(k + 1) % circle.len()]])
                .collect();
            let told: Vec<String> = steps
                .iter()
                .map(|a| format!("{}:{} uses `{}`", a.path, a.line + 1, a.name))
                .collect();
            out.push(Violation {
                path: steps[0].path.clone(),
                line: steps[0].line + 1,
                rule: Rule::Circles,
                what: format!(
                    "import circle inside src/{dir}: {} → {}: {}; move what they share into a \
                     module below them",
                    circle.join(" → "),
                    circle[0],
                    told.join(", ")
                ),
            });
        }
    }
    out
}

// ---- the tree -----------------------------------------------------------------------------

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The `.rs` files under `dir` (repository-relative, sorted), skipping `skip`.
fn rust_files(dir: &str, skip: &[&str]) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, skip: &[&str], out: &mut Vec<String>) {
        let entries =
            fs::read_dir(dir).unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()));
        for entry in entries {
            let entry = entry.unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()));
            let path = entry.path();
            let rel = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .to_string_lossy()
                .replace('\\', "/");
            if skip
                .iter()
                .any(|s| rel == *s || rel.starts_with(&format!("{s}/")))
            {
                continue;
            }
            if path.is_dir() {
                walk(root, &path, skip, out);
            } else if rel.ends_with(".rs") {
                out.push(rel);
            }
        }
    }
    let root = root();
    let mut out = Vec::new();
    if root.join(dir).is_dir() {
        walk(&root, &root.join(dir), skip, &mut out);
    }
    out.sort();
    out
}

fn tree_violations() -> Vec<Violation> {
    let root = root();
    let mut files = rust_files("src", &[]);
    files.extend(rust_files("tests", &["tests/tidy_fixtures"]));
    files.extend(rust_files("benches", &[]));
    let texts: BTreeMap<String, String> = files
        .iter()
        .map(|f| (f.clone(), read(&root.join(f))))
        .collect();
    let test_files: BTreeSet<String> = texts
        .iter()
        .filter(|(p, _)| p.starts_with("src/"))
        .flat_map(|(p, t)| test_children(p, t))
        .collect();
    let modules: BTreeMap<String, Vec<String>> = texts
        .iter()
        .filter(|(p, _)| p.starts_with("src/"))
        .flat_map(|(p, t)| path_attr_children(p, t))
        .collect();
    let mut out = Vec::new();
    let mut uses = Vec::new();
    for (path, text) in &texts {
        let ctx = FileCtx {
            path,
            test_file: test_files.contains(path),
            module: modules.get(path).cloned(),
        };
        out.extend(check_file(&ctx, text));
        // `src/bin/`'s files are crates of their own: their `crate::` is not the library.
        if ctx.in_src() && !ctx.in_bin() {
            let toks = tokenize(&lex(text));
            uses.push((path.clone(), ctx.module_path(), module_uses(&ctx, &toks)));
        }
    }
    out.extend(circle_violations(&uses));
    out
}

#[test]
fn tree_is_tidy() {
    let found = tree_violations();
    let mut problems: Vec<String> = found
        .iter()
        .filter(|v| !ALLOWED.contains(&(v.path.as_str(), v.rule)) && !long_allowed(v))
        .map(|v| v.to_string())
        .collect();
    for &(path, name, _) in LONG_FUNCTIONS {
        let long = |v: &Violation| long_allowed(v) && v.path == path && v.what.contains(name);
        if !found.iter().any(long) {
            problems.push(format!(
                "{path}: fn `{name}` is in LONG_FUNCTIONS (tests/tidy.rs) but is not over \
                 {MAX_FN_LINES} lines: delete the entry"
            ));
        }
    }
    for &(path, rule) in ALLOWED {
        if !found.iter().any(|v| v.path == path && v.rule == rule) {
            problems.push(format!(
                "{path}: [{}] is in ALLOWED (tests/tidy.rs) but no longer violates: delete the entry",
                rule.name()
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "tidy: {} problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// Every child module of a folder of [`INNER_LAYERS`] (a file or a subfolder of it) is placed
/// in a layer, and every name placed is one.
#[test]
fn every_child_is_placed() {
    for &(folder, layers) in INNER_LAYERS {
        let dir = root().join("src").join(folder);
        let entries =
            fs::read_dir(&dir).unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()));
        let children: BTreeSet<String> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().to_string();
                match name.strip_suffix(".rs") {
                    Some("mod") => None,
                    Some(stem) => Some(stem.to_string()),
                    None if e.path().is_dir() => Some(name),
                    None => None,
                }
            })
            .collect();
        let placed: BTreeSet<String> = layers
            .iter()
            .flat_map(|l| l.iter())
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            children, placed,
            "src/{folder}/'s child modules and its INNER_LAYERS entry (tests/tidy.rs) differ"
        );
    }
}

/// The top-level modules `src/lib.rs` declares.
fn lib_modules() -> BTreeSet<String> {
    let lexed = lex(&read(&root().join("src/lib.rs")));
    let toks = tokenize(&lexed);
    toks.windows(3)
        .filter(|w| w[0].text == "mod" && w[2].text == ";")
        .map(|w| w[1].text.clone())
        .collect()
}

/// The layers as ARCHITECTURE.md draws them, lowest first.
fn layers_line() -> String {
    LAYERS
        .iter()
        .map(|l| l.join(", "))
        .collect::<Vec<_>>()
        .join(" → ")
}

#[test]
fn layers_are_drawn_in_architecture_md() {
    let declared = lib_modules();
    let layered: BTreeSet<String> = LAYERS
        .iter()
        .flat_map(|l| l.iter())
        .map(|s| s.to_string())
        .collect();
    assert_eq!(
        declared, layered,
        "src/lib.rs's modules and LAYERS (tests/tidy.rs) differ: place every module in a layer"
    );
    let doc = read(&root().join("ARCHITECTURE.md"));
    let line = layers_line();
    assert!(
        doc.lines().any(|l| l.trim() == line),
        "ARCHITECTURE.md's Layers section must draw LAYERS (tests/tidy.rs) as the line\n{line}"
    );
}

/// The measurement docs speak of the project (dates, builds, cards), not of how it was worked
/// on: no "session" outside code blocks in docs/benchmarks.md and docs/gpu-notes.md, and
/// docs/benchmarks.md opens with its table of current figures.
#[test]
fn measurement_docs_say_what_is() {
    for name in ["docs/benchmarks.md", "docs/gpu-notes.md"] {
        let text = read(&root().join(name));
        let mut in_code = false;
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("```") {
                in_code = !in_code;
                continue;
            }
            assert!(
                in_code || !line.to_lowercase().contains("session"),
                "{name}:{}: \"session\" outside a code block: name the date and build instead\n{line}",
                n + 1
            );
        }
    }
    let text = read(&root().join("docs/benchmarks.md"));
    let mut headings = text.lines().filter(|l| l.starts_with("## "));
    assert_eq!(
        headings.next(),
        Some("## Current figures"),
        "docs/benchmarks.md must open with its \"## Current figures\" section"
    );
    let table = text
        .split("## Current figures")
        .nth(1)
        .and_then(|rest| rest.lines().find(|l| l.starts_with('|')));
    assert_eq!(
        table,
        Some("| metric | value | card / machine | build | date | real or synthetic | verified | how |"),
        "docs/benchmarks.md's current figures must be one table: metric, value, card, build, \
         date, real or synthetic, verified, how"
    );
}

// ---- the test of the test -----------------------------------------------------------------

/// A planted file: the path it pretends to be (`tidy-fixture: as PATH` on a line of its own)
/// and the lines that must be flagged (`tidy-expect: RULE` on the line), 1-based.
fn fixture_expectations(name: &str, text: &str) -> (String, BTreeSet<(usize, Rule)>) {
    let mut path = None;
    let mut expect = BTreeSet::new();
    for (n, line) in text.lines().enumerate() {
        if let Some(rest) = line.split("tidy-fixture: as ").nth(1) {
            path = Some(rest.trim().to_string());
        }
        for part in line.split("tidy-expect: ").skip(1) {
            let word = part.split_whitespace().next().unwrap_or("");
            let rule = Rule::parse(word)
                .unwrap_or_else(|| panic!("{name}:{}: unknown rule {word:?}", n + 1));
            expect.insert((n + 1, rule));
        }
    }
    let path = path.unwrap_or_else(|| panic!("{name}: no `tidy-fixture: as PATH` line"));
    (path, expect)
}

#[test]
fn planted_violations_are_found() {
    let dir = root().join("tests/tidy_fixtures");
    let names = rust_files("tests/tidy_fixtures", &[]);
    assert!(names.len() >= 5, "fixtures missing under {}", dir.display());
    let mut rules_planted = BTreeSet::new();
    let mut clean_files = 0;
    let mut problems = Vec::new();
    for name in &names {
        let text = read(&root().join(name));
        let (path, expect) = fixture_expectations(name, &text);
        let ctx = FileCtx {
            path: &path,
            test_file: false,
            module: None,
        };
        let got: BTreeSet<(usize, Rule)> = check_file(&ctx, &text)
            .iter()
            .map(|v| (v.line, v.rule))
            .collect();
        for missed in expect.difference(&got) {
            problems.push(format!(
                "{name}:{}: [{}] planted but not found",
                missed.0,
                missed.1.name()
            ));
        }
        for extra in got.difference(&expect) {
            problems.push(format!(
                "{name}:{}: [{}] found but not planted",
                extra.0,
                extra.1.name()
            ));
        }
        if expect.is_empty() {
            clean_files += 1;
        }
        rules_planted.extend(expect.iter().map(|&(_, r)| r));
    }
    assert!(
        problems.is_empty(),
        "the checker is wrong:\n{}",
        problems.join("\n")
    );
    // Circles span files, which a fixture (one file) cannot plant: `circles_are_found` and
    // `circles_between_files_are_found` test them.
    for rule in [
        Rule::Layering,
        Rule::Length,
        Rule::Env,
        Rule::Print,
        Rule::Safety,
        Rule::Vacuous,
    ] {
        assert!(
            rules_planted.contains(&rule),
            "no fixture plants a [{}] violation",
            rule.name()
        );
    }
    assert!(
        clean_files > 0,
        "no clean fixture (one the checker must not flag)"
    );
}

#[test]
fn literals_and_comments_are_not_code() {
    let lexed = lex(concat!(
        "let a = \"println!(x) // not a comment\"; // crate::gpu\n",
        "let b = r#\"env::var(\"X\")\"#; let c = '\"'; let d = b'\\'';\n",
        "/* outer /* inner */ still comment */ let e: &'static str = \"\";\n",
        "fn f<'a>(x: &'a str) -> char { 'x' }\n",
    ));
    assert_eq!(lexed.code.len(), 5);
    assert_eq!(lexed.code[0].trim(), "let a = \"\";");
    assert_eq!(lexed.comments[0].trim(), "// crate::gpu");
    assert_eq!(
        lexed.code[1].trim(),
        "let b = \"\"; let c = ''; let d = b'';"
    );
    assert_eq!(lexed.code[2].trim(), "let e: &'static str = \"\";");
    assert_eq!(lexed.code[3].trim(), "fn f<'a>(x: &'a str) -> char { '' }");
}

/// A graph of `(from, to)` arrows.
fn graph_of(arrows: &[(&str, &str)]) -> BTreeMap<String, BTreeSet<String>> {
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for &(from, to) in arrows {
        g.entry(from.into()).or_default().insert(to.into());
    }
    g
}

#[test]
fn circles_are_found() {
    let names = |c: &[&str]| c.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    // A two-node and a three-node circle, tied by arrows that are on none.
    let planted = graph_of(&[
        ("f", "a"),
        ("a", "b"),
        ("b", "a"),
        ("b", "c"),
        ("d", "e"),
        ("e", "c"),
        ("c", "d"),
        ("e", "g"),
    ]);
    assert_eq!(
        circles(&planted),
        vec![names(&["a", "b"]), names(&["c", "d", "e"])]
    );
    // Two circles through one node: both listed.
    let tangle = graph_of(&[("a", "b"), ("b", "a"), ("b", "c"), ("c", "b")]);
    assert_eq!(
        circles(&tangle),
        vec![names(&["a", "b"]), names(&["b", "c"])]
    );
    // Arrows that meet again downstream make no circle.
    let acyclic = graph_of(&[("a", "b"), ("b", "c"), ("a", "c"), ("d", "c"), ("c", "e")]);
    assert!(circles(&acyclic).is_empty());
}

/// The arrows of a few planted files, through `module_uses` as the tree's are read: circles in
/// two folders, paths of every form, and uses that draw no arrow.
#[test]
fn circles_between_files_are_found() {
    let files = [
        ("src/x/a.rs", "use super::b::Thing; // super::c::Not\n"),
        (
            "src/x/b.rs",
            "fn f() {\n    crate::x::a::g(\"super::d\");\n}\n",
        ),
        // A subfolder is one child: its root and its files draw its arrows.
        (
            "src/x/c/mod.rs",
            "mod inner;\nuse super::{d::{self, D}, Root};\n",
        ),
        ("src/x/c/inner.rs", "use super::super::b::B;\n"),
        (
            "src/x/d.rs",
            "#[cfg(test)]\nmod tests {\n    use super::super::c::inner::H;\n}\n",
        ),
        ("src/y/p.rs", "use super::q::Q;\n"),
        (
            "src/y/q.rs",
            "pub(in crate::y) fn q() -> crate::y::r::R {}\n",
        ),
        (
            "src/y/r.rs",
            "mod t {\n    use super::*;\n}\nuse super::p::P;\nuse self::t::T;\n",
        ),
        // One way only: z::s → z::t → z::u, and z::u takes an item of the root.
        ("src/z/s.rs", "use super::t::T;\n"),
        ("src/z/t.rs", "fn t() {\n    super::u::go();\n}\n"),
        ("src/z/u.rs", "use super::Root;\n"),
    ];
    let read: Vec<(String, Vec<String>, Vec<Use>)> = files
        .iter()
        .map(|&(path, text)| {
            let ctx = FileCtx {
                path,
                test_file: false,
                module: None,
            };
            let toks = tokenize(&lex(text));
            (
                path.to_string(),
                ctx.module_path(),
                module_uses(&ctx, &toks),
            )
        })
        .collect();
    let found: Vec<String> = circle_violations(&read)
        .iter()
        .map(|v| format!("{}:{} {}", v.path, v.line, v.what))
        .collect();
    let tail = "; move what they share into a module below them";
    assert_eq!(
        found,
        vec![
            format!(
                "src/x/a.rs:1 import circle inside src/x/: a → b → a: src/x/a.rs:1 uses \
                 `b::Thing`, src/x/b.rs:2 uses `a::g`{tail}"
            ),
            format!(
                "src/x/c/mod.rs:2 import circle inside src/x/: c → d → c: src/x/c/mod.rs:2 \
                 uses `d::D`, src/x/d.rs:3 uses `c::inner::H`{tail}"
            ),
            format!(
                "src/y/p.rs:1 import circle inside src/y/: p → q → r → p: src/y/p.rs:1 uses \
                 `q::Q`, src/y/q.rs:1 uses `r::R`, src/y/r.rs:4 uses `p::P`{tail}"
            ),
        ]
    );
}
