//! What kubelet does with a Pod bound to its Node, as pure functions of the Pod and of what the
//! container runtime shows of it ([`Seen`]): what to start next — the sandbox holding the Pod's
//! network namespace, then the init containers one at a time, then every app container — which
//! exited container to start again under the Pod's restart policy once kubelet's back-off has
//! passed (none for the first restart, then 10 s doubling up to 5 minutes), and the status
//! kubelet reports: phase, conditions, init and container statuses with their states, last
//! states and restart counts.
//!
//! The runtime is the Docker Engine ([`super::containers`]); nothing here does I/O.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::api::core::v1::{Container, Pod};
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::api::docker::ENGINE_SOCKET_HOST_PATH;

/// The annotations kubelet puts on mirror Pods (the static pods' stand-ins in the API).
pub const CONFIG_MIRROR_ANNOTATION: &str = crate::apiserver::node_authz::MIRROR_ANNOTATION;
pub const CONFIG_SOURCE_ANNOTATION: &str = "kubernetes.io/config.source";
pub const CONFIG_HASH_ANNOTATION: &str = "kubernetes.io/config.hash";

/// The sandbox's name among a Pod's containers, as kubelet's Docker runtime named it.
pub const SANDBOX: &str = "POD";
/// kubelet's restart back-off: the first restart is at once, then 10 s doubling up to 5 min.
const BACK_OFF_START: u64 = 10;
const BACK_OFF_MAX: u64 = 300;

/// One of a Pod's containers as the runtime shows it: each start of a container is a new
/// runtime container, numbered by `attempt` (its restart count when it started).
#[derive(Clone, Debug, PartialEq)]
pub struct Seen {
    pub id: String,
    /// The container's name in the Pod, or [`SANDBOX`].
    pub container: String,
    pub attempt: u32,
    pub image_id: String,
    pub state: State,
}

#[derive(Clone, Debug, PartialEq)]
pub enum State {
    /// Made, not started (or its start failed).
    Created,
    Running {
        started_at: OffsetDateTime,
    },
    Exited {
        exit_code: i64,
        oom_killed: bool,
        started_at: OffsetDateTime,
        finished_at: OffsetDateTime,
    },
}

/// Why a container could not be made or started when it was last tried: kubelet keeps these in
/// memory and shows them as the container's waiting reason.
#[derive(Clone, Debug, PartialEq)]
pub struct StartFailure {
    /// `ErrImagePull`, `ErrImageNeverPull`, `CreateContainerConfigError`,
    /// `CreateContainerError` or `RunContainerError`.
    pub reason: String,
    pub message: String,
    pub at: OffsetDateTime,
    /// Failures in a row: the pull back-off grows with them.
    pub count: u32,
    /// Failed in this pass: the status shows the failure itself, later passes the back-off.
    pub fresh: bool,
}

/// What to do for a Pod now.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Make and start the sandbox.
    Sandbox,
    /// Make and start attempt `attempt` of the container `container`.
    Start { container: String, attempt: u32 },
}

/// The Pod's next steps, and when to look again if only time will change them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    pub steps: Vec<Step>,
    pub recheck: Option<OffsetDateTime>,
}

/// The delay after attempt `attempt` of a container exited before it starts again (none after
/// the first run), or after a pull failed `attempt` times before it is tried again.
fn back_off(attempt: u32) -> time::Duration {
    if attempt == 0 {
        return time::Duration::ZERO;
    }
    let seconds = BACK_OFF_START.saturating_mul(1 << (attempt - 1).min(16));
    time::Duration::seconds(seconds.min(BACK_OFF_MAX) as i64)
}

/// The newest runtime container of `name`.
fn latest<'a>(seen: &'a [Seen], name: &str) -> Option<&'a Seen> {
    seen.iter()
        .filter(|s| s.container == name)
        .max_by_key(|s| s.attempt)
}

/// The newest runtime container of `name` before the newest.
fn previous<'a>(seen: &'a [Seen], name: &str) -> Option<&'a Seen> {
    let newest = latest(seen, name)?.attempt;
    seen.iter()
        .filter(|s| s.container == name && s.attempt < newest)
        .max_by_key(|s| s.attempt)
}

fn restart_policy(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always")
}

/// Whether an exited container is started again: init containers until they succeed (unless
/// the policy is Never), app containers as the policy says.
fn restarts(policy: &str, init: bool, exit_code: i64) -> bool {
    match policy {
        "Never" => false,
        "OnFailure" => exit_code != 0,
        _ => !init || exit_code != 0,
    }
}

fn containers(pod: &Pod) -> &[Container] {
    pod.spec.as_ref().map_or(&[], |s| &s.containers)
}

fn init_containers(pod: &Pod) -> &[Container] {
    pod.spec
        .as_ref()
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or_default()
}

/// Where one container stands.
enum Progress {
    /// Never started; `failure` says why when a start failed.
    NotStarted,
    Running,
    /// Exited and done: not started again.
    Done {
        exit_code: i64,
    },
    /// Exited, to be started again at `at`.
    Restarting {
        at: OffsetDateTime,
    },
}

fn progress(
    seen: &[Seen],
    container: &str,
    policy: &str,
    init: bool,
    failure: Option<&StartFailure>,
) -> Progress {
    match latest(seen, container).map(|s| &s.state) {
        // A start that failed is tried again after the same back-off as a restart.
        None | Some(State::Created) => match failure {
            Some(f) => Progress::Restarting {
                at: f.at + back_off(f.count),
            },
            None => Progress::NotStarted,
        },
        Some(State::Running { .. }) => Progress::Running,
        Some(State::Exited {
            exit_code,
            finished_at,
            ..
        }) => {
            if restarts(policy, init, *exit_code) {
                let attempt = latest(seen, container).map_or(0, |s| s.attempt);
                Progress::Restarting {
                    at: *finished_at + back_off(attempt),
                }
            } else {
                Progress::Done {
                    exit_code: *exit_code,
                }
            }
        }
    }
}

/// The next attempt's number for a container.
fn next_attempt(seen: &[Seen], container: &str) -> u32 {
    latest(seen, container).map_or(0, |s| match s.state {
        State::Created => s.attempt,
        _ => s.attempt + 1,
    })
}

/// What to do next for a Pod that is not being deleted.
pub fn plan(
    pod: &Pod,
    seen: &[Seen],
    failures: &BTreeMap<String, StartFailure>,
    now: OffsetDateTime,
) -> Plan {
    let mut plan = Plan::default();
    if !matches!(
        latest(seen, SANDBOX).map(|s| &s.state),
        Some(State::Running { .. })
    ) {
        match failures.get(SANDBOX).map(|f| f.at + back_off(f.count)) {
            Some(at) if at > now => plan.recheck = Some(at),
            _ => plan.steps.push(Step::Sandbox),
        }
        return plan;
    }
    let policy = restart_policy(pod);
    // Starts `name` now, or once its back-off ends at `at`.
    let mut start = |name: &str, at: Option<OffsetDateTime>| match at {
        Some(at) if at > now => {
            plan.recheck = Some(plan.recheck.map_or(at, |r| r.min(at)));
        }
        _ => plan.steps.push(Step::Start {
            container: name.to_string(),
            attempt: next_attempt(seen, name),
        }),
    };
    for c in init_containers(pod) {
        match progress(seen, &c.name, policy, true, failures.get(&c.name)) {
            Progress::Done { exit_code: 0 } => continue,
            // A failed init container that is not restarted fails the Pod.
            Progress::Done { .. } | Progress::Running => {}
            Progress::NotStarted => start(&c.name, None),
            Progress::Restarting { at } => start(&c.name, Some(at)),
        }
        return plan;
    }
    for c in containers(pod) {
        match progress(seen, &c.name, policy, false, failures.get(&c.name)) {
            Progress::NotStarted => start(&c.name, None),
            Progress::Restarting { at } => start(&c.name, Some(at)),
            Progress::Running | Progress::Done { .. } => {}
        }
    }
    plan
}

fn rfc3339(t: OffsetDateTime) -> String {
    t.replace_nanosecond(0)
        .expect("0 is a nanosecond")
        .format(&time::format_description::well_known::Rfc3339)
        .expect("a time formats")
}

/// A runtime container's state as the API shows it (`running` or `terminated`).
fn state_of(seen: &Seen) -> Value {
    match &seen.state {
        State::Created => json!({"waiting": {"reason": "ContainerCreating"}}),
        State::Running { started_at } => json!({"running": {"startedAt": rfc3339(*started_at)}}),
        State::Exited {
            exit_code,
            oom_killed,
            started_at,
            finished_at,
        } => {
            let reason = match (oom_killed, exit_code) {
                (true, _) => "OOMKilled",
                (false, 0) => "Completed",
                (false, _) => "Error",
            };
            json!({"terminated": {
                "exitCode": exit_code,
                "reason": reason,
                "startedAt": rfc3339(*started_at),
                "finishedAt": rfc3339(*finished_at),
                "containerID": format!("docker://{}", seen.id),
            }})
        }
    }
}

/// Which of a Pod's container lists a container is in; for an app container, whether the init
/// containers still run.
#[derive(Clone, Copy, Debug, PartialEq)]
enum List {
    Init,
    App { initializing: bool },
}

/// The status of one container, as kubelet reports it.
fn container_status(
    pod: &Pod,
    c: &Container,
    seen: &[Seen],
    failure: Option<&StartFailure>,
    list: List,
    now: OffsetDateTime,
    probed: &HashMap<String, super::prober::Results>,
) -> Value {
    let init = list == List::Init;
    let initializing = list == List::App { initializing: true };
    let image = c.image.clone().unwrap_or_default();
    let newest = latest(seen, &c.name);
    let policy = restart_policy(pod);
    let waiting = |reason: &str, message: Option<String>| {
        let mut w = json!({"reason": reason});
        if let Some(m) = message {
            w["message"] = json!(m);
        }
        json!({ "waiting": w })
    };
    let state = match (newest.map(|s| &s.state), failure) {
        (None | Some(State::Created), Some(f)) if f.fresh || f.reason != "ErrImagePull" => {
            waiting(&f.reason, Some(f.message.clone()))
        }
        (None | Some(State::Created), Some(f)) => waiting(
            "ImagePullBackOff",
            Some(format!("Back-off pulling image {image:?}: {}", f.message)),
        ),
        (None, None) if initializing && !init => waiting("PodInitializing", None),
        (None | Some(State::Created), None) => waiting("ContainerCreating", None),
        (Some(State::Exited { exit_code, .. }), _)
            if restarts(policy, init, *exit_code)
                && matches!(progress(seen, &c.name, policy, init, None), Progress::Restarting { at } if at > now) =>
        {
            let delay = back_off(newest.map_or(0, |s| s.attempt));
            waiting(
                "CrashLoopBackOff",
                Some(format!(
                    "back-off {}s restarting failed container={} pod={}_{}({})",
                    delay.whole_seconds(),
                    c.name,
                    pod.metadata.name.as_deref().unwrap_or_default(),
                    pod.metadata.namespace.as_deref().unwrap_or_default(),
                    pod.metadata.uid.as_deref().unwrap_or_default(),
                )),
            )
        }
        (Some(_), _) => state_of(newest.expect("matched Some")),
    };
    // The last state: the newest exit, when the current state is not that exit itself.
    let last = match newest.map(|s| &s.state) {
        Some(State::Exited { .. }) if state.get("waiting").is_some() => newest,
        Some(State::Running { .. } | State::Created) => previous(seen, &c.name),
        _ => None,
    };
    let running = state.get("running").is_some();
    // An app container is started and ready as its probes say (none: once running).
    let (started, ready) = match newest.filter(|_| running && !init) {
        Some(s) => {
            super::prober::started_and_ready(c, probed.get(&s.id).copied().unwrap_or_default())
        }
        None => (running, running),
    };
    let mut status = json!({
        "name": c.name,
        "image": image,
        "imageID": newest.map(|s| s.image_id.clone()).unwrap_or_default(),
        "ready": ready || (init && state["terminated"]["exitCode"] == 0),
        "restartCount": newest.map_or(0, |s| s.attempt),
        "state": state,
        "lastState": last.map(state_of).unwrap_or(json!({})),
    });
    if let Some(s) = newest.filter(|s| s.state != State::Created) {
        status["containerID"] = json!(format!("docker://{}", s.id));
    }
    if !init {
        status["started"] = json!(started);
    }
    status
}

/// The Pod's phase, as kubelet's `getPhase` decides it.
fn phase(pod: &Pod, seen: &[Seen], init_done: bool, init_failed: bool) -> &'static str {
    if init_failed {
        return "Failed";
    }
    if !init_done {
        return "Pending";
    }
    let policy = restart_policy(pod);
    let (mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0);
    for c in containers(pod) {
        match latest(seen, &c.name).map(|s| &s.state) {
            Some(State::Running { .. }) => running += 1,
            Some(State::Exited { exit_code, .. }) => {
                stopped += 1;
                if *exit_code == 0 {
                    succeeded += 1;
                }
            }
            None | Some(State::Created) => waiting += 1,
        }
    }
    let all = containers(pod).len();
    match () {
        _ if waiting > 0 => "Pending",
        _ if running > 0 => "Running",
        _ if stopped == all && policy == "Always" => "Running",
        _ if stopped == all && succeeded == all => "Succeeded",
        _ if policy == "Never" => "Failed",
        // OnFailure: a failed container is restarting.
        _ => "Running",
    }
}

/// The status kubelet reports for a Pod, from what the runtime shows, the start failures it
/// keeps, what the probes found (by container id), and the Pod's addresses. Conditions keep
/// their transition time while their status holds.
pub fn status(
    pod: &Pod,
    seen: &[Seen],
    failures: &BTreeMap<String, StartFailure>,
    probed: &HashMap<String, super::prober::Results>,
    addresses: (&str, &str),
    now: OffsetDateTime,
) -> Value {
    let (pod_ip, host_ip) = addresses;
    let policy = restart_policy(pod);
    let sandbox_up = matches!(
        latest(seen, SANDBOX).map(|s| &s.state),
        Some(State::Running { .. })
    );
    let mut init_done = true;
    let mut init_failed = false;
    for c in init_containers(pod) {
        match progress(seen, &c.name, policy, true, None) {
            Progress::Done { exit_code: 0 } => {}
            Progress::Done { .. } => {
                init_failed = true;
                init_done = false;
                break;
            }
            _ => {
                init_done = false;
                break;
            }
        }
    }
    let init_statuses: Vec<Value> = init_containers(pod)
        .iter()
        .map(|c| container_status(pod, c, seen, failures.get(&c.name), List::Init, now, probed))
        .collect();
    let statuses: Vec<Value> = containers(pod)
        .iter()
        .map(|c| {
            let failure = failures.get(&c.name);
            let list = List::App {
                initializing: !init_done,
            };
            container_status(pod, c, seen, failure, list, now, probed)
        })
        .collect();
    let unready: Vec<&str> = statuses
        .iter()
        .filter(|s| s["ready"] != true)
        .filter_map(|s| s["name"].as_str())
        .collect();
    let phase = phase(pod, seen, init_done, init_failed);
    let completed = matches!(phase, "Succeeded" | "Failed");
    let before: BTreeMap<String, (String, Value)> = pod
        .status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .map(|c| {
            (
                c.type_.clone(),
                (
                    c.status.clone(),
                    serde_json::to_value(&c.last_transition_time).unwrap_or_default(),
                ),
            )
        })
        .collect();
    let condition = |kind: &str, holds: bool, reason: Option<(&str, String)>| {
        let status = if holds { "True" } else { "False" };
        let since = match before.get(kind) {
            Some((s, t)) if s == status && !t.is_null() => t.clone(),
            _ => json!(rfc3339(now)),
        };
        let mut c = json!({"type": kind, "status": status, "lastProbeTime": null, "lastTransitionTime": since});
        if let (false, Some((reason, message))) = (holds, reason) {
            c["reason"] = json!(reason);
            c["message"] = json!(message);
        }
        c
    };
    let pending_init: Vec<&str> = init_statuses
        .iter()
        .filter(|s| s["state"]["terminated"]["exitCode"] != 0)
        .filter_map(|s| s["name"].as_str())
        .collect();
    let not_ready = (
        if completed {
            "PodCompleted"
        } else {
            "ContainersNotReady"
        },
        format!("containers with unready status: [{}]", unready.join(" ")),
    );
    let conditions = vec![
        condition("PodReadyToStartContainers", sandbox_up, None),
        condition(
            "Initialized",
            init_done || completed && !init_failed,
            Some((
                "ContainersNotInitialized",
                format!(
                    "containers with incomplete status: [{}]",
                    pending_init.join(" ")
                ),
            )),
        ),
        condition("Ready", unready.is_empty(), Some(not_ready.clone())),
        condition("ContainersReady", unready.is_empty(), Some(not_ready)),
        condition("PodScheduled", true, None),
    ];
    let start_time = pod
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .map_or_else(|| json!(rfc3339(now)), |t| json!(t));
    let mut status = json!({
        "phase": phase,
        "conditions": conditions,
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "startTime": start_time,
        "containerStatuses": statuses,
    });
    if !init_statuses.is_empty() {
        status["initContainerStatuses"] = json!(init_statuses);
    }
    if sandbox_up && !pod_ip.is_empty() {
        status["podIP"] = json!(pod_ip);
        status["podIPs"] = json!([{ "ip": pod_ip }]);
    }
    status
}

/// What a Pod asks that capictl's unprivileged nodes cannot give, in a sentence for the
/// container's waiting message and an Event; None when it can run.
pub fn refused(pod: &Pod, container: &Container) -> Option<String> {
    if container
        .security_context
        .as_ref()
        .and_then(|s| s.privileged)
        == Some(true)
    {
        return Some(format!(
            "container {:?} is privileged, and capictl's nodes run unprivileged: a privileged container cannot run here",
            container.name
        ));
    }
    for mount in container.volume_mounts.iter().flatten() {
        if mount.sub_path.as_deref().is_some_and(|p| !p.is_empty())
            || mount
                .sub_path_expr
                .as_deref()
                .is_some_and(|p| !p.is_empty())
        {
            return Some(format!(
                "volume mount {:?} of container {:?} uses subPath, which capictl's nodes do not support (the Docker Engine mounts whole volumes)",
                mount.name, container.name
            ));
        }
    }
    for volume in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        let supported = volume.empty_dir.is_some() || projects(volume) || is_engine_socket(volume);
        if let Some(host_path) = &volume.host_path
            && !is_engine_socket(volume)
        {
            return Some(format!(
                "volume {:?} is a hostPath volume of {:?}; capictl's nodes give Pods one hostPath only, the Docker Engine's socket {ENGINE_SOCKET_HOST_PATH:?} (type Socket or unset): any other path would be a path of the node container, not of a host",
                volume.name, host_path.path
            ));
        }
        if !supported {
            let kind = serde_json::to_value(volume)
                .ok()
                .and_then(|v| {
                    v.as_object()?
                        .keys()
                        .find(|k| k.as_str() != "name")
                        .cloned()
                })
                .unwrap_or_default();
            return Some(format!(
                "volume {:?} is a {kind} volume; capictl's nodes run emptyDir, configMap, secret, downwardAPI and projected volumes (a hostPath would be a path of the node container, not of a host)",
                volume.name
            ));
        }
    }
    None
}

/// Whether a volume is the hostPath of the Docker Engine's socket, the one hostPath capictl's
/// nodes give (what upstream's Docker provider Deployment mounts).
pub fn is_engine_socket(volume: &k8s_openapi::api::core::v1::Volume) -> bool {
    volume.host_path.as_ref().is_some_and(|h| {
        h.path == ENGINE_SOCKET_HOST_PATH
            && matches!(h.type_.as_deref(), None | Some("") | Some("Socket"))
    })
}

/// Whether kubelet projects files into a volume (and keeps them current): a configMap,
/// secret, downwardAPI or projected volume.
pub fn projects(volume: &k8s_openapi::api::core::v1::Volume) -> bool {
    volume.config_map.is_some()
        || volume.secret.is_some()
        || volume.downward_api.is_some()
        || volume.projected.is_some()
}

/// A file of a configMap, secret, downwardAPI or projected volume.
#[derive(Clone, Debug, PartialEq, Hash)]
pub struct VolumeFile {
    pub path: String,
    pub content: Vec<u8>,
    pub mode: u32,
}

/// An entry of a configMap, secret, downwardAPI or projected volume's directory, as kubelet's
/// atomic writer lays it out: the files under a directory of their own, [`DATA_LINK`] naming
/// that directory, and each top-level name a link through it, so that an update (a new
/// directory, then one rename of the link) never shows a half-written set.
#[derive(Clone, Debug, PartialEq)]
pub enum Entry {
    File(VolumeFile),
    Link { path: String, target: String },
}

/// The link naming the directory a volume's files are in now.
pub const DATA_LINK: &str = "..data";
/// The link an update makes beside [`DATA_LINK`], then renames over it.
pub const NEXT_DATA_LINK: &str = "..data_tmp";

/// The directory a volume's files written at `at` go to (`..2026_12_07_01_53_00.123456789`).
pub fn data_dir(at: OffsetDateTime) -> String {
    format!(
        "..{:04}_{:02}_{:02}_{:02}_{:02}_{:02}.{:09}",
        at.year(),
        u8::from(at.month()),
        at.day(),
        at.hour(),
        at.minute(),
        at.second(),
        at.nanosecond()
    )
}

/// The top-level names of a volume's files: what its directory shows through [`DATA_LINK`].
fn top_level(files: &[VolumeFile]) -> BTreeSet<String> {
    files
        .iter()
        .filter_map(|f| f.path.split('/').find(|c| !c.is_empty()))
        .map(str::to_string)
        .collect()
}

/// The entries that write `files` into directory `dir`, `link` naming it, and the top-level
/// links through [`DATA_LINK`].
pub fn atomic_layout(files: &[VolumeFile], dir: &str, link: &str) -> Vec<Entry> {
    let mut out: Vec<Entry> = files
        .iter()
        .map(|f| {
            Entry::File(VolumeFile {
                path: format!("{dir}/{}", f.path.trim_start_matches('/')),
                ..f.clone()
            })
        })
        .collect();
    out.push(Entry::Link {
        path: link.to_string(),
        target: dir.to_string(),
    });
    out.extend(top_level(files).into_iter().map(|name| Entry::Link {
        target: format!("{DATA_LINK}/{name}"),
        path: name,
    }));
    out
}

/// What a Pod's volumes read: ConfigMaps and Secrets of its namespace by name, and the
/// ServiceAccount tokens kubelet requested for it, by audience and lifetime.
#[derive(Clone, Debug, Default)]
pub struct Sources {
    pub config_maps: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
    pub secrets: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
    pub tokens: BTreeMap<String, String>,
}

/// The key of a ServiceAccount token among [`Sources::tokens`].
pub fn token_key(audience: Option<&str>, expiration_seconds: Option<i64>) -> String {
    format!(
        "{}/{}",
        audience.unwrap_or_default(),
        expiration_seconds.unwrap_or(3600)
    )
}

/// A downward API field of the Pod (`metadata.name`, `metadata.labels`, ...).
fn pod_field(pod: &Pod, path: &str) -> Option<String> {
    let map = |m: Option<&BTreeMap<String, String>>| {
        m.into_iter()
            .flatten()
            .map(|(k, v)| format!("{k}={v:?}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let meta = &pod.metadata;
    Some(match path {
        "metadata.name" => meta.name.clone()?,
        "metadata.namespace" => meta.namespace.clone()?,
        "metadata.uid" => meta.uid.clone()?,
        "metadata.labels" => map(meta.labels.as_ref()),
        "metadata.annotations" => map(meta.annotations.as_ref()),
        "spec.nodeName" => pod.spec.as_ref()?.node_name.clone()?,
        "spec.serviceAccountName" => pod.spec.as_ref()?.service_account_name.clone()?,
        "status.podIP" => pod.status.as_ref()?.pod_ip.clone()?,
        "status.hostIP" => pod.status.as_ref()?.host_ip.clone()?,
        _ => {
            let key = |prefix: &str| {
                path.strip_prefix(prefix)?
                    .strip_prefix("['")?
                    .strip_suffix("']")
                    .map(str::to_string)
            };
            if let Some(k) = key("metadata.labels") {
                meta.labels.as_ref()?.get(&k)?.clone()
            } else {
                meta.annotations
                    .as_ref()?
                    .get(&key("metadata.annotations")?)?
                    .clone()
            }
        }
    })
}

/// The files of one key-to-path projection of a ConfigMap or Secret: every key, or the items.
fn projected_keys(
    kind: &str,
    name: &str,
    data: Option<&BTreeMap<String, Vec<u8>>>,
    items: Option<&Vec<k8s_openapi::api::core::v1::KeyToPath>>,
    optional: bool,
    mode: u32,
) -> Result<Vec<VolumeFile>, String> {
    let Some(data) = data else {
        return if optional {
            Ok(vec![])
        } else {
            Err(format!("{kind} {name:?} not found"))
        };
    };
    match items {
        None => Ok(data
            .iter()
            .map(|(key, content)| VolumeFile {
                path: key.clone(),
                content: content.clone(),
                mode,
            })
            .collect()),
        Some(items) => items
            .iter()
            .filter_map(|item| match data.get(&item.key) {
                Some(content) => Some(Ok(VolumeFile {
                    path: item.path.clone(),
                    content: content.clone(),
                    mode: item.mode.map_or(mode, |m| m as u32),
                })),
                None if optional => None,
                None => Some(Err(format!(
                    "couldn't find key {} in {kind} {name}",
                    item.key
                ))),
            })
            .collect(),
    }
}

fn downward_files(
    pod: &Pod,
    items: &[k8s_openapi::api::core::v1::DownwardAPIVolumeFile],
    mode: u32,
) -> Vec<VolumeFile> {
    items
        .iter()
        .filter_map(|item| {
            let value = pod_field(pod, &item.field_ref.as_ref()?.field_path)?;
            Some(VolumeFile {
                path: item.path.clone(),
                content: value.into_bytes(),
                mode: item.mode.map_or(mode, |m| m as u32),
            })
        })
        .collect()
}

/// The files of a Pod's volume, from what it reads; emptyDir volumes have none. An error says
/// what is missing, in kubelet's words.
pub fn volume_files(
    pod: &Pod,
    volume: &k8s_openapi::api::core::v1::Volume,
    sources: &Sources,
) -> Result<Vec<VolumeFile>, String> {
    use k8s_openapi::api::core::v1::{
        ConfigMapProjection, DownwardAPIProjection, SecretProjection, VolumeProjection,
    };
    // A configMap, secret or downwardAPI volume is a projected volume of one source.
    let (projections, mode) = if let Some(cm) = &volume.config_map {
        let source = ConfigMapProjection {
            name: cm.name.clone(),
            items: cm.items.clone(),
            optional: cm.optional,
        };
        let projection = VolumeProjection {
            config_map: Some(source),
            ..Default::default()
        };
        (vec![projection], cm.default_mode)
    } else if let Some(secret) = &volume.secret {
        let source = SecretProjection {
            name: secret.secret_name.clone().unwrap_or_default(),
            items: secret.items.clone(),
            optional: secret.optional,
        };
        let projection = VolumeProjection {
            secret: Some(source),
            ..Default::default()
        };
        (vec![projection], secret.default_mode)
    } else if let Some(downward) = &volume.downward_api {
        let source = DownwardAPIProjection {
            items: downward.items.clone(),
        };
        let projection = VolumeProjection {
            downward_api: Some(source),
            ..Default::default()
        };
        (vec![projection], downward.default_mode)
    } else if let Some(projected) = &volume.projected {
        (
            projected.sources.clone().unwrap_or_default(),
            projected.default_mode,
        )
    } else {
        return Ok(vec![]);
    };
    let mode = mode.unwrap_or(0o644) as u32;
    let mut files = Vec::new();
    for source in &projections {
        if let Some(cm) = &source.config_map {
            files.extend(projected_keys(
                "configmap",
                &cm.name,
                sources.config_maps.get(&cm.name),
                cm.items.as_ref(),
                cm.optional == Some(true),
                mode,
            )?);
        }
        if let Some(secret) = &source.secret {
            files.extend(projected_keys(
                "secret",
                &secret.name,
                sources.secrets.get(&secret.name),
                secret.items.as_ref(),
                secret.optional == Some(true),
                mode,
            )?);
        }
        if let Some(downward) = &source.downward_api {
            files.extend(downward_files(
                pod,
                downward.items.as_deref().unwrap_or_default(),
                mode,
            ));
        }
        if let Some(token) = &source.service_account_token {
            let key = token_key(token.audience.as_deref(), token.expiration_seconds);
            let value = sources
                .tokens
                .get(&key)
                .ok_or_else(|| "the ServiceAccount token was not issued".to_string())?;
            files.push(VolumeFile {
                path: token.path.clone(),
                content: value.clone().into_bytes(),
                mode,
            });
        }
    }
    Ok(files)
}

/// A container's environment, as kubelet sets it: `envFrom` first, then `env` in order
/// (`$(VAR)` references expanded), then the `KUBERNETES_SERVICE_*` variables reaching the API
/// server. An error names what is missing, in kubelet's words.
pub fn environment(
    pod: &Pod,
    container: &Container,
    sources: &Sources,
    api_server: Option<(&str, &str)>,
) -> Result<Vec<(String, String)>, String> {
    let mut env: Vec<(String, String)> = Vec::new();
    let set = |env: &mut Vec<(String, String)>, key: String, value: String| {
        env.retain(|(k, _)| *k != key);
        env.push((key, value));
    };
    if let Some((host, port)) = api_server {
        set(&mut env, "KUBERNETES_SERVICE_HOST".into(), host.into());
        set(&mut env, "KUBERNETES_SERVICE_PORT".into(), port.into());
        set(
            &mut env,
            "KUBERNETES_SERVICE_PORT_HTTPS".into(),
            port.into(),
        );
        set(
            &mut env,
            "KUBERNETES_PORT".into(),
            format!("tcp://{host}:{port}"),
        );
    }
    let text = |bytes: &Vec<u8>| String::from_utf8_lossy(bytes).into_owned();
    for from in container.env_from.iter().flatten() {
        let prefix = from.prefix.clone().unwrap_or_default();
        let (kind, name, data, optional) = match (&from.config_map_ref, &from.secret_ref) {
            (Some(cm), _) => (
                "configmap",
                cm.name.clone(),
                sources.config_maps.get(&cm.name),
                cm.optional == Some(true),
            ),
            (None, Some(s)) => (
                "secret",
                s.name.clone(),
                sources.secrets.get(&s.name),
                s.optional == Some(true),
            ),
            (None, None) => continue,
        };
        match data {
            Some(data) => {
                for (k, v) in data {
                    set(&mut env, format!("{prefix}{k}"), text(v));
                }
            }
            None if optional => {}
            None => return Err(format!("{kind} {name:?} not found")),
        }
    }
    for var in container.env.iter().flatten() {
        let value = match (&var.value, &var.value_from) {
            (Some(v), _) => expand(v, &env),
            (None, Some(from)) => {
                let keyed = |kind: &str,
                             all: &BTreeMap<String, BTreeMap<String, Vec<u8>>>,
                             name: &str,
                             key: &str,
                             optional: Option<bool>|
                 -> Result<Option<String>, String> {
                    match all.get(name).map(|d| d.get(key)) {
                        Some(Some(v)) => Ok(Some(text(v))),
                        _ if optional == Some(true) => Ok(None),
                        Some(None) => Err(format!(
                            "couldn't find key {key} in {kind} {}/{name}",
                            pod.metadata.namespace.as_deref().unwrap_or_default()
                        )),
                        None => Err(format!("{} {name:?} not found", kind.to_lowercase())),
                    }
                };
                let found = if let Some(r) = &from.config_map_key_ref {
                    keyed(
                        "ConfigMap",
                        &sources.config_maps,
                        &r.name,
                        &r.key,
                        r.optional,
                    )?
                } else if let Some(r) = &from.secret_key_ref {
                    keyed("Secret", &sources.secrets, &r.name, &r.key, r.optional)?
                } else if let Some(r) = &from.field_ref {
                    pod_field(pod, &r.field_path)
                } else if let Some(r) = &from.resource_field_ref {
                    resource_field(container, &r.resource)
                } else {
                    None
                };
                match found {
                    Some(v) => v,
                    None => continue,
                }
            }
            (None, None) => String::new(),
        };
        set(&mut env, var.name.clone(), value);
    }
    Ok(env)
}

/// A Pod's resolver settings, as kubelet writes its `resolv.conf`: name servers, search
/// domains and options.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DnsSettings {
    pub servers: Vec<String>,
    pub searches: Vec<String>,
    pub options: Vec<String>,
}

/// The resolver settings of a Pod by its `dnsPolicy` and `dnsConfig`: `ClusterFirst` (the
/// default) asks the cluster DNS with the namespace's search path and `ndots:5`; `Default`
/// takes the node's (None: the runtime's own); `None` takes `dnsConfig` alone. Pods in the
/// node's network namespace share the node's resolver, which a runtime cannot change for one
/// container there, so they get None whatever they ask.
pub fn dns_settings(
    pod: &Pod,
    cluster: Option<&super::service_proxy::ClusterDns>,
) -> Option<DnsSettings> {
    let spec = pod.spec.as_ref()?;
    if spec.host_network == Some(true) {
        return None;
    }
    let mut settings = match (
        spec.dns_policy.as_deref().unwrap_or("ClusterFirst"),
        cluster,
    ) {
        ("None", _) => DnsSettings::default(),
        ("ClusterFirst" | "ClusterFirstWithHostNet", Some(cluster)) => {
            let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
            DnsSettings {
                servers: vec![cluster.address.clone()],
                searches: vec![
                    format!("{namespace}.svc.{}", cluster.domain),
                    format!("svc.{}", cluster.domain),
                    cluster.domain.clone(),
                ],
                options: vec!["ndots:5".into()],
            }
        }
        // `Default`, or no cluster DNS configured: kubelet falls back to the node's.
        _ if spec.dns_config.is_none() => return None,
        _ => DnsSettings::default(),
    };
    if let Some(config) = &spec.dns_config {
        settings
            .servers
            .extend(config.nameservers.iter().flatten().cloned());
        settings
            .searches
            .extend(config.searches.iter().flatten().cloned());
        for option in config.options.iter().flatten() {
            let text = match &option.value {
                Some(v) => format!("{}:{v}", option.name.clone().unwrap_or_default()),
                None => option.name.clone().unwrap_or_default(),
            };
            let name = text.split(':').next().unwrap_or_default().to_string();
            settings
                .options
                .retain(|o| o.split(':').next() != Some(name.as_str()));
            settings.options.push(text);
        }
    }
    Some(settings)
}

/// `$(VAR)` in a value, from the variables set before it (`$$` escapes a `$`).
fn expand(value: &str, env: &[(String, String)]) -> String {
    let mut out = String::new();
    let mut rest = value;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(inner) = after.strip_prefix('(')
            && let Some(end) = inner.find(')')
            && let Some((_, v)) = env.iter().find(|(k, _)| *k == inner[..end])
        {
            out.push_str(v);
            rest = &inner[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// A container's resource as the downward API gives it (`limits.memory` in bytes,
/// `limits.cpu` in whole cores rounded up).
fn resource_field(container: &Container, resource: &str) -> Option<String> {
    let (group, name) = resource.split_once('.')?;
    let resources = container.resources.as_ref()?;
    let quantity = match group {
        "limits" => resources.limits.as_ref()?.get(name)?,
        "requests" => resources.requests.as_ref()?.get(name)?,
        _ => return None,
    };
    let value = crate::kubernetes::resources::parse_quantity(&quantity.0)?;
    Some(format!("{}", value.ceil() as i64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(spec: Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default", "uid": "u1"},
            "spec": spec,
        }))
        .unwrap()
    }

    fn at(seconds: i64) -> OffsetDateTime {
        OffsetDateTime::UNIX_EPOCH + time::Duration::seconds(1_800_000_000 + seconds)
    }

    fn running(container: &str, attempt: u32) -> Seen {
        Seen {
            id: format!("{container}-{attempt}"),
            container: container.into(),
            attempt,
            image_id: "sha256:abc".into(),
            state: State::Running { started_at: at(0) },
        }
    }

    fn exited(container: &str, attempt: u32, exit_code: i64, finished: i64) -> Seen {
        Seen {
            state: State::Exited {
                exit_code,
                oom_killed: false,
                started_at: at(finished - 1),
                finished_at: at(finished),
            },
            ..running(container, attempt)
        }
    }

    fn start(container: &str, attempt: u32) -> Step {
        Step::Start {
            container: container.into(),
            attempt,
        }
    }

    #[test]
    fn the_sandbox_then_init_containers_one_by_one_then_every_container() {
        let p = pod(json!({
            "initContainers": [{"name": "a"}, {"name": "b"}],
            "containers": [{"name": "web"}, {"name": "log"}],
        }));
        let none = BTreeMap::new();
        for (seen, steps) in [
            (vec![], vec![Step::Sandbox]),
            (vec![running(SANDBOX, 0)], vec![start("a", 0)]),
            (vec![running(SANDBOX, 0), running("a", 0)], vec![]),
            (
                vec![running(SANDBOX, 0), exited("a", 0, 0, 1)],
                vec![start("b", 0)],
            ),
            // A failed init container runs again (restartPolicy Always).
            (
                vec![running(SANDBOX, 0), exited("a", 0, 1, 1)],
                vec![start("a", 1)],
            ),
            (
                vec![
                    running(SANDBOX, 0),
                    exited("a", 0, 0, 1),
                    exited("b", 0, 0, 2),
                ],
                vec![start("web", 0), start("log", 0)],
            ),
            // A sandbox that stopped is made again first.
            (
                vec![exited(SANDBOX, 0, 0, 1), running("web", 0)],
                vec![Step::Sandbox],
            ),
        ] {
            assert_eq!(plan(&p, &seen, &none, at(5)).steps, steps, "{seen:?}");
        }
    }

    #[test]
    fn exited_containers_restart_by_policy_after_kubelets_back_off() {
        let none = BTreeMap::new();
        for (policy, seen, now, steps, recheck) in [
            // The first restart is at once.
            (
                "Always",
                exited("web", 0, 0, 10),
                10,
                vec![start("web", 1)],
                None,
            ),
            // The second waits 10 s after the exit, the third 20 s.
            ("Always", exited("web", 1, 1, 10), 15, vec![], Some(20)),
            (
                "Always",
                exited("web", 1, 1, 10),
                20,
                vec![start("web", 2)],
                None,
            ),
            ("Always", exited("web", 2, 1, 10), 25, vec![], Some(30)),
            // Capped at five minutes.
            ("Always", exited("web", 12, 1, 10), 200, vec![], Some(310)),
            ("OnFailure", exited("web", 0, 0, 10), 100, vec![], None),
            (
                "OnFailure",
                exited("web", 0, 2, 10),
                10,
                vec![start("web", 1)],
                None,
            ),
            ("Never", exited("web", 0, 2, 10), 100, vec![], None),
        ] {
            let p = pod(json!({"restartPolicy": policy, "containers": [{"name": "web"}]}));
            let seen = vec![running(SANDBOX, 0), seen];
            let planned = plan(&p, &seen, &none, at(now));
            assert_eq!(planned.steps, steps, "{policy} {seen:?} at {now}");
            assert_eq!(planned.recheck, recheck.map(at), "{policy} {seen:?}");
        }
    }

    fn state(status: &Value) -> (String, String) {
        let c = &status["containerStatuses"][0];
        let (kind, detail) = c["state"].as_object().unwrap().iter().next().unwrap();
        (
            status["phase"].as_str().unwrap().to_string(),
            format!(
                "{kind} {} restarts={}",
                detail["reason"].as_str().unwrap_or_default(),
                c["restartCount"]
            ),
        )
    }

    #[test]
    fn status_reports_phase_states_and_back_offs_in_kubelets_words() {
        let failure = |reason: &str, fresh: bool| StartFailure {
            reason: reason.into(),
            message: "pull access denied for nothing, repository does not exist".into(),
            at: at(0),
            count: 1,
            fresh,
        };
        let sandbox = running(SANDBOX, 0);
        let oom = Seen {
            state: State::Exited {
                exit_code: 137,
                oom_killed: true,
                started_at: at(0),
                finished_at: at(1),
            },
            ..running("web", 0)
        };
        for (policy, seen, failure, phase, expected) in [
            (
                "Always",
                vec![],
                None,
                "Pending",
                "waiting ContainerCreating restarts=0",
            ),
            (
                "Always",
                vec![sandbox.clone()],
                Some(failure("ErrImagePull", true)),
                "Pending",
                "waiting ErrImagePull restarts=0",
            ),
            (
                "Always",
                vec![sandbox.clone()],
                Some(failure("ErrImagePull", false)),
                "Pending",
                "waiting ImagePullBackOff restarts=0",
            ),
            (
                "Always",
                vec![sandbox.clone(), running("web", 0)],
                None,
                "Running",
                "running  restarts=0",
            ),
            (
                "Always",
                vec![
                    sandbox.clone(),
                    exited("web", 0, 1, 1),
                    exited("web", 1, 1, 3),
                ],
                None,
                "Running",
                "waiting CrashLoopBackOff restarts=1",
            ),
            (
                "Never",
                vec![sandbox.clone(), oom],
                None,
                "Failed",
                "terminated OOMKilled restarts=0",
            ),
            (
                "OnFailure",
                vec![sandbox.clone(), exited("web", 0, 0, 1)],
                None,
                "Succeeded",
                "terminated Completed restarts=0",
            ),
        ] {
            let p = pod(
                json!({"restartPolicy": policy, "containers": [{"name": "web", "image": "nothing"}]}),
            );
            let failures: BTreeMap<String, StartFailure> = failure
                .into_iter()
                .map(|f| ("web".to_string(), f))
                .collect();
            let s = status(
                &p,
                &seen,
                &failures,
                &HashMap::new(),
                ("172.18.0.9", "172.18.0.2"),
                at(5),
            );
            assert_eq!(
                state(&s),
                (phase.to_string(), expected.to_string()),
                "{policy} {seen:?}"
            );
        }
    }

    #[test]
    fn a_crash_loop_says_how_long_it_waits_and_keeps_the_last_exit() {
        let p = pod(json!({"containers": [{"name": "web", "image": "busybox"}]}));
        let seen = vec![
            running(SANDBOX, 0),
            exited("web", 0, 1, 1),
            exited("web", 1, 3, 3),
        ];
        let s = status(
            &p,
            &seen,
            &BTreeMap::new(),
            &HashMap::new(),
            ("172.18.0.9", "172.18.0.2"),
            at(5),
        );
        let c = &s["containerStatuses"][0];
        assert_eq!(
            c["state"]["waiting"]["message"],
            "back-off 10s restarting failed container=web pod=web_default(u1)"
        );
        assert_eq!(c["lastState"]["terminated"]["exitCode"], 3);
        assert_eq!(c["ready"], false);
        assert_eq!(s["podIP"], "172.18.0.9");
        let ready = s["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Ready")
            .unwrap();
        assert_eq!(ready["status"], "False");
        assert_eq!(ready["message"], "containers with unready status: [web]");
    }

    #[test]
    fn probes_decide_whether_a_running_container_is_started_and_ready() {
        let p = pod(json!({"containers": [{"name": "web", "image": "busybox",
            "startupProbe": {"tcpSocket": {"port": 80}},
            "readinessProbe": {"tcpSocket": {"port": 80}}}]}));
        let seen = vec![running(SANDBOX, 0), running("web", 0)];
        let web = seen[1].id.clone();
        let at_results = |results: super::super::prober::Results| {
            let probed = HashMap::from([(web.clone(), results)]);
            let s = status(
                &p,
                &seen,
                &BTreeMap::new(),
                &probed,
                ("172.18.0.9", "172.18.0.2"),
                at(5),
            );
            let c = &s["containerStatuses"][0];
            let ready = s["conditions"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["type"] == "Ready")
                .unwrap()
                .clone();
            (
                c["started"].clone(),
                c["ready"].clone(),
                ready["status"].clone(),
                s["phase"].clone(),
            )
        };
        use super::super::prober::Results;
        assert_eq!(
            at_results(Results {
                started: Some(false),
                ready: Some(false)
            }),
            (json!(false), json!(false), json!("False"), json!("Running"))
        );
        assert_eq!(
            at_results(Results {
                started: Some(true),
                ready: Some(false)
            }),
            (json!(true), json!(false), json!("False"), json!("Running"))
        );
        assert_eq!(
            at_results(Results {
                started: Some(true),
                ready: Some(true)
            }),
            (json!(true), json!(true), json!("True"), json!("Running"))
        );
    }

    #[test]
    fn app_containers_wait_for_init_containers() {
        let p = pod(json!({
            "initContainers": [{"name": "setup", "image": "busybox"}],
            "containers": [{"name": "web", "image": "busybox"}],
        }));
        let s = status(
            &p,
            &[running(SANDBOX, 0), running("setup", 0)],
            &BTreeMap::new(),
            &HashMap::new(),
            ("172.18.0.9", "172.18.0.2"),
            at(5),
        );
        assert_eq!(s["phase"], "Pending");
        assert_eq!(
            s["containerStatuses"][0]["state"]["waiting"]["reason"],
            "PodInitializing"
        );
        assert_eq!(
            s["initContainerStatuses"][0]["state"]["running"]["startedAt"],
            rfc3339(at(0))
        );
        let initialized = &s["conditions"][1];
        assert_eq!(
            (&initialized["type"], &initialized["status"]),
            (&json!("Initialized"), &json!("False"))
        );
    }

    #[test]
    fn environment_as_kubelet_sets_it() {
        let p = pod(json!({"nodeName": "n1", "containers": [{
            "name": "web",
            "envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "S_"}],
            "env": [
                {"name": "A", "value": "one"},
                {"name": "B", "value": "$(A)-two $$(A) $(NOPE)"},
                {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}},
                {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                {"name": "MEMORY", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory"}}},
            ],
            "resources": {"limits": {"memory": "64Mi"}},
        }]}));
        let mut sources = Sources::default();
        sources.config_maps.insert(
            "settings".into(),
            BTreeMap::from([("MODE".to_string(), b"fast".to_vec())]),
        );
        sources.secrets.insert(
            "db".into(),
            BTreeMap::from([("password".to_string(), b"hunter2".to_vec())]),
        );
        let container = &p.spec.as_ref().unwrap().containers[0];
        let env: BTreeMap<String, String> =
            environment(&p, container, &sources, Some(("172.18.0.5", "6443")))
                .unwrap()
                .into_iter()
                .collect();
        assert_eq!(env["S_MODE"], "fast");
        assert_eq!(env["B"], "one-two $(A) $(NOPE)");
        assert_eq!(env["PASSWORD"], "hunter2");
        assert_eq!(env["NODE"], "n1");
        assert_eq!(env["MEMORY"], "67108864");
        assert_eq!(env["KUBERNETES_SERVICE_HOST"], "172.18.0.5");
        assert_eq!(env["KUBERNETES_PORT"], "tcp://172.18.0.5:6443");

        sources.secrets.clear();
        assert_eq!(
            environment(&p, container, &sources, None).unwrap_err(),
            "secret \"db\" not found"
        );
    }

    #[test]
    fn resolver_settings_by_dns_policy_as_kubelet_writes_them() {
        let cluster = super::super::service_proxy::ClusterDns {
            address: "10.96.0.10".into(),
            domain: "cluster.local".into(),
        };
        let settings = |spec: Value| {
            let mut pod = pod(spec);
            pod.metadata.namespace = Some("shop".into());
            dns_settings(&pod, Some(&cluster))
        };
        let first = DnsSettings {
            servers: vec!["10.96.0.10".into()],
            searches: vec![
                "shop.svc.cluster.local".into(),
                "svc.cluster.local".into(),
                "cluster.local".into(),
            ],
            options: vec!["ndots:5".into()],
        };
        assert_eq!(settings(json!({"containers": []})), Some(first.clone()));
        assert_eq!(
            settings(
                json!({"containers": [], "dnsConfig": {"options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}], "searches": ["corp.example"]}})
            ),
            Some(DnsSettings {
                searches: [first.searches.clone(), vec!["corp.example".into()]].concat(),
                options: vec!["ndots:2".into(), "edns0".into()],
                ..first.clone()
            })
        );
        assert_eq!(
            settings(json!({"containers": [], "dnsPolicy": "Default"})),
            None
        );
        assert_eq!(
            settings(json!({"containers": [], "hostNetwork": true})),
            None
        );
        assert_eq!(
            settings(
                json!({"containers": [], "dnsPolicy": "None", "dnsConfig": {"nameservers": ["1.1.1.1"]}})
            ),
            Some(DnsSettings {
                servers: vec!["1.1.1.1".into()],
                ..Default::default()
            })
        );
        let no_cluster_dns = dns_settings(&pod(json!({"containers": []})), None);
        assert_eq!(no_cluster_dns, None);
    }

    #[test]
    fn volumes_are_laid_out_as_kubelets_atomic_writer_lays_them_out() {
        let file = |path: &str| VolumeFile {
            path: path.into(),
            content: b"x".to_vec(),
            mode: 0o644,
        };
        let at = OffsetDateTime::from_unix_timestamp_nanos(1_765_072_380_000_000_042).unwrap();
        let dir = data_dir(at);
        assert_eq!(dir, "..2025_12_07_01_53_00.000000042");
        let entries = atomic_layout(
            &[file("ca.crt"), file("conf/app.yaml"), file("conf/log.yaml")],
            &dir,
            NEXT_DATA_LINK,
        );
        let link = |path: &str, target: &str| Entry::Link {
            path: path.into(),
            target: target.into(),
        };
        assert_eq!(
            entries,
            [
                Entry::File(file(&format!("{dir}/ca.crt"))),
                Entry::File(file(&format!("{dir}/conf/app.yaml"))),
                Entry::File(file(&format!("{dir}/conf/log.yaml"))),
                link("..data_tmp", &dir),
                link("ca.crt", "..data/ca.crt"),
                link("conf", "..data/conf"),
            ],
            "files under their directory, the link to rename over ..data, each top-level name once through ..data"
        );
    }

    #[test]
    fn volume_files_from_config_maps_secrets_the_downward_api_and_tokens() {
        let p = pod(json!({"containers": [{"name": "web"}], "volumes": [
            {"name": "config", "configMap": {"name": "settings", "items": [{"key": "MODE", "path": "mode.txt"}]}},
            {"name": "certs", "secret": {"secretName": "tls", "defaultMode": 0o400}},
            {"name": "api", "projected": {"sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}},
            ]}},
            {"name": "missing", "configMap": {"name": "nothing"}},
        ]}));
        let mut sources = Sources::default();
        sources.config_maps.insert(
            "settings".into(),
            BTreeMap::from([("MODE".to_string(), b"fast".to_vec())]),
        );
        sources.config_maps.insert(
            "kube-root-ca.crt".into(),
            BTreeMap::from([("ca.crt".to_string(), b"PEM".to_vec())]),
        );
        sources.secrets.insert(
            "tls".into(),
            BTreeMap::from([("tls.key".to_string(), b"KEY".to_vec())]),
        );
        sources
            .tokens
            .insert(token_key(None, Some(3607)), "eyJ".into());
        let volumes = p.spec.as_ref().unwrap().volumes.clone().unwrap();
        let files = |i: usize| -> Vec<(String, String, u32)> {
            volume_files(&p, &volumes[i], &sources)
                .unwrap()
                .into_iter()
                .map(|f| (f.path, String::from_utf8(f.content).unwrap(), f.mode))
                .collect()
        };
        assert_eq!(files(0), [("mode.txt".into(), "fast".into(), 0o644)]);
        assert_eq!(files(1), [("tls.key".into(), "KEY".into(), 0o400)]);
        assert_eq!(
            files(2),
            [
                ("token".into(), "eyJ".into(), 0o644),
                ("ca.crt".into(), "PEM".into(), 0o644),
                ("namespace".into(), "default".into(), 0o644),
            ]
        );
        assert_eq!(
            volume_files(&p, &volumes[3], &sources).unwrap_err(),
            "configmap \"nothing\" not found"
        );
    }

    #[test]
    fn what_unprivileged_nodes_cannot_run_is_refused_saying_why() {
        for (spec, refusal) in [
            (json!({"containers": [{"name": "web"}]}), None),
            (
                json!({"containers": [{"name": "web", "securityContext": {"privileged": true}}]}),
                Some("is privileged"),
            ),
            (
                json!({"containers": [{"name": "web", "volumeMounts": [{"name": "v", "mountPath": "/x", "subPath": "a"}]}], "volumes": [{"name": "v", "emptyDir": {}}]}),
                Some("uses subPath"),
            ),
            (
                json!({"containers": [{"name": "web"}], "volumes": [{"name": "host", "hostPath": {"path": "/etc"}}]}),
                Some("is a hostPath volume"),
            ),
            // The Engine's socket is the one hostPath given, as upstream's CAPD mounts it.
            (
                json!({"containers": [{"name": "manager", "volumeMounts": [{"name": "dockersock", "mountPath": "/var/run/docker.sock"}]}], "volumes": [{"name": "dockersock", "hostPath": {"path": "/var/run/docker.sock"}}]}),
                None,
            ),
            (
                json!({"containers": [{"name": "web"}], "volumes": [{"name": "sock", "hostPath": {"path": "/var/run/docker.sock", "type": "Socket"}}]}),
                None,
            ),
            (
                json!({"containers": [{"name": "web"}], "volumes": [{"name": "sock", "hostPath": {"path": "/var/run/docker.sock", "type": "DirectoryOrCreate"}}]}),
                Some("one hostPath only"),
            ),
            (
                json!({"containers": [{"name": "web"}], "volumes": [{"name": "run", "hostPath": {"path": "/var/run"}}]}),
                Some("one hostPath only"),
            ),
        ] {
            let p = pod(spec.clone());
            let found = refused(&p, &p.spec.as_ref().unwrap().containers[0]);
            match refusal {
                None => assert_eq!(found, None, "{spec}"),
                Some(words) => assert!(
                    found.as_deref().unwrap_or_default().contains(words),
                    "{spec}: {found:?}"
                ),
            }
        }
    }
}
