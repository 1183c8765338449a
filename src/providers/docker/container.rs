//! Node and load-balancer containers as upstream's Docker provider runs them (CAPD's
//! `createNode`): named after the machine, on the `kind` network, kind's labels, `/run` and
//! `/tmp` on tmpfs, `/var` on an anonymous volume, control planes publishing 6443 on
//! 127.0.0.1, restarted once on failure. capictl's node image needs no privileges, so it gets
//! none; `kindest/node` (systemd and containerd inside) runs privileged as upstream runs it.

use std::collections::HashMap;

use bollard::Docker;
use bollard::models::{
    ContainerCreateBody, HostConfig, HostConfigCgroupnsModeEnum, NetworkCreateRequest, PortBinding,
    RestartPolicy, RestartPolicyNameEnum,
};
use bollard::query_parameters::{
    CreateContainerOptions, InspectContainerOptions, RemoveContainerOptions,
};

use super::DockerError;

/// The network every node and load balancer joins (kind's; CAPD never creates it, capictl
/// does when it is missing).
pub const NETWORK: &str = "kind";
/// kind's labels, which CAPD finds containers by.
pub const CLUSTER_LABEL: &str = "io.x-k8s.kind.cluster";
pub const ROLE_LABEL: &str = "io.x-k8s.kind.role";
/// capictl's own: `<namespace>/<cluster>`, so that clusters of one name in two namespaces (or
/// a kind cluster) never share containers.
pub const OWNER_LABEL: &str = "io.x-k8s.capictl.cluster";
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

/// Creates the `kind` network unless it exists.
pub async fn ensure_network(docker: &Docker) -> Result<(), DockerError> {
    match docker
        .inspect_network(
            NETWORK,
            None::<bollard::query_parameters::InspectNetworkOptions>,
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => {
            let request = NetworkCreateRequest {
                name: NETWORK.into(),
                driver: Some("bridge".into()),
                ..Default::default()
            };
            match docker.create_network(request).await {
                Ok(_) => Ok(()),
                // Created by someone else meanwhile.
                Err(bollard::errors::Error::DockerResponseServerError {
                    status_code: 409, ..
                }) => Ok(()),
                Err(e) => Err(e.into()),
            }
        }
        Err(e) => Err(e.into()),
    }
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
pub async fn create_and_start(docker: &Docker, spec: &Spec) -> Result<(), DockerError> {
    docker
        .create_container(
            Some(CreateContainerOptions {
                name: Some(spec.name.clone()),
                ..Default::default()
            }),
            create_body(spec),
        )
        .await?;
    if let Err(e) = docker
        .start_container(
            &spec.name,
            None::<bollard::query_parameters::StartContainerOptions>,
        )
        .await
    {
        let _ = remove(docker, &spec.name).await;
        return Err(e.into());
    }
    Ok(())
}

/// Removes a container and its volumes; one that is not there is fine.
pub async fn remove(docker: &Docker, name: &str) -> Result<(), DockerError> {
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
}
