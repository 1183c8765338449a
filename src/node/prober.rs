//! kubelet's prober and container lifecycle hooks for the Pods a node runs. What a probe or a
//! hook does is an [`Action`] read from the Pod's spec (named ports resolved); when a probe's
//! result turns is [`Streak::observe`], kubelet's thresholds; both are pure and tested below.
//! The [`Prober`] keeps one worker per probe of each running container: startup first, then
//! liveness and readiness; a readiness change wakes the kubelet so the Pod's status follows,
//! and a liveness or startup failure kills the container (its preStop hook first), after which
//! the restart policy decides as for any exit.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bollard::Docker;
use bollard::query_parameters::StopContainerOptions;
use k8s_openapi::api::core::v1::{Container, LifecycleHandler, Pod, Probe as ProbeSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Client;
use time::OffsetDateTime;
use tokio::sync::Notify;

const COMPONENT: &str = "kubelet";

/// What a probe or a lifecycle hook does.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// A command run in the container: exit 0 passes.
    Exec(Vec<String>),
    /// A GET to the Pod's address (or `host`).
    HttpGet {
        https: bool,
        host: Option<String>,
        port: u16,
        path: String,
        headers: Vec<(String, String)>,
    },
    /// A TCP connect to the Pod's address (or `host`).
    TcpSocket { host: Option<String>, port: u16 },
    /// gRPC's health check of `service` on the Pod's address.
    Grpc { port: u16, service: String },
    /// A pause (hooks only).
    Sleep(Duration),
}

/// Which probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Startup,
    Liveness,
    Readiness,
}

impl Kind {
    fn word(self) -> &'static str {
        match self {
            Kind::Startup => "Startup",
            Kind::Liveness => "Liveness",
            Kind::Readiness => "Readiness",
        }
    }
}

/// One probe of a container, with kubelet's defaults filled in.
#[derive(Clone, Debug, PartialEq)]
pub struct Probe {
    pub kind: Kind,
    pub action: Action,
    pub initial_delay: Duration,
    pub period: Duration,
    pub timeout: Duration,
    pub success_threshold: u32,
    pub failure_threshold: u32,
    /// The grace period of a kill this probe causes, when it has its own.
    pub termination_grace: Option<i64>,
}

/// A port given by number or by the name of one of the container's ports.
fn port(container: &Container, port: &IntOrString) -> Result<u16, String> {
    let number = match port {
        IntOrString::Int(n) => i64::from(*n),
        IntOrString::String(name) => match name.parse::<i64>() {
            Ok(n) => n,
            Err(_) => container
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(name.as_str()))
                .map(|p| i64::from(p.container_port))
                .ok_or_else(|| {
                    format!(
                        "port {name:?} is not one of container {:?}'s named ports",
                        container.name
                    )
                })?,
        },
    };
    u16::try_from(number)
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("port {number} is not a valid port number (1-65535)"))
}

/// The action of a probe's or a hook's handler fields; None when none is set.
fn action(
    container: &Container,
    exec: Option<&k8s_openapi::api::core::v1::ExecAction>,
    http_get: Option<&k8s_openapi::api::core::v1::HTTPGetAction>,
    tcp_socket: Option<&k8s_openapi::api::core::v1::TCPSocketAction>,
) -> Result<Option<Action>, String> {
    if let Some(exec) = exec {
        return Ok(Some(Action::Exec(exec.command.clone().unwrap_or_default())));
    }
    if let Some(get) = http_get {
        return Ok(Some(Action::HttpGet {
            https: get
                .scheme
                .as_deref()
                .is_some_and(|s| s.eq_ignore_ascii_case("https")),
            host: get.host.clone().filter(|h| !h.is_empty()),
            port: port(container, &get.port)?,
            path: match get.path.as_deref() {
                None | Some("") => "/".to_string(),
                Some(p) if !p.starts_with('/') => format!("/{p}"),
                Some(p) => p.to_string(),
            },
            headers: get
                .http_headers
                .iter()
                .flatten()
                .map(|h| (h.name.clone(), h.value.clone()))
                .collect(),
        }));
    }
    if let Some(tcp) = tcp_socket {
        return Ok(Some(Action::TcpSocket {
            host: tcp.host.clone().filter(|h| !h.is_empty()),
            port: port(container, &tcp.port)?,
        }));
    }
    Ok(None)
}

fn probe(container: &Container, kind: Kind, spec: &ProbeSpec) -> Result<Option<Probe>, String> {
    let mut handler = action(
        container,
        spec.exec.as_ref(),
        spec.http_get.as_ref(),
        spec.tcp_socket.as_ref(),
    )?;
    if let (None, Some(grpc)) = (&handler, &spec.grpc) {
        handler = Some(Action::Grpc {
            port: port(container, &IntOrString::Int(grpc.port))?,
            service: grpc.service.clone().unwrap_or_default(),
        });
    }
    let seconds = |value: Option<i32>, default: i32, least: i32| {
        Duration::from_secs(value.unwrap_or(default).max(least) as u64)
    };
    let count = |value: Option<i32>, default: i32| value.unwrap_or(default).max(1) as u32;
    Ok(handler.map(|action| Probe {
        kind,
        action,
        initial_delay: seconds(spec.initial_delay_seconds, 0, 0),
        period: seconds(spec.period_seconds, 10, 1),
        timeout: seconds(spec.timeout_seconds, 1, 1),
        // Liveness and startup probes pass at the first success whatever is asked (the API
        // refuses anything but 1 for them).
        success_threshold: match kind {
            Kind::Readiness => count(spec.success_threshold, 1),
            _ => 1,
        },
        failure_threshold: count(spec.failure_threshold, 3),
        termination_grace: spec.termination_grace_period_seconds,
    }))
}

/// A container's probes, startup first; why one cannot run when its port is not the
/// container's.
pub fn probes(container: &Container) -> Result<Vec<Probe>, String> {
    let specs = [
        (Kind::Startup, &container.startup_probe),
        (Kind::Liveness, &container.liveness_probe),
        (Kind::Readiness, &container.readiness_probe),
    ];
    let mut found = Vec::new();
    for (kind, spec) in specs {
        if let Some(spec) = spec {
            found.extend(probe(container, kind, spec)?);
        }
    }
    Ok(found)
}

/// A lifecycle hook's action (`postStart` or `preStop`).
pub fn hook(container: &Container, handler: &LifecycleHandler) -> Result<Option<Action>, String> {
    if let Some(sleep) = &handler.sleep {
        return Ok(Some(Action::Sleep(Duration::from_secs(
            sleep.seconds.max(0) as u64,
        ))));
    }
    action(
        container,
        handler.exec.as_ref(),
        handler.http_get.as_ref(),
        handler.tcp_socket.as_ref(),
    )
}

/// What the probes of one running container say so far: None while nothing is known (no
/// worker yet), as kubelet starts a container unready and not started until its probes pass.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Results {
    pub started: Option<bool>,
    pub ready: Option<bool>,
}

/// Whether a running container counts as started and as ready: a container without a startup
/// probe is started once running, one without a readiness probe is ready once started.
pub fn started_and_ready(container: &Container, results: Results) -> (bool, bool) {
    let started = container.startup_probe.is_none() || results.started == Some(true);
    let ready = started && (container.readiness_probe.is_none() || results.ready == Some(true));
    (started, ready)
}

/// Results in a row, as a probe worker counts them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Streak {
    successes: u32,
    failures: u32,
}

impl Streak {
    /// Counts one result and says what the probe's result is now: it turns to success after
    /// `successThreshold` successes in a row and to failure after `failureThreshold` failures
    /// in a row, and otherwise stays `current`.
    pub fn observe(&mut self, probe: &Probe, current: Option<bool>, passed: bool) -> Option<bool> {
        if passed {
            self.successes += 1;
            self.failures = 0;
            if self.successes >= probe.success_threshold {
                return Some(true);
            }
        } else {
            self.failures += 1;
            self.successes = 0;
            if self.failures >= probe.failure_threshold {
                return Some(false);
            }
        }
        current
    }
}

/// Where an action runs: the container (for exec) and the Pod's address (for the network).
#[derive(Clone)]
pub struct Target {
    pub docker: Docker,
    pub container_id: String,
    pub pod_ip: String,
}

/// Runs an action once within `timeout`: Ok, or why it failed in kubelet's words.
pub async fn run(action: &Action, target: &Target, timeout: Duration) -> Result<(), String> {
    match action {
        Action::Exec(argv) => {
            let run = super::engine::exec(&target.docker, &target.container_id, argv, None);
            match tokio::time::timeout(timeout, run).await {
                Ok(Ok(out)) if out.code == 0 => Ok(()),
                Ok(Ok(out)) => {
                    let said = format!("{}{}", out.stdout, out.stderr);
                    Err(match said.trim() {
                        "" => format!("command {argv:?} exited with {}", out.code),
                        said => said.to_string(),
                    })
                }
                Ok(Err(e)) => Err(format!("exec of {argv:?} failed: {e}")),
                Err(_) => Err(format!("command {:?} timed out", argv.join(" "))),
            }
        }
        Action::HttpGet {
            https,
            host,
            port,
            path,
            headers,
        } => {
            let host = host.as_deref().unwrap_or(&target.pod_ip);
            super::probe::http_get(*https, host, *port, path, headers, timeout).await
        }
        Action::TcpSocket { host, port } => {
            let host = host.as_deref().unwrap_or(&target.pod_ip);
            super::probe::tcp_connect(host, *port, timeout).await
        }
        Action::Grpc { port, service } => {
            super::probe::grpc_health(&target.pod_ip, *port, service, timeout).await
        }
        Action::Sleep(pause) => {
            tokio::time::sleep((*pause).min(timeout)).await;
            Ok(())
        }
    }
}

/// Stops a container as kubelet does: its preStop hook first (an Event when it fails), then
/// SIGTERM and SIGKILL once what is left of `grace` seconds has passed.
pub async fn stop(
    client: &Client,
    pod: &Pod,
    container: Option<&Container>,
    target: &Target,
    grace: i64,
) {
    let grace = grace.max(0);
    let begun = std::time::Instant::now();
    let pre_stop = container.and_then(|c| {
        let handler = c.lifecycle.as_ref()?.pre_stop.as_ref()?;
        Some((c, hook(c, handler)))
    });
    if let Some((c, found)) = pre_stop {
        let outcome = match found {
            Ok(Some(action)) => run(&action, target, Duration::from_secs(grace as u64)).await,
            Ok(None) => Ok(()),
            Err(e) => Err(e),
        };
        if let Err(message) = outcome {
            crate::kubernetes::record_event(
                client,
                pod,
                COMPONENT,
                "Warning",
                "FailedPreStopHook",
                &format!("PreStopHook failed for container {:?}: {message}", c.name),
            )
            .await;
        }
    }
    let left = grace - begun.elapsed().as_secs() as i64;
    let _ = target
        .docker
        .stop_container(
            &target.container_id,
            Some(StopContainerOptions {
                t: Some(left.max(0) as i32),
                ..Default::default()
            }),
        )
        .await;
}

/// The grace period of a Pod's containers.
pub fn grace_of(pod: &Pod) -> i64 {
    pod.spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(30)
}

/// A running container to probe.
pub struct Running<'a> {
    pub pod: &'a Pod,
    pub container: &'a Container,
    pub target: Target,
    pub started_at: OffsetDateTime,
}

/// The probe workers of a node's running containers and what they found, by container id.
pub struct Prober {
    results: Arc<Mutex<HashMap<String, Results>>>,
    workers: HashMap<String, Vec<tokio::task::JoinHandle<()>>>,
    wake: Arc<Notify>,
}

impl Drop for Prober {
    fn drop(&mut self) {
        self.workers.values().flatten().for_each(|w| w.abort());
    }
}

impl Prober {
    /// A prober that wakes `wake` when a container's readiness or start changes.
    pub fn new(wake: Arc<Notify>) -> Prober {
        Prober {
            results: Arc::default(),
            workers: HashMap::new(),
            wake,
        }
    }

    /// What the probes found so far, by container id.
    pub fn results(&self) -> HashMap<String, Results> {
        self.results.lock().unwrap().clone()
    }

    /// Keeps one worker per probe of each container in `running` and stops the workers of
    /// containers that no longer run. A probe that cannot run (a port the container does not
    /// name) is reported once as an Event and counts as failing.
    pub fn keep(&mut self, client: &Client, running: Vec<Running<'_>>) {
        let ids: std::collections::HashSet<&str> = running
            .iter()
            .map(|r| r.target.container_id.as_str())
            .collect();
        self.workers.retain(|id, workers| {
            let keep = ids.contains(id.as_str());
            if !keep {
                workers.iter().for_each(|w| w.abort());
            }
            keep
        });
        self.results
            .lock()
            .unwrap()
            .retain(|id, _| ids.contains(id.as_str()));
        for r in running {
            let id = r.target.container_id.clone();
            if self.workers.contains_key(&id) {
                continue;
            }
            let probes = match probes(r.container) {
                Ok(p) => p,
                Err(why) => {
                    let (client, pod) = (client.clone(), r.pod.clone());
                    let message = format!(
                        "Probe of container {:?} cannot run: {why}",
                        r.container.name
                    );
                    let reporter = tokio::spawn(async move {
                        crate::kubernetes::record_event(
                            &client,
                            &pod,
                            COMPONENT,
                            "Warning",
                            "Unhealthy",
                            &message,
                        )
                        .await;
                    });
                    self.workers.insert(id, vec![reporter]);
                    continue;
                }
            };
            let mut results = Results::default();
            for p in &probes {
                match p.kind {
                    Kind::Startup => results.started = Some(false),
                    Kind::Readiness => results.ready = Some(false),
                    Kind::Liveness => {}
                }
            }
            self.results.lock().unwrap().insert(id.clone(), results);
            let workers = probes
                .into_iter()
                .map(|probe| {
                    let worker = Worker {
                        client: client.clone(),
                        pod: r.pod.clone(),
                        container: r.container.clone(),
                        target: r.target.clone(),
                        started_at: r.started_at,
                        results: self.results.clone(),
                        wake: self.wake.clone(),
                    };
                    tokio::spawn(worker.run(probe))
                })
                .collect();
            self.workers.insert(id, workers);
        }
    }
}

/// One probe of one container, run every period until the container stops.
struct Worker {
    client: Client,
    pod: Pod,
    container: Container,
    target: Target,
    started_at: OffsetDateTime,
    results: Arc<Mutex<HashMap<String, Results>>>,
    wake: Arc<Notify>,
}

impl Worker {
    fn current(&self) -> Results {
        self.results
            .lock()
            .unwrap()
            .get(&self.target.container_id)
            .copied()
            .unwrap_or_default()
    }

    async fn run(self, probe: Probe) {
        let since_start = OffsetDateTime::now_utc() - self.started_at;
        let delay = probe
            .initial_delay
            .saturating_sub(since_start.try_into().unwrap_or_default());
        tokio::time::sleep(delay).await;
        let mut streak = Streak::default();
        loop {
            let now = self.current();
            // Liveness and readiness wait for the startup probe; the startup probe ends with
            // its first success.
            let waits = probe.kind != Kind::Startup && now.started == Some(false);
            if probe.kind == Kind::Startup && now.started == Some(true) {
                return;
            }
            if !waits {
                let outcome = run(&probe.action, &self.target, probe.timeout).await;
                if let Err(message) = &outcome {
                    crate::kubernetes::record_event(
                        &self.client,
                        &self.pod,
                        COMPONENT,
                        "Warning",
                        "Unhealthy",
                        &format!("{} probe failed: {message}", probe.kind.word()),
                    )
                    .await;
                }
                let before = match probe.kind {
                    Kind::Startup => now.started,
                    Kind::Readiness => now.ready,
                    Kind::Liveness => Some(true),
                };
                let after = streak.observe(&probe, before, outcome.is_ok());
                if after != before && probe.kind != Kind::Liveness {
                    if let Some(r) = self
                        .results
                        .lock()
                        .unwrap()
                        .get_mut(&self.target.container_id)
                    {
                        match probe.kind {
                            Kind::Startup => r.started = after,
                            _ => r.ready = after,
                        }
                    }
                    self.wake.notify_one();
                }
                if after == Some(false) && probe.kind != Kind::Readiness {
                    self.kill(&probe).await;
                    return;
                }
            }
            tokio::time::sleep(probe.period).await;
        }
    }

    /// Kills the container for a failed liveness or startup probe, as kubelet does.
    async fn kill(&self, probe: &Probe) {
        let word = probe.kind.word().to_lowercase();
        crate::kubernetes::record_event(
            &self.client,
            &self.pod,
            COMPONENT,
            "Normal",
            "Killing",
            &format!(
                "Container {} failed {word} probe, will be restarted",
                self.container.name
            ),
        )
        .await;
        let grace = probe
            .termination_grace
            .unwrap_or_else(|| grace_of(&self.pod));
        stop(
            &self.client,
            &self.pod,
            Some(&self.container),
            &self.target,
            grace,
        )
        .await;
        self.wake.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn container(spec: serde_json::Value) -> Container {
        serde_json::from_value(spec).unwrap()
    }

    #[test]
    fn probes_with_kubelets_defaults_and_named_ports() {
        let c = container(json!({
            "name": "web",
            "ports": [{"name": "http", "containerPort": 8080}],
            "livenessProbe": {"httpGet": {"port": "http", "path": "healthz", "httpHeaders": [{"name": "X", "value": "1"}]}},
            "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 2, "successThreshold": 2, "failureThreshold": 1},
            "startupProbe": {"exec": {"command": ["cat", "/ready"]}, "initialDelaySeconds": 5, "successThreshold": 4},
        }));
        let found = probes(&c).unwrap();
        let kinds: Vec<Kind> = found.iter().map(|p| p.kind).collect();
        assert_eq!(kinds, [Kind::Startup, Kind::Liveness, Kind::Readiness]);
        assert_eq!(
            found[0].action,
            Action::Exec(vec!["cat".into(), "/ready".into()])
        );
        assert_eq!(found[0].initial_delay, Duration::from_secs(5));
        assert_eq!(
            found[0].success_threshold, 1,
            "startup passes at its first success"
        );
        assert_eq!(
            found[1].action,
            Action::HttpGet {
                https: false,
                host: None,
                port: 8080,
                path: "/healthz".into(),
                headers: vec![("X".into(), "1".into())],
            }
        );
        assert_eq!(
            (
                found[1].period,
                found[1].timeout,
                found[1].failure_threshold
            ),
            (Duration::from_secs(10), Duration::from_secs(1), 3)
        );
        assert_eq!(
            found[2].action,
            Action::TcpSocket {
                host: None,
                port: 8080
            }
        );
        assert_eq!(
            (found[2].success_threshold, found[2].failure_threshold),
            (2, 1)
        );

        let unnamed =
            container(json!({"name": "web", "livenessProbe": {"tcpSocket": {"port": "metrics"}}}));
        let why = probes(&unnamed).unwrap_err();
        assert!(
            why.contains("\"metrics\" is not one of container \"web\"'s named ports"),
            "{why}"
        );
        let grpc = container(json!({"name": "web", "readinessProbe": {"grpc": {"port": 9090}}}));
        assert_eq!(
            probes(&grpc).unwrap()[0].action,
            Action::Grpc {
                port: 9090,
                service: String::new()
            }
        );
    }

    #[test]
    fn a_result_turns_only_after_its_threshold_in_a_row() {
        let c = container(json!({"name": "web", "readinessProbe": {
            "tcpSocket": {"port": 80}, "successThreshold": 2, "failureThreshold": 3}}));
        let probe = probes(&c).unwrap().remove(0);
        // (passed, result after) from a container that starts unready.
        let cases = [
            (true, Some(false)),
            (true, Some(true)),
            (false, Some(true)),
            (false, Some(true)),
            (true, Some(true)),
            (false, Some(true)),
            (false, Some(true)),
            (false, Some(false)),
            (true, Some(false)),
            (false, Some(false)),
            (true, Some(false)),
            (true, Some(true)),
        ];
        let mut streak = Streak::default();
        let mut result = Some(false);
        for (i, (passed, expected)) in cases.into_iter().enumerate() {
            result = streak.observe(&probe, result, passed);
            assert_eq!(result, expected, "step {i}");
        }
    }

    #[test]
    fn started_and_ready_follow_the_probes_the_container_has() {
        let plain = container(json!({"name": "web"}));
        let ready_probe =
            container(json!({"name": "web", "readinessProbe": {"tcpSocket": {"port": 80}}}));
        let startup = container(json!({"name": "web",
            "startupProbe": {"tcpSocket": {"port": 80}}, "readinessProbe": {"tcpSocket": {"port": 80}}}));
        let none = Results::default();
        let started_unready = Results {
            started: Some(true),
            ready: Some(false),
        };
        let both = Results {
            started: Some(true),
            ready: Some(true),
        };
        let cases = [
            (&plain, none, (true, true)),
            (&ready_probe, none, (true, false)),
            (
                &ready_probe,
                Results {
                    started: None,
                    ready: Some(true),
                },
                (true, true),
            ),
            (&startup, none, (false, false)),
            (
                &startup,
                Results {
                    started: Some(false),
                    ready: Some(true),
                },
                (false, false),
            ),
            (&startup, started_unready, (true, false)),
            (&startup, both, (true, true)),
        ];
        for (i, (c, results, expected)) in cases.into_iter().enumerate() {
            assert_eq!(started_and_ready(c, results), expected, "case {i}");
        }
    }

    #[test]
    fn hooks_read_every_handler() {
        let c = container(json!({"name": "web", "ports": [{"name": "http", "containerPort": 80}]}));
        let handler =
            |h: serde_json::Value| -> LifecycleHandler { serde_json::from_value(h).unwrap() };
        assert_eq!(
            hook(&c, &handler(json!({"sleep": {"seconds": 3}}))).unwrap(),
            Some(Action::Sleep(Duration::from_secs(3)))
        );
        assert_eq!(
            hook(
                &c,
                &handler(json!({"httpGet": {"port": "http", "path": "/quit"}}))
            )
            .unwrap(),
            Some(Action::HttpGet {
                https: false,
                host: None,
                port: 80,
                path: "/quit".into(),
                headers: vec![]
            })
        );
        assert_eq!(
            hook(
                &c,
                &handler(json!({"exec": {"command": ["sh", "-c", "exit 0"]}}))
            )
            .unwrap(),
            Some(Action::Exec(vec![
                "sh".into(),
                "-c".into(),
                "exit 0".into()
            ]))
        );
        assert_eq!(hook(&c, &handler(json!({}))).unwrap(), None);
    }
}
