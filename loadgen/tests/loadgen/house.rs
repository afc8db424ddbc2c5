//! The house's seams, held by a test: no file of `broker/src` or `loadgen/src` takes part in a
//! circle of imports. An edge is any `use crate::…`, `use super::…`, `use self::…`, inline
//! `crate::…` or `super::…` path from one file to the file that defines the module it names (a
//! path to an item resolves to the longest module prefix that is a file); a strongly connected
//! component of two or more files is a circle. Test modules (`#[cfg(test)] mod tests`) are left
//! out, and so are a module's bare paths to its own children (`use core::Core` in
//! `lanes/mod.rs`): those are its parts.
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module path (`["pop", "hotlist"]`) of every `.rs` file below `root`, to its text.
fn modules(root: &Path) -> BTreeMap<Vec<String>, String> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir)
            .expect("a source directory")
            .flatten()
        {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("a source file");
                out.insert(module_path(root, &path), text);
            }
        }
    }
    out
}

fn module_path(root: &Path, file: &Path) -> Vec<String> {
    let rel: PathBuf = file
        .strip_prefix(root)
        .expect("below root")
        .with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into()).collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The text without comments and without its test module.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or(text);
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every path a file names: `use` trees expanded, plus inline `crate::a::b` and `super::a`
/// paths.
fn named_paths(here: &[String], code: &str) -> Vec<Vec<String>> {
    let parent: Vec<String> = here[..here.len().saturating_sub(1)].to_vec();
    let mut out = Vec::new();
    for (i, _) in code.match_indices("use ") {
        if !starts_word(code, i) {
            continue;
        }
        let body = &code[i + 4..];
        let body = &body[..body.find(';').unwrap_or(body.len())];
        let (base, rest) = match body.trim_start().split_once("::") {
            Some(("crate", rest)) => (Vec::new(), rest),
            Some(("super", rest)) => (parent.clone(), rest),
            Some(("self", rest)) => (here.to_vec(), rest),
            _ => continue,
        };
        expand(&base, rest, &mut out);
    }
    for (prefix, base) in [("crate::", Vec::new()), ("super::", parent.clone())] {
        for (i, _) in code.match_indices(prefix) {
            if !starts_word(code, i) || code[..i].ends_with("::") {
                continue;
            }
            let tail: String = code[i + prefix.len()..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            out.push(segments(&base, &tail));
        }
    }
    out
}

/// Whether `code[i..]` starts a word (not inside an identifier).
fn starts_word(code: &str, i: usize) -> bool {
    !code[..i]
        .chars()
        .last()
        .is_some_and(|c| c.is_alphanumeric() || c == '_')
}

fn segments(base: &[String], tail: &str) -> Vec<String> {
    let mut path = base.to_vec();
    path.extend(tail.split("::").filter(|s| !s.is_empty()).map(String::from));
    path
}

/// Expands a `use` tree (`a::{b, c::d}`) below `base` into paths.
fn expand(base: &[String], tree: &str, out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let name = tree.split(" as ").next().unwrap_or(tree);
        let mut path = segments(base, name);
        if matches!(path.last().map(String::as_str), Some("self" | "*")) {
            path.pop();
        }
        out.push(path);
        return;
    };
    let prefix = segments(base, tree[..open].trim_end_matches("::"));
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                expand(&prefix, &inner[start..i], out);
                start = i + 1;
            }
            _ => {}
        }
    }
    if !inner[start..].trim().is_empty() {
        expand(&prefix, &inner[start..], out);
    }
}

/// The file-level import graph of the crate whose sources are below `root`.
fn import_graph(root: &Path) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let files = modules(root);
    let resolve = |path: &[String]| {
        (1..=path.len())
            .rev()
            .map(|n| path[..n].to_vec())
            .find(|p| files.contains_key(p))
    };
    files
        .iter()
        .map(|(here, text)| {
            let edges = named_paths(here, &code(text))
                .iter()
                .filter_map(|p| resolve(p))
                .filter(|to| to != here)
                .collect();
            (here.clone(), edges)
        })
        .collect()
}

/// The strongly connected components of two or more files (Tarjan's algorithm).
fn circles(graph: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<String>> {
    struct State<'a> {
        graph: &'a BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        index: BTreeMap<&'a Vec<String>, (usize, usize)>,
        stack: Vec<&'a Vec<String>>,
        on_stack: BTreeSet<&'a Vec<String>>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a Vec<String>) {
        let n = s.index.len();
        s.index.insert(v, (n, n));
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in &s.graph[v] {
            let (w, _) = s.graph.get_key_value(w).expect("a known file");
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.index[w].1.min(s.index[v].1);
                s.index.get_mut(v).expect("visited").1 = low;
            } else if s.on_stack.contains(w) {
                let low = s.index[w].0.min(s.index[v].1);
                s.index.get_mut(v).expect("visited").1 = low;
            }
        }
        if s.index[v].0 == s.index[v].1 {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.join("/"));
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                s.found.push(component);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.found
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_path_buf()
}

#[test]
fn no_file_of_the_broker_or_the_load_generator_is_in_an_import_circle() {
    for krate in ["broker/src", "loadgen/src"] {
        let graph = import_graph(&workspace().join(krate));
        assert!(graph.len() > 20, "{krate}: {} files read", graph.len());
        assert_eq!(circles(&graph), Vec::<Vec<String>>::new(), "{krate}");
    }
}

#[test]
fn the_circle_check_finds_a_circle_it_is_given() {
    let dir = std::env::temp_dir().join(format!("ackbench-house-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("a")).unwrap();
    std::fs::write(dir.join("lib.rs"), "pub mod a;\npub mod b;\n").unwrap();
    std::fs::write(dir.join("a/mod.rs"), "pub mod c;\nuse crate::b::Thing;\n").unwrap();
    std::fs::write(dir.join("a/c.rs"), "pub struct C;\n").unwrap();
    std::fs::write(
        dir.join("b.rs"),
        "use crate::a::{c::C, self};\npub struct Thing;\n",
    )
    .unwrap();
    let found = circles(&import_graph(&dir));
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    let mut files = found[0].clone();
    files.sort();
    assert_eq!(files, ["a", "b"]);
}
