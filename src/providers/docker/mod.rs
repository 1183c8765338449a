//! The Docker infrastructure provider: capictl's own node and load-balancer images
//! ([`images`]), the HAProxy configuration ([`haproxy`]), and what the command line needs to
//! reach a Docker workload cluster from outside the Docker network, as kind does: the
//! kubeconfig names the load balancer's address on the Docker network, which this host may not
//! route to, while the load balancer container `<cluster>-lb` also publishes the API server
//! port on 127.0.0.1.

pub mod bootstrap;
pub mod cluster;
pub mod container;
pub mod haproxy;
pub mod images;
pub mod machine;

use std::sync::Arc;

use futures::future::BoxFuture;
use kube::Client;
use kube::api::Api;
use kube::runtime::{Controller, watcher};

use crate::api::{DockerCluster, DockerMachine, Machine};
use crate::controllers::runtime::Wiring;

use bollard::Docker;

#[derive(Debug, thiserror::Error)]
pub enum DockerError {
    #[error("cannot reach the Docker Engine: {0}")]
    Engine(#[from] bollard::errors::Error),
    #[error("{0}")]
    Exec(String),
}

/// What the Docker reconcilers share: the management cluster, the Docker Engine (connected on
/// first use, so that a manager without an Engine still runs the other providers), the
/// workload clusters and the bootstraps running in this process.
pub struct DockerProvider {
    pub client: Client,
    pub shared: Arc<crate::controllers::Context>,
    engine: tokio::sync::OnceCell<Docker>,
    pub bootstraps: machine::Bootstraps,
}

impl DockerProvider {
    pub fn new(client: Client, shared: Arc<crate::controllers::Context>) -> Arc<DockerProvider> {
        Arc::new(DockerProvider {
            client,
            shared,
            engine: tokio::sync::OnceCell::new(),
            bootstraps: Default::default(),
        })
    }

    /// The Docker Engine, or what to do when it does not answer.
    pub async fn docker(&self) -> Result<Docker, String> {
        self.engine
            .get_or_try_init(|| async {
                let docker = connect().await.map_err(|e| e.to_string())?;
                docker.ping().await.map_err(|e| e.to_string())?;
                Ok::<_, String>(docker)
            })
            .await
            .cloned()
            .map_err(|e| {
                format!("the Docker Engine does not answer ({e}): start it, or set DOCKER_HOST")
            })
    }
}

/// The Docker provider's controllers: DockerClusters, and DockerMachines woken by the Machines
/// that refer to them.
pub fn controllers(w: &Wiring, ctx: Arc<DockerProvider>) -> Vec<BoxFuture<'static, ()>> {
    let clusters = Controller::new(
        Api::<DockerCluster>::all(w.client.clone()),
        watcher::Config::default(),
    );
    let machines = Controller::new(
        Api::<DockerMachine>::all(w.client.clone()),
        watcher::Config::default(),
    )
    .watches(
        Api::<Machine>::all(w.client.clone()),
        watcher::Config::default(),
        crate::controllers::runtime::infrastructure_machine_of::<DockerMachine>,
    );
    vec![
        w.run_with("dockercluster", clusters, cluster::reconcile, ctx.clone()),
        w.run_with("dockermachine", machines, machine::reconcile, ctx),
    ]
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
    Ok(
        container::inspect(&docker, &load_balancer_container(cluster))
            .await?
            .and_then(|c| container::host_port_of(&c, container::API_SERVER_PORT)),
    )
}

/// What a command run in a container printed, and its exit code.
#[derive(Clone, Debug, Default)]
pub struct ExecOutput {
    pub code: i64,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `argv` in `container` (as `docker exec -i`), feeding it `stdin`, and waits for it.
pub async fn exec(
    docker: &Docker,
    container: &str,
    argv: &[String],
    stdin: Option<&[u8]>,
) -> Result<ExecOutput, DockerError> {
    use bollard::exec::{CreateExecOptions, StartExecResults};
    use futures::StreamExt;
    use tokio::io::AsyncWriteExt;
    let created = docker
        .create_exec(
            container,
            CreateExecOptions {
                attach_stdin: Some(stdin.is_some()),
                attach_stdout: Some(true),
                attach_stderr: Some(true),
                cmd: Some(argv.to_vec()),
                ..Default::default()
            },
        )
        .await?;
    let mut out = ExecOutput::default();
    if let StartExecResults::Attached {
        mut output,
        mut input,
    } = docker.start_exec(&created.id, None).await?
    {
        if let Some(data) = stdin {
            input
                .write_all(data)
                .await
                .map_err(|e| DockerError::Engine(bollard::errors::Error::IOError { err: e }))?;
        }
        let _ = input.shutdown().await;
        drop(input);
        while let Some(chunk) = output.next().await {
            match chunk? {
                bollard::container::LogOutput::StdOut { message } => {
                    out.stdout.push_str(&String::from_utf8_lossy(&message))
                }
                bollard::container::LogOutput::StdErr { message } => {
                    out.stderr.push_str(&String::from_utf8_lossy(&message))
                }
                _ => {}
            }
        }
    }
    loop {
        let inspected = docker.inspect_exec(&created.id).await?;
        if inspected.running != Some(true) {
            out.code = inspected.exit_code.unwrap_or(-1);
            return Ok(out);
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
