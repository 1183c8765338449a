//! Node and load-balancer containers as upstream's Docker provider runs them (CAPD's
//! `createNode`): named after the machine, on the `kind` network, kind's labels, `/run` and
//! `/tmp` on tmpfs, `/var` on an anonymous volume, control planes publishing 6443 on
//! 127.0.0.1, restarted once on failure. capictl's node image needs no privileges, so it gets
//! none; `kindest/node` (systemd and containerd inside) runs privileged as upstream runs it.

use std::collections::HashMap;

use bollard::Docker;
use bollard::models::{
    ContainerCreateBody, EndpointIpamConfig, EndpointSettings, HostConfig,
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
    /// `host:container[:ro]` binds.
    pub mounts: Vec<String>,
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

/// The run spec of a node or load balancer.
pub fn create_body(spec: &Spec) -> ContainerCreateBody {
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
    let mut binds = spec.mounts.clone();
    if spec.privileged && std::path::Path::new("/lib/modules").exists() {
        binds.push("/lib/modules:/lib/modules:ro".into());
    }
    ContainerCreateBody {
        image: Some(spec.image.clone()),
        hostname: Some(spec.name.clone()),
        tty: Some(spec.privileged),
        labels: Some(labels),
        env: (spec.role == Role::ControlPlane)
            .then(|| vec!["KUBECONFIG=/etc/kubernetes/admin.conf".to_string()]),
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
            ..Default::default()
        }),
        ..Default::default()
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
        let mut body = create_body(spec);
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

    #[test]
    fn the_run_spec_is_capds_without_privileges_for_capictls_image() {
        let body = create_body(&spec(Role::ControlPlane, false));
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
        let worker = create_body(&spec(Role::Worker, false));
        assert!(
            worker.host_config.unwrap().port_bindings.is_none(),
            "workers publish nothing"
        );
        let kind = create_body(&spec(Role::Worker, true)).host_config.unwrap();
        assert_eq!(kind.privileged, Some(true));
        assert_eq!(kind.security_opt.unwrap().len(), 2);
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
