//! `capictl quickstart`: the seeds' quick-start in one command, for someone who has just
//! installed capictl — the management cluster (the embedded one unless one is configured),
//! the providers (Docker where an Engine answers, else in-memory), the node images, the
//! `capi-quickstart` cluster from the built-in template, progress until it is Available, then
//! its tree and its kubeconfig in a file. Each step is the command a user would run by hand,
//! so running it again changes nothing and picks up where it stopped.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use kube::Api;

use super::UsageError;
use super::connect::ClusterArgs;
use crate::api::Cluster;
use crate::conditions;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The workload cluster's name.
    #[arg(default_value = "capi-quickstart")]
    name: String,
    /// docker or in-memory [default: docker when a Docker Engine answers, else in-memory]
    #[arg(short, long, value_name = "NAME")]
    infrastructure: Option<String>,
    /// The Kubernetes version of the cluster.
    #[arg(long, value_name = "VERSION", default_value = "v1.28.13")]
    kubernetes_version: String,
    #[arg(long, value_name = "N", default_value_t = 3)]
    control_plane_machine_count: u32,
    #[arg(long, value_name = "N", default_value_t = 3)]
    worker_machine_count: u32,
    /// The namespace of the cluster's objects.
    #[arg(short = 'n', long, value_name = "NS", default_value = "default")]
    namespace: String,
    /// Where to write the workload cluster's kubeconfig (mode 0600) [default: ./NAME.kubeconfig]
    #[arg(long, value_name = "FILE")]
    write_kubeconfig: Option<PathBuf>,
    /// Then install the providers into the cluster as Pods and move the cluster into itself, so
    /// that it manages itself (Docker, with at least one worker for the controllers' Pods).
    #[arg(long)]
    self_hosted: bool,
    /// How long to wait for the cluster to be Available.
    #[arg(long, value_name = "SECONDS", default_value_t = 600)]
    timeout: u64,
    #[command(flatten)]
    cluster: ClusterArgs,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    tokio::runtime::Runtime::new()?.block_on(quickstart(args))
}

async fn quickstart(args: Args) -> anyhow::Result<()> {
    if let Some(problem) = crate::apiserver::object::name_problem(&args.name) {
        return Err(UsageError(format!("invalid cluster name {:?}: {problem}", args.name)).into());
    }
    if args.control_plane_machine_count.is_multiple_of(2) {
        return Err(UsageError(format!(
            "--control-plane-machine-count {}: a stacked etcd needs an odd number of control-plane machines (1, 3, 5)",
            args.control_plane_machine_count
        ))
        .into());
    }
    if args.self_hosted
        && (args.worker_machine_count == 0 || args.infrastructure.as_deref() == Some("in-memory"))
    {
        return Err(UsageError(
            "--self-hosted: the providers run as Pods on the cluster's workers, so it needs the Docker provider (in-memory clusters run no Pods) and --worker-machine-count 1 or more".into(),
        )
        .into());
    }
    let started = Instant::now();
    let infrastructure = match &args.infrastructure {
        Some(name) => name.clone(),
        None => match crate::providers::docker::connect().await {
            Ok(_) => "docker".to_string(),
            Err(e) if args.self_hosted => {
                return Err(anyhow::anyhow!(
                    "--self-hosted needs the Docker Engine, which does not answer ({e})"
                ));
            }
            Err(e) => {
                eprintln!(
                    "No Docker Engine answers ({e}); using the in-memory provider, whose machines are simulated"
                );
                "in-memory".to_string()
            }
        },
    };
    let template = crate::generate::flavor(
        &infrastructure,
        if infrastructure == "docker" {
            "development"
        } else {
            ""
        },
    )
    .map_err(|e| UsageError(e.to_string()))?;

    if infrastructure == "docker" {
        eprintln!(
            "Making sure the node images for {} are here (built from Debian packages the first time, about a minute)",
            args.kubernetes_version
        );
        super::images::ensure(vec![args.kubernetes_version.clone()], false, None).await?;
    }
    super::init::init(super::init::Args::for_quickstart(
        &infrastructure,
        args.cluster.clone(),
    ))
    .await?;
    let (client, _) = args.cluster.client().await?;

    let variables = [
        ("CLUSTER_NAME", args.name.clone()),
        ("NAMESPACE", args.namespace.clone()),
        ("KUBERNETES_VERSION", args.kubernetes_version.clone()),
        (
            "CONTROL_PLANE_MACHINE_COUNT",
            args.control_plane_machine_count.to_string(),
        ),
        (
            "WORKER_MACHINE_COUNT",
            args.worker_machine_count.to_string(),
        ),
    ];
    let lookup = |key: &str| {
        variables
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var(key).ok())
    };
    let rendered = crate::generate::render(template, &args.namespace, &lookup)?;
    let objects: Vec<serde_json::Value> = crate::yaml::from_multiple(&rendered)?;
    eprintln!(
        "Creating Cluster {}/{} ({infrastructure}, {}, {} control plane and {} worker machines)",
        args.namespace,
        args.name,
        args.kubernetes_version,
        args.control_plane_machine_count,
        args.worker_machine_count
    );
    for object in objects.iter().filter(|o| o.is_object()) {
        super::init::apply(&client, object).await?;
    }

    let clusters: Api<Cluster> = Api::namespaced(client.clone(), &args.namespace);
    wait_until_available(&clusters, &args.name, Duration::from_secs(args.timeout)).await?;
    print!(
        "{}",
        super::describe::tree(&client, &args.namespace, &args.name).await?
    );
    let path = args
        .write_kubeconfig
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("{}.kubeconfig", args.name)));
    let kubeconfig = super::get::read_kubeconfig(&client, &args.namespace, &args.name).await?;
    super::get::write_private(&path, &kubeconfig)?;
    if args.self_hosted {
        let itself = ClusterArgs {
            kubeconfig: Some(path.clone()),
            kubeconfig_context: None,
        };
        eprintln!(
            "Installing the providers into {} as Pods of {}",
            args.name,
            crate::build_info::controller_image()
        );
        super::init::init(super::init::Args::for_quickstart(
            &infrastructure,
            itself.clone(),
        ))
        .await?;
        eprintln!(
            "Moving Cluster {}/{} into itself",
            args.namespace, args.name
        );
        super::r#move::move_clusters(
            &args.cluster,
            &itself,
            &args.namespace,
            vec![args.name.clone()],
        )
        .await?;
        eprintln!(
            "\nCluster {} manages itself, {:.0?} after the start: its own providers run in it as Pods. Its kubeconfig is in {}:\n\n  kubectl --kubeconfig {} get clusters,machines\n\nScale or upgrade it there; move it back out with `capictl move --kubeconfig {} --to-kubeconfig <a management cluster>`.",
            args.name,
            started.elapsed(),
            path.display(),
            path.display(),
            path.display()
        );
        return Ok(());
    }
    eprintln!(
        "\nCluster {} is Available after {:.0?}. Its kubeconfig is in {}:\n\n  kubectl --kubeconfig {} get nodes\n\nFollow it with `capictl describe cluster {} --show-conditions all`; remove it with `kubectl delete cluster {}`. The management cluster keeps running (`capictl management status`).",
        args.name,
        started.elapsed(),
        path.display(),
        path.display(),
        args.name,
        args.name
    );
    Ok(())
}

/// Waits with a spinner saying how far the cluster is, until its Available condition is True.
async fn wait_until_available(
    clusters: &Api<Cluster>,
    name: &str,
    timeout: Duration,
) -> anyhow::Result<()> {
    let spinner = indicatif::ProgressBar::new_spinner();
    spinner.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    spinner.enable_steady_tick(Duration::from_millis(120));
    let started = Instant::now();
    let mut last = String::from("waiting for the Cluster's first status");
    loop {
        if let Some(cluster) = clusters.get_opt(name).await? {
            let status = cluster.status.unwrap_or_default();
            let list = status.conditions.unwrap_or_default();
            if conditions::is_true(&list, conditions::types::AVAILABLE) {
                spinner.finish_and_clear();
                return Ok(());
            }
            last = progress(
                status.phase.as_deref(),
                status.control_plane.as_ref(),
                status.workers.as_ref(),
            );
        }
        if started.elapsed() > timeout {
            spinner.finish_and_clear();
            anyhow::bail!(
                "Cluster {name} is not Available after {}s ({last}); `capictl describe cluster {name} --show-conditions all` says what it waits for",
                timeout.as_secs()
            );
        }
        spinner.set_message(format!("{:.0?} {last}", started.elapsed()));
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// One line on how far a cluster is: its phase and its Ready machines.
fn progress(
    phase: Option<&str>,
    control_plane: Option<&crate::api::cluster::ReplicasSummary>,
    workers: Option<&crate::api::cluster::ReplicasSummary>,
) -> String {
    let count = |s: Option<&crate::api::cluster::ReplicasSummary>| {
        let s = s.cloned().unwrap_or_default();
        format!(
            "{}/{}",
            s.ready_replicas.unwrap_or(0),
            s.desired_replicas.unwrap_or(0)
        )
    };
    format!(
        "{}: control plane {} Ready, workers {} Ready",
        phase.unwrap_or("Pending"),
        count(control_plane),
        count(workers)
    )
}

#[cfg(test)]
mod tests {
    use crate::api::cluster::ReplicasSummary;

    #[test]
    fn progress_says_how_many_machines_are_ready() {
        let cp = ReplicasSummary {
            desired_replicas: Some(3),
            ready_replicas: Some(1),
            ..Default::default()
        };
        assert_eq!(
            super::progress(Some("Provisioned"), Some(&cp), None),
            "Provisioned: control plane 1/3 Ready, workers 0/0 Ready"
        );
        assert_eq!(
            super::progress(None, None, None),
            "Pending: control plane 0/0 Ready, workers 0/0 Ready"
        );
    }
}
