//! The node's container runtime: the Pods bound to this Node run as containers on the Docker
//! Engine whose socket the Docker provider mounts at [`ENGINE_SOCKET`] (never into a Pod).
//! [`pods`](super::pods) decides; this does what it decides.
//!
//! Each Pod has a sandbox container (this node's own image, sleeping) that holds its network
//! namespace: on the node's Docker network with an address of its own, so Pods reach each other
//! across nodes without a CNI plugin (in the node's namespace for `hostNetwork` Pods). Its
//! containers join that namespace, each start a new container named as kubelet's Docker
//! runtime named them (`k8s_<container>_<pod>_<namespace>_<uid>_<attempt>`); the previous
//! attempt is kept for `kubectl logs --previous`. Volumes are Docker volumes (tmpfs for what
//! holds configuration and secrets), filled through the sandbox. Every container and volume
//! carries [`POD_NODE_LABEL`], the Pod's labels as kubelet sets them, and the cluster's owner
//! label, so that removing the node removes them.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use bollard::Docker;
use bollard::models::{ContainerCreateBody, HostConfig, VolumeCreateOptions};
use bollard::query_parameters::{
    CreateContainerOptions, CreateImageOptions, ListContainersOptions, ListVolumesOptions,
    RemoveContainerOptions, UploadToContainerOptions,
};
use futures::StreamExt;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, Secret, ServiceAccount};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use time::OffsetDateTime;

use super::engine::exec;
use super::image::{ENGINE_SOCKET, OWNER_LABEL, POD_NODE_LABEL};
use super::pods::{self, SANDBOX, Seen, Sources, StartFailure, State, Step};
use super::prober::{self, Prober};
use super::service_proxy::{self, ClusterDns};
use crate::api::docker::ENGINE_SOCKET_HOST_PATH;

const POD_NAME_LABEL: &str = "io.kubernetes.pod.name";
const POD_NAMESPACE_LABEL: &str = "io.kubernetes.pod.namespace";
const POD_UID_LABEL: &str = "io.kubernetes.pod.uid";
const CONTAINER_NAME_LABEL: &str = "io.kubernetes.container.name";
const ATTEMPT_LABEL: &str = "io.x-k8s.capictl.attempt";
/// Where the sandbox mounts each volume, to fill it.
const VOLUMES_IN_SANDBOX: &str = "/volumes";
/// The component the kubelet's Events name.
const COMPONENT: &str = "kubelet";

/// What this node's own container is: Pods' sandboxes run its image, on its network (or in
/// its namespace), labelled with its owner.
struct Own {
    name: String,
    network: String,
    image: String,
    owner: Option<String>,
    /// Where the host's Engine socket is on the host (the source of the node's
    /// [`ENGINE_SOCKET`] mount): what a Pod's [`ENGINE_SOCKET_HOST_PATH`] hostPath gets.
    engine_socket: Option<String>,
}

/// A container as last inspected, and the state the Engine's list showed it in then.
struct Inspected {
    listed_state: String,
    seen: Seen,
    /// Its address on the node's network (a sandbox's is its Pod's).
    address: Option<String>,
    /// When this agent first saw it exited: an OOM mark is waited for from then, however late
    /// a busy node's pass came after the exit.
    exited_seen: Option<std::time::Instant>,
}

/// How often a running Pod's configMap, secret, downwardAPI and projected volumes are read
/// again and rewritten when what they project changed (kubelet's sync period is 1 min).
const VOLUME_RESYNC: std::time::Duration = std::time::Duration::from_secs(10);

/// What a sandbox's projected volumes hold now, to update them in place.
#[derive(Default)]
struct Projection {
    /// A hash of each volume's files, by volume name.
    volumes: BTreeMap<String, u64>,
    /// The ServiceAccount tokens issued for the Pod, by [`pods::token_key`].
    tokens: BTreeMap<String, Issued>,
    /// When the volumes are read again.
    next_read: Option<std::time::Instant>,
}

/// A ServiceAccount token kubelet requested, and when it asks for a new one: once 80% of its
/// lifetime has passed, as kubelet's token manager does.
#[derive(Clone)]
struct Issued {
    token: String,
    renew_at: OffsetDateTime,
}

/// What a Pod's volumes and environment read data from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Source {
    ConfigMap,
    Secret,
}

/// The ConfigMaps and Secrets read in one pass, by (kind, namespace, name); None where there
/// is none.
type Reads = HashMap<(Source, String, String), Option<BTreeMap<String, Vec<u8>>>>;

/// The data of a ConfigMap or Secret as a volume or environment reads it: text and binary keys
/// alike; None when there is none.
async fn read_data(
    client: &Client,
    (source, namespace, name): &(Source, String, String),
) -> Result<Option<BTreeMap<String, Vec<u8>>>, String> {
    if *source == Source::Secret {
        let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
        let Some(s) = api.get_opt(name).await.map_err(|e| e.to_string())? else {
            return Ok(None);
        };
        let data = s
            .data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.0));
        let text = s.string_data.unwrap_or_default().into_iter();
        return Ok(Some(
            data.chain(text.map(|(k, v)| (k, v.into_bytes()))).collect(),
        ));
    }
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let Some(cm) = api.get_opt(name).await.map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    let text = cm.data.unwrap_or_default().into_iter();
    let binary = cm.binary_data.unwrap_or_default().into_iter();
    let data = text.map(|(k, v)| (k, v.into_bytes()));
    Ok(Some(data.chain(binary.map(|(k, v)| (k, v.0))).collect()))
}

/// How many Pods of a node start at once.
const CONCURRENT_POD_STARTS: usize = 8;

/// What one step of a Pod's start came to: its key (the sandbox or a container's name) and
/// its failure, if it failed.
type StepOutcome = (String, Result<(), StartFailure>);

/// The container runtime of one node.
pub struct Runtime {
    docker: Docker,
    node: String,
    own: Own,
    /// The API server as Pods reach it: `KUBERNETES_SERVICE_HOST` and `_PORT`.
    api_server: Option<(String, String)>,
    /// Start failures, by Pod uid and container name.
    failures: HashMap<String, BTreeMap<String, StartFailure>>,
    /// The statuses last written, by Pod uid.
    written: HashMap<String, Value>,
    /// Pods whose containers are being stopped.
    terminating: Arc<Mutex<HashSet<String>>>,
    /// What the Engine showed of each Pod container, by id.
    inspected: HashMap<String, Inspected>,
    /// Images being pulled in the background (None) or whose pull failed, by reference: a
    /// pull that cannot reach a registry must not hold up the other Pods.
    pulls: Arc<Mutex<HashMap<String, Option<String>>>>,
    /// The cluster DNS Pods ask, from the kubelet's configuration.
    cluster_dns: Option<ClusterDns>,
    /// The Services' rules every Pod's namespace should hold ([`service_proxy::rules`]).
    rules: String,
    /// The rules each sandbox holds, by container id (a hash of their text); written by
    /// sandbox starts, which run side by side.
    programmed: Mutex<HashMap<String, u64>>,
    /// The projected volumes each sandbox holds, by container id; written by sandbox starts.
    projections: Mutex<HashMap<String, Projection>>,
    /// This node's Pod containers the kernel killed for memory, as the Engine's `oom` events
    /// name them: the Engine's inspection can lose the mark when the OOM event reaches it
    /// before the exit (and then says exit 137 alone), the event stream does not.
    oom_killed: Arc<Mutex<HashSet<String>>>,
    oom_watch: tokio::task::JoinHandle<()>,
    /// The running containers' probes.
    prober: Prober,
    /// The node's address, as the last pass was given it (`hostNetwork` Pods' address).
    host_ip: String,
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.oom_watch.abort();
    }
}

/// Records the ids of this node's Pod containers in the Engine's `oom` events until aborted
/// (the stream is opened again when it ends, from just before it ended).
async fn watch_oom_events(
    docker: Docker,
    node_container: String,
    into: Arc<Mutex<HashSet<String>>>,
) {
    let filters = HashMap::from([
        ("type", vec!["container".to_string()]),
        ("event", vec!["oom".to_string()]),
        ("label", vec![format!("{POD_NODE_LABEL}={node_container}")]),
    ]);
    // A stream opened again replays from a little before the last one ended: an OOM kill in
    // between (the Engine ends idle streams) is not lost.
    let mut since: Option<i64> = None;
    loop {
        let mut options = bollard::query_parameters::EventsOptionsBuilder::new().filters(&filters);
        if let Some(since) = since {
            options = options.since(&since.to_string());
        }
        let mut events = docker.events(Some(options.build()));
        while let Some(event) = events.next().await {
            match event {
                Ok(event) => {
                    if let Some(id) = event.actor.and_then(|a| a.id) {
                        into.lock().unwrap().insert(id);
                    }
                }
                Err(e) => {
                    tracing::debug!(error = %e, "kubelet: the Engine's event stream ended");
                    break;
                }
            }
        }
        since = Some(OffsetDateTime::now_utc().unix_timestamp() - 2);
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}

/// The host's Docker Engine, through the socket the Docker provider mounts; None when it is
/// not mounted or does not answer (the node then runs its static pods only).
async fn engine() -> Option<Docker> {
    if !std::path::Path::new(ENGINE_SOCKET).exists() {
        return None;
    }
    Docker::connect_with_unix(ENGINE_SOCKET, 120, bollard::API_DEFAULT_VERSION)
        .ok()?
        .negotiate_version()
        .await
        .map_err(|e| tracing::warn!(error = %e, "the Docker Engine does not answer; this node runs its static pods only"))
        .ok()
}

/// The docker-style name of a Pod's container.
fn container_name(pod: &Pod, container: &str, attempt: u32) -> String {
    format!(
        "k8s_{container}_{}_{}_{}_{attempt}",
        pod.name_any(),
        pod.namespace().unwrap_or_default(),
        pod.uid().unwrap_or_default()
    )
}

fn volume_name(pod: &Pod, volume: &str) -> String {
    format!("k8s_{}_{volume}", pod.uid().unwrap_or_default())
}

fn docker_time(text: Option<&str>) -> OffsetDateTime {
    text.and_then(|t| OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).ok())
        .unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

fn is_mirror(pod: &Pod) -> bool {
    pod.annotations()
        .contains_key(pods::CONFIG_MIRROR_ANNOTATION)
}

impl Runtime {
    /// The runtime of node `node`, when the Engine's socket is mounted and this is one of its
    /// containers; None otherwise (the node then runs its static pods only). `wake` is
    /// notified when a probe changes a container's readiness or kills it.
    pub async fn connect(
        node: &str,
        kubeconfig: &std::path::Path,
        wake: Arc<tokio::sync::Notify>,
    ) -> Option<Runtime> {
        let docker = engine().await?;
        let me = docker
            .inspect_container(&super::hostname(), None::<bollard::query_parameters::InspectContainerOptions>)
            .await
            .map_err(|e| tracing::warn!(error = %e, "kubelet: this node's container is not found on the Engine; only static pods run"))
            .ok()?;
        let config = me.config.unwrap_or_default();
        let engine_socket = me
            .mounts
            .iter()
            .flatten()
            .find(|m| m.destination.as_deref() == Some(ENGINE_SOCKET))
            .and_then(|m| m.source.clone());
        let own = Own {
            engine_socket,
            name: me
                .name
                .unwrap_or_default()
                .trim_start_matches('/')
                .to_string(),
            network: me
                .host_config
                .and_then(|h| h.network_mode)
                .unwrap_or_else(|| "bridge".into()),
            image: config.image.unwrap_or_default(),
            owner: config.labels.and_then(|l| l.get(OWNER_LABEL).cloned()),
        };
        let api_server = kube::config::Kubeconfig::read_from(kubeconfig)
            .ok()
            .and_then(|k| k.clusters.first()?.cluster.as_ref()?.server.clone())
            .and_then(|server| {
                let url: http::Uri = server.parse().ok()?;
                Some((
                    url.host()?.to_string(),
                    url.port_u16().unwrap_or(443).to_string(),
                ))
            });
        let oom_killed: Arc<Mutex<HashSet<String>>> = Arc::default();
        let oom_watch = tokio::spawn(watch_oom_events(
            docker.clone(),
            own.name.clone(),
            oom_killed.clone(),
        ));
        Some(Runtime {
            oom_killed,
            oom_watch,
            prober: Prober::new(wake),
            host_ip: String::new(),
            docker,
            node: node.to_string(),
            own,
            api_server,
            failures: HashMap::new(),
            written: HashMap::new(),
            terminating: Arc::default(),
            inspected: HashMap::new(),
            pulls: Arc::default(),
            cluster_dns: None,
            rules: String::new(),
            programmed: Mutex::default(),
            projections: Mutex::default(),
        })
    }

    /// The cluster DNS the Pods started from now on ask.
    pub fn set_cluster_dns(&mut self, dns: ClusterDns) {
        self.cluster_dns = Some(dns);
    }

    /// One pass over the Pods bound to this node: start what is due, stop what is deleted,
    /// remove what belongs to no Pod, bring every sandbox's Service rules to `rules`, report
    /// statuses. Returns when to look again at the latest, for back-offs that end.
    pub async fn sync(
        &mut self,
        client: &Client,
        pods: &[Pod],
        host_ip: &str,
        rules: String,
    ) -> Option<OffsetDateTime> {
        self.rules = rules;
        self.host_ip = host_ip.to_string();
        let seen = match self.seen().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "kubelet: listing the Pods' containers failed");
                return None;
            }
        };
        let ours: Vec<&Pod> = pods
            .iter()
            .filter(|p| {
                p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(self.node.as_str())
            })
            .filter(|p| !is_mirror(p))
            .collect();
        let known: HashSet<String> = ours.iter().filter_map(|p| p.uid()).collect();
        // Containers of Pods that are gone (deleted at once, or bound elsewhere).
        for (uid, containers) in &seen {
            if !known.contains(uid) && !self.terminating.lock().unwrap().contains(uid) {
                remove_all(&self.docker, uid, containers).await;
                self.failures.remove(uid);
                self.written.remove(uid);
            }
        }
        let mut running = Vec::new();
        for pod in ours {
            let uid = pod.uid().unwrap_or_default();
            let containers = seen.get(&uid).cloned().unwrap_or_default();
            if pod.metadata.deletion_timestamp.is_some() {
                self.terminate(client, pod, containers);
            } else {
                running.push((pod, containers));
            }
        }
        self.keep_probes(client, &running);
        let refresh: Vec<(&Pod, Option<String>)> = running
            .iter()
            .map(|(pod, containers)| (*pod, running_sandbox(containers)))
            .collect();
        let recheck = self.sync_pods(client, running, host_ip).await;
        self.program_sandboxes(&seen).await;
        self.refresh_volumes(client, &refresh).await;
        recheck
    }

    /// Probes every running app container of these Pods (and no other).
    fn keep_probes(&mut self, client: &Client, pods: &[(&Pod, Vec<Seen>)]) {
        let mut running = Vec::new();
        for (pod, containers) in pods {
            let pod_ip = self.pod_ip(pod, containers, &self.host_ip);
            for spec in pod.spec.iter().flat_map(|s| &s.containers) {
                let newest = containers
                    .iter()
                    .filter(|c| c.container == spec.name)
                    .max_by_key(|c| c.attempt);
                if let Some(Seen {
                    id,
                    state: State::Running { started_at },
                    ..
                }) = newest
                {
                    running.push(prober::Running {
                        pod,
                        container: spec,
                        target: self.target(id, &pod_ip),
                        started_at: *started_at,
                    });
                }
            }
        }
        self.prober.keep(client, running);
    }

    fn target(&self, container_id: &str, pod_ip: &str) -> prober::Target {
        prober::Target {
            docker: self.docker.clone(),
            container_id: container_id.to_string(),
            pod_ip: pod_ip.to_string(),
        }
    }

    /// Brings the Service rules of every running sandbox to the current ones (a `hostNetwork`
    /// Pod's sandbox programs the node's own namespace, as kube-proxy does); a sandbox that
    /// refuses is tried again on the next pass.
    async fn program_sandboxes(&self, seen: &HashMap<String, Vec<Seen>>) {
        let sandboxes: Vec<String> = seen
            .values()
            .flatten()
            .filter(|c| c.container == SANDBOX && matches!(c.state, State::Running { .. }))
            .map(|c| c.id.clone())
            .collect();
        self.programmed
            .lock()
            .unwrap()
            .retain(|id, _| sandboxes.contains(id));
        let hash = hash_of(&self.rules);
        // Side by side: a Service change reaches every sandbox, and an exec each one after the
        // other held up the node's pass (its starts and statuses) on a busy machine.
        let mut programs = Vec::new();
        for id in sandboxes {
            if self.programmed.lock().unwrap().get(&id) == Some(&hash) {
                continue;
            }
            programs.push(async move {
                match self.program(&id).await {
                    Ok(()) => {
                        self.programmed.lock().unwrap().insert(id, hash);
                    }
                    Err(e) => {
                        tracing::warn!(sandbox = %id, error = %e, "kubelet: the Services' rules were not applied")
                    }
                }
            });
        }
        futures::stream::iter(programs)
            .buffer_unordered(CONCURRENT_POD_STARTS)
            .collect::<Vec<()>>()
            .await;
    }

    /// Applies the current Service rules in a sandbox's network namespace, through the
    /// sandbox (which holds `NET_ADMIN`; the Pod's containers do not).
    async fn program(&self, sandbox: &str) -> Result<(), String> {
        let chain = service_proxy::CHAIN;
        let script = format!(
            "printf '%s' \"$1\" | iptables-restore --noflush && {{ iptables -t nat -C OUTPUT -j {chain} 2>/dev/null || iptables -t nat -I OUTPUT -j {chain}; }}"
        );
        let out = exec(
            &self.docker,
            sandbox,
            &[
                "sh".into(),
                "-c".into(),
                script,
                "service-rules".into(),
                self.rules.clone(),
            ],
            None,
        )
        .await
        .map_err(|e| engine_message(&e))?;
        if out.code != 0 {
            return Err(format!(
                "iptables-restore exited with {}: {}",
                out.code,
                out.stderr.trim()
            ));
        }
        Ok(())
    }

    /// The Pods' containers on this node, by Pod uid. A container is inspected when it is new
    /// or the Engine's list shows it in another state; otherwise what was read stands.
    async fn seen(&mut self) -> Result<HashMap<String, Vec<Seen>>, bollard::errors::Error> {
        let listed = self
            .list(format!("{POD_NODE_LABEL}={}", self.own.name))
            .await?;
        let listed_ids: HashSet<String> = listed.iter().filter_map(|c| c.id.clone()).collect();
        self.inspected.retain(|id, _| listed_ids.contains(id));
        self.oom_killed
            .lock()
            .unwrap()
            .retain(|id| listed_ids.contains(id));
        let mut by_pod: HashMap<String, Vec<Seen>> = HashMap::new();
        for summary in listed {
            let Some(id) = summary.id.clone() else {
                continue;
            };
            let listed_state = format!("{:?}", summary.state);
            let known = self
                .inspected
                .get(&id)
                .filter(|i| i.listed_state == listed_state && !oom_may_follow(i));
            if let Some(known) = known {
                let uid = summary.labels.as_ref().and_then(|l| l.get(POD_UID_LABEL));
                if let Some(uid) = uid {
                    by_pod
                        .entry(uid.clone())
                        .or_default()
                        .push(known.seen.clone());
                }
                continue;
            }
            let Some((uid, inspected)) = self.inspect(summary).await else {
                continue;
            };
            by_pod.entry(uid).or_default().push(inspected.seen.clone());
            self.remember(inspected);
        }
        Ok(by_pod)
    }

    /// Keeps an inspection, with when the container was first seen exited.
    fn remember(&mut self, mut inspected: Inspected) {
        let id = inspected.seen.id.clone();
        if let Some(earlier) = self.inspected.get(&id).and_then(|i| i.exited_seen) {
            inspected.exited_seen = inspected.exited_seen.map(|_| earlier);
        }
        self.inspected.insert(id, inspected);
    }

    /// One Pod's containers, each inspected now: what a Pod's own start reads back, beside the
    /// other starts (the node-wide [`Self::seen`] keeps the cache).
    async fn seen_of(&self, uid: &str) -> Vec<Inspected> {
        let Ok(listed) = self.list(format!("{POD_UID_LABEL}={uid}")).await else {
            return vec![];
        };
        let mut out = Vec::new();
        for summary in listed {
            let ours =
                summary.labels.as_ref().and_then(|l| l.get(POD_NODE_LABEL)) == Some(&self.own.name);
            if let Some((_, inspected)) = self.inspect(summary).await.filter(|_| ours) {
                out.push(inspected);
            }
        }
        out
    }

    /// The Pod containers (and sandboxes) the Engine lists with this label.
    async fn list(
        &self,
        label: String,
    ) -> Result<Vec<bollard::models::ContainerSummary>, bollard::errors::Error> {
        self.docker
            .list_containers(Some(ListContainersOptions {
                all: true,
                filters: Some(HashMap::from([("label".to_string(), vec![label])])),
                ..Default::default()
            }))
            .await
    }

    /// A listed Pod container as the Engine's inspection shows it, with its Pod's uid; None
    /// when it is not a Pod container or is gone meanwhile.
    async fn inspect(
        &self,
        summary: bollard::models::ContainerSummary,
    ) -> Option<(String, Inspected)> {
        let id = summary.id?;
        let labels = summary.labels.unwrap_or_default();
        let (uid, container) = (
            labels.get(POD_UID_LABEL)?,
            labels.get(CONTAINER_NAME_LABEL)?,
        );
        let inspected = self
            .docker
            .inspect_container(
                &id,
                None::<bollard::query_parameters::InspectContainerOptions>,
            )
            .await
            .ok()?;
        let state = inspected.state.unwrap_or_default();
        let started_at = docker_time(state.started_at.as_deref());
        let seen_state = match state.status.map(|s| s.to_string()).as_deref() {
            Some("running") | Some("paused") | Some("restarting") => State::Running { started_at },
            Some("exited") | Some("dead") => {
                let exit_code = state.exit_code.unwrap_or(0);
                let oom_killed =
                    state.oom_killed == Some(true) || self.oom_killed.lock().unwrap().contains(&id);
                State::Exited {
                    exit_code,
                    oom_killed,
                    started_at,
                    finished_at: docker_time(state.finished_at.as_deref()),
                }
            }
            _ => State::Created,
        };
        let seen = Seen {
            id,
            container: container.clone(),
            attempt: labels
                .get(ATTEMPT_LABEL)
                .and_then(|a| a.parse().ok())
                .unwrap_or(0),
            image_id: format!("docker://{}", inspected.image.unwrap_or_default()),
            state: seen_state,
        };
        let address = inspected
            .network_settings
            .and_then(|n| n.networks?.get(&self.own.network)?.ip_address.clone());
        Some((
            uid.clone(),
            Inspected {
                exited_seen: matches!(seen.state, State::Exited { .. })
                    .then(std::time::Instant::now),
                listed_state: format!("{:?}", summary.state),
                seen,
                address,
            },
        ))
    }

    /// Starts what the Pods need, Pods side by side (as kubelet's pod workers; a Pod's own steps
    /// in order, at most [`CONCURRENT_POD_STARTS`] Pods at once), each Pod's status written as
    /// soon as its own steps are done, then the statuses of the others that changed; when to
    /// look again.
    async fn sync_pods(
        &mut self,
        client: &Client,
        pods: Vec<(&Pod, Vec<Seen>)>,
        host_ip: &str,
    ) -> Option<OffsetDateTime> {
        let now = OffsetDateTime::now_utc();
        let plans: Vec<(&Pod, pods::Plan, Vec<Seen>)> = pods
            .into_iter()
            .map(|(pod, containers)| {
                let failures = self
                    .failures
                    .get(&pod.uid().unwrap_or_default())
                    .cloned()
                    .unwrap_or_default();
                (
                    pod,
                    pods::plan(pod, &containers, &failures, now),
                    containers,
                )
            })
            .collect();
        let probed = self.prober.results();
        let (this, probed) = (&*self, &probed);
        // Gathered first: a stream of closures would not be Send for the kubelet's task.
        let starts: Vec<_> = plans
            .iter()
            .filter(|(_, plan, _)| !plan.steps.is_empty())
            .map(|(pod, plan, containers)| {
                this.start_and_report(client, pod, &plan.steps, containers, probed, host_ip)
            })
            .collect();
        let started: Vec<_> = futures::stream::iter(starts)
            .buffer_unordered(CONCURRENT_POD_STARTS)
            .collect()
            .await;
        let recheck = plans.iter().filter_map(|(_, plan, _)| plan.recheck).min();
        for (uid, mut failures, inspected, written) in started {
            // A failure is shown as itself once; later passes show the back-off.
            failures.values_mut().for_each(|f| f.fresh = false);
            self.failures.insert(uid.clone(), failures);
            inspected.into_iter().for_each(|i| self.remember(i));
            if let Some(status) = written {
                self.written.insert(uid, status);
            }
        }
        let mut writes = Vec::new();
        for (pod, _, containers) in plans.iter().filter(|(_, plan, _)| plan.steps.is_empty()) {
            let uid = pod.uid().unwrap_or_default();
            let failures = self.failures.get(&uid).cloned().unwrap_or_default();
            let pod_ip = self.pod_ip(pod, containers, host_ip);
            let status = pods::status(pod, containers, &failures, probed, (&pod_ip, host_ip), now);
            if let Some(f) = self.failures.get_mut(&uid) {
                f.values_mut().for_each(|f| f.fresh = false);
            }
            if self.written.get(&uid) != Some(&status) {
                writes.push((*pod, uid, status));
            }
        }
        let this = &*self;
        let mut patches = Vec::new();
        for (pod, uid, status) in writes {
            patches.push(async move {
                this.write_status(client, pod, &status)
                    .await
                    .then_some((uid, status))
            });
        }
        let written: Vec<Option<(String, Value)>> = futures::stream::iter(patches)
            .buffer_unordered(CONCURRENT_POD_STARTS)
            .collect()
            .await;
        self.written.extend(written.into_iter().flatten());
        recheck
    }

    /// Runs one Pod's steps, reads its containers back at once and writes its status when it
    /// changed, so that the Pod shows Running without waiting for the other Pods' starts: its
    /// uid, its failures after the steps, what was inspected, and the status written.
    async fn start_and_report(
        &self,
        client: &Client,
        pod: &Pod,
        steps: &[Step],
        containers: &[Seen],
        probed: &HashMap<String, prober::Results>,
        host_ip: &str,
    ) -> (
        String,
        BTreeMap<String, StartFailure>,
        Vec<Inspected>,
        Option<Value>,
    ) {
        let uid = pod.uid().unwrap_or_default();
        let outcome = self.run_steps(client, pod, steps, containers).await;
        let mut failures = self.failures.get(&uid).cloned().unwrap_or_default();
        for (key, result) in outcome {
            match result {
                // A new sandbox starts every container afresh.
                Ok(()) if key == SANDBOX => failures.clear(),
                Ok(()) => {
                    failures.remove(&key);
                }
                Err(failure) => {
                    failures.insert(key, failure);
                }
            }
        }
        let inspected = self.seen_of(&uid).await;
        let containers: Vec<Seen> = inspected.iter().map(|i| i.seen.clone()).collect();
        let address_of = |id: &str| inspected.iter().find(|i| i.seen.id == id)?.address.clone();
        let pod_ip = pod_address(pod, &containers, host_ip, address_of);
        let now = OffsetDateTime::now_utc();
        let status = pods::status(pod, &containers, &failures, probed, (&pod_ip, host_ip), now);
        let written = match self.written.get(&uid) == Some(&status) {
            true => None,
            false => self
                .write_status(client, pod, &status)
                .await
                .then_some(status),
        };
        (uid, failures, inspected, written)
    }

    /// Writes a Pod's status; whether it was written (a failure is reported).
    async fn write_status(&self, client: &Client, pod: &Pod, status: &Value) -> bool {
        let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace().unwrap_or_default());
        let patch = Patch::Merge(json!({"status": status}));
        match api
            .patch_status(&pod.name_any(), &PatchParams::default(), &patch)
            .await
        {
            Ok(_) => true,
            Err(e) => {
                crate::kubernetes::report_failure(COMPONENT, &pod.name_any(), &e);
                false
            }
        }
    }

    /// One Pod's steps in order, until one fails: each step's key (the sandbox or a container's
    /// name) and outcome; a failed sandbox fails every container with it.
    async fn run_steps(
        &self,
        client: &Client,
        pod: &Pod,
        steps: &[Step],
        containers: &[Seen],
    ) -> Vec<StepOutcome> {
        let now = OffsetDateTime::now_utc();
        let uid = pod.uid().unwrap_or_default();
        let mut outcome = Vec::new();
        // After a new sandbox, failures count afresh.
        let mut new_sandbox = false;
        for step in steps {
            let (key, result) = match step {
                Step::Sandbox => (
                    SANDBOX.to_string(),
                    self.start_sandbox(client, pod, containers).await,
                ),
                Step::Start { container, attempt } => (
                    container.clone(),
                    self.start_container(client, pod, containers, container, *attempt)
                        .await,
                ),
            };
            let Err((reason, message)) = result else {
                new_sandbox |= key == SANDBOX;
                outcome.push((key, Ok(())));
                continue;
            };
            let before = match new_sandbox {
                true => 0,
                false => self
                    .failures
                    .get(&uid)
                    .and_then(|f| f.get(&key))
                    .map_or(0, |f| f.count),
            };
            let count = before + 1;
            tracing::info!(pod = %pod.name_any(), container = %key, %reason, %message, "kubelet: a start failed");
            crate::kubernetes::record_event(
                client,
                pod,
                COMPONENT,
                "Warning",
                "Failed",
                &format!("{reason}: {message}"),
            )
            .await;
            let failure = StartFailure {
                reason,
                message,
                at: now,
                count,
                fresh: true,
            };
            if key == SANDBOX {
                // Nothing can start without the sandbox: every container shows why.
                for c in pod.spec.iter().flat_map(|s| {
                    s.containers
                        .iter()
                        .chain(s.init_containers.iter().flatten())
                }) {
                    outcome.push((c.name.clone(), Err(failure.clone())));
                }
            }
            outcome.push((key, Err(failure)));
            break;
        }
        outcome
    }

    /// The Pod's address, its sandbox's as last inspected.
    fn pod_ip(&self, pod: &Pod, containers: &[Seen], host_ip: &str) -> String {
        pod_address(pod, containers, host_ip, |id| {
            self.inspected.get(id)?.address.clone()
        })
    }

    fn labels(&self, pod: &Pod, container: &str, attempt: u32) -> HashMap<String, String> {
        let mut labels = HashMap::from([
            (POD_NODE_LABEL.to_string(), self.own.name.clone()),
            (POD_NAME_LABEL.to_string(), pod.name_any()),
            (
                POD_NAMESPACE_LABEL.to_string(),
                pod.namespace().unwrap_or_default(),
            ),
            (POD_UID_LABEL.to_string(), pod.uid().unwrap_or_default()),
            (CONTAINER_NAME_LABEL.to_string(), container.to_string()),
            (ATTEMPT_LABEL.to_string(), attempt.to_string()),
        ]);
        if let Some(owner) = &self.own.owner {
            labels.insert(OWNER_LABEL.to_string(), owner.clone());
        }
        labels
    }

    /// Makes the sandbox (after removing what is left of an earlier one and its containers),
    /// the Pod's volumes, and fills them.
    async fn start_sandbox(
        &self,
        client: &Client,
        pod: &Pod,
        containers: &[Seen],
    ) -> Result<(), (String, String)> {
        let spec = pod.spec.clone().unwrap_or_default();
        for c in spec
            .init_containers
            .iter()
            .flatten()
            .chain(spec.containers.iter())
        {
            if let Some(why) = pods::refused(pod, c) {
                return Err(("CreateContainerConfigError".into(), why));
            }
        }
        let attempt = containers
            .iter()
            .filter(|c| c.container == SANDBOX)
            .map(|c| c.attempt + 1)
            .max()
            .unwrap_or(0);
        for c in containers {
            self.remove_container(&c.id).await;
        }
        // The Engine's socket is bound into the containers from the host, not a volume.
        let volumes: Vec<_> = spec
            .volumes
            .iter()
            .flatten()
            .filter(|v| !pods::is_engine_socket(v))
            .cloned()
            .collect();
        let (sources, tokens) = self
            .sources(client, pod, &volumes, &[], &BTreeMap::new(), None)
            .await
            .map_err(|m| ("CreateContainerConfigError".to_string(), m))?;
        let mut files = Vec::new();
        for volume in volumes.iter().filter(|v| pods::projects(v)) {
            files.push((
                volume.name.clone(),
                pods::volume_files(pod, volume, &sources)
                    .map_err(|m| ("CreateContainerConfigError".to_string(), m))?,
            ));
        }
        let mut binds = Vec::new();
        for volume in &volumes {
            let in_memory = volume
                .empty_dir
                .as_ref()
                .is_none_or(|e| e.medium.as_deref() == Some("Memory"));
            let name = volume_name(pod, &volume.name);
            let options = VolumeCreateOptions {
                name: Some(name.clone()),
                labels: Some(self.labels(pod, &volume.name, 0)),
                driver_opts: in_memory.then(|| {
                    HashMap::from([
                        ("type".to_string(), "tmpfs".to_string()),
                        ("device".to_string(), "tmpfs".to_string()),
                    ])
                }),
                ..Default::default()
            };
            self.docker.create_volume(options).await.map_err(|e| {
                (
                    "CreateContainerError".to_string(),
                    format!("volume {:?}: {e}", volume.name),
                )
            })?;
            binds.push(format!("{name}:{VOLUMES_IN_SANDBOX}/{}", volume.name));
        }
        let name = container_name(pod, SANDBOX, attempt);
        let network_mode = if host_network(pod) {
            format!("container:{}", self.own.name)
        } else {
            self.own.network.clone()
        };
        let hostname = (!host_network(pod)).then(|| {
            let h = spec
                .hostname
                .clone()
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| pod.name_any());
            h.chars().take(63).collect::<String>()
        });
        let dns = pods::dns_settings(pod, self.cluster_dns.as_ref());
        let body = ContainerCreateBody {
            image: Some(self.own.image.clone()),
            entrypoint: Some(vec!["sleep".into(), "infinity".into()]),
            hostname,
            labels: Some(self.labels(pod, SANDBOX, attempt)),
            host_config: Some(HostConfig {
                network_mode: Some(network_mode),
                // For the Services' rules in the Pod's namespace (the node's, for a
                // hostNetwork Pod): the sandbox alone holds it.
                cap_add: Some(vec!["NET_ADMIN".into()]),
                dns: dns.as_ref().map(|d| d.servers.clone()),
                dns_search: dns.as_ref().map(|d| d.searches.clone()),
                dns_options: dns.as_ref().map(|d| d.options.clone()),
                // The Pod's containers join its IPC namespace, as they join its network.
                ipc_mode: Some("shareable".into()),
                binds: Some(binds),
                init: Some(false),
                ..Default::default()
            }),
            ..Default::default()
        };
        let id = self.create_and_start(&name, body).await?;
        // Before any container starts, so that its first request finds the Services.
        self.program(&id)
            .await
            .map_err(|m| ("CreatePodSandboxError".to_string(), m))?;
        self.programmed
            .lock()
            .unwrap()
            .insert(id.clone(), hash_of(&self.rules));
        let mut projection = Projection {
            tokens,
            next_read: Some(std::time::Instant::now() + VOLUME_RESYNC),
            ..Default::default()
        };
        let dir = pods::data_dir(OffsetDateTime::now_utc());
        for (volume, files) in files {
            let entries = pods::atomic_layout(&files, &dir, pods::DATA_LINK);
            self.upload(&name, &volume, &entries)
                .await
                .map_err(|m| ("CreateContainerError".to_string(), m))?;
            projection.volumes.insert(volume, hash_of(&files));
        }
        self.projections.lock().unwrap().insert(id, projection);
        Ok(())
    }

    /// Writes entries into a volume of the Pod, through its sandbox.
    async fn upload(
        &self,
        sandbox: &str,
        volume: &str,
        entries: &[pods::Entry],
    ) -> Result<(), String> {
        let tar = tar_of(entries).map_err(|e| e.to_string())?;
        self.docker
            .upload_to_container(
                sandbox,
                Some(UploadToContainerOptions {
                    path: format!("{VOLUMES_IN_SANDBOX}/{volume}"),
                    ..Default::default()
                }),
                bollard::body_full(tar.into()),
            )
            .await
            .map_err(|e| format!("filling volume {volume:?}: {}", engine_message(&e)))
    }

    /// Reads the projected volumes of the running Pods due again and rewrites those whose
    /// content changed (a ConfigMap or Secret edited, a label changed, a token due for
    /// renewal), as kubelet updates them: the new files beside the old, then one rename. What
    /// cannot be read now keeps its content, and is tried again.
    async fn refresh_volumes(&self, client: &Client, pods: &[(&Pod, Option<String>)]) {
        let now = std::time::Instant::now();
        // Pods of a namespace mostly read the same objects (kube-root-ca.crt): once a pass.
        let mut reads = Reads::new();
        let live: HashSet<&String> = pods.iter().filter_map(|(_, id)| id.as_ref()).collect();
        self.projections
            .lock()
            .unwrap()
            .retain(|id, _| live.contains(id));
        for (pod, sandbox) in pods {
            let Some(sandbox) = sandbox else { continue };
            let (written, issued) = {
                let mut projections = self.projections.lock().unwrap();
                // A sandbox an earlier agent started: its volumes are rewritten once.
                let p = projections.entry(sandbox.clone()).or_insert_with(|| {
                    let volumes = pod.spec.iter().flat_map(|s| s.volumes.iter().flatten());
                    Projection {
                        volumes: volumes
                            .filter(|v| pods::projects(v))
                            .map(|v| (v.name.clone(), 0))
                            .collect(),
                        ..Default::default()
                    }
                });
                if p.next_read.is_some_and(|at| at > now) || p.volumes.is_empty() {
                    continue;
                }
                p.next_read = Some(now + VOLUME_RESYNC);
                (p.volumes.clone(), p.tokens.clone())
            };
            let volumes: Vec<k8s_openapi::api::core::v1::Volume> = pod
                .spec
                .iter()
                .flat_map(|s| s.volumes.iter().flatten())
                .filter(|v| written.contains_key(&v.name))
                .cloned()
                .collect();
            let read = self
                .sources(client, pod, &volumes, &[], &issued, Some(&mut reads))
                .await;
            let (sources, tokens) = match read {
                Ok(read) => read,
                Err(e) => {
                    tracing::warn!(pod = %pod.name_any(), error = %e, "kubelet: a Pod's volumes could not be read again; they keep their content");
                    continue;
                }
            };
            let dir = pods::data_dir(OffsetDateTime::now_utc());
            for volume in &volumes {
                let Ok(files) = pods::volume_files(pod, volume, &sources) else {
                    continue; // what it reads is gone: kubelet keeps the last content
                };
                let hash = hash_of(&files);
                if written.get(&volume.name) == Some(&hash) {
                    continue;
                }
                match self.swap(sandbox, &volume.name, &files, &dir).await {
                    Ok(()) => {
                        if let Some(p) = self.projections.lock().unwrap().get_mut(sandbox) {
                            p.volumes.insert(volume.name.clone(), hash);
                        }
                    }
                    Err(e) => {
                        tracing::warn!(pod = %pod.name_any(), volume = %volume.name, error = %e, "kubelet: a volume could not be updated; tried again")
                    }
                }
            }
            if let Some(p) = self.projections.lock().unwrap().get_mut(sandbox) {
                p.tokens = tokens;
            }
        }
    }

    /// Puts `files` into a volume in place of what it holds: the new directory `dir` and its
    /// link beside the old, the link renamed over [`pods::DATA_LINK`], then the old directory
    /// and the top-level links that lead nowhere now removed.
    async fn swap(
        &self,
        sandbox: &str,
        volume: &str,
        files: &[pods::VolumeFile],
        dir: &str,
    ) -> Result<(), String> {
        let entries = pods::atomic_layout(files, dir, pods::NEXT_DATA_LINK);
        self.upload(sandbox, volume, &entries).await?;
        const SCRIPT: &str = r#"cd "$1" || exit 1
old=$(readlink "$3")
mv -T "$2" "$3" || exit 1
if [ -n "$old" ] && [ "$old" != "$4" ]; then rm -rf -- "$old"; fi
for f in * .[!.]*; do if [ -L "$f" ] && [ ! -e "$f" ]; then rm -f -- "$f"; fi; done"#;
        let command: Vec<String> = [
            "sh",
            "-c",
            SCRIPT,
            "swap",
            &format!("{VOLUMES_IN_SANDBOX}/{volume}"),
            pods::NEXT_DATA_LINK,
            pods::DATA_LINK,
            dir,
        ]
        .map(String::from)
        .to_vec();
        let out = exec(&self.docker, sandbox, &command, None)
            .await
            .map_err(|e| engine_message(&e))?;
        match out.code {
            0 => Ok(()),
            code => Err(format!("exit {code}: {}", out.stderr.trim())),
        }
    }

    /// Creates and starts a container; its id.
    async fn create_and_start(
        &self,
        name: &str,
        body: ContainerCreateBody,
    ) -> Result<String, (String, String)> {
        let created = self
            .docker
            .create_container(
                Some(CreateContainerOptions {
                    name: Some(name.to_string()),
                    ..Default::default()
                }),
                body,
            )
            .await
            .map_err(|e| ("CreateContainerError".to_string(), engine_message(&e)))?;
        self.docker
            .start_container(
                name,
                None::<bollard::query_parameters::StartContainerOptions>,
            )
            .await
            .map_err(|e| ("RunContainerError".to_string(), engine_message(&e)))?;
        Ok(created.id)
    }

    /// What these volumes and these containers' environments read, from the API: ConfigMaps
    /// and Secrets of the Pod's namespace, and a token of its ServiceAccount per projected
    /// token source (those `issued` already kept until due for renewal), with the tokens as
    /// issued now. The sandbox asks for the volumes, each container start for its own
    /// environment alone, so that tokens are requested once per sandbox.
    async fn sources(
        &self,
        client: &Client,
        pod: &Pod,
        volumes: &[k8s_openapi::api::core::v1::Volume],
        containers: &[&Container],
        issued: &BTreeMap<String, Issued>,
        mut reads: Option<&mut Reads>,
    ) -> Result<(Sources, BTreeMap<String, Issued>), String> {
        let namespace = pod.namespace().unwrap_or_default();
        let mut config_maps = HashSet::new();
        let mut secrets = HashSet::new();
        let mut tokens = Vec::new();
        for v in volumes {
            if let Some(cm) = &v.config_map {
                config_maps.insert(cm.name.clone());
            }
            if let Some(s) = v.secret.as_ref().and_then(|s| s.secret_name.clone()) {
                secrets.insert(s);
            }
            for source in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
                if let Some(cm) = &source.config_map {
                    config_maps.insert(cm.name.clone());
                }
                if let Some(s) = &source.secret {
                    secrets.insert(s.name.clone());
                }
                if let Some(t) = &source.service_account_token {
                    tokens.push((t.audience.clone(), t.expiration_seconds));
                }
            }
        }
        for c in containers {
            for from in c.env_from.iter().flatten() {
                config_maps.extend(from.config_map_ref.as_ref().map(|r| r.name.clone()));
                secrets.extend(from.secret_ref.as_ref().map(|r| r.name.clone()));
            }
            for var in c.env.iter().flatten().filter_map(|e| e.value_from.as_ref()) {
                config_maps.extend(var.config_map_key_ref.as_ref().map(|r| r.name.clone()));
                secrets.extend(var.secret_key_ref.as_ref().map(|r| r.name.clone()));
            }
        }
        let mut sources = Sources::default();
        for (source, names) in [(Source::ConfigMap, config_maps), (Source::Secret, secrets)] {
            for name in names {
                let key = (source, namespace.clone(), name);
                let known = reads.as_ref().and_then(|r| r.get(&key).cloned());
                let data = match known {
                    Some(data) => data,
                    None => {
                        let data = read_data(client, &key).await?;
                        if let Some(r) = reads.as_mut() {
                            r.insert(key.clone(), data.clone());
                        }
                        data
                    }
                };
                let (_, _, name) = key;
                let into = match source {
                    Source::ConfigMap => &mut sources.config_maps,
                    Source::Secret => &mut sources.secrets,
                };
                if let Some(data) = data {
                    into.insert(name, data);
                }
            }
        }
        let account = pod
            .spec
            .as_ref()
            .and_then(|s| s.service_account_name.clone())
            .filter(|a| !a.is_empty())
            .unwrap_or_else(|| "default".into());
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &namespace);
        let mut kept = BTreeMap::new();
        let now = OffsetDateTime::now_utc();
        for (audience, expiration) in tokens {
            let key = pods::token_key(audience.as_deref(), expiration);
            if let Some(token) = issued.get(&key).filter(|t| t.renew_at > now) {
                sources.tokens.insert(key.clone(), token.token.clone());
                kept.insert(key, token.clone());
                continue;
            }
            let request: TokenRequest = serde_json::from_value(json!({
                "spec": {
                    "audiences": audience.iter().collect::<Vec<_>>(),
                    "expirationSeconds": expiration.unwrap_or(3600),
                    "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": pod.name_any(), "uid": pod.uid()},
                },
            }))
            .expect("a TokenRequest");
            let issued: TokenRequest = accounts
                .create_subresource("token", &account, &PostParams::default(), &request)
                .await
                .map_err(|e| format!("requesting a token of ServiceAccount {account:?}: {e}"))?;
            let status = issued.status.unwrap_or_default();
            let lifetime = status
                .expiration_timestamp
                .map(|t| t.0.as_second() - now.unix_timestamp())
                .unwrap_or(expiration.unwrap_or(3600));
            let renew_at = now + time::Duration::seconds(lifetime * 4 / 5);
            let token = status.token.unwrap_or_default();
            sources.tokens.insert(key.clone(), token.clone());
            kept.insert(key, Issued { token, renew_at });
        }
        Ok((sources, kept))
    }

    /// Whether the image is present as the pull policy asks; when it is not, a pull starts in
    /// the background, and its failure is the next call's error.
    async fn ensure_image(&self, container: &Container) -> Result<bool, (String, String)> {
        let image = container.image.clone().unwrap_or_default();
        let present = self.docker.inspect_image(&image).await.is_ok();
        let tagged = image
            .rsplit('/')
            .next()
            .is_some_and(|last| last.contains(':') || last.contains('@'));
        let latest = !tagged || image.ends_with(":latest");
        let policy = container
            .image_pull_policy
            .clone()
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| if latest { "Always" } else { "IfNotPresent" }.to_string());
        match policy.as_str() {
            "Never" if present => return Ok(true),
            "Never" => {
                return Err((
                    "ErrImageNeverPull".into(),
                    format!("Container image {image:?} is not present with pull policy of Never"),
                ));
            }
            "IfNotPresent" if present => return Ok(true),
            _ => {}
        }
        let mut pulls = self.pulls.lock().unwrap();
        match pulls.get(&image).cloned() {
            // Pulling.
            Some(None) => Ok(false),
            Some(Some(failure)) => {
                pulls.remove(&image);
                Err(("ErrImagePull".into(), failure))
            }
            None => {
                pulls.insert(image.clone(), None);
                let docker = self.docker.clone();
                let results = self.pulls.clone();
                tokio::spawn(async move {
                    let options = CreateImageOptions {
                        from_image: Some(image.clone()),
                        ..Default::default()
                    };
                    let mut pull = docker.create_image(Some(options), None, None);
                    let mut failure = None;
                    while let Some(progress) = pull.next().await {
                        if let Err(e) = progress {
                            failure = Some(format!(
                                "failed to pull image {image:?}: {}",
                                engine_message(&e)
                            ));
                            break;
                        }
                    }
                    let mut results = results.lock().unwrap();
                    match failure {
                        Some(f) => results.insert(image, Some(f)),
                        None => results.remove(&image),
                    };
                });
                Ok(false)
            }
        }
    }

    async fn start_container(
        &self,
        client: &Client,
        pod: &Pod,
        containers: &[Seen],
        name: &str,
        attempt: u32,
    ) -> Result<(), (String, String)> {
        let spec = pod.spec.clone().unwrap_or_default();
        let Some(container) = spec
            .init_containers
            .iter()
            .flatten()
            .chain(spec.containers.iter())
            .find(|c| c.name == name)
        else {
            return Ok(());
        };
        if let Some(why) = pods::refused(pod, container) {
            return Err(("CreateContainerConfigError".into(), why));
        }
        let Some(sandbox) = containers
            .iter()
            .filter(|c| c.container == SANDBOX)
            .max_by_key(|c| c.attempt)
        else {
            return Ok(());
        };
        if !self.ensure_image(container).await? {
            return Ok(()); // pulling
        }
        let (sources, _) = self
            .sources(client, pod, &[], &[container], &BTreeMap::new(), None)
            .await
            .map_err(|m| ("CreateContainerConfigError".to_string(), m))?;
        let api_server = self
            .api_server
            .as_ref()
            .map(|(h, p)| (h.as_str(), p.as_str()));
        let env = pods::environment(pod, container, &sources, api_server)
            .map_err(|m| ("CreateContainerConfigError".to_string(), m))?;
        // Attempts older than the one before are gone, as kubelet keeps one dead container.
        for old in containers
            .iter()
            .filter(|c| c.container == name && c.attempt + 1 < attempt)
        {
            self.remove_container(&old.id).await;
        }
        if let Some(same) = containers
            .iter()
            .find(|c| c.container == name && c.attempt == attempt)
        {
            // A start that failed before left the container made.
            self.remove_container(&same.id).await;
        }
        let engine_socket_volumes: Vec<&str> = pod
            .spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten())
            .filter(|v| pods::is_engine_socket(v))
            .map(|v| v.name.as_str())
            .collect();
        let binds = container
            .volume_mounts
            .iter()
            .flatten()
            .map(|m| {
                let ro = if m.read_only == Some(true) { ":ro" } else { "" };
                let source = if engine_socket_volumes.contains(&m.name.as_str()) {
                    self.own.engine_socket.clone().ok_or_else(|| {
                        (
                            "CreateContainerConfigError".to_string(),
                            format!(
                                "volume {:?} is the Docker Engine's socket {ENGINE_SOCKET_HOST_PATH:?}, and this node's container has no Engine socket mounted to give",
                                m.name
                            ),
                        )
                    })?
                } else {
                    volume_name(pod, &m.name)
                };
                Ok(format!("{source}:{}{ro}", m.mount_path))
            })
            .collect::<Result<Vec<String>, (String, String)>>()?;
        let limits = container
            .resources
            .as_ref()
            .and_then(|r| r.limits.clone())
            .unwrap_or_default();
        let quantity = |name: &str| {
            limits
                .get(name)
                .and_then(|q| crate::kubernetes::resources::parse_quantity(&q.0))
        };
        let sandbox_mode = format!("container:{}", sandbox.id);
        let body = ContainerCreateBody {
            image: container.image.clone(),
            entrypoint: container.command.clone(),
            cmd: container.args.clone(),
            env: Some(env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
            working_dir: container.working_dir.clone(),
            tty: container.tty,
            open_stdin: container.stdin,
            user: container
                .security_context
                .as_ref()
                .and_then(|s| s.run_as_user)
                .map(|u| u.to_string()),
            labels: Some(self.labels(pod, name, attempt)),
            host_config: Some(HostConfig {
                network_mode: Some(sandbox_mode.clone()),
                ipc_mode: Some(sandbox_mode),
                binds: Some(binds),
                memory: quantity("memory").map(|m| m as i64),
                nano_cpus: quantity("cpu").map(|c| (c * 1e9) as i64),
                init: Some(false),
                ..Default::default()
            }),
            ..Default::default()
        };
        let id = self
            .create_and_start(&container_name(pod, name, attempt), body)
            .await?;
        crate::kubernetes::record_event(
            client,
            pod,
            COMPONENT,
            "Normal",
            "Started",
            &format!("Started container {name}"),
        )
        .await;
        self.post_start(client, pod, container, containers, &id)
            .await
    }

    /// Runs a started container's postStart hook; when it fails, kills the container as
    /// kubelet does (it then restarts by the Pod's policy).
    async fn post_start(
        &self,
        client: &Client,
        pod: &Pod,
        container: &Container,
        containers: &[Seen],
        id: &str,
    ) -> Result<(), (String, String)> {
        let Some(handler) = container
            .lifecycle
            .as_ref()
            .and_then(|l| l.post_start.as_ref())
        else {
            return Ok(());
        };
        let target = self.target(id, &self.pod_ip(pod, containers, &self.host_ip));
        let outcome = match prober::hook(container, handler) {
            Ok(Some(action)) => {
                let grace = std::time::Duration::from_secs(prober::grace_of(pod) as u64);
                prober::run(&action, &target, grace).await
            }
            Ok(None) => return Ok(()),
            Err(e) => Err(e),
        };
        let Err(message) = outcome else {
            return Ok(());
        };
        crate::kubernetes::record_event(
            client,
            pod,
            COMPONENT,
            "Warning",
            "FailedPostStartHook",
            &format!("PostStartHook failed: {message}"),
        )
        .await;
        prober::stop(client, pod, Some(container), &target, prober::grace_of(pod)).await;
        Err(("PostStartHookError".into(), message))
    }

    /// Stops a deleted Pod's containers within its grace period, removes them and its
    /// volumes, then confirms the deletion, in the background.
    fn terminate(&self, client: &Client, pod: &Pod, containers: Vec<Seen>) {
        let uid = pod.uid().unwrap_or_default();
        if !self.terminating.lock().unwrap().insert(uid.clone()) {
            return;
        }
        let grace = pod
            .metadata
            .deletion_grace_period_seconds
            .unwrap_or_else(|| prober::grace_of(pod));
        let docker = self.docker.clone();
        let terminating = self.terminating.clone();
        let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace().unwrap_or_default());
        let name = pod.name_any();
        let pod_ip = self.pod_ip(pod, &containers, &self.host_ip);
        let targets: Vec<(Option<Container>, prober::Target)> = containers
            .iter()
            .filter(|c| c.container != SANDBOX && matches!(c.state, State::Running { .. }))
            .map(|c| {
                let spec = pod
                    .spec
                    .iter()
                    .flat_map(|s| {
                        s.containers
                            .iter()
                            .chain(s.init_containers.iter().flatten())
                    })
                    .find(|s| s.name == c.container)
                    .cloned();
                (spec, self.target(&c.id, &pod_ip))
            })
            .collect();
        let (client, pod) = (client.clone(), pod.clone());
        tokio::spawn(async move {
            // Each container's preStop hook, then SIGTERM, SIGKILL when the grace period ends.
            let stops = targets
                .iter()
                .map(|(spec, target)| prober::stop(&client, &pod, spec.as_ref(), target, grace));
            futures::future::join_all(stops).await;
            remove_all(&docker, &uid, &containers).await;
            let params = DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(Preconditions {
                    uid: Some(uid.clone()),
                    resource_version: None,
                }),
                ..Default::default()
            };
            if let Err(e) = api.delete(&name, &params).await {
                crate::kubernetes::report_failure(COMPONENT, &name, &e);
            }
            terminating.lock().unwrap().remove(&uid);
        });
    }

    async fn remove_container(&self, id: &str) {
        let _ = self
            .docker
            .remove_container(
                id,
                Some(RemoveContainerOptions {
                    force: true,
                    ..Default::default()
                }),
            )
            .await;
    }
}

/// Removes a Pod's containers and volumes.
async fn remove_all(docker: &Docker, uid: &str, containers: &[Seen]) {
    for c in containers {
        let _ = docker
            .remove_container(
                &c.id,
                Some(RemoveContainerOptions {
                    force: true,
                    ..Default::default()
                }),
            )
            .await;
    }
    let volumes = docker
        .list_volumes(Some(ListVolumesOptions {
            filters: Some(HashMap::from([(
                "label".to_string(),
                vec![format!("{POD_UID_LABEL}={uid}")],
            )])),
        }))
        .await
        .map(|v| v.volumes.unwrap_or_default())
        .unwrap_or_default();
    for v in volumes {
        let _ = docker
            .remove_volume(
                &v.name,
                None::<bollard::query_parameters::RemoveVolumeOptions>,
            )
            .await;
    }
}

/// A Pod's address: the node's for a `hostNetwork` Pod, else its newest sandbox's on the
/// node's network (`address_of` a container id).
fn pod_address(
    pod: &Pod,
    containers: &[Seen],
    host_ip: &str,
    address_of: impl Fn(&str) -> Option<String>,
) -> String {
    if host_network(pod) {
        return host_ip.to_string();
    }
    newest_sandbox(containers)
        .and_then(|sandbox| address_of(&sandbox.id))
        .unwrap_or_default()
}

/// The Pod's newest sandbox, whose address is the Pod's.
fn newest_sandbox(containers: &[Seen]) -> Option<&Seen> {
    containers
        .iter()
        .filter(|c| c.container == SANDBOX)
        .max_by_key(|c| c.attempt)
}

/// Whether a container killed by SIGKILL may yet be marked OOMKilled: the Engine records the
/// kernel's OOM event apart from the exit, sometimes after it (seconds later on a loaded host),
/// so such a container is read again for half a minute from when this agent first saw it
/// exited (however late a busy node's pass came) rather than reported `Error` for good.
fn oom_may_follow(inspected: &Inspected) -> bool {
    matches!(
        inspected.seen.state,
        State::Exited {
            exit_code: 137,
            oom_killed: false,
            ..
        }
    ) && inspected
        .exited_seen
        .is_some_and(|at| at.elapsed() < std::time::Duration::from_secs(30))
}

/// A hash of what the node last wrote somewhere (rules, a volume's files), to tell whether
/// writing again would change it.
fn hash_of(value: &impl std::hash::Hash) -> u64 {
    use std::hash::Hasher;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

fn host_network(pod: &Pod) -> bool {
    pod.spec.as_ref().and_then(|s| s.host_network) == Some(true)
}

/// The Engine's own words for a failure (its message, without bollard's wrapping).
fn engine_message(e: &bollard::errors::Error) -> String {
    match e {
        bollard::errors::Error::DockerResponseServerError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// A tar archive of a volume's entries.
fn tar_of(entries: &[pods::Entry]) -> std::io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    for entry in entries {
        let mut header = tar::Header::new_gnu();
        header.set_mtime(0);
        match entry {
            pods::Entry::File(file) => {
                header.set_size(file.content.len() as u64);
                header.set_mode(file.mode);
                header.set_cksum();
                builder.append_data(&mut header, &file.path, file.content.as_slice())?;
            }
            pods::Entry::Link { path, target } => {
                header.set_entry_type(tar::EntryType::Symlink);
                header.set_size(0);
                header.set_mode(0o777);
                builder.append_link(&mut header, path, target)?;
            }
        }
    }
    builder.into_inner()
}

/// The Pod's newest sandbox, when it runs.
fn running_sandbox(containers: &[Seen]) -> Option<String> {
    newest_sandbox(containers)
        .filter(|s| matches!(s.state, State::Running { .. }))
        .map(|s| s.id.clone())
}

/// A field of a Pod's metadata as text ("" when missing).
fn metadata(pod: &Value, field: &str) -> String {
    pod["metadata"][field]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The runtime containers of one of a Pod's containers: every attempt (`all`), or the
/// running one.
async fn pod_containers(
    docker: &Docker,
    uid: &str,
    container: &str,
    all: bool,
) -> Result<Vec<bollard::models::ContainerSummary>, bollard::errors::Error> {
    docker
        .list_containers(Some(ListContainersOptions {
            all,
            filters: Some(HashMap::from([(
                "label".to_string(),
                vec![
                    format!("{POD_UID_LABEL}={uid}"),
                    format!("{CONTAINER_NAME_LABEL}={container}"),
                ],
            )])),
            ..Default::default()
        }))
        .await
}

/// `kubectl logs` and `kubectl exec` for the Pods the nodes' kubelets run: the node's API
/// server reads their containers' output from the Engine and runs commands in them there, as
/// kube-apiserver asks a kubelet.
pub struct EngineStreams {
    docker: Docker,
}

impl EngineStreams {
    /// The Engine's logs, when its socket is mounted here.
    pub async fn connect() -> Option<EngineStreams> {
        Some(EngineStreams {
            docker: engine().await?,
        })
    }
}

/// The id of the running container `container` of the Pod `uid`, or why there is none.
async fn running_container(docker: &Docker, uid: &str, container: &str) -> Result<String, String> {
    let running = pod_containers(docker, uid, container, false)
        .await
        .map_err(|e| engine_message(&e))?;
    running
        .into_iter()
        .find_map(|c| c.id)
        .ok_or_else(|| format!("container {container:?} is not running"))
}

/// An attached container's stdin whose shutdown only flushes: the Engine's attach is one
/// hijacked connection, and shutting its writing half ends the output too, so a client that
/// closes its stdin (as `kubectl attach -i` does at the end of its input) would never see the
/// process answer. The process keeps its stdin open, as the Engine keeps it for a container
/// started without `StdinOnce`.
struct KeepOpen(std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>>);

impl tokio::io::AsyncWrite for KeepOpen {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.0.as_mut().poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        self.0.as_mut().poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        self.0.as_mut().poll_flush(cx)
    }
}

/// The Engine's output of an exec or an attach, by kubelet's channel.
fn channels(
    output: std::pin::Pin<
        Box<
            dyn futures::Stream<
                    Item = Result<bollard::container::LogOutput, bollard::errors::Error>,
                > + Send,
        >,
    >,
) -> crate::apiserver::exec::ExecOutput {
    use crate::apiserver::exec::{STDERR, STDOUT};
    output
        .filter_map(|chunk| async move {
            match chunk {
                Ok(bollard::container::LogOutput::StdErr { message }) => {
                    Some(Ok((STDERR, message)))
                }
                Ok(
                    bollard::container::LogOutput::StdOut { message }
                    | bollard::container::LogOutput::Console { message },
                ) => Some(Ok((STDOUT, message))),
                Ok(bollard::container::LogOutput::StdIn { .. }) => None,
                Err(e) => Some(Err(std::io::Error::other(e))),
            }
        })
        .boxed()
}

impl crate::apiserver::exec::ExecSource for EngineStreams {
    fn attach(
        &self,
        pod: &Value,
        container: &str,
        options: &crate::apiserver::exec::ExecOptions,
    ) -> futures::future::BoxFuture<'static, Result<crate::apiserver::exec::ExecSession, String>>
    {
        use bollard::query_parameters::{AttachContainerOptions, ResizeContainerTTYOptions};
        let docker = self.docker.clone();
        let uid = metadata(pod, "uid");
        let container = container.to_string();
        let options = options.clone();
        Box::pin(async move {
            let id = running_container(&docker, &uid, &container).await?;
            let attached = docker
                .attach_container(
                    &id,
                    Some(AttachContainerOptions {
                        stdin: options.stdin,
                        stdout: options.stdout,
                        stderr: options.stderr,
                        stream: true,
                        logs: false,
                        detach_keys: None,
                    }),
                )
                .await
                .map_err(|e| engine_message(&e))?;
            let (resizer, target) = (docker.clone(), id.clone());
            let resize = Box::new(move |width: u16, height: u16| {
                let (docker, id) = (resizer.clone(), target.clone());
                Box::pin(async move {
                    let size = ResizeContainerTTYOptions {
                        h: i32::from(height),
                        w: i32::from(width),
                    };
                    let _ = docker.resize_container_tty(&id, size).await;
                }) as futures::future::BoxFuture<'static, ()>
            });
            // The session ends when the container's process does, with its exit code.
            let exit_code = Box::pin(async move {
                let mut waits = docker
                    .wait_container(&id, None::<bollard::query_parameters::WaitContainerOptions>);
                match waits.next().await {
                    Some(Ok(exit)) => Ok(exit.status_code),
                    Some(Err(bollard::errors::Error::DockerContainerWaitError {
                        code, ..
                    })) => Ok(code),
                    Some(Err(e)) => Err(engine_message(&e)),
                    None => Err("the Engine did not say how the container ended".into()),
                }
            });
            let input: std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>> =
                Box::pin(KeepOpen(attached.input));
            Ok(crate::apiserver::exec::ExecSession {
                stdin: options.stdin.then_some(input),
                output: channels(attached.output),
                resize,
                exit_code,
            })
        })
    }

    fn exec(
        &self,
        pod: &Value,
        container: &str,
        options: &crate::apiserver::exec::ExecOptions,
    ) -> futures::future::BoxFuture<'static, Result<crate::apiserver::exec::ExecSession, String>>
    {
        use crate::apiserver::exec::ExecSession;
        use bollard::exec::{
            CreateExecOptions, ResizeExecOptions, StartExecOptions, StartExecResults,
        };
        let docker = self.docker.clone();
        let uid = metadata(pod, "uid");
        let container = container.to_string();
        let options = options.clone();
        Box::pin(async move {
            let id = running_container(&docker, &uid, &container).await?;
            let created = docker
                .create_exec(
                    &id,
                    CreateExecOptions {
                        attach_stdin: Some(options.stdin),
                        attach_stdout: Some(options.stdout),
                        attach_stderr: Some(options.stderr),
                        tty: Some(options.tty),
                        cmd: Some(options.command.clone()),
                        ..Default::default()
                    },
                )
                .await
                .map_err(|e| engine_message(&e))?;
            let started = docker
                .start_exec(
                    &created.id,
                    Some(StartExecOptions {
                        detach: false,
                        tty: options.tty,
                        output_capacity: None,
                    }),
                )
                .await
                .map_err(|e| engine_message(&e))?;
            let StartExecResults::Attached { output, input } = started else {
                return Err("the Engine started the command detached".into());
            };
            let output = channels(output);
            let exec_id = created.id.clone();
            let resizer = docker.clone();
            let resize = Box::new(move |width: u16, height: u16| {
                let (docker, id) = (resizer.clone(), exec_id.clone());
                Box::pin(async move {
                    let _ = docker
                        .resize_exec(&id, ResizeExecOptions { height, width })
                        .await;
                }) as futures::future::BoxFuture<'static, ()>
            });
            let exec_id = created.id;
            let exit_code = Box::pin(async move {
                loop {
                    let inspected = docker
                        .inspect_exec(&exec_id)
                        .await
                        .map_err(|e| engine_message(&e))?;
                    if inspected.running != Some(true) {
                        return Ok(inspected.exit_code.unwrap_or(-1));
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            });
            Ok(ExecSession {
                stdin: options.stdin.then_some(input),
                output,
                resize,
                exit_code,
            })
        })
    }
}

impl crate::apiserver::logs::LogSource for EngineStreams {
    fn logs(
        &self,
        pod: &Value,
        container: &str,
        options: &crate::apiserver::logs::LogOptions,
    ) -> futures::future::BoxFuture<'static, Result<crate::apiserver::logs::LogStream, String>>
    {
        let docker = self.docker.clone();
        let uid = metadata(pod, "uid");
        let name = metadata(pod, "name");
        let namespace = metadata(pod, "namespace");
        let container = container.to_string();
        let options = options.clone();
        Box::pin(async move {
            let listed = pod_containers(&docker, &uid, &container, true)
                .await
                .map_err(|e| engine_message(&e))?;
            let mut attempts: Vec<(u32, String)> = listed
                .into_iter()
                .filter_map(|c| {
                    let attempt = c.labels?.get(ATTEMPT_LABEL)?.parse().ok()?;
                    Some((attempt, c.id?))
                })
                .collect();
            attempts.sort();
            let pick = if options.previous {
                attempts.iter().rev().nth(1)
            } else {
                attempts.last()
            };
            let Some((_, id)) = pick else {
                return Err(if options.previous {
                    format!("previous terminated container {container:?} in pod {name:?} not found")
                } else {
                    format!(
                        "container {container:?} in pod {name:?} is waiting to start: ContainerCreating"
                    )
                });
            };
            let since = options.since_seconds.map_or(0, |s| {
                (OffsetDateTime::now_utc().unix_timestamp() - s).max(0) as i32
            });
            let logs = docker.logs(
                id,
                Some(bollard::query_parameters::LogsOptions {
                    follow: options.follow,
                    stdout: true,
                    stderr: true,
                    since,
                    timestamps: options.timestamps,
                    tail: options
                        .tail_lines
                        .map_or_else(|| "all".to_string(), |n| n.max(0).to_string()),
                    ..Default::default()
                }),
            );
            // `limitBytes`: the output up to that many bytes, cut mid-line if need be.
            let limit = options.limit_bytes.map(|l| l.max(0) as usize);
            let stream = logs
                .map(|chunk| {
                    chunk
                        .map(|output| output.into_bytes())
                        .map_err(|e| std::io::Error::other(engine_message(&e)))
                })
                .scan(limit, |left, chunk| {
                    let out = match (left.as_mut(), chunk) {
                        (Some(0), _) => None,
                        (Some(l), Ok(mut bytes)) => {
                            bytes.truncate(*l);
                            *l -= bytes.len();
                            Some(Ok(bytes))
                        }
                        (_, chunk) => Some(chunk),
                    };
                    std::future::ready(out)
                });
            tracing::debug!(pod = %format!("{namespace}/{name}"), %container, "kubelet: serving logs");
            Ok(Box::pin(stream) as crate::apiserver::logs::LogStream)
        })
    }
}
