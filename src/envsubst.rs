//! clusterctl's template variables: drone/envsubst's `${...}` dialect with clusterctl's rules,
//! quirks included. Only the braced form is substituted (a bare `$VAR` stays as it is), `$${X}`
//! is the literal `${X}`, and the three default forms (`:=`, `=`, `:-`) all apply when the value
//! is empty or unset.
//!
//! ```
//! use capictl::envsubst::Template;
//! let t = Template::parse("name: ${CLUSTER_NAME}\ndomain: ${SERVICE_DOMAIN:=\"cluster.local\"}").unwrap();
//! let out = t.render(&|v: &str| (v == "CLUSTER_NAME").then(|| "demo".to_string())).unwrap();
//! assert_eq!(out, "name: demo\ndomain: \"cluster.local\"");
//! ```

use std::collections::BTreeMap;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EnvsubstError {
    #[error("bad substitution: {0}")]
    BadSubstitution(String),
    #[error(
        "value for variables [{}] is not set. Please set the value using os environment variables or the clusterctl config file",
        .0.join(", ")
    )]
    Missing(Vec<String>),
}

/// What is done to a variable's value.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Op {
    Plain,
    /// `:=`, `=`, `:-` (and, as upstream parses them, `:?` and `:+`).
    Default(Vec<Node>),
    Length,
    Upper {
        all: bool,
    },
    Lower {
        all: bool,
    },
    Substring {
        offset: i64,
        length: Option<i64>,
    },
    TrimPrefix {
        longest: bool,
        pattern: String,
    },
    TrimSuffix {
        longest: bool,
        pattern: String,
    },
    Replace {
        all: bool,
        anchor: Option<char>,
        from: String,
        to: String,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Node {
    Text(String),
    Var { name: String, op: Op },
}

/// A parsed template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    nodes: Vec<Node>,
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// Rewrites `${ VAR}`, `${VAR }` and `${ VAR }` to `${VAR}`, as clusterctl does first.
fn normalise(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i + 2]);
        rest = &rest[i + 2..];
        let trimmed = rest.trim_start_matches(' ');
        let name_len = trimmed
            .find(|c: char| !is_ident(c))
            .unwrap_or(trimmed.len());
        let after = trimmed[name_len..].trim_start_matches(' ');
        if name_len > 0 && after.starts_with('}') {
            out.push_str(&trimmed[..name_len]);
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.text[self.pos..].chars().next()
    }

    fn eat(&mut self, s: &str) -> bool {
        if self.text[self.pos..].starts_with(s) {
            self.pos += s.len();
            true
        } else {
            false
        }
    }

    /// Nodes up to (not including) an unbalanced `}` when `nested`, else to the end.
    fn nodes(&mut self, nested: bool) -> Result<Vec<Node>, EnvsubstError> {
        let mut nodes = Vec::new();
        let mut text = String::new();
        while let Some(c) = self.peek() {
            if nested && c == '}' {
                break;
            }
            if self.eat("$${") {
                text.push_str("${");
            } else if self.eat("${") {
                if !text.is_empty() {
                    nodes.push(Node::Text(std::mem::take(&mut text)));
                }
                nodes.push(self.variable()?);
            } else {
                text.push(c);
                self.pos += c.len_utf8();
            }
        }
        if !text.is_empty() {
            nodes.push(Node::Text(text));
        }
        Ok(nodes)
    }

    /// The raw text up to the closing brace of this expression.
    fn raw_until_close(&mut self) -> String {
        let start = self.pos;
        let mut depth = 0;
        while let Some(c) = self.peek() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                _ => {}
            }
            self.pos += c.len_utf8();
        }
        self.text[start..self.pos].to_string()
    }

    fn variable(&mut self) -> Result<Node, EnvsubstError> {
        let start = self.pos;
        let length = self.eat("#");
        let name_len = self.text[self.pos..]
            .find(|c: char| !is_ident(c))
            .unwrap_or(self.text.len() - self.pos);
        let name = self.text[self.pos..self.pos + name_len].to_string();
        self.pos += name_len;
        if name.is_empty() {
            return Err(EnvsubstError::BadSubstitution(format!(
                "${{{}",
                &self.text[start..]
            )));
        }
        let op = if length {
            Op::Length
        } else if self.eat(":=")
            || self.eat(":-")
            || self.eat(":?")
            || self.eat(":+")
            || self.eat("=")
        {
            Op::Default(self.nodes(true)?)
        } else if self.peek() == Some('-') || self.peek() == Some('+') {
            return Err(EnvsubstError::BadSubstitution(format!(
                "${{{name}{}",
                self.raw_until_close()
            )));
        } else if self.eat("^^") {
            Op::Upper { all: true }
        } else if self.eat("^") {
            Op::Upper { all: false }
        } else if self.eat(",,") {
            Op::Lower { all: true }
        } else if self.eat(",") {
            Op::Lower { all: false }
        } else if self.eat(":") {
            let raw = self.raw_until_close();
            let mut parts = raw.splitn(2, ':');
            let parse = |s: &str| {
                s.trim()
                    .parse::<i64>()
                    .map_err(|_| EnvsubstError::BadSubstitution(format!("${{{name}:{raw}}}")))
            };
            let offset = parse(parts.next().unwrap_or_default())?;
            let length = parts.next().map(parse).transpose()?;
            Op::Substring { offset, length }
        } else if self.eat("##") {
            Op::TrimPrefix {
                longest: true,
                pattern: self.raw_until_close(),
            }
        } else if self.eat("#") {
            Op::TrimPrefix {
                longest: false,
                pattern: self.raw_until_close(),
            }
        } else if self.eat("%%") {
            Op::TrimSuffix {
                longest: true,
                pattern: self.raw_until_close(),
            }
        } else if self.eat("%") {
            Op::TrimSuffix {
                longest: false,
                pattern: self.raw_until_close(),
            }
        } else if self.eat("/") {
            let (all, anchor) = if self.eat("/") {
                (true, None)
            } else if self.eat("#") {
                (false, Some('#'))
            } else if self.eat("%") {
                (false, Some('%'))
            } else {
                (false, None)
            };
            let raw = self.raw_until_close();
            let (from, to) = raw.split_once('/').unwrap_or((raw.as_str(), ""));
            Op::Replace {
                all,
                anchor,
                from: from.to_string(),
                to: to.to_string(),
            }
        } else {
            Op::Plain
        };
        if !self.eat("}") {
            return Err(EnvsubstError::BadSubstitution(format!(
                "${{{} is not closed",
                &self.text[start..]
            )));
        }
        Ok(Node::Var { name, op })
    }
}

/// Shell glob match of a whole string (`*`, `?`, literal otherwise).
fn glob(pattern: &[char], text: &[char]) -> bool {
    match (pattern.first(), text.first()) {
        (None, None) => true,
        (Some('*'), _) => {
            glob(&pattern[1..], text) || (!text.is_empty() && glob(pattern, &text[1..]))
        }
        (Some('?'), Some(_)) => glob(&pattern[1..], &text[1..]),
        (Some(p), Some(t)) if p == t => glob(&pattern[1..], &text[1..]),
        _ => false,
    }
}

fn apply(op: &Op, value: &str) -> String {
    let chars: Vec<char> = value.chars().collect();
    match op {
        Op::Plain | Op::Default(_) => value.to_string(),
        Op::Length => chars.len().to_string(),
        Op::Upper { all: true } => value.to_uppercase(),
        Op::Lower { all: true } => value.to_lowercase(),
        Op::Upper { all: false } | Op::Lower { all: false } => {
            let mut out = String::new();
            if let Some(first) = chars.first() {
                out.extend(if matches!(op, Op::Upper { .. }) {
                    first.to_uppercase().collect::<Vec<_>>()
                } else {
                    first.to_lowercase().collect()
                });
                out.extend(&chars[1..]);
            }
            out
        }
        Op::Substring { offset, length } => {
            let n = chars.len() as i64;
            let start = if *offset < 0 {
                (n + offset).max(0)
            } else {
                (*offset).min(n)
            };
            let end = match length {
                Some(l) if *l < 0 => (n + l).max(start),
                Some(l) => (start + l).min(n),
                None => n,
            };
            chars[start as usize..end as usize].iter().collect()
        }
        Op::TrimPrefix { longest, pattern } => {
            let p: Vec<char> = pattern.chars().collect();
            let cuts: Vec<usize> = (0..=chars.len())
                .filter(|&i| glob(&p, &chars[..i]))
                .collect();
            let cut = if *longest { cuts.last() } else { cuts.first() };
            cut.map_or(value.to_string(), |&i| chars[i..].iter().collect())
        }
        Op::TrimSuffix { longest, pattern } => {
            let p: Vec<char> = pattern.chars().collect();
            let cuts: Vec<usize> = (0..=chars.len())
                .filter(|&i| glob(&p, &chars[i..]))
                .collect();
            let cut = if *longest { cuts.first() } else { cuts.last() };
            cut.map_or(value.to_string(), |&i| chars[..i].iter().collect())
        }
        Op::Replace {
            all,
            anchor,
            from,
            to,
        } => match anchor {
            Some('#') if value.starts_with(from.as_str()) => {
                format!("{to}{}", &value[from.len()..])
            }
            Some('%') if value.ends_with(from.as_str()) => {
                format!("{}{to}", &value[..value.len() - from.len()])
            }
            Some(_) => value.to_string(),
            None if from.is_empty() => value.to_string(),
            None if *all => value.replace(from.as_str(), to),
            None => value.replacen(from.as_str(), to, 1),
        },
    }
}

/// The text a node list contributes to a "default string" when listing variables.
fn default_text(nodes: &[Node]) -> String {
    nodes
        .iter()
        .map(|n| match n {
            Node::Text(t) => t.clone(),
            Node::Var { name, .. } => format!("${{{name}}}"),
        })
        .collect()
}

impl Template {
    pub fn parse(text: &str) -> Result<Template, EnvsubstError> {
        let normalised = normalise(text);
        let mut parser = Parser {
            text: &normalised,
            pos: 0,
        };
        Ok(Template {
            nodes: parser.nodes(false)?,
        })
    }

    /// Every variable and its default, if it has a non-empty one (clusterctl counts
    /// `${VAR:=}` as required, and the arguments of functions as defaults: `${VAR:0:3}` has
    /// the "default" `03`).
    pub fn variables(&self) -> BTreeMap<String, Option<String>> {
        let mut out: BTreeMap<String, Option<String>> = BTreeMap::new();
        fn walk(nodes: &[Node], out: &mut BTreeMap<String, Option<String>>) {
            for node in nodes {
                let Node::Var { name, op } = node else {
                    continue;
                };
                let default = match op {
                    Op::Default(d) => {
                        walk(d, out);
                        Some(default_text(d))
                    }
                    Op::Substring { offset, length } => Some(format!(
                        "{offset}{}",
                        length.map(|l| l.to_string()).unwrap_or_default()
                    )),
                    Op::TrimPrefix { pattern, .. } | Op::TrimSuffix { pattern, .. } => {
                        Some(pattern.clone())
                    }
                    Op::Replace { from, to, .. } => Some(format!("{from}{to}")),
                    _ => None,
                }
                .filter(|d| !d.is_empty());
                let entry = out.entry(name.clone()).or_insert(None);
                if default.is_some() {
                    *entry = default;
                }
            }
        }
        walk(&self.nodes, &mut out);
        out
    }

    /// Substitutes the variables; every variable without a value or a default is named in one
    /// error.
    pub fn render(&self, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, EnvsubstError> {
        let mut missing = Vec::new();
        let out = render_nodes(&self.nodes, lookup, &mut missing);
        if missing.is_empty() {
            Ok(out)
        } else {
            missing.sort();
            missing.dedup();
            Err(EnvsubstError::Missing(missing))
        }
    }
}

fn render_nodes(
    nodes: &[Node],
    lookup: &dyn Fn(&str) -> Option<String>,
    missing: &mut Vec<String>,
) -> String {
    let mut out = String::new();
    for node in nodes {
        match node {
            Node::Text(t) => out.push_str(t),
            Node::Var { name, op } => {
                let value = lookup(name).filter(|v| !v.is_empty() || !matches!(op, Op::Default(_)));
                match (value, op) {
                    (Some(v), _) => out.push_str(&apply(op, &v)),
                    (None, Op::Default(d)) if !default_text(d).is_empty() => {
                        out.push_str(&render_nodes(d, lookup, missing))
                    }
                    (None, _) => missing.push(name.clone()),
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k: &str| map.get(k).cloned()
    }

    #[test]
    fn substitution_table() {
        let env = vars(&[
            ("NAME", "capi-Demo"),
            ("EMPTY", ""),
            ("COUNT", "3"),
            ("PATH_", "a/b/c.tar.gz"),
        ]);
        for (template, want) in [
            ("${NAME}", "capi-Demo"),
            ("${ NAME }", "capi-Demo"),
            ("$NAME stays", "$NAME stays"),
            ("$${NAME} is literal", "${NAME} is literal"),
            ("${UNSET:=default}", "default"),
            ("${UNSET=default}", "default"),
            ("${UNSET:-default}", "default"),
            ("${EMPTY:=fallback}", "fallback"),
            ("${NAME:=unused}", "capi-Demo"),
            ("${UNSET:=${NAME}-x}", "capi-Demo-x"),
            ("${UNSET:=[\"10.0.0.0/8\"]}", "[\"10.0.0.0/8\"]"),
            ("${#NAME}", "9"),
            ("${NAME^^}", "CAPI-DEMO"),
            ("${NAME,,}", "capi-demo"),
            ("${NAME^}", "Capi-Demo"),
            ("${NAME:5}", "Demo"),
            ("${NAME:0:4}", "capi"),
            ("${PATH_#*/}", "b/c.tar.gz"),
            ("${PATH_##*/}", "c.tar.gz"),
            ("${PATH_%.*}", "a/b/c.tar"),
            ("${PATH_%%.*}", "a/b/c"),
            ("${NAME/-/_}", "capi_Demo"),
            ("${PATH_//\\//-}", "a/b/c.tar.gz"),
            ("${NAME/#capi/k8s}", "k8s-Demo"),
            ("${NAME/%Demo/test}", "capi-test"),
            ("count: ${COUNT}", "count: 3"),
        ] {
            let t = Template::parse(template).unwrap_or_else(|e| panic!("{template}: {e}"));
            assert_eq!(t.render(&env).unwrap(), want, "{template}");
        }
    }

    #[test]
    fn missing_variables_are_named_together_and_sorted() {
        let t = Template::parse("${B} ${A} ${B} ${C:=ok} ${D:=}").unwrap();
        assert_eq!(
            t.render(&vars(&[])).unwrap_err().to_string(),
            "value for variables [A, B, D] is not set. Please set the value using os environment variables or the clusterctl config file"
        );
    }

    #[test]
    fn plus_forms_and_unclosed_expressions_are_bad_substitutions() {
        // (`-` is a name character here, so `${my-var}` names MY_VAR, as clusterctl reads it.)
        for bad in ["${VAR+x}", "${VAR", "${}"] {
            assert!(
                matches!(Template::parse(bad), Err(EnvsubstError::BadSubstitution(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn variables_and_their_defaults_with_upstreams_quirks() {
        let t = Template::parse("${A} ${B:=b} ${C:=} ${D:0:3} ${E:=${F}}").unwrap();
        let v = t.variables();
        assert_eq!(v["A"], None);
        assert_eq!(v["B"].as_deref(), Some("b"));
        assert_eq!(v["C"], None, "an empty default is required");
        assert_eq!(
            v["D"].as_deref(),
            Some("03"),
            "upstream counts substring arguments as a default"
        );
        assert_eq!(v["E"].as_deref(), Some("${F}"));
        assert_eq!(v["F"], None);
    }
}
