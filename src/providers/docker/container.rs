//! Node and load-balancer containers as upstream's Docker provider runs them (CAPD's
//! `createNode`): named after the machine, on the `kind` network, kind's labels, `/run` and
//! `/tmp` on tmpfs, `/var` on an anonymous volume, control planes publishing 6443 on
//! 127.0.0.1, restarted once on failure. capictl's node image needs no privileges, so it gets
//! none; `kindest/node` (systemd and containerd inside) runs privileged as upstream runs it,
//! with what CAPD adds for the Engine's host ([`Host`]): `/lib/modules`, `/dev/mapper` on btrfs
//! and zfs, the host's user namespace under userns-remap, `/dev/fuse` when rootless, SELinux
//! relabelling, and the controller's proxy settings.

use std::collections::HashMap;

use bollard::Docker;
use bollard::models::{
    ContainerCreateBody, DeviceMapping, EndpointIpamConfig, EndpointSettings, HostConfig,
    HostConfigCgroupnsModeEnum, Ipam, IpamConfig, NetworkCreateRequest, NetworkingConfig,
    PortBinding, RestartPolicy, RestartPolicyNameEnum,
};
use bollard::query_parameters::{
    CreateContainerOptions, InspectContainerOptions, RemoveContainerOptions,
};

use super::DockerError;
use crate::node::image::POD_NODE_LABEL;

/// The network every node and load balancer joins (kind's; CAPD never creates it, capictl
/// does when it is missing).
pub const NETWORK: &str = "kind";
/// kind's labels, which CAPD finds containers by.
pub const CLUSTER_LABEL: &str = "io.x-k8s.kind.cluster";
pub const ROLE_LABEL: &str = "io.x-k8s.kind.role";
pub use crate::node::image::OWNER_LABEL;
/// The API server port in node and load-balancer containers.
pub const API_SERVER_PORT: &str = "6443/tcp";

/// A container's role, as kind labels it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    ControlPlane,
    Worker,
    LoadBalancer,
}

impl Role {
    pub fn label(self) -> &'static str {
        match self {
            Role::ControlPlane => "control-plane",
            Role::Worker => "worker",
            Role::LoadBalancer => "external-load-balancer",
        }
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Spec {
    pub name: String,
    /// The Cluster's namespace and name (kind's label has the name, capictl's both).
    pub namespace: String,
    pub cluster: String,
    pub role: Role,
    pub image: String,
    /// Runs systemd and containerd inside (`kindest/node`), so needs `--privileged`.
    pub privileged: bool,
    /// More labels (the failure domain).
    pub labels: HashMap<String, String>,
    /// Host paths bound into the container (the DockerMachine's `extraMounts`, the Engine
    /// socket for capictl's nodes).
    pub mounts: Vec<Mount>,
}

/// A host path bound into a container.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    pub source: String,
    pub target: String,
    pub read_only: bool,
}

/// What of the Engine's host shapes a run spec, as CAPD's `RunContainer` reads it: `docker
/// info`, the `kind` network's subnets, SELinux, and the controller's own environment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Host {
    /// `docker info`'s storage driver: btrfs and zfs need `/dev/mapper` in privileged nodes.
    pub storage_driver: String,
    /// `docker info`'s security options name `userns` (userns-remap is on).
    pub userns_remap: bool,
    /// `docker info`'s security options name `rootless`.
    pub rootless: bool,
    /// `/sys/fs/selinux/enforce` is 1: binds are relabelled.
    pub selinux_enforcing: bool,
    /// `/lib/modules` exists on the host (CAPD binds it unconditionally; a host without it
    /// would refuse the container).
    pub lib_modules: bool,
    /// `HTTP_PROXY`, `HTTPS_PROXY` and `NO_PROXY` (or their lower-case forms) of this process.
    pub proxy: Vec<(&'static str, String)>,
    /// The `kind` network's subnets, which `NO_PROXY` gets when a proxy is set.
    pub network_subnets: Vec<String>,
}

const PROXY_VARIABLES: [&str; 3] = ["HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"];

impl Host {
    /// Reads the host's traits from the Engine, the filesystem and the environment.
    pub async fn read(docker: &Docker) -> Result<Host, DockerError> {
        let info = docker.info().await?;
        let security = info.security_options.unwrap_or_default();
        let named = |name: &str| {
            security
                .iter()
                .any(|o| o.split(',').any(|field| field == format!("name={name}")))
        };
        let proxy = PROXY_VARIABLES
            .iter()
            .filter_map(|name| {
                let value = std::env::var(name)
                    .ok()
                    .filter(|v| !v.is_empty())
                    .or_else(|| std::env::var(name.to_lowercase()).ok())
                    .filter(|v| !v.is_empty())?;
                Some((*name, value))
            })
            .collect::<Vec<_>>();
        let network_subnets = if proxy.is_empty() {
            Vec::new()
        } else {
            network_inspect(docker, NETWORK)
                .await?
                .and_then(|n| n.ipam?.config)
                .into_iter()
                .flatten()
                .filter_map(|c| c.subnet)
                .collect()
        };
        Ok(Host {
            storage_driver: info.driver.unwrap_or_default(),
            userns_remap: named("userns"),
            rootless: named("rootless"),
            selinux_enforcing: std::fs::read_to_string("/sys/fs/selinux/enforce")
                .is_ok_and(|s| s == "1"),
            lib_modules: std::path::Path::new("/lib/modules").exists(),
            proxy,
            network_subnets,
        })
    }

    /// The proxy variables a node gets, in both cases, as CAPD's `getProxyDetails` passes
    /// them: `NO_PROXY` extended with the network's subnets, the node's name and the cluster's
    /// service domains, so that nothing in the cluster goes through the proxy.
    fn proxy_env(&self, node: &str) -> Vec<String> {
        if self.proxy.is_empty() {
            return Vec::new();
        }
        let mut values: Vec<(&str, String)> = self
            .proxy
            .iter()
            .filter(|(name, _)| *name != "NO_PROXY")
            .cloned()
            .collect();
        let given = self
            .proxy
            .iter()
            .find(|(name, _)| *name == "NO_PROXY")
            .map(|(_, v)| v.clone());
        let no_proxy: Vec<String> = self
            .network_subnets
            .iter()
            .cloned()
            .chain(given)
            .chain([node.to_string()])
            .chain([".svc", ".svc.cluster", ".svc.cluster.local"].map(String::from))
            .collect();
        values.push(("NO_PROXY", no_proxy.join(",")));
        values
            .into_iter()
            .flat_map(|(name, value)| {
                [
                    format!("{name}={value}"),
                    format!("{}={value}", name.to_lowercase()),
                ]
            })
            .collect()
    }

    /// A bind as `source:target[:options]`, relabelled (`Z`) under SELinux as CAPD does.
    fn bind(&self, mount: &Mount) -> String {
        let options: Vec<&str> = [
            self.selinux_enforcing.then_some("Z"),
            mount.read_only.then_some("ro"),
        ]
        .into_iter()
        .flatten()
        .collect();
        if options.is_empty() {
            format!("{}:{}", mount.source, mount.target)
        } else {
            format!("{}:{}:{}", mount.source, mount.target, options.join(","))
        }
    }
}

/// Creates the `kind` network unless it exists: on a subnet of Docker's choosing, declared as
/// the network's own, with Docker's dynamic addresses in its lower half, so that capictl can pin
/// its containers to addresses in the upper half (see [`create_and_start`]).
pub async fn ensure_network(docker: &Docker) -> Result<(), DockerError> {
    // Docker 20.10 makes a second network of the same name when asked (containers naming it
    // then fail as "ambiguous"): one maker at a time in this process, and after making it the
    // oldest of the name is kept, which every process racing here agrees on.
    static MAKING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _making = MAKING.lock().await;
    if network_inspect(docker, NETWORK).await?.is_some() {
        return Ok(());
    }
    // Docker hands out a free subnet only to a network created without one: a probe network
    // learns it, and `kind` is made on it with the address range declared.
    let probe = format!("capictl-subnet-probe-{}", std::process::id());
    docker
        .create_network(NetworkCreateRequest {
            name: probe.clone(),
            driver: Some("bridge".into()),
            ..Default::default()
        })
        .await?;
    let subnet = network_inspect(docker, &probe)
        .await?
        .and_then(|n| n.ipam?.config?.into_iter().find_map(|c| c.subnet))
        .and_then(|s| Subnet::parse(&s));
    docker.remove_network(&probe).await?;
    let ipam = subnet.and_then(|s| {
        Some(Ipam {
            config: Some(vec![IpamConfig {
                subnet: Some(s.to_string()),
                ip_range: Some(s.lower_half()?.to_string()),
                ..Default::default()
            }]),
            ..Default::default()
        })
    });
    let request = NetworkCreateRequest {
        name: NETWORK.into(),
        driver: Some("bridge".into()),
        ipam,
        ..Default::default()
    };
    match docker.create_network(request).await {
        Ok(_) => {}
        // Created by someone else meanwhile.
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 409, ..
        }) => {}
        Err(e) => return Err(e.into()),
    }
    keep_oldest_network(docker).await
}

/// Removes every `kind` network but the oldest, when processes made one each at once.
async fn keep_oldest_network(docker: &Docker) -> Result<(), DockerError> {
    let mut named: Vec<bollard::models::Network> = docker
        .list_networks(Some(bollard::query_parameters::ListNetworksOptions {
            filters: Some(HashMap::from([(
                "name".to_string(),
                vec![NETWORK.to_string()],
            )])),
        }))
        .await?
        .into_iter()
        .filter(|n| n.name.as_deref() == Some(NETWORK))
        .collect();
    named.sort_by_key(|n| (n.created.clone(), n.id.clone()));
    for extra in named.iter().skip(1) {
        if let Some(id) = &extra.id {
            let _ = docker.remove_network(id).await;
        }
    }
    Ok(())
}

async fn network_inspect(
    docker: &Docker,
    name: &str,
) -> Result<Option<bollard::models::Network>, DockerError> {
    match docker
        .inspect_network(
            name,
            None::<bollard::query_parameters::InspectNetworkOptions>,
        )
        .await
    {
        Ok(n) => Ok(Some(n)),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// An IPv4 subnet, `a.b.c.d/len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Subnet {
    base: u32,
    len: u32,
}

impl Subnet {
    pub fn parse(s: &str) -> Option<Subnet> {
        let (ip, len) = s.split_once('/')?;
        let ip: std::net::Ipv4Addr = ip.parse().ok()?;
        let len: u32 = len.parse().ok()?;
        (len <= 32).then(|| Subnet {
            base: u32::from(ip) & Self::mask(len),
            len,
        })
    }

    fn mask(len: u32) -> u32 {
        u32::MAX.checked_shl(32 - len).unwrap_or(0)
    }

    fn size(self) -> u64 {
        1u64 << (32 - self.len)
    }

    /// The lower half, Docker's to hand out; None for subnets too small to split.
    pub fn lower_half(self) -> Option<Subnet> {
        (self.len < 30).then_some(Subnet {
            base: self.base,
            len: self.len + 1,
        })
    }

    /// The addresses of the upper half, capictl's to pin, without the broadcast address.
    pub fn pinned(self) -> impl Iterator<Item = std::net::Ipv4Addr> {
        let (first, end) = match self.lower_half() {
            Some(lower) => (
                u64::from(self.base) + lower.size(),
                u64::from(self.base) + self.size() - 1,
            ),
            None => (0, 0),
        };
        (first..end).map(|a| std::net::Ipv4Addr::from(a as u32))
    }
}

impl std::fmt::Display for Subnet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", std::net::Ipv4Addr::from(self.base), self.len)
    }
}

/// The subnet whose upper half capictl pins addresses in: the `kind` network's when it was made
/// with its dynamic range declared as [`ensure_network`] makes it. A `kind` network made by kind
/// (no range declared) gets no pinned addresses: Docker chooses, as for kind's own nodes.
async fn pinning_subnet(docker: &Docker) -> Result<Option<Subnet>, DockerError> {
    let Some(network) = network_inspect(docker, NETWORK).await? else {
        return Ok(None);
    };
    Ok(network
        .ipam
        .and_then(|i| i.config)
        .into_iter()
        .flatten()
        .find(|c| c.ip_range.as_deref().is_some_and(|r| !r.is_empty()))
        .and_then(|c| {
            let subnet = Subnet::parse(c.subnet.as_deref()?)?;
            (Subnet::parse(c.ip_range.as_deref()?)? == subnet.lower_half()?).then_some(subnet)
        }))
}

/// The addresses containers on the network hold or are pinned to, stopped ones included (a
/// stopped container keeps its pinned address for its next start).
async fn taken_addresses(docker: &Docker) -> Result<Vec<std::net::Ipv4Addr>, DockerError> {
    use bollard::query_parameters::ListContainersOptions;
    let listed = docker
        .list_containers(Some(ListContainersOptions {
            all: true,
            filters: Some(HashMap::from([(
                "network".to_string(),
                vec![NETWORK.to_string()],
            )])),
            ..Default::default()
        }))
        .await?;
    Ok(listed
        .into_iter()
        .filter_map(|c| c.network_settings?.networks)
        .flat_map(|n| n.into_values())
        .flat_map(|e| [e.ipam_config.and_then(|i| i.ipv4_address), e.ip_address])
        .flatten()
        .filter_map(|ip| ip.parse().ok())
        .collect())
}

/// The first address of the subnet's pinned half that no container holds.
pub fn free_pinned_address(
    subnet: Subnet,
    taken: &[std::net::Ipv4Addr],
) -> Option<std::net::Ipv4Addr> {
    subnet.pinned().find(|ip| !taken.contains(ip))
}

/// The run spec of a node or load balancer on `host`.
pub fn create_body(spec: &Spec, host: &Host) -> ContainerCreateBody {
    let mut labels = HashMap::from([
        (CLUSTER_LABEL.to_string(), spec.cluster.clone()),
        (ROLE_LABEL.to_string(), spec.role.label().to_string()),
        (
            OWNER_LABEL.to_string(),
            owner(&spec.namespace, &spec.cluster),
        ),
    ]);
    labels.extend(spec.labels.clone());
    let publish = |address: &str| {
        HashMap::from([(
            API_SERVER_PORT.to_string(),
            Some(vec![PortBinding {
                host_ip: Some(address.into()),
                host_port: Some("0".into()),
            }]),
        )])
    };
    let port_bindings = match spec.role {
        Role::ControlPlane => Some(publish("127.0.0.1")),
        Role::LoadBalancer => Some(publish("0.0.0.0")),
        Role::Worker => None,
    };
    // kind's nodes need device-mapper on btrfs and zfs, and read the host's kernel modules.
    let device_mapper = spec.privileged && matches!(host.storage_driver.as_str(), "btrfs" | "zfs");
    let binds: Vec<String> = device_mapper
        .then(|| "/dev/mapper:/dev/mapper:ro".to_string())
        .into_iter()
        .chain(spec.mounts.iter().map(|m| host.bind(m)))
        .chain(
            (spec.privileged && host.lib_modules)
                .then(|| host.bind(&Mount::read_only("/lib/modules"))),
        )
        .collect();
    let mut env = Vec::new();
    if spec.role == Role::ControlPlane {
        env.push("KUBECONFIG=/etc/kubernetes/admin.conf".to_string());
    }
    env.extend(host.proxy_env(&spec.name));
    ContainerCreateBody {
        image: Some(spec.image.clone()),
        hostname: Some(spec.name.clone()),
        tty: Some(spec.privileged),
        labels: Some(labels),
        env: (!env.is_empty()).then_some(env),
        volumes: (spec.role != Role::LoadBalancer)
            .then(|| HashMap::from([("/var".to_string(), HashMap::new())])),
        exposed_ports: port_bindings
            .as_ref()
            .map(|p| p.keys().map(|k| (k.clone(), HashMap::new())).collect()),
        host_config: Some(HostConfig {
            network_mode: Some(NETWORK.into()),
            privileged: Some(spec.privileged),
            security_opt: spec
                .privileged
                .then(|| vec!["seccomp=unconfined".into(), "apparmor=unconfined".into()]),
            tmpfs: Some(HashMap::from([
                ("/tmp".to_string(), String::new()),
                ("/run".to_string(), String::new()),
            ])),
            port_bindings,
            binds: (!binds.is_empty()).then_some(binds),
            restart_policy: Some(RestartPolicy {
                name: Some(RestartPolicyNameEnum::ON_FAILURE),
                maximum_retry_count: Some(1),
            }),
            cgroupns_mode: (spec.role != Role::LoadBalancer)
                .then_some(HostConfigCgroupnsModeEnum::PRIVATE),
            init: Some(false),
            userns_mode: host.userns_remap.then(|| "host".to_string()),
            // Rootless Engines do not give privileged containers /dev/fuse (fuse-overlayfs).
            devices: host.rootless.then(|| {
                vec![DeviceMapping {
                    path_on_host: Some("/dev/fuse".into()),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

impl Mount {
    /// A host path bound at the same path, read-only.
    pub fn read_only(path: &str) -> Mount {
        Mount {
            source: path.into(),
            target: path.into(),
            read_only: true,
        }
    }
}

/// capictl's owner label value: `<namespace>/<cluster>`.
pub fn owner(namespace: &str, cluster: &str) -> String {
    format!("{namespace}/{cluster}")
}

/// The names of the cluster's containers of a role, found by kind's labels and capictl's
/// owner label (so that a kind cluster or a same-named cluster elsewhere is never taken).
pub async fn find(
    docker: &Docker,
    namespace: &str,
    cluster: &str,
    role: Role,
) -> Result<Vec<String>, DockerError> {
    use bollard::query_parameters::ListContainersOptions;
    let filters = HashMap::from([(
        "label".to_string(),
        vec![
            format!("{CLUSTER_LABEL}={cluster}"),
            format!("{ROLE_LABEL}={}", role.label()),
            format!("{OWNER_LABEL}={}", owner(namespace, cluster)),
        ],
    )]);
    let listed = docker
        .list_containers(Some(ListContainersOptions {
            all: true,
            filters: Some(filters),
            ..Default::default()
        }))
        .await?;
    let mut names: Vec<String> = listed
        .iter()
        .filter_map(|c| {
            c.names
                .as_ref()?
                .first()
                .map(|n| n.trim_start_matches('/').to_string())
        })
        .collect();
    names.sort();
    Ok(names)
}

/// `preferred` when no container has that name, else `<namespace>-<preferred>` (two clusters
/// of one name in two namespaces, or a kind cluster, cannot both have `<name>-lb`).
pub async fn free_name(
    docker: &Docker,
    preferred: &str,
    namespace: &str,
) -> Result<String, DockerError> {
    if inspect(docker, preferred).await?.is_none() {
        return Ok(preferred.to_string());
    }
    Ok(format!("{namespace}-{preferred}"))
}

/// Creates and starts the container; one that cannot start is removed again (CAPD does the
/// same: a half-made container would be found and taken for the machine).
///
/// On a network made by [`ensure_network`] the container is pinned to a free address of the
/// network's upper half. Docker gives a restarted container the lowest free address otherwise,
/// and a node's address is in its certificates, its etcd member's peer URL, the load
/// balancer's backends and the Cluster's endpoint: a node restarted after another container
/// went away would come back unreachable.
pub async fn create_and_start(docker: &Docker, spec: &Spec) -> Result<(), DockerError> {
    // One choice at a time in this process: a created container holds its address in its
    // configuration, so the next choice sees it. Another process choosing the same address
    // makes the start fail with "Address already in use", and the next free one is tried.
    static PINNING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let subnet = pinning_subnet(docker).await?;
    let host = Host::read(docker).await?;
    let mut attempts = 0;
    loop {
        attempts += 1;
        let pinning = PINNING.lock().await;
        let address = match subnet {
            Some(subnet) => Some(
                free_pinned_address(subnet, &taken_addresses(docker).await?).ok_or_else(|| {
                    DockerError::Exec(format!(
                        "no free address left in the upper half of the {NETWORK} network ({subnet})"
                    ))
                })?,
            ),
            None => None,
        };
        let mut body = create_body(spec, &host);
        body.networking_config = address.map(|ip| NetworkingConfig {
            endpoints_config: Some(HashMap::from([(
                NETWORK.to_string(),
                EndpointSettings {
                    ipam_config: Some(EndpointIpamConfig {
                        ipv4_address: Some(ip.to_string()),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            )])),
        });
        docker
            .create_container(
                Some(CreateContainerOptions {
                    name: Some(spec.name.clone()),
                    ..Default::default()
                }),
                body,
            )
            .await?;
        drop(pinning);
        match docker
            .start_container(
                &spec.name,
                None::<bollard::query_parameters::StartContainerOptions>,
            )
            .await
        {
            Ok(()) => return Ok(()),
            Err(e) => {
                let _ = remove(docker, &spec.name).await;
                let raced = address.is_some() && e.to_string().contains("Address already in use");
                if !raced || attempts >= 5 {
                    return Err(e.into());
                }
            }
        }
    }
}

/// Removes a container and its volumes, and the containers and volumes of the Pods a node
/// container ran; one that is not there is fine.
///
/// The node goes first, so its kubelet cannot start a Pod container behind the sweep; a
/// create the kubelet had in flight when it stopped can still land at the Engine, so the
/// sweep repeats until a listing made after a pause finds nothing.
pub async fn remove(docker: &Docker, name: &str) -> Result<(), DockerError> {
    use bollard::query_parameters::{ListContainersOptions, ListVolumesOptions};
    let pods = HashMap::from([(
        "label".to_string(),
        vec![format!("{POD_NODE_LABEL}={name}")],
    )]);
    remove_one(docker, name).await?;
    let mut swept_empty = false;
    for _ in 0..10 {
        let pod_containers = docker
            .list_containers(Some(ListContainersOptions {
                all: true,
                filters: Some(pods.clone()),
                ..Default::default()
            }))
            .await?;
        if pod_containers.is_empty() && swept_empty {
            break;
        }
        swept_empty = pod_containers.is_empty();
        for id in pod_containers.into_iter().filter_map(|c| c.id) {
            remove_one(docker, &id).await?;
        }
        tokio::time::sleep(IN_FLIGHT_CREATE).await;
    }
    let volumes = docker
        .list_volumes(Some(ListVolumesOptions {
            filters: Some(pods),
        }))
        .await?;
    for volume in volumes.volumes.into_iter().flatten() {
        match docker
            .remove_volume(
                &volume.name,
                None::<bollard::query_parameters::RemoveVolumeOptions>,
            )
            .await
        {
            Ok(())
            | Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// How long a create the stopped kubelet sent may take to land at the Engine.
const IN_FLIGHT_CREATE: std::time::Duration = std::time::Duration::from_millis(300);

async fn remove_one(docker: &Docker, name: &str) -> Result<(), DockerError> {
    match docker
        .remove_container(
            name,
            Some(RemoveContainerOptions {
                force: true,
                v: true,
                ..Default::default()
            }),
        )
        .await
    {
        Ok(()) => Ok(()),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The host's Engine socket, to mount into capictl's node containers for their kubelet: the
/// one `DOCKER_HOST` names, or the default; None when the Engine is not reached through a
/// socket of this host.
pub fn host_engine_socket() -> Option<String> {
    let path = match std::env::var("DOCKER_HOST") {
        Ok(host) => host.strip_prefix("unix://")?.to_string(),
        Err(_) => "/var/run/docker.sock".to_string(),
    };
    std::path::Path::new(&path).exists().then_some(path)
}

/// A container's inspection; None when there is no such container.
pub async fn inspect(
    docker: &Docker,
    name: &str,
) -> Result<Option<bollard::models::ContainerInspectResponse>, DockerError> {
    match docker
        .inspect_container(name, None::<InspectContainerOptions>)
        .await
    {
        Ok(c) => Ok(Some(c)),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The container's IPv4 address on its first network (CAPD's `GetContainerIPs`).
pub fn ip_of(inspected: &bollard::models::ContainerInspectResponse) -> Option<String> {
    inspected
        .network_settings
        .as_ref()?
        .networks
        .as_ref()?
        .values()
        .find_map(|n| n.ip_address.clone().filter(|ip| !ip.is_empty()))
}

/// The host port a container publishes `port` (`6443/tcp`) on.
pub fn host_port_of(
    inspected: &bollard::models::ContainerInspectResponse,
    port: &str,
) -> Option<u16> {
    inspected
        .network_settings
        .as_ref()?
        .ports
        .as_ref()?
        .get(port)
        .cloned()
        .flatten()
        .into_iter()
        .flatten()
        .find_map(|b| b.host_port.and_then(|p| p.parse().ok()))
}

/// The container of a Machine: its name, or `<cluster>-<name>` when it does not start with the
/// cluster's name (CAPD's `MachineContainerName`).
pub fn machine_container(cluster: &str, machine: &str) -> String {
    if machine.starts_with(cluster) {
        machine.to_string()
    } else {
        format!("{cluster}-{machine}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(role: Role, privileged: bool) -> Spec {
        Spec {
            name: "c1-cp-abc".into(),
            namespace: "default".into(),
            cluster: "c1".into(),
            role,
            image: "capictl/node:v1.28.13".into(),
            privileged,
            labels: HashMap::from([("io.x-k8s.cluster.failureDomain".into(), "fd1".into())]),
            mounts: vec![],
        }
    }

    fn plain_host() -> Host {
        Host {
            storage_driver: "overlay2".into(),
            lib_modules: true,
            ..Default::default()
        }
    }

    #[test]
    fn the_run_spec_is_capds_without_privileges_for_capictls_image() {
        let body = create_body(&spec(Role::ControlPlane, false), &plain_host());
        let host = body.host_config.clone().unwrap();
        assert_eq!(host.privileged, Some(false));
        assert_eq!(host.security_opt, None);
        assert_eq!(host.network_mode.as_deref(), Some(NETWORK));
        let published = host.port_bindings.unwrap()[API_SERVER_PORT]
            .clone()
            .unwrap();
        assert_eq!(published[0].host_ip.as_deref(), Some("127.0.0.1"));
        let labels = body.labels.unwrap();
        assert_eq!(labels[CLUSTER_LABEL], "c1");
        assert_eq!(labels[ROLE_LABEL], "control-plane");
        assert_eq!(labels[OWNER_LABEL], "default/c1");
        assert_eq!(labels["io.x-k8s.cluster.failureDomain"], "fd1");
        assert!(body.volumes.unwrap().contains_key("/var"));
        assert_eq!(host.tmpfs.unwrap().len(), 2);
        assert_eq!(host.restart_policy.unwrap().maximum_retry_count, Some(1));
        assert_eq!(host.binds, None, "no /lib/modules for capictl's image");
        let worker = create_body(&spec(Role::Worker, false), &plain_host());
        assert!(
            worker.host_config.unwrap().port_bindings.is_none(),
            "workers publish nothing"
        );
    }

    /// The contract with upstream for `kindest/node`: the Engine API body CAPD v1.14 sends
    /// (`test/infrastructure/docker/internal/docker/manager.go` `createNode` and
    /// `test/infrastructure/container/docker.go` `RunContainer`), field by field, on the wire.
    /// The one addition is capictl's owner label, which finds a cluster's containers by
    /// namespace as well as name.
    #[test]
    fn a_kindest_node_is_created_as_capd_creates_it() {
        let node = Spec {
            name: "c1-control-plane-x7k2p".into(),
            image: "kindest/node:v1.31.0".into(),
            ..spec(Role::ControlPlane, true)
        };
        let body = serde_json::to_value(create_body(&node, &plain_host())).unwrap();
        let capd = serde_json::json!({
            "Tty": true,
            "Hostname": "c1-control-plane-x7k2p",
            "Image": "kindest/node:v1.31.0",
            "Labels": {
                "io.x-k8s.kind.cluster": "c1",
                "io.x-k8s.kind.role": "control-plane",
                "io.x-k8s.cluster.failureDomain": "fd1",
                OWNER_LABEL: "default/c1",
            },
            "Env": ["KUBECONFIG=/etc/kubernetes/admin.conf"],
            "Volumes": {"/var": {}},
            "ExposedPorts": {"6443/tcp": {}},
            "HostConfig": {
                "Privileged": true,
                "SecurityOpt": ["seccomp=unconfined", "apparmor=unconfined"],
                "NetworkMode": "kind",
                "Tmpfs": {"/tmp": "", "/run": ""},
                "PortBindings": {"6443/tcp": [{"HostIp": "127.0.0.1", "HostPort": "0"}]},
                "RestartPolicy": {"Name": "on-failure", "MaximumRetryCount": 1},
                "Init": false,
                "CgroupnsMode": "private",
                "Binds": ["/lib/modules:/lib/modules:ro"],
            },
        });
        assert_eq!(body, capd);
        let worker = serde_json::to_value(create_body(
            &Spec {
                role: Role::Worker,
                ..node.clone()
            },
            &plain_host(),
        ))
        .unwrap();
        assert_eq!(
            worker["Env"],
            serde_json::Value::Null,
            "only control planes get KUBECONFIG"
        );
        assert_eq!(worker["ExposedPorts"], serde_json::Value::Null);
        assert_eq!(
            worker["HostConfig"]["PortBindings"],
            serde_json::Value::Null
        );
        assert_eq!(worker["Labels"]["io.x-k8s.kind.role"], "worker");
    }

    /// What CAPD adds for the Engine's host: device-mapper on btrfs, SELinux relabelling of
    /// every bind, the host's user namespace under userns-remap, `/dev/fuse` when rootless,
    /// and the controller's proxy with the cluster kept out of it.
    #[test]
    fn a_kindest_node_gets_what_capd_adds_for_its_host() {
        let host = Host {
            storage_driver: "btrfs".into(),
            userns_remap: true,
            rootless: true,
            selinux_enforcing: true,
            lib_modules: true,
            proxy: vec![
                ("HTTP_PROXY", "http://proxy:3128".into()),
                ("NO_PROXY", "example.com".into()),
            ],
            network_subnets: vec!["172.18.0.0/16".into()],
        };
        let node = Spec {
            mounts: vec![Mount {
                source: "/data".into(),
                target: "/mnt/data".into(),
                read_only: true,
            }],
            ..spec(Role::ControlPlane, true)
        };
        let body = serde_json::to_value(create_body(&node, &host)).unwrap();
        let no_proxy = "172.18.0.0/16,example.com,c1-cp-abc,.svc,.svc.cluster,.svc.cluster.local";
        assert_eq!(
            body["Env"],
            serde_json::json!([
                "KUBECONFIG=/etc/kubernetes/admin.conf",
                "HTTP_PROXY=http://proxy:3128",
                "http_proxy=http://proxy:3128",
                format!("NO_PROXY={no_proxy}"),
                format!("no_proxy={no_proxy}"),
            ])
        );
        let host_config = &body["HostConfig"];
        assert_eq!(
            host_config["Binds"],
            serde_json::json!([
                "/dev/mapper:/dev/mapper:ro",
                "/data:/mnt/data:Z,ro",
                "/lib/modules:/lib/modules:Z,ro"
            ])
        );
        assert_eq!(host_config["UsernsMode"], "host");
        assert_eq!(
            host_config["Devices"],
            serde_json::json!([{"PathOnHost": "/dev/fuse"}])
        );
        let unprivileged = create_body(&spec(Role::Worker, false), &host);
        assert_eq!(
            unprivileged.host_config.unwrap().binds,
            None,
            "device-mapper and kernel modules are kind's needs, not capictl's nodes'"
        );
        let without_proxy = Host {
            proxy: vec![],
            ..host
        };
        assert_eq!(
            create_body(&node, &without_proxy).env,
            Some(vec!["KUBECONFIG=/etc/kubernetes/admin.conf".to_string()])
        );
    }

    #[test]
    fn docker_keeps_the_lower_half_and_capictl_pins_in_the_upper() {
        let subnet = Subnet::parse("172.18.0.0/16").unwrap();
        assert_eq!(subnet.lower_half().unwrap().to_string(), "172.18.0.0/17");
        let pinned: Vec<_> = subnet.pinned().collect();
        assert_eq!(pinned.first().unwrap().to_string(), "172.18.128.0");
        assert_eq!(pinned.last().unwrap().to_string(), "172.18.255.254");
        assert_eq!(pinned.len(), 32_767);
        // A host part in the written subnet is dropped, as Docker does.
        assert_eq!(
            Subnet::parse("10.1.2.3/24").unwrap().to_string(),
            "10.1.2.0/24"
        );
        for bad in ["172.18.0.0", "172.18.0.0/33", "x/16"] {
            assert_eq!(Subnet::parse(bad), None, "{bad}");
        }
        // Too small to share: nothing is pinned.
        let tiny = Subnet::parse("10.0.0.0/30").unwrap();
        assert_eq!(tiny.lower_half(), None);
        assert_eq!(tiny.pinned().count(), 0);
    }

    #[test]
    fn the_first_address_nobody_holds_is_pinned() {
        let subnet = Subnet::parse("192.168.16.0/20").unwrap();
        let taken: Vec<std::net::Ipv4Addr> = ["192.168.16.2", "192.168.24.0", "192.168.24.1"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        assert_eq!(
            free_pinned_address(subnet, &taken).unwrap().to_string(),
            "192.168.24.2"
        );
    }
}
