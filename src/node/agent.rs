//! The node agent, PID 1 of a capictl node container (`capictl node agent`). It does what
//! systemd and kubelet do on a kind node, with ordinary processes:
//!
//! - prints the line the Docker provider waits for (`Reached target Multi-User System`);
//! - reaps every child (orphans are re-parented to PID 1), and on SIGTERM stops the static
//!   pods' processes before it exits;
//! - runs the static pods of `/etc/kubernetes/manifests`: starts a process per manifest,
//!   restarts it with kubelet's back-off when it dies, replaces it when its manifest changes,
//!   stops it when the manifest goes, and probes it for readiness;
//! - hands what runs to the kubelet loop ([`super::kubelet`]), which keeps the Node, its Lease
//!   and the mirror Pods, and to `crictl` ([`super::tools`]) through `/run/capictl/pods.json`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::signal::unix::{SignalKind, signal};

use super::static_pods::{self, StaticPod};
use super::{Layout, Result, io_error};

/// How often the manifests are read and the processes probed.
const SYNC_PERIOD: Duration = Duration::from_secs(1);
/// kubelet's crash-loop back-off: doubling from 1 s up to this.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A process that ran this long without dying resets its back-off.
const STABLE_RUN: Duration = Duration::from_secs(60);
/// How long a stopped process gets between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// The start line CAPD's `WaitForMultiUserTarget` looks for in the container's log.
pub const STARTED_LINE: &str = "[  OK  ] Reached target Multi-User System.";

/// A static pod's container as it is now, for the mirror Pod and `crictl ps`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodState {
    pub file: String,
    pub name: String,
    pub namespace: String,
    pub container: String,
    pub image: String,
    pub hash: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub pid: Option<u32>,
    /// When the current process started (RFC 3339).
    pub started_at: Option<String>,
    pub ready: bool,
    pub restart_count: u32,
    /// The last process's exit: code and when (RFC 3339).
    pub last_exit: Option<(i32, String)>,
    /// Waiting to be restarted after a crash.
    pub backing_off: bool,
    /// Why the manifest cannot run, if it cannot.
    pub error: Option<String>,
}

struct Slot {
    pod: Option<StaticPod>,
    error: Option<String>,
    pid: Option<u32>,
    started: Option<(Instant, String)>,
    ready: bool,
    restart_count: u32,
    last_exit: Option<(i32, String)>,
    backoff: Duration,
    next_start: Instant,
    /// Stopping this process (manifest changed or gone): SIGKILL after this.
    stopping: Option<Instant>,
    /// Replace with this manifest once the old process is gone.
    replacement: Option<Option<StaticPod>>,
}

impl Slot {
    fn new(pod: Option<StaticPod>, error: Option<String>) -> Slot {
        Slot {
            pod,
            error,
            pid: None,
            started: None,
            ready: false,
            restart_count: 0,
            last_exit: None,
            backoff: Duration::from_secs(1),
            next_start: Instant::now(),
            stopping: None,
            replacement: None,
        }
    }

    fn hash(&self) -> Option<&str> {
        self.pod.as_ref().map(|p| p.hash.as_str())
    }
}

/// The static pods of one node and their processes.
pub struct Supervisor {
    layout: Layout,
    slots: BTreeMap<String, Slot>,
    /// None until the first sync: the kubelet loop must not take "nothing yet" for "none".
    states: tokio::sync::watch::Sender<Option<Vec<PodState>>>,
}

fn send_signal(pid: u32, signal: i32) {
    // SAFETY: kill has no memory-safety preconditions; a stale pid only fails with ESRCH.
    unsafe {
        libc::kill(pid as i32, signal);
    }
}

impl Supervisor {
    pub fn new(
        layout: Layout,
    ) -> (
        Supervisor,
        tokio::sync::watch::Receiver<Option<Vec<PodState>>>,
    ) {
        let (states, receiver) = tokio::sync::watch::channel(None);
        (
            Supervisor {
                layout,
                slots: BTreeMap::new(),
                states,
            },
            receiver,
        )
    }

    /// The manifests on disk: file name → (text).
    fn read_manifests(&self) -> BTreeMap<String, String> {
        let dir = self.layout.manifests();
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return BTreeMap::new();
        };
        entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().to_string();
                if !(name.ends_with(".yaml") || name.ends_with(".yml") || name.ends_with(".json"))
                    || name.starts_with('.')
                {
                    return None;
                }
                Some((name, std::fs::read_to_string(e.path()).ok()?))
            })
            .collect()
    }

    /// Brings the processes in line with the manifests.
    pub async fn sync(&mut self) {
        let manifests = self.read_manifests();
        for (file, text) in &manifests {
            let (pod, error) = match static_pods::parse(text) {
                Ok(p) => (Some(p), None),
                Err(e) => (None, Some(e.to_string())),
            };
            match self.slots.get_mut(file) {
                None => {
                    if let Some(e) = &error {
                        tracing::warn!(%file, error = %e, "static pod manifest cannot run");
                    }
                    self.slots.insert(file.clone(), Slot::new(pod, error));
                }
                Some(slot)
                    if slot.hash() != pod.as_ref().map(|p| p.hash.as_str())
                        || (pod.is_none() && slot.error != error) =>
                {
                    if slot.replacement.as_ref().is_some_and(|r| {
                        r.as_ref().map(|p| &p.hash) == pod.as_ref().map(|p| &p.hash)
                    }) {
                        continue;
                    }
                    tracing::info!(%file, "static pod manifest changed; replacing its process");
                    slot.error = error;
                    slot.replacement = Some(pod);
                    Self::stop(slot);
                }
                Some(_) => {}
            }
        }
        for (file, slot) in self.slots.iter_mut() {
            if !manifests.contains_key(file) && slot.replacement.is_none() {
                tracing::info!(%file, "static pod manifest removed; stopping its process");
                slot.replacement = Some(None);
                Self::stop(slot);
            }
        }
        self.reap();
        let now = Instant::now();
        let mut gone = Vec::new();
        for (file, slot) in self.slots.iter_mut() {
            if let Some(deadline) = slot.stopping
                && let Some(pid) = slot.pid
                && now >= deadline
            {
                send_signal(pid, libc::SIGKILL);
            }
            if slot.pid.is_none()
                && let Some(replacement) = slot.replacement.take()
            {
                slot.stopping = None;
                match replacement {
                    Some(pod) => {
                        let error = slot.error.take();
                        *slot = Slot::new(Some(pod), error);
                    }
                    None => gone.push(file.clone()),
                }
            }
            if slot.pid.is_none()
                && slot.stopping.is_none()
                && slot.replacement.is_none()
                && now >= slot.next_start
                && let Some(pod) = &slot.pod
            {
                Self::start(file, slot, pod.clone());
            }
        }
        for file in gone {
            self.slots.remove(&file);
        }
        self.probe().await;
        self.publish();
    }

    fn start(file: &str, slot: &mut Slot, pod: StaticPod) {
        let mut command = std::process::Command::new(&pod.argv[0]);
        command
            .args(&pod.argv[1..])
            .envs(pod.env.iter().map(|(k, v)| (k, v)))
            .stdin(std::process::Stdio::null());
        match command.spawn() {
            // The child is reaped by `reap`, never waited on through `Child`.
            Ok(child) => {
                tracing::info!(%file, pid = child.id(), program = %pod.argv[0], "started");
                slot.pid = Some(child.id());
                slot.started = Some((Instant::now(), crate::apiserver::object::now()));
                slot.ready = false;
                slot.error = None;
            }
            Err(e) => {
                let message = format!("starting {}: {e}", pod.argv[0]);
                tracing::warn!(%file, "{message}");
                slot.error = Some(message);
                slot.backoff = (slot.backoff * 2).min(MAX_BACKOFF);
                slot.next_start = Instant::now() + slot.backoff;
            }
        }
    }

    fn stop(slot: &mut Slot) {
        if let Some(pid) = slot.pid
            && slot.stopping.is_none()
        {
            send_signal(pid, libc::SIGTERM);
            slot.stopping = Some(Instant::now() + STOP_GRACE);
        }
    }

    /// Collects every exited child: a static pod's process is restarted after its back-off.
    pub fn reap(&mut self) {
        loop {
            let mut status = 0;
            // SAFETY: waitpid writes only to `status`.
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if pid <= 0 {
                return;
            }
            let code = if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else if libc::WIFSIGNALED(status) {
                128 + libc::WTERMSIG(status)
            } else {
                continue;
            };
            let Some((file, slot)) = self
                .slots
                .iter_mut()
                .find(|(_, s)| s.pid == Some(pid as u32))
            else {
                continue;
            };
            let ran = slot
                .started
                .as_ref()
                .map(|(t, _)| t.elapsed())
                .unwrap_or_default();
            tracing::info!(%file, pid, code, "exited");
            slot.pid = None;
            slot.ready = false;
            slot.started = None;
            slot.last_exit = Some((code, crate::apiserver::object::now()));
            if slot.stopping.is_none() {
                slot.restart_count += 1;
                slot.backoff = if ran >= STABLE_RUN {
                    Duration::from_secs(1)
                } else {
                    (slot.backoff * 2).min(MAX_BACKOFF)
                };
                slot.next_start = Instant::now() + slot.backoff;
            }
        }
    }

    async fn probe(&mut self) {
        let checks = self.slots.iter().filter_map(|(file, slot)| {
            let pod = slot.pod.as_ref()?;
            slot.pid?;
            let probe = pod.probe.clone();
            let file = file.clone();
            Some(async move {
                let ok = match probe {
                    Some(p) => super::probe::check(&p, Duration::from_secs(1)).await,
                    None => true,
                };
                (file, ok)
            })
        });
        let results = futures::future::join_all(checks).await;
        for (file, ok) in results {
            if let Some(slot) = self.slots.get_mut(&file) {
                slot.ready = ok && slot.pid.is_some();
            }
        }
    }

    fn states(&self) -> Vec<PodState> {
        let now = Instant::now();
        self.slots
            .iter()
            .filter_map(|(file, slot)| {
                let pod = slot.pod.as_ref()?;
                Some(PodState {
                    file: file.clone(),
                    name: pod.name.clone(),
                    namespace: pod.namespace.clone(),
                    container: pod.container.clone(),
                    image: pod.image.clone(),
                    hash: pod.hash.clone(),
                    labels: pod.labels.clone(),
                    annotations: pod.annotations.clone(),
                    pid: slot.pid,
                    started_at: slot.started.as_ref().map(|(_, at)| at.clone()),
                    ready: slot.ready,
                    restart_count: slot.restart_count,
                    last_exit: slot.last_exit.clone(),
                    backing_off: slot.pid.is_none() && slot.next_start > now,
                    error: slot.error.clone(),
                })
            })
            .collect()
    }

    fn publish(&self) {
        let states = self.states();
        let path = self.layout.run().join("pods.json");
        if let Ok(text) = serde_json::to_vec_pretty(&states) {
            let _ = std::fs::create_dir_all(self.layout.run());
            let tmp = path.with_extension("tmp");
            if std::fs::write(&tmp, text).is_ok() {
                let _ = std::fs::rename(&tmp, &path);
            }
        }
        self.states.send_if_modified(|current| {
            if current.as_ref() == Some(&states) {
                false
            } else {
                *current = Some(states);
                true
            }
        });
    }

    /// Stops every process: SIGTERM, then SIGKILL for those still there after the grace.
    pub async fn stop_all(&mut self) {
        for slot in self.slots.values_mut() {
            slot.replacement = Some(None);
            Self::stop(slot);
        }
        let deadline = Instant::now() + STOP_GRACE;
        while self.slots.values().any(|s| s.pid.is_some()) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
            self.reap();
        }
        for slot in self.slots.values() {
            if let Some(pid) = slot.pid {
                send_signal(pid, libc::SIGKILL);
            }
        }
        self.reap();
    }
}

/// Runs the agent until SIGTERM (or SIGINT).
pub async fn run(layout: Layout) -> Result<()> {
    let mut terminate = signal(SignalKind::terminate()).map_err(io_error("SIGTERM".as_ref()))?;
    let mut interrupt = signal(SignalKind::interrupt()).map_err(io_error("SIGINT".as_ref()))?;
    let mut child = signal(SignalKind::child()).map_err(io_error("SIGCHLD".as_ref()))?;
    for dir in [layout.manifests(), layout.kubelet(), layout.run()] {
        std::fs::create_dir_all(&dir).map_err(io_error(&dir))?;
    }
    let (mut supervisor, states) = Supervisor::new(layout.clone());
    let kubelet = tokio::spawn(super::kubelet::run(layout.clone(), states));
    println!("{STARTED_LINE}");
    let mut tick = tokio::time::interval(SYNC_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = terminate.recv() => break,
            _ = interrupt.recv() => break,
            _ = child.recv() => supervisor.reap(),
            _ = tick.tick() => supervisor.sync().await,
        }
    }
    println!("Stopping the static pods.");
    kubelet.abort();
    supervisor.stop_all().await;
    Ok(())
}
