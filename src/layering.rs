//! The house's rule, as a test: which top-level parts of the crate may use which. Lower parts
//! never reach up, so no circle crosses two parts; ARCHITECTURE.md draws the same table. An
//! import (`crate::part`, or `super::part` from a part's own top) not in the table fails here,
//! naming the file, before it reaches a review.

use std::collections::BTreeSet;
use std::path::Path;

/// The parts each part may use (besides itself). `cli` sits on top and may use any part.
const ALLOWED: &[(&str, &[&str])] = &[
    // Vocabulary and small utilities.
    ("api", &["conditions"]),
    ("conditions", &[]),
    ("cache", &[]),
    ("yaml", &[]),
    ("envsubst", &["yaml"]),
    ("gotemplate", &["yaml"]),
    ("metrics", &[]),
    ("pki", &[]),
    ("https", &["pki"]),
    ("kubeconfig", &["pki", "yaml"]),
    // A generic Kubernetes API server: it knows no Cluster API (no `api`).
    (
        "apiserver",
        &["build_info", "https", "metrics", "pki", "yaml"],
    ),
    // Runtime Extensions: calling their hooks, and serving them.
    (
        "extensions",
        &[
            "api",
            "apiserver",
            "cache",
            "conditions",
            "https",
            "kubernetes",
            "pki",
        ],
    ),
    // Contracts and clients below the reconcilers.
    ("kubeadm", &["api", "kubeconfig", "pki", "yaml"]),
    (
        "workload",
        &["api", "cache", "kubeadm", "kubernetes", "pki"],
    ),
    ("topology", &["api", "apiserver"]),
    // Kubernetes' own loops for workload clusters (scheduler, ReplicaSets, Deployments).
    ("kubernetes", &[]),
    (
        "reconcile",
        &[
            "api",
            "apiserver",
            "cache",
            "conditions",
            "extensions",
            "kubeadm",
            "metrics",
            "workload",
        ],
    ),
    ("webhooks", &["api", "apiserver", "topology"]),
    // The reconcilers, the providers, and what runs inside a node.
    (
        "controllers",
        &[
            "api",
            "apiserver",
            "cache",
            "conditions",
            "extensions",
            "gotemplate",
            "kubeadm",
            "kubeconfig",
            "kubernetes",
            "pki",
            "reconcile",
            "topology",
            "workload",
            "yaml",
        ],
    ),
    (
        "providers",
        &[
            "api",
            "apiserver",
            "cache",
            "conditions",
            "kubeadm",
            "kubeconfig",
            "kubernetes",
            "node",
            "pki",
            "reconcile",
            "workload",
            "yaml",
        ],
    ),
    (
        "node",
        &[
            "api",
            "apiserver",
            "build_info",
            "kubeadm",
            "kubernetes",
            "kubeconfig",
            "pki",
            "reconcile::leader",
            "yaml",
        ],
    ),
    // The composition root and the embedded management cluster.
    (
        "manager",
        &["api", "controllers", "providers", "reconcile", "workload"],
    ),
    (
        "management",
        &[
            "apiserver",
            "kubeconfig",
            "manager",
            "metrics",
            "pki",
            "reconcile",
            "webhooks",
            "yaml",
        ],
    ),
    // What the commands do.
    ("init", &["api", "envsubst", "pki", "webhooks", "yaml"]),
    ("mover", &["api", "conditions", "yaml"]),
    ("describe", &["api", "conditions"]),
    ("generate", &["envsubst", "yaml"]),
    ("upgrade", &["api", "build_info"]),
];

/// The part a source file belongs to: the first component under `src/`.
fn part_of(relative: &Path) -> String {
    let first = relative.components().next().expect("a path under src");
    let name = first.as_os_str().to_string_lossy();
    name.trim_end_matches(".rs").to_string()
}

/// The code of a file without its tests and comments: the rule is about what the code uses.
fn code_of(text: &str) -> String {
    let end = text.find("#[cfg(test)]").unwrap_or(text.len());
    text[..end]
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The parts (and `part::module` paths) a file's code uses: `crate::part`, and `super::part`
/// from the top of its part (`src/x.rs`, `src/x/mod.rs` one `super`; `src/x/y.rs` two).
fn uses(relative: &Path, code: &str) -> BTreeSet<String> {
    let components: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().to_string())
        .collect();
    let depth = components.len() - usize::from(components.last().is_some_and(|l| l == "mod.rs"));
    let mut found = BTreeSet::new();
    let mut scan = |prefix: &str| {
        let mut rest = code;
        while let Some(i) = rest.find(prefix) {
            let before = rest[..i].chars().last();
            rest = &rest[i + prefix.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let path: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let mut parts = path.split("::").filter(|s| !s.is_empty());
            if let Some(part) = parts.next() {
                found.insert(part.to_string());
                if let Some(module) = parts.next() {
                    found.insert(format!("{part}::{module}"));
                }
            }
        }
    };
    scan("crate::");
    scan(&"super::".repeat(depth));
    found
}

/// Every use of a part the table does not allow, as `file uses part`.
fn violations(src: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let relative = path.strip_prefix(src).unwrap().to_path_buf();
            let me = part_of(&relative);
            if matches!(me.as_str(), "lib" | "main" | "cli" | "layering") {
                continue;
            }
            let Some((_, allowed)) = ALLOWED.iter().find(|(p, _)| *p == me) else {
                out.push(format!(
                    "src/{} is in a part the table does not name: add `{me}` to ALLOWED",
                    relative.display()
                ));
                continue;
            };
            let code = code_of(&std::fs::read_to_string(&path).unwrap());
            let found = uses(&relative, &code);
            for used in &found {
                let part = used.split("::").next().unwrap_or_default();
                let known = part == "build_info" || ALLOWED.iter().any(|(p, _)| *p == part);
                if part == me || !known {
                    continue;
                }
                // `part::module` in the table allows only that module of the part.
                let modules: Vec<&str> = allowed
                    .iter()
                    .copied()
                    .filter(|a| a.starts_with(&format!("{part}::")))
                    .collect();
                let ok = match used.contains("::") {
                    true => modules.is_empty() || modules.contains(&used.as_str()),
                    false => allowed.contains(&part) || !modules.is_empty(),
                };
                if !ok {
                    out.push(format!("src/{} uses {used}", relative.display()));
                }
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_part_uses_only_what_the_table_allows() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = violations(&src);
    assert!(
        found.is_empty(),
        "imports the layering table (src/layering.rs, ARCHITECTURE.md) does not allow:\n{}",
        found.join("\n")
    );
}

#[test]
fn a_forbidden_import_is_found() {
    let dir = std::env::temp_dir().join(format!("capictl-layering-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(dir.join("apiserver")).unwrap();
    std::fs::create_dir_all(dir.join("node")).unwrap();
    std::fs::write(
        dir.join("apiserver/mod.rs"),
        "use crate::api::Cluster;\nuse crate::pki::Pki;\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("apiserver/tls.rs"),
        "fn f() { super::super::controllers::x(); }\n// crate::manager in a comment\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("node/agent.rs"),
        "use crate::reconcile::leader::LeaderElection;\nuse crate::reconcile::runtime::Wiring;\n",
    )
    .unwrap();
    let found = violations(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        found,
        [
            "src/apiserver/mod.rs uses api",
            "src/apiserver/tls.rs uses controllers",
            "src/node/agent.rs uses reconcile::runtime",
        ]
    );
}

#[test]
fn the_table_itself_has_no_circle() {
    fn reaches(from: &str, to: &str, seen: &mut Vec<String>) -> bool {
        let Some((_, allowed)) = ALLOWED.iter().find(|(p, _)| *p == from) else {
            return false;
        };
        allowed.iter().any(|next| {
            let next = next.split("::").next().unwrap_or_default();
            if next == to {
                return true;
            }
            if seen.iter().any(|s| s == next) {
                return false;
            }
            seen.push(next.to_string());
            reaches(next, to, seen)
        })
    }
    for (part, _) in ALLOWED {
        assert!(
            !reaches(part, part, &mut Vec::new()),
            "{part} can reach itself through the table"
        );
    }
}
