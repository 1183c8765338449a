//! YAML in and out, the way Kubernetes tools read it: YAML 1.2 booleans only, so that `y`,
//! `on` and `yes` stay strings (a label value `on` must not become `true`).

use serde::Serialize;
use serde::de::DeserializeOwned;

pub use serde_saphyr::{Error, SerializeError};

fn options() -> serde_saphyr::Options {
    serde_saphyr::options! { strict_booleans: true }
}

/// Parses one YAML document.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, Error> {
    serde_saphyr::from_str_with_options(text, options())
}

/// Parses a stream of `---`-separated documents; empty documents are skipped.
pub fn from_multiple<T: DeserializeOwned>(text: &str) -> Result<Vec<T>, Error> {
    serde_saphyr::from_multiple_with_options(text, options())
}

/// Writes one document.
pub fn to_string<T: Serialize>(value: &T) -> Result<String, SerializeError> {
    serde_saphyr::to_string(value)
}

/// Writes documents separated by `---`, as `kubectl apply -f -` reads them.
pub fn to_multiple<T: Serialize>(values: &[T]) -> Result<String, SerializeError> {
    let mut out = String::new();
    for value in values {
        out.push_str("---\n");
        out.push_str(&to_string(value)?);
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    #[test]
    fn yaml_1_1_boolean_spellings_stay_strings() {
        let v: Value = super::from_str("a: on\nb: y\nc: yes\nd: true\n").unwrap();
        assert_eq!(v, json!({"a": "on", "b": "y", "c": "yes", "d": true}));
    }

    #[test]
    fn multiple_documents_round_trip() {
        let docs = vec![json!({"kind": "A"}), json!({"kind": "B"})];
        let text = super::to_multiple(&docs).unwrap();
        let back: Vec<Value> = super::from_multiple(&text).unwrap();
        assert_eq!(back, docs);
    }
}
