//! The Docker infrastructure provider: capictl's own node and load-balancer images
//! ([`images`]), the HAProxy configuration ([`haproxy`]), and what the command line needs to
//! reach a Docker workload cluster from outside the Docker network, as kind does: the
//! kubeconfig names the load balancer's address on the Docker network, which this host may not
//! route to, while the load balancer container `<cluster>-lb` also publishes the API server
//! port on 127.0.0.1.

pub mod haproxy;
pub mod images;

use bollard::Docker;
use bollard::query_parameters::InspectContainerOptions;

/// The API server port inside the load balancer container.
const API_SERVER_PORT: &str = "6443/tcp";

#[derive(Debug, thiserror::Error)]
pub enum DockerError {
    #[error("cannot reach the Docker Engine: {0}")]
    Engine(#[from] bollard::errors::Error),
}

/// The local Docker Engine (DOCKER_HOST, else its socket), speaking its API version, whichever
/// it is (bollard's default is newer than many Engines in use).
pub async fn connect() -> Result<Docker, bollard::errors::Error> {
    Docker::connect_with_local_defaults()?
        .negotiate_version()
        .await
}

/// The name of a Cluster's load balancer container, as upstream's Docker provider names it.
pub fn load_balancer_container(cluster: &str) -> String {
    format!("{cluster}-lb")
}

/// The port on this host that the Cluster's load balancer container publishes the API server
/// on; None when there is no such container here or it publishes nothing.
pub async fn load_balancer_host_port(cluster: &str) -> Result<Option<u16>, DockerError> {
    let docker = connect().await?;
    let inspected = match docker
        .inspect_container(
            &load_balancer_container(cluster),
            None::<InspectContainerOptions>,
        )
        .await
    {
        Ok(c) => c,
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    Ok(inspected
        .network_settings
        .and_then(|n| n.ports)
        .and_then(|ports| ports.get(API_SERVER_PORT).cloned().flatten())
        .into_iter()
        .flatten()
        .find_map(|b| b.host_port.and_then(|p| p.parse().ok())))
}
