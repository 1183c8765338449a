//! `capictl manager`: runs the controllers of the providers installed in the management
//! cluster a kubeconfig points at (what the Deployments `capictl init` installs run).

use std::sync::Arc;
use std::time::Duration;

use kube::client::ClientBuilder;

use crate::apiserver::admission::{Chain, webhook_router};
use crate::apiserver::listener;
use crate::apiserver::tls;
use crate::manager::{self, Options};
use crate::metrics::Metrics;
use crate::pki::KeyPairPem;
use crate::reconcile::leader::{self, LeaderElection, Term, Timings};
use crate::reconcile::metrics::{ClientMetricsLayer, ControllerMetrics, measure_webhooks};
use crate::reconcile::throttle::Throttle;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    cluster: super::connect::ClusterArgs,
    /// Elect a leader among managers on a Lease, so that only one reconciles at a time.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    leader_elect: bool,
    /// The namespace of the leader election Lease.
    #[arg(long, default_value = "capi-system", value_name = "NS")]
    leader_election_namespace: String,
    /// How long the others wait, after the leader last renewed its Lease, before one takes over
    /// (a Go duration; a bare number is seconds).
    #[arg(long, default_value = "15s", value_name = "DURATION", value_parser = super::parse_duration)]
    leader_elect_lease_duration: Duration,
    /// How long the leader keeps trying to renew its Lease before it stops leading; shorter
    /// than the lease duration, so that it stops before another may start.
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = super::parse_duration)]
    leader_elect_renew_deadline: Duration,
    /// How often candidates try to take the Lease, and the leader to renew it.
    #[arg(long, default_value = "2s", value_name = "DURATION", value_parser = super::parse_duration)]
    leader_elect_retry_period: Duration,
    /// Run only these providers' controllers (comma-separated labels: cluster-api,
    /// bootstrap-kubeadm, control-plane-kubeadm, infrastructure-in-memory) [default: all installed]
    #[arg(long, value_name = "LABELS", value_delimiter = ',')]
    providers: Vec<String>,
    /// How many objects of one kind are reconciled at once.
    #[arg(long, default_value_t = 10, value_name = "N")]
    concurrency: u16,
    /// Run the cluster autoscaler: node groups (MachineDeployments, and MachineSets of their
    /// own, with the cluster-api-autoscaler-node-group-min-size and -max-size annotations) grow
    /// for Pods no Node fits and shrink by Nodes left empty (docs/autoscaler.md).
    #[arg(long)]
    autoscaler: bool,
    /// Serve the providers' admission webhooks on this port (0: do not serve them).
    #[arg(long, default_value_t = 0, value_name = "PORT")]
    webhook_port: u16,
    /// Where the webhook serving certificate is (tls.crt, tls.key).
    #[arg(long, default_value = crate::init::WEBHOOK_CERT_DIR, value_name = "DIR")]
    webhook_cert_dir: std::path::PathBuf,
    /// Average requests per second to the API server.
    #[arg(long, default_value_t = 20.0, value_name = "QPS")]
    kube_api_qps: f64,
    /// Requests allowed at once above the average.
    #[arg(long, default_value_t = 30, value_name = "N")]
    kube_api_burst: u32,
    /// Serve Prometheus metrics on /metrics, and /healthz and /readyz, at this address
    /// (e.g. :8080 or 127.0.0.1:8080; 0: do not serve them).
    #[arg(long, default_value = "0", value_name = "ADDR")]
    metrics_bind_address: String,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let timings = Timings {
        lease_duration: args.leader_elect_lease_duration,
        renew_deadline: args.leader_elect_renew_deadline,
        retry_period: args.leader_elect_retry_period,
    };
    if args.leader_elect {
        timings.check()?;
    }
    let lease = lease_name(&args.providers);
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let config = args.cluster.config().await?;
        let controller_metrics = ControllerMetrics::new();
        let client = ClientBuilder::try_from(config)?
            .with_layer(&Throttle::new(args.kube_api_qps, args.kube_api_burst))
            .with_layer(&ClientMetricsLayer::new(controller_metrics.clone()))
            .build();
        if let Some(address) = metrics_address(&args.metrics_bind_address)? {
            let metrics = Arc::new(Metrics::default());
            metrics.register(|r| controller_metrics.register(r));
            let listener = tokio::net::TcpListener::bind(address).await.map_err(|e| {
                anyhow::anyhow!("--metrics-bind-address {}: {e}", args.metrics_bind_address)
            })?;
            eprintln!("Serving metrics on http://{address}/metrics");
            tokio::spawn(serve_metrics(listener, metrics));
        }
        if args.webhook_port != 0 {
            let server = webhook_server(&args, controller_metrics.clone()).await?;
            eprintln!("Serving admission webhooks on :{}", args.webhook_port);
            tokio::spawn(server);
        }
        let options = Options {
            concurrency: args.concurrency,
            providers: args.providers.clone(),
            metrics: controller_metrics.clone(),
            autoscaler: args.autoscaler,
        };
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let signalled = async move {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = terminate.recv() => {}
            }
        };
        if !args.leader_elect {
            controller_metrics.set_leader(lease, true);
            eprintln!("Running the controllers");
            manager::run(client, options, signalled).await;
            return Ok(());
        }
        let election = LeaderElection::new(
            client.clone(),
            &args.leader_election_namespace,
            lease,
            &leader::candidate_identity(),
            timings,
        );
        controller_metrics.set_leader(lease, false);
        eprintln!(
            "Waiting to lead (Lease {}/{lease})",
            args.leader_election_namespace
        );
        tokio::pin!(signalled);
        let term = election
            .lead(&mut signalled, |stopping| {
                controller_metrics.set_leader(lease, true);
                eprintln!(
                    "Leading as {}; running the controllers",
                    election.identity()
                );
                manager::run(client, options, stopping)
            })
            .await;
        controller_metrics.set_leader(lease, false);
        match term {
            Term::Stopped => Ok(()),
            // As controller-runtime's managers do: the process ends and is started again.
            Term::Lost => Err(anyhow::anyhow!(
                "lost the leader Lease {}/{lease}; stopping so that another manager takes over",
                args.leader_election_namespace
            )),
        }
    })
}

/// The leader election Lease of the managers running `providers` (every installed one when
/// empty): upstream's name for a single provider's manager, so that capictl's and upstream's
/// managers of one provider never lead at once.
fn lease_name(providers: &[String]) -> &'static str {
    match providers {
        [one] => match one.as_str() {
            "cluster-api" => "controller-leader-election-capi",
            "bootstrap-kubeadm" => "kubeadm-bootstrap-manager-leader-election-capi",
            "control-plane-kubeadm" => "kubeadm-control-plane-manager-leader-election-capi",
            "infrastructure-docker" => "controller-leader-election-capd",
            "infrastructure-in-memory" => "controller-leader-election-capim",
            _ => ALL_PROVIDERS_LEASE,
        },
        _ => ALL_PROVIDERS_LEASE,
    }
}

const ALL_PROVIDERS_LEASE: &str = "controller-leader-election-capictl";

/// Where `--metrics-bind-address` says to listen: `None` for "0"; a bare `:port` is every
/// address, as controller-runtime reads it.
fn metrics_address(flag: &str) -> anyhow::Result<Option<std::net::SocketAddr>> {
    if flag == "0" {
        return Ok(None);
    }
    let full = match flag.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => flag.to_string(),
    };
    full.parse().map(Some).map_err(|_| {
        anyhow::anyhow!(
            "--metrics-bind-address {flag:?} is not an address: give host:port, :port, or 0 to serve no metrics"
        )
    })
}

/// Serves /metrics, /healthz and /readyz over plain HTTP, as controller-runtime's metrics and
/// health servers do.
async fn serve_metrics(listener: tokio::net::TcpListener, metrics: Arc<Metrics>) {
    let router = axum::Router::new()
        .route(
            "/metrics",
            axum::routing::get(move || {
                let metrics = metrics.clone();
                async move { metrics.response() }
            }),
        )
        .route("/healthz", axum::routing::get(|| async { "ok" }))
        .route("/readyz", axum::routing::get(|| async { "ok" }));
    if let Err(e) = axum::serve(listener, router).await {
        tracing::warn!(error = %e, "the metrics server stopped");
    }
}

/// The admission webhook server, ready to run: the certificate is read and the port bound
/// first, so a missing file or a taken port stops the manager with a clear error.
async fn webhook_server(
    args: &Args,
    metrics: Arc<ControllerMetrics>,
) -> anyhow::Result<impl std::future::Future<Output = ()> + Send + use<>> {
    let read = |file: &str| {
        let path = args.webhook_cert_dir.join(file);
        std::fs::read_to_string(&path).map_err(|e| {
            anyhow::anyhow!(
                "reading the webhook serving certificate {}: {e}; mount the provider's webhook-service-cert Secret there or set --webhook-cert-dir",
                path.display()
            )
        })
    };
    let serving = KeyPairPem {
        cert: read("tls.crt")?,
        key: read("tls.key")?,
    };
    let config = tls::plain_server_config(&serving)?;
    let listener = tokio::net::TcpListener::bind(("0.0.0.0", args.webhook_port))
        .await
        .map_err(|e| anyhow::anyhow!("--webhook-port {}: {e}", args.webhook_port))?;
    let chain = Arc::new(Chain::default());
    crate::webhooks::register(&chain);
    Ok(listener::serve(
        listener,
        measure_webhooks(
            metrics,
            webhook_router(chain).merge(crate::apiserver::conversion::webhook_router(Arc::new(
                crate::webhooks::conversion::converters(Default::default()),
            ))),
        ),
        config,
        std::future::pending(),
    ))
}
