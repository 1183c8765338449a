//! The audit log, as kube-apiserver keeps it: one `audit.k8s.io/v1` Event per request, as a
//! JSON line (who, what, on which object, the answer, how long it took), at the level a
//! policy file's first matching rule gives (`None`, `Metadata`, `Request`); `Metadata` for
//! everything without a policy. A Secret's body (or a TokenReview's token) is never written,
//! whatever the policy says. The file is private (0600) and rotated by size.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use serde::Deserialize;
use serde_json::Value;

use super::User;
use super::metrics::RequestInfo;

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("reading the audit policy {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the audit policy {path} is not valid: {message}")]
    Policy { path: PathBuf, message: String },
    #[error("opening the audit log {path}: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// How much of a request is recorded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    None,
    #[default]
    Metadata,
    Request,
}

impl Level {
    fn as_str(self) -> &'static str {
        match self {
            Level::None => "None",
            Level::Metadata => "Metadata",
            Level::Request => "Request",
        }
    }
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct GroupResources {
    #[serde(default)]
    group: String,
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    resource_names: Vec<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Rule {
    level: String,
    #[serde(default)]
    users: Vec<String>,
    #[serde(default)]
    user_groups: Vec<String>,
    #[serde(default)]
    verbs: Vec<String>,
    #[serde(default)]
    resources: Vec<GroupResources>,
    #[serde(default)]
    namespaces: Vec<String>,
    #[serde(default)]
    non_resource_u_r_ls: Vec<String>,
    #[serde(default)]
    omit_stages: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PolicyFile {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    rules: Vec<Rule>,
}

/// The audit policy: rules tried in order, the first that matches a request decides.
#[derive(Clone, Debug)]
pub struct Policy {
    rules: Vec<(Rule, Level)>,
}

impl Default for Policy {
    /// Every request at `Metadata`.
    fn default() -> Self {
        Policy {
            rules: vec![(Rule::default(), Level::Metadata)],
        }
    }
}

impl Policy {
    /// Reads an `audit.k8s.io/v1` Policy (YAML or JSON).
    pub fn read(path: &Path) -> Result<Policy, AuditError> {
        let text = std::fs::read_to_string(path).map_err(|source| AuditError::Read {
            path: path.into(),
            source,
        })?;
        Policy::parse(&text).map_err(|message| AuditError::Policy {
            path: path.into(),
            message,
        })
    }

    fn parse(text: &str) -> Result<Policy, String> {
        let file: PolicyFile = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
        if file.kind != "Policy" || !file.api_version.starts_with("audit.k8s.io/") {
            return Err(format!(
                "expected kind: Policy of apiVersion audit.k8s.io/v1, got kind {:?} of {:?}",
                file.kind, file.api_version
            ));
        }
        let mut rules = Vec::new();
        for (i, rule) in file.rules.into_iter().enumerate() {
            let level = match rule.level.as_str() {
                "None" => Level::None,
                "Metadata" => Level::Metadata,
                "Request" => Level::Request,
                "RequestResponse" => {
                    return Err(format!(
                        "rules[{i}].level: RequestResponse is not supported (response bodies are not recorded); use Request"
                    ));
                }
                other => {
                    return Err(format!(
                        "rules[{i}].level: {other:?} is not a level; use None, Metadata or Request"
                    ));
                }
            };
            rules.push((rule, level));
        }
        Ok(Policy { rules })
    }

    /// The level of a request: the first matching rule's, None when no rule matches. Secrets
    /// and TokenReviews are at most Metadata: their bodies hold credentials.
    pub fn level(&self, request: &RequestInfo) -> Level {
        // The one stage a request is recorded at: a watch when its response starts.
        let stage = if request.is_watch() {
            "ResponseStarted"
        } else {
            "ResponseComplete"
        };
        let level = match self.rules.iter().find(|(rule, _)| matches(rule, request)) {
            Some((rule, _)) if rule.omit_stages.iter().any(|s| s == stage) => Level::None,
            Some((_, level)) => *level,
            None => Level::None,
        };
        let credentials = request.path.is_none()
            && matches!(request.resource.as_str(), "secrets" | "tokenreviews");
        if credentials {
            level.min(Level::Metadata)
        } else {
            level
        }
    }
}

fn listed(list: &[String], value: &str) -> bool {
    list.is_empty() || list.iter().any(|v| v == value)
}

fn matches(rule: &Rule, request: &RequestInfo) -> bool {
    let (user, groups) = request
        .user
        .as_ref()
        .map_or(("", &[][..]), |u| (u.name.as_str(), u.groups.as_slice()));
    if !listed(&rule.users, user) {
        return false;
    }
    if !rule.user_groups.is_empty() && !groups.iter().any(|g| rule.user_groups.contains(g)) {
        return false;
    }
    if !listed(&rule.verbs, &request.verb) {
        return false;
    }
    match &request.path {
        // A non-resource request matches only rules without resources or namespaces.
        Some(path) => {
            if !rule.resources.is_empty() || !rule.namespaces.is_empty() {
                return false;
            }
            rule.non_resource_u_r_ls.is_empty()
                || rule
                    .non_resource_u_r_ls
                    .iter()
                    .any(|u| match u.strip_suffix('*') {
                        Some(prefix) => path.starts_with(prefix),
                        None => u == path,
                    })
        }
        None => {
            if !rule.non_resource_u_r_ls.is_empty() {
                return false;
            }
            if !rule.namespaces.is_empty() && !rule.namespaces.contains(&request.namespace) {
                return false;
            }
            let resource = if request.subresource.is_empty() {
                request.resource.clone()
            } else {
                format!("{}/{}", request.resource, request.subresource)
            };
            rule.resources.is_empty()
                || rule.resources.iter().any(|r| {
                    r.group == request.group
                        && (r.resources.is_empty()
                            || r.resources.iter().any(|n| {
                                n == &resource
                                    || n == "*"
                                    || n.strip_prefix("*/")
                                        .is_some_and(|sub| sub == request.subresource)
                                    || n.strip_suffix("/*")
                                        .is_some_and(|main| main == request.resource)
                            }))
                        && listed(&r.resource_names, &request.name)
                })
        }
    }
}

/// Where the log goes and when it is rotated.
#[derive(Clone, Debug)]
pub struct LogOptions {
    pub path: PathBuf,
    /// Rotate once the file reaches this many bytes.
    pub max_size: u64,
    /// How many rotated files are kept (`audit.log.1` is the newest).
    pub max_backups: usize,
}

/// A request as the log records it.
pub struct Entry<'a> {
    pub info: &'a RequestInfo,
    pub level: Level,
    pub uri: &'a str,
    pub user_agent: &'a str,
    pub source: Option<std::net::SocketAddr>,
    pub code: u16,
    /// The message of a refused or failed request.
    pub failure: Option<(&'static str, String)>,
    pub received: time::OffsetDateTime,
    pub latency: std::time::Duration,
    pub request_body: Option<&'a [u8]>,
}

/// The audit log: lines are written by a thread of their own, so that a slow disk never
/// holds up a request.
pub struct AuditLog {
    policy: Policy,
    lines: mpsc::Sender<Vec<u8>>,
    writer: std::thread::JoinHandle<()>,
}

impl AuditLog {
    /// Opens (or creates, 0600) the log and starts its writer.
    pub fn open(policy: Policy, options: LogOptions) -> Result<AuditLog, AuditError> {
        let file = open_private(&options.path).map_err(|source| AuditError::Open {
            path: options.path.clone(),
            source,
        })?;
        let (lines, received) = mpsc::channel::<Vec<u8>>();
        let writer = std::thread::Builder::new()
            .name("audit-log".into())
            .spawn(move || write_lines(file, options, received))
            .map_err(|source| AuditError::Open {
                path: PathBuf::from("audit-log thread"),
                source,
            })?;
        Ok(AuditLog {
            policy,
            lines,
            writer,
        })
    }

    /// Writes what is queued and closes the file.
    pub fn close(self) {
        drop(self.lines);
        let _ = self.writer.join();
    }

    pub fn level(&self, request: &RequestInfo) -> Level {
        self.policy.level(request)
    }

    pub fn record(&self, entry: Entry<'_>) {
        if entry.level == Level::None {
            return;
        }
        let _ = self.lines.send(line(&entry));
    }
}

fn open_private(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

/// How long the writer gathers lines after writing some: a busy server's requests then cost a
/// queue push each, not a wake-up of the writer thread and a write(2) each (a fifth of the
/// API server's CPU when serving gets, `perf`).
const GATHER: std::time::Duration = std::time::Duration::from_millis(20);

fn write_lines(file: std::fs::File, options: LogOptions, lines: mpsc::Receiver<Vec<u8>>) {
    let mut size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, file);
    let warn = |what: &str, e: &std::io::Error| {
        tracing::warn!(path = %options.path.display(), error = %e, "{what} the audit log failed");
    };
    // Everything queued is written, then flushed at once; then the writer waits a little.
    while let Ok(first) = lines.recv() {
        for line in std::iter::once(first).chain(std::iter::from_fn(|| lines.try_recv().ok())) {
            if size > 0 && size + line.len() as u64 > options.max_size {
                if let Err(e) = out.flush() {
                    warn("writing", &e);
                }
                match rotate(&options) {
                    Ok(fresh) => {
                        out = std::io::BufWriter::with_capacity(64 * 1024, fresh);
                        size = 0;
                    }
                    Err(e) => warn("rotating", &e),
                }
            }
            match out.write_all(&line) {
                Ok(()) => size += line.len() as u64,
                Err(e) => warn("writing", &e),
            }
        }
        if let Err(e) = out.flush() {
            warn("writing", &e);
        }
        std::thread::sleep(GATHER);
    }
}

/// `audit.log` becomes `audit.log.1`, `.1` becomes `.2`..., the oldest beyond `max_backups`
/// goes; a new `audit.log` is opened.
fn rotate(options: &LogOptions) -> std::io::Result<std::fs::File> {
    let numbered = |n: usize| PathBuf::from(format!("{}.{n}", options.path.display()));
    if options.max_backups == 0 {
        std::fs::remove_file(&options.path)?;
    } else {
        let _ = std::fs::remove_file(numbered(options.max_backups));
        for n in (1..options.max_backups).rev() {
            let _ = std::fs::rename(numbered(n), numbered(n + 1));
        }
        std::fs::rename(&options.path, numbered(1))?;
    }
    open_private(&options.path)
}

fn timestamp(t: time::OffsetDateTime) -> String {
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// The `audit.k8s.io/v1` Event of a request, as kube-apiserver writes it. Borrowed from the
/// request and serialized straight to the line: building a JSON tree per request first was a
/// tenth of the API server's CPU serving gets (`perf`).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Event<'a> {
    kind: &'static str,
    api_version: &'static str,
    level: &'static str,
    #[serde(rename = "auditID")]
    audit_id: &'a str,
    stage: &'static str,
    #[serde(rename = "requestURI")]
    request_uri: &'a str,
    verb: &'a str,
    user: UserInfo<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    impersonated_user: Option<UserInfo<'a>>,
    #[serde(rename = "sourceIPs", skip_serializing_if = "Option::is_none")]
    source_ips: Option<[std::net::IpAddr; 1]>,
    user_agent: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    object_ref: Option<ObjectRef<'a>>,
    response_status: ResponseStatus<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_object: Option<Value>,
    request_received_timestamp: String,
    stage_timestamp: String,
    annotations: Annotations,
}

#[derive(serde::Serialize)]
struct UserInfo<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    username: Option<&'a str>,
    #[serde(skip_serializing_if = "str::is_empty")]
    uid: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    groups: Option<&'a [String]>,
    #[serde(skip_serializing_if = "is_empty_map")]
    extra: Option<&'a std::collections::BTreeMap<String, Vec<String>>>,
}

fn is_empty_map(extra: &Option<&std::collections::BTreeMap<String, Vec<String>>>) -> bool {
    extra.is_none_or(|m| m.is_empty())
}

impl<'a> UserInfo<'a> {
    fn of(user: Option<&'a User>) -> UserInfo<'a> {
        UserInfo {
            username: user.map(|u| u.name.as_str()),
            uid: user.map_or("", |u| u.uid.as_str()),
            groups: user.map(|u| u.groups.as_slice()),
            extra: user.map(|u| &u.extra),
        }
    }
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ObjectRef<'a> {
    resource: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    namespace: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    name: &'a str,
    api_group: &'a str,
    api_version: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    subresource: &'a str,
}

#[derive(serde::Serialize)]
struct ResponseStatus<'a> {
    metadata: Empty,
    code: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'a str>,
}

#[derive(serde::Serialize)]
struct Empty {}

#[derive(serde::Serialize)]
struct Annotations {
    #[serde(rename = "authorization.k8s.io/decision")]
    decision: &'static str,
    #[serde(rename = "capictl.x-k8s.io/latency")]
    latency: String,
}

/// Room for a typical line (a kubectl create at `Metadata` is about 730 bytes): serialized
/// into a buffer grown from serde_json's 128 bytes, a line took three reallocations and
/// copies (a fifth of the line's cost, `perf`). Longer lines (a failure's message, a request
/// body) still grow it.
const LINE_CAPACITY: usize = 1024;

/// The Event of a request, as one line.
fn line(entry: &Entry<'_>) -> Vec<u8> {
    let info = entry.info;
    let failure = entry.failure.as_ref();
    let mut id = uuid::Uuid::encode_buffer();
    let event = Event {
        kind: "Event",
        api_version: "audit.k8s.io/v1",
        level: entry.level.as_str(),
        audit_id: super::object::random_uuid()
            .hyphenated()
            .encode_lower(&mut id),
        stage: if info.is_watch() && entry.code == 200 {
            "ResponseStarted"
        } else {
            "ResponseComplete"
        },
        request_uri: entry.uri,
        verb: &info.verb,
        user: UserInfo::of(info.user.as_ref()),
        impersonated_user: info
            .impersonated_user
            .as_ref()
            .map(|u| UserInfo::of(Some(u))),
        source_ips: entry.source.map(|s| [s.ip()]),
        user_agent: entry.user_agent,
        object_ref: info.path.is_none().then(|| ObjectRef {
            resource: &info.resource,
            namespace: &info.namespace,
            name: &info.name,
            api_group: &info.group,
            api_version: &info.version,
            subresource: &info.subresource,
        }),
        response_status: ResponseStatus {
            metadata: Empty {},
            code: entry.code,
            status: failure.map(|_| "Failure"),
            reason: failure.map(|(reason, _)| *reason),
            message: failure.map(|(_, message)| message.as_str()),
        },
        request_object: entry
            .request_body
            .filter(|b| entry.level >= Level::Request && !b.is_empty())
            .map(|body| {
                serde_json::from_slice::<Value>(body)
                    .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into()))
            }),
        request_received_timestamp: timestamp(entry.received),
        stage_timestamp: timestamp(entry.received + entry.latency),
        annotations: Annotations {
            decision: if entry.code == 403 { "forbid" } else { "allow" },
            latency: format!("{:?}", entry.latency),
        },
    };
    let mut line = Vec::with_capacity(LINE_CAPACITY);
    serde_json::to_writer(&mut line, &event).expect("an audit event serializes");
    line.push(b'\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::User;

    fn request(user: &str, verb: &str, resource: &str, namespace: &str) -> RequestInfo {
        RequestInfo {
            verb: verb.into(),
            resource: resource.into(),
            version: "v1".into(),
            namespace: namespace.into(),
            user: Some(User {
                name: user.into(),
                groups: vec!["system:authenticated".into()],
                ..User::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_first_matching_rule_decides_and_secrets_never_go_past_metadata() {
        let policy = Policy::parse(
            r#"
apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: None
  users: ["system:kube-proxy"]
- level: None
  nonResourceURLs: ["/healthz*", "/readyz"]
- level: Request
  resources:
  - group: ""
    resources: ["secrets", "configmaps"]
- level: Metadata
  namespaces: ["kube-system"]
"#,
        )
        .unwrap();
        let cases = [
            (
                request("system:kube-proxy", "get", "configmaps", "x"),
                Level::None,
            ),
            (
                request("alice", "get", "configmaps", "default"),
                Level::Request,
            ),
            (
                request("alice", "get", "secrets", "default"),
                Level::Metadata,
            ),
            (
                request("alice", "list", "pods", "kube-system"),
                Level::Metadata,
            ),
            (request("alice", "list", "pods", "default"), Level::None),
        ];
        for (request, want) in cases {
            assert_eq!(policy.level(&request), want, "{request:?}");
        }
        let health = RequestInfo {
            verb: "get".into(),
            path: Some("/healthz/etcd".into()),
            ..Default::default()
        };
        assert_eq!(policy.level(&health), Level::None);
        assert_eq!(Policy::default().level(&health), Level::Metadata);
    }

    #[test]
    fn a_policy_asking_for_what_is_not_recorded_is_refused_saying_so() {
        let err = Policy::parse(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: RequestResponse\n",
        )
        .unwrap_err();
        assert!(err.contains("rules[0].level: RequestResponse"), "{err}");
        let err = Policy::parse("apiVersion: v1\nkind: ConfigMap\n").unwrap_err();
        assert!(err.contains("expected kind: Policy"), "{err}");
    }

    #[test]
    fn the_log_is_private_and_rotates_by_size() {
        let dir = std::env::temp_dir().join(format!("capictl-audit-{}", uuid::Uuid::new_v4()));
        let options = LogOptions {
            path: dir.join("audit.log"),
            max_size: 400,
            max_backups: 2,
        };
        let log = AuditLog::open(Policy::default(), options.clone()).unwrap();
        let info = request("alice", "get", "pods", "default");
        for _ in 0..8 {
            log.record(Entry {
                info: &info,
                level: Level::Metadata,
                uri: "/api/v1/namespaces/default/pods",
                user_agent: "test",
                source: None,
                code: 200,
                failure: None,
                received: time::OffsetDateTime::now_utc(),
                latency: std::time::Duration::from_millis(1),
                request_body: None,
            });
        }
        log.close();
        let backup = PathBuf::from(format!("{}.1", options.path.display()));
        assert!(backup.exists() && options.path.exists(), "no rotation");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&options.path)
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(!PathBuf::from(format!("{}.3", options.path.display())).exists());
        let first = std::fs::read_to_string(&backup).unwrap();
        let event: Value = serde_json::from_str(first.lines().next().unwrap()).unwrap();
        assert_eq!(event["user"]["username"], "alice");
        assert_eq!(event["objectRef"]["resource"], "pods");
        let _ = std::fs::remove_dir_all(dir);
    }
}
