//! The HAProxy load balancer in front of a Docker cluster's control plane: its configuration,
//! rendered from upstream's template (or the user's, from the ConfigMap that
//! `spec.loadBalancer.customHAProxyConfigTemplateRef` names) with the control-plane machines as
//! back ends, written into the container, read back, and reloaded with SIGHUP — only when it
//! changed.
//!
//! Templates are Go `text/template`, as upstream's are; [`render`] understands what upstream's
//! template and users' variations of it use: `{{ .Field }}`, `{{ $.Field }}`, `{{ if … }}…
//! {{ else }}…{{ end }}`, `{{ range $name, $value := .Map }}…{{ end }}`, `JoinHostPort`, and
//! the `{{-`/`-}}` whitespace trimming.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// What the load balancer image starts with, before any control plane exists.
pub const INITIAL_CONFIG: &str = include_str!("../../../templates/haproxy/initial.cfg");
/// Upstream's configuration template.
pub const DEFAULT_TEMPLATE: &str = include_str!("../../../templates/haproxy/haproxy.cfg");
/// The port HAProxy sends API server traffic to.
pub const BACKEND_PORT: u16 = 6443;

/// One control-plane machine behind the load balancer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backend {
    /// Its container's address (a name Docker's DNS resolves, or an IP).
    pub address: String,
    /// 100, or 0 while its Machine is being deleted.
    pub weight: u32,
}

/// The template's data, as upstream names it.
pub fn data(frontend_port: u16, backends: &BTreeMap<String, Backend>, ipv6: bool) -> Value {
    let servers: serde_json::Map<String, Value> = backends
        .iter()
        .map(|(name, b)| {
            (
                name.clone(),
                json!({"Address": b.address, "Weight": b.weight}),
            )
        })
        .collect();
    json!({
        "FrontendControlPlanePort": frontend_port.to_string(),
        "BackendControlPlanePort": BACKEND_PORT.to_string(),
        "BackendServers": servers,
        "IPv6": ipv6,
    })
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("the HAProxy configuration template: {0}")]
pub struct TemplateError(String);

#[derive(Debug)]
enum Node {
    Text(String),
    Print(String),
    If(String, Vec<Node>, Vec<Node>),
    Range {
        key: String,
        value: String,
        over: String,
        body: Vec<Node>,
    },
}

/// Splits a template into text and actions, applying `{{-` and `-}}` trimming.
fn lex(template: &str) -> Result<Vec<(bool, String)>, TemplateError> {
    let mut out: Vec<(bool, String)> = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        let mut text = rest[..start].to_string();
        let after = &rest[start + 2..];
        let end = after
            .find("}}")
            .ok_or_else(|| TemplateError("an action is not closed with }}".into()))?;
        let mut action = &after[..end];
        if let Some(a) = action.strip_prefix('-') {
            text = text.trim_end().to_string();
            action = a;
        }
        let trim_after = action.ends_with('-');
        if trim_after {
            action = &action[..action.len() - 1];
        }
        out.push((false, text));
        out.push((true, action.trim().to_string()));
        rest = &after[end + 2..];
        if trim_after {
            rest = rest.trim_start();
        }
    }
    out.push((false, rest.to_string()));
    Ok(out)
}

fn parse(
    tokens: &mut std::iter::Peekable<std::vec::IntoIter<(bool, String)>>,
    until: &[&str],
) -> Result<(Vec<Node>, String), TemplateError> {
    let mut nodes = Vec::new();
    while let Some((action, text)) = tokens.next() {
        if !action {
            if !text.is_empty() {
                nodes.push(Node::Text(text));
            }
            continue;
        }
        let word = text
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_string();
        if until.contains(&word.as_str()) {
            return Ok((nodes, word));
        }
        match word.as_str() {
            "if" => {
                let cond = text["if".len()..].trim().to_string();
                let (then, ended) = parse(tokens, &["else", "end"])?;
                let otherwise = if ended == "else" {
                    parse(tokens, &["end"])?.0
                } else {
                    Vec::new()
                };
                nodes.push(Node::If(cond, then, otherwise));
            }
            "range" => {
                let spec = text["range".len()..].trim();
                let (vars, over) = spec.split_once(":=").ok_or_else(|| {
                    TemplateError(format!("range {spec:?}: write range $name, $value := .Map"))
                })?;
                let mut names = vars.split(',').map(|v| v.trim().to_string());
                let key = names.next().unwrap_or_default();
                let value = names.next().unwrap_or_default();
                let (body, _) = parse(tokens, &["end"])?;
                nodes.push(Node::Range {
                    key,
                    value,
                    over: over.trim().to_string(),
                    body,
                });
            }
            "end" | "else" => {
                return Err(TemplateError(format!("{{{{{word}}}}} without if or range")));
            }
            _ => nodes.push(Node::Print(text)),
        }
    }
    if until.is_empty() {
        Ok((nodes, String::new()))
    } else {
        Err(TemplateError(format!(
            "missing {{{{{}}}}}",
            until.join(" or ")
        )))
    }
}

struct Scope<'a> {
    root: &'a Value,
    vars: BTreeMap<String, Value>,
}

impl Scope<'_> {
    fn lookup(&self, path: &str) -> Result<Value, TemplateError> {
        let (base, fields) = if let Some(rest) = path.strip_prefix("$.") {
            (self.root.clone(), rest)
        } else if let Some(rest) = path.strip_prefix('.') {
            (self.root.clone(), rest)
        } else if path.starts_with('$') {
            let (var, rest) = path.split_once('.').unwrap_or((path, ""));
            let value = self
                .vars
                .get(var)
                .cloned()
                .ok_or_else(|| TemplateError(format!("undefined variable {var}")))?;
            (value, rest)
        } else {
            return Ok(Value::String(path.trim_matches('"').to_string()));
        };
        let mut at = base;
        for field in fields.split('.').filter(|f| !f.is_empty()) {
            at = at
                .get(field)
                .cloned()
                .ok_or_else(|| TemplateError(format!("{path}: no field {field}")))?;
        }
        Ok(at)
    }

    fn eval(&self, expr: &str) -> Result<Value, TemplateError> {
        let words: Vec<&str> = expr.split_whitespace().collect();
        match words.as_slice() {
            ["JoinHostPort", host, port] => {
                let text = |v: Value| match v {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                let host = text(self.lookup(host)?);
                let port = text(self.lookup(port)?);
                Ok(Value::String(if host.contains(':') {
                    format!("[{host}]:{port}")
                } else {
                    format!("{host}:{port}")
                }))
            }
            [single] => self.lookup(single),
            _ => Err(TemplateError(format!("{{{{ {expr} }}}} is not supported"))),
        }
    }
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::String(s) => !s.is_empty(),
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

fn execute(nodes: &[Node], scope: &mut Scope, out: &mut String) -> Result<(), TemplateError> {
    for node in nodes {
        match node {
            Node::Text(t) => out.push_str(t),
            Node::Print(expr) => match scope.eval(expr)? {
                Value::String(s) => out.push_str(&s),
                other => out.push_str(&other.to_string()),
            },
            Node::If(cond, then, otherwise) => {
                let branch = if truthy(&scope.eval(cond)?) {
                    then
                } else {
                    otherwise
                };
                execute(branch, scope, out)?;
            }
            Node::Range {
                key,
                value,
                over,
                body,
            } => {
                let items: Vec<(Value, Value)> = match scope.eval(over)? {
                    // Go ranges over a map in key order.
                    Value::Object(map) => {
                        let mut items: Vec<(String, Value)> = map.into_iter().collect();
                        items.sort_by(|a, b| a.0.cmp(&b.0));
                        items
                            .into_iter()
                            .map(|(k, v)| (Value::String(k), v))
                            .collect()
                    }
                    Value::Array(list) => list
                        .into_iter()
                        .enumerate()
                        .map(|(i, v)| (json!(i), v))
                        .collect(),
                    _ => Vec::new(),
                };
                for (k, v) in items {
                    scope.vars.insert(key.clone(), k);
                    if !value.is_empty() {
                        scope.vars.insert(value.clone(), v);
                    }
                    execute(body, scope, out)?;
                }
            }
        }
    }
    Ok(())
}

/// Renders a template with `data`.
pub fn render(template: &str, data: &Value) -> Result<String, TemplateError> {
    let mut tokens = lex(template)?.into_iter().peekable();
    let (nodes, _) = parse(&mut tokens, &[])?;
    let mut out = String::new();
    execute(
        &nodes,
        &mut Scope {
            root: data,
            vars: BTreeMap::new(),
        },
        &mut out,
    )?;
    Ok(out)
}

/// Writes `config` into the load balancer `container` and reloads HAProxy, unless it is what
/// the container has already; whether it wrote. The file is read back before the reload, as
/// upstream does since a write that was not visible yet made HAProxy reload the old one.
pub async fn apply(
    docker: &bollard::Docker,
    container: &str,
    config: &str,
) -> Result<bool, super::DockerError> {
    use super::images::HAPROXY_CONFIG;
    let read = || async {
        super::exec(
            docker,
            container,
            &["cp".into(), HAPROXY_CONFIG.into(), "/dev/stdout".into()],
            None,
        )
        .await
    };
    if read().await?.stdout == config {
        return Ok(false);
    }
    let dir = std::path::Path::new(HAPROXY_CONFIG)
        .parent()
        .expect("a directory")
        .display()
        .to_string();
    let failed = |what: &str, out: super::ExecOutput| {
        super::DockerError::Exec(format!(
            "{what} in {container}: exit status {}: {}",
            out.code,
            out.stderr.trim()
        ))
    };
    let out = super::exec(docker, container, &["mkdir".into(), "-p".into(), dir], None).await?;
    if out.code != 0 {
        return Err(failed("making the HAProxy configuration directory", out));
    }
    let out = super::exec(
        docker,
        container,
        &["cp".into(), "/dev/stdin".into(), HAPROXY_CONFIG.into()],
        Some(config.as_bytes()),
    )
    .await?;
    if out.code != 0 {
        return Err(failed("writing the HAProxy configuration", out));
    }
    if read().await?.stdout != config {
        return Err(super::DockerError::Exec(format!(
            "the HAProxy configuration read back from {container} is not what was written"
        )));
    }
    docker
        .kill_container(
            container,
            Some(bollard::query_parameters::KillContainerOptions {
                signal: "SIGHUP".into(),
            }),
        )
        .await?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backends() -> BTreeMap<String, Backend> {
        BTreeMap::from([
            (
                "c1-cp-b".to_string(),
                Backend {
                    address: "c1-cp-b".into(),
                    weight: 0,
                },
            ),
            (
                "c1-cp-a".to_string(),
                Backend {
                    address: "172.18.0.5".into(),
                    weight: 100,
                },
            ),
        ])
    }

    #[test]
    fn upstreams_template_renders_every_control_plane() {
        let config = render(DEFAULT_TEMPLATE, &data(6443, &backends(), false)).unwrap();
        // As Go renders it: the `if` leaves its indentation on a line of its own.
        assert!(
            config.contains("  bind *:6443\n  \n  default_backend kube-apiservers"),
            "{config}"
        );
        assert!(!config.contains(":::"), "no IPv6 bind");
        let servers: Vec<&str> = config
            .lines()
            .filter(|l| l.trim_start().starts_with("server "))
            .collect();
        assert_eq!(
            servers,
            [
                "  server c1-cp-a 172.18.0.5:6443 weight 100 check check-ssl verify none on-marked-down shutdown-sessions resolvers docker resolve-prefer ipv4",
                "  server c1-cp-b c1-cp-b:6443 weight 0 check check-ssl verify none on-marked-down shutdown-sessions resolvers docker resolve-prefer ipv4",
            ]
        );
        assert!(config.contains("maxconn 8000"));
        let v6 = render(DEFAULT_TEMPLATE, &data(7443, &backends(), true)).unwrap();
        assert!(
            v6.contains("  bind *:7443\n  bind :::7443;\n  default_backend"),
            "{v6}"
        );
        assert!(
            v6.contains("resolve-prefer ipv6\n") || v6.trim_end().ends_with("resolve-prefer ipv6"),
            "{v6}"
        );
    }

    #[test]
    fn custom_templates_and_their_mistakes() {
        let custom = "frontend rke2\n  bind *:9345\n{{range $name, $b := .BackendServers}}  server {{ $name }} {{ $b.Address }}:9345 weight {{ $b.Weight }}\n{{end}}";
        let out = render(custom, &data(6443, &backends(), false)).unwrap();
        assert_eq!(
            out,
            "frontend rke2\n  bind *:9345\n  server c1-cp-a 172.18.0.5:9345 weight 100\n  server c1-cp-b c1-cp-b:9345 weight 0\n"
        );
        assert!(
            render("{{ if .IPv6 }}x", &data(1, &backends(), false))
                .unwrap_err()
                .0
                .contains("missing")
        );
        assert!(
            render("{{ .Nope }}", &data(1, &backends(), false))
                .unwrap_err()
                .0
                .contains("no field Nope")
        );
        assert!(render("{{ printf \"%d\" 1 }}", &data(1, &backends(), false)).is_err());
    }
}
