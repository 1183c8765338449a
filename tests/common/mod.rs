//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

/// `../shared/reference/upstream/<rel>` beside the checkout, where upstream's CRDs and
/// templates live as test data. `None` (with a note on stderr) when it is absent, so the tests
/// that need it skip rather than fail on a machine without it.
pub fn upstream(rel: &str) -> Option<PathBuf> {
    shared(&format!("reference/upstream/{rel}"))
}

/// `../shared/<rel>` beside the checkout.
pub fn shared(rel: &str) -> Option<PathBuf> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared")
        .join(rel);
    if path.exists() {
        Some(path)
    } else {
        eprintln!("skipping: {} is not there", path.display());
        None
    }
}

/// Every document of a YAML file, as JSON values.
pub fn read_yaml_docs(path: &std::path::Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap();
    capictl::yaml::from_multiple(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
