//! The node agent's kubelet loop: once kubeadm has written `/etc/kubernetes/kubelet.conf`, it
//! registers the Node (name, labels and taints from `/var/lib/kubelet/kubeadm-flags.env`, as
//! kubelet takes them from its flags), renews its Lease every 10 s, reports its status (Ready,
//! no pressure, addresses, kubeletVersion = the image's version, capacity), and keeps a mirror
//! Pod per static pod with the process's phase, readiness and restarts.
//!
//! The offline node is Ready without a CNI plugin (upstream's kubelet waits for one). Where the
//! Docker Engine is reachable (a Docker node), the Pods the scheduler binds to the Node run as
//! containers ([`containers`](super::containers)).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::agent::PodState;
use super::pods::{CONFIG_HASH_ANNOTATION, CONFIG_MIRROR_ANNOTATION, CONFIG_SOURCE_ANNOTATION};
use super::service_proxy::ClusterDns;
use super::{Layout, NodeError, Result};

/// kubelet's defaults: the Lease lasts 40 s and is renewed every 10 s.
pub const LEASE_DURATION_SECONDS: i32 = 40;
const LEASE_RENEW: Duration = Duration::from_secs(10);
/// Node status is written this often even when nothing changed (kubelet's report frequency,
/// shortened: the Ready heartbeat is what people look at).
const STATUS_REPORT: Duration = Duration::from_secs(60);

/// What kubeadm tells kubelet through `kubeadm-flags.env`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KubeletFlags {
    pub hostname_override: Option<String>,
    pub node_ip: Option<String>,
    pub node_labels: BTreeMap<String, String>,
    /// `key=value:Effect` or `key:Effect`.
    pub taints: Vec<String>,
    pub provider_id: Option<String>,
    /// Every other flag, kept as given.
    pub other: Vec<(String, String)>,
}

impl KubeletFlags {
    pub fn file(layout: &Layout) -> std::path::PathBuf {
        layout.kubelet().join("kubeadm-flags.env")
    }

    /// `KUBELET_KUBEADM_ARGS="--flag=value ..."`.
    pub fn render(&self) -> String {
        let mut args: Vec<String> = Vec::new();
        if let Some(h) = &self.hostname_override {
            args.push(format!("--hostname-override={h}"));
        }
        if let Some(ip) = &self.node_ip {
            args.push(format!("--node-ip={ip}"));
        }
        if !self.node_labels.is_empty() {
            let labels: Vec<String> = self
                .node_labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            args.push(format!("--node-labels={}", labels.join(",")));
        }
        if !self.taints.is_empty() {
            args.push(format!("--register-with-taints={}", self.taints.join(",")));
        }
        if let Some(p) = &self.provider_id {
            args.push(format!("--provider-id={p}"));
        }
        args.extend(self.other.iter().map(|(k, v)| format!("--{k}={v}")));
        format!("KUBELET_KUBEADM_ARGS=\"{}\"\n", args.join(" "))
    }

    pub fn parse(text: &str) -> KubeletFlags {
        let mut flags = KubeletFlags::default();
        let value = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("KUBELET_KUBEADM_ARGS="))
            .unwrap_or_default()
            .trim_matches('"');
        for arg in value.split_whitespace() {
            let Some((name, v)) = arg.trim_start_matches('-').split_once('=') else {
                continue;
            };
            match name {
                "hostname-override" => flags.hostname_override = Some(v.into()),
                "node-ip" => flags.node_ip = Some(v.into()),
                "node-labels" => {
                    for pair in v.split(',').filter(|p| !p.is_empty()) {
                        let (k, val) = pair.split_once('=').unwrap_or((pair, ""));
                        flags.node_labels.insert(k.into(), val.into());
                    }
                }
                "register-with-taints" => {
                    flags.taints = v
                        .split(',')
                        .filter(|t| !t.is_empty())
                        .map(String::from)
                        .collect()
                }
                "provider-id" => flags.provider_id = Some(v.into()),
                _ => flags.other.push((name.into(), v.into())),
            }
        }
        flags
    }
}

/// `key=value:Effect` as a Node taint.
pub fn taint(spec: &str) -> Option<Value> {
    let (key_value, effect) = spec.rsplit_once(':')?;
    let (key, value) = key_value.split_once('=').unwrap_or((key_value, ""));
    let mut t = json!({"key": key, "effect": effect});
    if !value.is_empty() {
        t["value"] = json!(value);
    }
    Some(t)
}

/// The Node kubelet registers.
pub fn node(name: &str, flags: &KubeletFlags) -> Value {
    let mut labels: BTreeMap<String, String> = BTreeMap::from([
        ("kubernetes.io/hostname".into(), name.into()),
        ("kubernetes.io/os".into(), "linux".into()),
        (
            "kubernetes.io/arch".into(),
            std::env::consts::ARCH
                .replace("x86_64", "amd64")
                .replace("aarch64", "arm64"),
        ),
        ("beta.kubernetes.io/os".into(), "linux".into()),
    ]);
    labels.extend(flags.node_labels.clone());
    let mut node = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": flags.taints.iter().filter_map(|t| taint(t)).collect::<Vec<_>>()},
    });
    if let Some(p) = &flags.provider_id {
        node["spec"]["providerID"] = json!(p);
    }
    node
}

/// What the Node's status says about this machine.
#[derive(Clone, Debug)]
pub struct Facts {
    pub ip: String,
    pub version: String,
    pub cpus: usize,
    pub memory_kib: u64,
    pub kernel: String,
    pub boot_id: String,
}

impl Facts {
    pub fn gather(ip: String, version: String) -> Facts {
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .unwrap_or_default()
                .trim()
                .to_string()
        };
        let memory_kib = read("/proc/meminfo")
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0);
        Facts {
            ip,
            version,
            cpus: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            memory_kib,
            kernel: read("/proc/sys/kernel/osrelease"),
            boot_id: read("/proc/sys/kernel/random/boot_id"),
        }
    }
}

/// The Node's status: Ready and no pressure (since `since`), heartbeat now.
pub fn node_status(name: &str, facts: &Facts, since: &str, now: &str) -> Value {
    let condition = |t: &str, status: &str, reason: &str, message: &str| json!({"type": t, "status": status, "reason": reason, "message": message, "lastHeartbeatTime": now, "lastTransitionTime": since});
    let capacity = json!({
        "cpu": facts.cpus.to_string(),
        "memory": format!("{}Ki", facts.memory_kib),
        "pods": "110",
        "ephemeral-storage": "100Gi",
    });
    json!({
        "conditions": [
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
        ],
        "addresses": [
            {"type": "InternalIP", "address": facts.ip},
            {"type": "Hostname", "address": name},
        ],
        "capacity": capacity,
        "allocatable": capacity,
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "kubeletVersion": facts.version,
            "kubeProxyVersion": facts.version,
            "containerRuntimeVersion": format!("capictl://{}", crate::build_info::VERSION),
            "operatingSystem": "linux",
            "architecture": std::env::consts::ARCH.replace("x86_64", "amd64").replace("aarch64", "arm64"),
            "osImage": os_image(),
            "kernelVersion": facts.kernel,
            "bootID": facts.boot_id,
            "machineID": facts.boot_id.replace('-', ""),
            "systemUUID": facts.boot_id,
        },
    })
}

fn os_image() -> String {
    std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                .map(|v| v.trim_matches('"').to_string())
        })
        .unwrap_or_else(|| "Linux".into())
}

/// The mirror Pod of a static pod on `node` (uid `node_uid`): its metadata from the manifest
/// and kubelet's annotations, its status from the process.
pub fn mirror_pod(
    state: &PodState,
    manifest_spec: &Value,
    node: &str,
    node_uid: &str,
    ip: &str,
) -> Value {
    let mut annotations = state.annotations.clone();
    annotations.insert(CONFIG_MIRROR_ANNOTATION.into(), state.hash.clone());
    annotations.insert(CONFIG_HASH_ANNOTATION.into(), state.hash.clone());
    annotations.insert(CONFIG_SOURCE_ANNOTATION.into(), "file".into());
    let mut spec = manifest_spec.clone();
    spec["nodeName"] = json!(node);
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": format!("{}-{node}", state.name),
            "namespace": state.namespace,
            "labels": state.labels,
            "annotations": annotations,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid, "controller": true}],
        },
        "spec": spec,
        "status": pod_status(state, ip),
    })
}

/// A static pod's status as kubelet reports it.
pub fn pod_status(state: &PodState, ip: &str) -> Value {
    let running = state.pid.is_some();
    let condition =
        |t: &str, ok: bool| json!({"type": t, "status": if ok { "True" } else { "False" }});
    let last_state = match &state.last_exit {
        Some((code, at)) => {
            json!({"terminated": {"exitCode": code, "reason": if *code == 0 { "Completed" } else { "Error" }, "finishedAt": at}})
        }
        None => json!({}),
    };
    let container_state = if let Some(at) = &state.started_at {
        json!({"running": {"startedAt": at}})
    } else if let Some(error) = &state.error {
        json!({"waiting": {"reason": "CreateContainerError", "message": error}})
    } else if state.backing_off {
        json!({"waiting": {"reason": "CrashLoopBackOff", "message": format!("back-off restarting failed container {}", state.container)}})
    } else {
        json!({"waiting": {"reason": "ContainerCreating"}})
    };
    json!({
        "phase": if running || state.restart_count > 0 { "Running" } else { "Pending" },
        "hostIP": ip,
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": state.started_at,
        "qosClass": "Burstable",
        "conditions": [
            condition("PodReadyToStartContainers", true),
            condition("Initialized", true),
            condition("Ready", state.ready),
            condition("ContainersReady", state.ready),
            condition("PodScheduled", true),
        ],
        "containerStatuses": [{
            "name": state.container,
            "image": state.image,
            "imageID": "",
            "containerID": state.pid.map(|p| format!("capictl://{p}")),
            "ready": state.ready,
            "started": running,
            "restartCount": state.restart_count,
            "state": container_state,
            "lastState": last_state,
        }],
    })
}

/// A client from a kubeconfig file.
pub async fn client_from(path: &std::path::Path) -> Result<Client> {
    Ok(Client::try_from(config_from(path).await?)?)
}

/// The client configuration of a kubeconfig file, with a node component's timeouts.
pub async fn config_from(path: &std::path::Path) -> Result<kube::Config> {
    let config = kube::config::Kubeconfig::read_from(path)
        .map_err(|e| NodeError::Config(format!("{}: {e}", path.display())))?;
    let mut config = kube::Config::from_custom_kubeconfig(config, &Default::default())
        .await
        .map_err(|e| NodeError::Config(format!("{}: {e}", path.display())))?;
    config.connect_timeout = Some(Duration::from_secs(5));
    config.read_timeout = Some(Duration::from_secs(30));
    Ok(config)
}

struct Loop {
    layout: Layout,
    name: String,
    flags: KubeletFlags,
    facts: Facts,
    nodes: Api<Node>,
    leases: Api<Lease>,
    client: Client,
    ready_since: String,
    node_uid: Option<String>,
    last_status: Option<Instant>,
    last_lease: Option<Instant>,
    /// The mirror Pod statuses last written, by Pod name.
    mirrors: BTreeMap<String, Value>,
    /// The Pods bound to this Node and the runtime that runs them; None without an Engine.
    pods: Option<(PodWatch, super::containers::Runtime)>,
}

/// The caches of the Pods bound to this Node and of the cluster's Services and
/// EndpointSlices, kept current by tasks that end with it, as the cluster DNS server does.
struct PodWatch {
    store: kube::runtime::reflector::Store<Pod>,
    services: kube::runtime::reflector::Store<Service>,
    slices: kube::runtime::reflector::Store<EndpointSlice>,
    /// Whether the caches above have listed their kinds: until then an empty cache says
    /// nothing, and the runtime would stop the Pods it runs.
    watches: crate::kubernetes::Watches,
    cluster_dns: Option<ClusterDns>,
    /// What kube-proxy serves on the node's own addresses: the Services' node ports.
    node_ports: super::node_ports::NodePorts,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for PodWatch {
    fn drop(&mut self) {
        self.tasks.iter().for_each(|t| t.abort());
    }
}

/// The cluster DNS of the kubelet's configuration (`clusterDNS`, `clusterDomain` of kubeadm's
/// `kubelet-config` ConfigMap); None when it names none.
async fn cluster_dns(client: &Client) -> Option<ClusterDns> {
    let config = Api::<ConfigMap>::namespaced(client.clone(), "kube-system")
        .get_opt("kubelet-config")
        .await
        .ok()??;
    let text = config.data?.get("kubelet")?.clone();
    let parsed: Value = crate::yaml::from_str(&text).ok()?;
    Some(ClusterDns {
        address: parsed["clusterDNS"][0].as_str()?.to_string(),
        domain: parsed["clusterDomain"]
            .as_str()
            .unwrap_or("cluster.local")
            .to_string(),
    })
}

/// Runs until the agent stops: waits for kubeadm's kubelet.conf, then keeps the Node, its
/// Lease and the mirror Pods.
pub async fn run(layout: Layout, mut states: tokio::sync::watch::Receiver<Option<Vec<PodState>>>) {
    let kubeconfig = layout.kubernetes().join("kubelet.conf");
    let pods_changed = std::sync::Arc::new(tokio::sync::Notify::new());
    let mut looped: Option<Loop> = None;
    loop {
        if looped.is_none() && kubeconfig.exists() {
            match start(&layout, &kubeconfig, &pods_changed).await {
                Ok(l) => looped = Some(l),
                Err(e) => tracing::warn!(error = %e, "kubelet: not started yet"),
            }
        }
        let mut wait = Duration::from_secs(2);
        if let Some(l) = looped.as_mut() {
            let current = states.borrow_and_update().clone();
            if let Err(e) = l.sync(current.as_deref()).await {
                tracing::warn!(error = %e, "kubelet: syncing with the API server failed; retrying");
            }
            if let Some(at) = l.run_pods().await {
                let until = (at - time::OffsetDateTime::now_utc()).max(time::Duration::ZERO);
                wait = wait.min(Duration::from_millis(until.whole_milliseconds() as u64));
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = states.changed() => {}
            _ = pods_changed.notified() => {}
        }
    }
}

async fn start(
    layout: &Layout,
    kubeconfig: &std::path::Path,
    pods_changed: &std::sync::Arc<tokio::sync::Notify>,
) -> Result<Loop> {
    // kubeadm writes the flags before kubelet.conf; the Node is registered with them once.
    let flags = KubeletFlags::parse(&super::read_file(&KubeletFlags::file(layout))?);
    let name = flags
        .hostname_override
        .clone()
        .unwrap_or_else(super::hostname);
    let ip = flags
        .node_ip
        .clone()
        .or_else(|| super::node_ip().map(|i| i.to_string()))
        .unwrap_or_default();
    let client = client_from(kubeconfig).await?;
    let pods =
        match super::containers::Runtime::connect(&name, kubeconfig, pods_changed.clone()).await {
            Some(runtime) => {
                let bound = kube::runtime::watcher::Config::default()
                    .fields(&format!("spec.nodeName={name}"));
                let watches = crate::kubernetes::Watches::waking(pods_changed.clone());
                let (store, watch) = watches.cache_selected::<Pod>(&client, bound);
                let (services, watch_services) = watches.cache::<Service>(&client);
                let (slices, watch_slices) = watches.cache::<EndpointSlice>(&client);
                let tasks = vec![
                    tokio::spawn(watch),
                    tokio::spawn(watch_services),
                    tokio::spawn(watch_slices),
                ];
                Some((
                    PodWatch {
                        store,
                        services,
                        slices,
                        watches,
                        cluster_dns: None,
                        node_ports: Default::default(),
                        tasks,
                    },
                    runtime,
                ))
            }
            None => None,
        };
    Ok(Loop {
        layout: layout.clone(),
        facts: Facts::gather(ip, super::kubernetes_version()),
        nodes: Api::all(client.clone()),
        leases: Api::namespaced(client.clone(), "kube-node-lease"),
        client,
        name,
        flags,
        ready_since: crate::apiserver::object::now(),
        node_uid: None,
        last_status: None,
        last_lease: None,
        mirrors: BTreeMap::new(),
        pods,
    })
}

fn due(last: Option<Instant>, every: Duration) -> bool {
    last.is_none_or(|t| t.elapsed() >= every)
}

impl Loop {
    /// One pass of the runtime over the Pods bound to this Node; when to look again.
    async fn run_pods(&mut self) -> Option<time::OffsetDateTime> {
        // Pods run once the Node is registered.
        self.node_uid.as_ref()?;
        let (watch, runtime) = self.pods.as_mut()?;
        if !watch.watches.listed() {
            return None;
        }
        if watch.cluster_dns.is_none() {
            // kubeadm uploads the kubelet's configuration after the first kubelet starts.
            watch.cluster_dns = cluster_dns(&self.client).await;
            if let Some(dns) = &watch.cluster_dns {
                runtime.set_cluster_dns(dns.clone());
                if let Ok(address) = self.facts.ip.parse() {
                    let records = super::dns::Records {
                        services: watch.services.clone(),
                        slices: watch.slices.clone(),
                        domain: dns.domain.clone(),
                    };
                    watch.tasks.push(tokio::spawn(async move {
                        if let Err(e) = super::dns::serve(address, records).await {
                            tracing::warn!(error = %e, "kubelet: the cluster DNS server could not start; Pods resolve no cluster names");
                        }
                    }));
                }
            }
        }
        let pods: Vec<Pod> = watch.store.state().iter().map(|p| (**p).clone()).collect();
        let (services, slices) = (watch.services.state(), watch.slices.state());
        let (services, slices): (Vec<&Service>, Vec<&EndpointSlice>) = (
            services.iter().map(|s| s.as_ref()).collect(),
            slices.iter().map(|s| s.as_ref()).collect(),
        );
        let rules = super::service_proxy::rules(
            &services,
            &slices,
            watch.cluster_dns.as_ref(),
            &self.facts.ip,
        );
        watch
            .node_ports
            .serve(super::service_proxy::node_ports(&services, &slices))
            .await;
        runtime
            .sync(&self.client, &pods, &self.facts.ip, rules)
            .await
    }

    async fn sync(&mut self, pods: Option<&[PodState]>) -> Result<()> {
        if self.node_uid.is_none() {
            self.register().await?;
        }
        // The Node is read back with each Lease renewal, not on every pass: the loop wakes
        // every 2 s and on each static pod change.
        let mut overwritten = false;
        if due(self.last_lease, LEASE_RENEW) {
            self.renew_lease().await?;
            self.last_lease = Some(Instant::now());
            overwritten = self.status_overwritten().await?;
        }
        if due(self.last_status, STATUS_REPORT) || overwritten {
            let status = node_status(
                &self.name,
                &self.facts,
                &self.ready_since,
                &crate::apiserver::object::now(),
            );
            self.nodes
                .patch_status(
                    &self.name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": status})),
                )
                .await?;
            self.last_status = Some(Instant::now());
        }
        match pods {
            Some(pods) => self.mirror(pods).await,
            None => Ok(()),
        }
    }

    /// Registers the Node, or takes the one registered before (a restarted node keeps its
    /// Node, labels and taints, as kubelet does).
    async fn register(&mut self) -> Result<()> {
        let node = match self.nodes.get_opt(&self.name).await? {
            Some(n) => n,
            None => {
                let node: Node = serde_json::from_value(node(&self.name, &self.flags))
                    .map_err(|e| NodeError::Failed(format!("the Node object: {e}")))?;
                match self.nodes.create(&PostParams::default(), &node).await {
                    Ok(n) => {
                        println!("Registered node {}", self.name);
                        n
                    }
                    Err(kube::Error::Api(s)) if s.code == 409 => self.nodes.get(&self.name).await?,
                    Err(e) => return Err(e.into()),
                }
            }
        };
        self.node_uid = node.metadata.uid.clone();
        Ok(())
    }

    /// Whether someone else (the node lifecycle controller) changed our Ready condition.
    async fn status_overwritten(&self) -> Result<bool> {
        let Some(node) = self.nodes.get_opt(&self.name).await? else {
            return Ok(true);
        };
        let ready = node
            .status
            .and_then(|s| s.conditions)
            .and_then(|c| c.into_iter().find(|c| c.type_ == "Ready"))
            .map(|c| c.status);
        Ok(ready.as_deref() != Some("True"))
    }

    async fn renew_lease(&self) -> Result<()> {
        let now = chrono_micro();
        let lease = json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": self.name,
                "ownerReferences": self.node_uid.as_ref().map(|uid| vec![json!({"apiVersion": "v1", "kind": "Node", "name": self.name, "uid": uid})]),
            },
            "spec": {"holderIdentity": self.name, "leaseDurationSeconds": LEASE_DURATION_SECONDS, "renewTime": now},
        });
        let params = PatchParams::apply("kubelet").force();
        self.leases
            .patch(&self.name, &params, &Patch::Apply(lease))
            .await?;
        Ok(())
    }

    async fn mirror(&mut self, pods: &[PodState]) -> Result<()> {
        let Some(uid) = self.node_uid.clone() else {
            return Ok(());
        };
        let mut wanted = std::collections::BTreeSet::new();
        for state in pods {
            let name = format!("{}-{}", state.name, self.name);
            wanted.insert((state.namespace.clone(), name.clone()));
            let manifest = std::fs::read_to_string(self.layout.manifests().join(&state.file))
                .ok()
                .and_then(|t| crate::yaml::from_str::<Value>(&t).ok())
                .unwrap_or_default();
            let desired = mirror_pod(state, &manifest["spec"], &self.name, &uid, &self.facts.ip);
            let key = format!("{}/{name}", state.namespace);
            let api: Api<Pod> = Api::namespaced(self.client.clone(), &state.namespace);
            let recorded = self.mirrors.get(&key);
            if recorded.is_some_and(|r| *r == desired) {
                continue;
            }
            match api.get_opt(&name).await? {
                Some(existing)
                    if existing.annotations().get(CONFIG_HASH_ANNOTATION) == Some(&state.hash) => {}
                Some(_) => {
                    // The manifest changed: kubelet replaces the mirror Pod.
                    api.delete(&name, &DeleteParams::default().grace_period(0))
                        .await?;
                    self.create_mirror(&api, &desired).await?;
                }
                None => self.create_mirror(&api, &desired).await?,
            }
            api.patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": desired["status"]})),
            )
            .await?;
            self.mirrors.insert(key, desired);
        }
        // Mirror Pods whose manifest is gone go too.
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), "kube-system");
        let listed = pods.list(&ListParams::default()).await?;
        for pod in listed {
            let ours =
                pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(self.name.as_str());
            let mirror = ours && pod.annotations().contains_key(CONFIG_MIRROR_ANNOTATION);
            let ns = pod.namespace().unwrap_or_default();
            if mirror && !wanted.contains(&(ns.clone(), pod.name_any())) {
                pods.delete(&pod.name_any(), &DeleteParams::default().grace_period(0))
                    .await?;
                self.mirrors.remove(&format!("{ns}/{}", pod.name_any()));
            }
        }
        Ok(())
    }

    async fn create_mirror(&self, api: &Api<Pod>, desired: &Value) -> Result<()> {
        let pod: Pod = serde_json::from_value(desired.clone())
            .map_err(|e| NodeError::Failed(format!("the mirror Pod: {e}")))?;
        match api.create(&PostParams::default(), &pod).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// Now as a Kubernetes MicroTime.
pub fn chrono_micro() -> String {
    let now = time::OffsetDateTime::now_utc();
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second(),
        now.microsecond()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubeadm_flags_round_trip() {
        let flags = KubeletFlags {
            hostname_override: Some("cp-1".into()),
            node_ip: Some("172.18.0.5".into()),
            node_labels: BTreeMap::from([
                ("node-role.kubernetes.io/control-plane".into(), "".into()),
                ("tier".into(), "a".into()),
            ]),
            taints: vec!["node-role.kubernetes.io/control-plane:NoSchedule".into()],
            provider_id: None,
            other: vec![("eviction-hard".into(), "nodefs.available<0%".into())],
        };
        assert_eq!(KubeletFlags::parse(&flags.render()), flags);
        let node = node("cp-1", &flags);
        assert_eq!(
            node["metadata"]["labels"]["node-role.kubernetes.io/control-plane"],
            ""
        );
        assert_eq!(node["metadata"]["labels"]["kubernetes.io/hostname"], "cp-1");
        assert_eq!(
            node["spec"]["taints"],
            json!([{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}])
        );
        assert_eq!(
            taint("a=b:NoExecute"),
            Some(json!({"key": "a", "value": "b", "effect": "NoExecute"}))
        );
        assert_eq!(taint("nonsense"), None);
    }

    fn state() -> PodState {
        PodState {
            file: "etcd.yaml".into(),
            name: "etcd".into(),
            namespace: "kube-system".into(),
            container: "etcd".into(),
            image: "registry.k8s.io/etcd:3.5.16-0".into(),
            hash: "abc".into(),
            labels: BTreeMap::from([
                ("component".into(), "etcd".into()),
                ("tier".into(), "control-plane".into()),
            ]),
            annotations: BTreeMap::new(),
            pid: Some(42),
            started_at: Some("2026-12-01T08:00:00Z".into()),
            ready: true,
            restart_count: 0,
            last_exit: None,
            backing_off: false,
            error: None,
        }
    }

    #[test]
    fn mirror_pods_report_the_process() {
        let pod = mirror_pod(
            &state(),
            &json!({"containers": []}),
            "cp-1",
            "uid-1",
            "172.18.0.5",
        );
        assert_eq!(pod["metadata"]["name"], "etcd-cp-1");
        assert_eq!(
            pod["metadata"]["annotations"][CONFIG_SOURCE_ANNOTATION],
            "file"
        );
        assert_eq!(pod["metadata"]["ownerReferences"][0]["uid"], "uid-1");
        assert_eq!(pod["spec"]["nodeName"], "cp-1");
        assert_eq!(pod["status"]["phase"], "Running");
        assert_eq!(
            pod["status"]["conditions"][2],
            json!({"type": "Ready", "status": "True"})
        );
        let crashed = PodState {
            pid: None,
            started_at: None,
            ready: false,
            restart_count: 3,
            last_exit: Some((1, "t".into())),
            backing_off: true,
            ..state()
        };
        let status = pod_status(&crashed, "172.18.0.5");
        assert_eq!(
            status["containerStatuses"][0]["state"]["waiting"]["reason"],
            "CrashLoopBackOff"
        );
        assert_eq!(
            status["containerStatuses"][0]["lastState"]["terminated"]["exitCode"],
            1
        );
        assert_eq!(status["containerStatuses"][0]["restartCount"], 3);
        let new = PodState {
            pid: None,
            started_at: None,
            ready: false,
            ..state()
        };
        assert_eq!(pod_status(&new, "x")["phase"], "Pending");
    }
}
