//! `capictl move`: Clusters and everything that belongs to them to another management cluster
//! (`--to-kubeconfig`), saved to a directory (`--to-directory`) or restored from one
//! (`--from-directory`, into the cluster `--kubeconfig` names), or taken over from another
//! management cluster that claims them (`--take-over`). The plan goes to stdout; the steps and
//! a progress bar to stderr.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

use super::UsageError;
use super::connect::ClusterArgs;
use crate::mover::graph::{ObjectRef, Plan};
use crate::mover::{self, Endpoint, Options, Outcome, Progress as _, directory, take_over};

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("destination").args(["to_kubeconfig", "to_directory", "from_directory", "take_over"])))]
pub struct Args {
    /// The target management cluster's kubeconfig.
    #[arg(long, value_name = "PATH")]
    to_kubeconfig: Option<PathBuf>,
    /// The context of --to-kubeconfig to use [default: its current one]
    #[arg(long, value_name = "NAME", requires = "to_kubeconfig")]
    to_kubeconfig_context: Option<String>,
    /// Save the objects to this directory (one YAML file each) and leave the source running.
    #[arg(long, value_name = "DIR")]
    to_directory: Option<PathBuf>,
    /// Restore objects saved with --to-directory into the management cluster --kubeconfig names.
    #[arg(long, value_name = "DIR")]
    from_directory: Option<PathBuf>,
    /// Make the management cluster --kubeconfig names the one that reconciles these Clusters,
    /// taking their workload clusters from the management cluster that claims them now (one
    /// gone for good, or that must stop: it leaves them alone from then on).
    #[arg(long)]
    take_over: bool,
    /// The namespace of the Clusters to move [default: the kubeconfig context's, else default]
    #[arg(short, long, value_name = "NS")]
    namespace: Option<String>,
    /// Move only these Clusters and what belongs to them [default: every Cluster in the namespace]
    #[arg(long = "cluster", value_name = "NAME", value_delimiter = ',')]
    clusters: Vec<String>,
    /// Print what would move and check the target, changing nothing anywhere.
    #[arg(long)]
    dry_run: bool,
    /// Move even when some objects cannot be (an owner of theirs does not move): they stay in
    /// the source.
    #[arg(long)]
    force: bool,
    /// The source management cluster (the target, with --from-directory).
    #[command(flatten)]
    cluster: ClusterArgs,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    tokio::runtime::Runtime::new()?.block_on(run_async(args))
}

/// The steps on stderr, and a bar for each phase over objects.
#[derive(Default)]
struct Shown {
    bar: Mutex<Option<indicatif::ProgressBar>>,
}

impl mover::Progress for Shown {
    fn step(&self, line: &str) {
        match self.bar.lock().unwrap().as_ref() {
            Some(bar) => bar.println(line),
            None => eprintln!("{line}"),
        }
    }

    fn phase(&self, what: &str, total: usize) {
        eprintln!("{what}");
        let bar = indicatif::ProgressBar::new(total as u64).with_style(
            indicatif::ProgressStyle::with_template("  [{bar:30}] {pos}/{len} {wide_msg}")
                .expect("a valid template")
                .progress_chars("=> "),
        );
        *self.bar.lock().unwrap() = Some(bar);
    }

    fn object(&self, verb: &str, object: &ObjectRef) {
        if let Some(bar) = self.bar.lock().unwrap().as_ref() {
            bar.set_message(format!("{verb} {object}"));
            bar.inc(1);
        }
    }

    fn phase_done(&self) {
        if let Some(bar) = self.bar.lock().unwrap().take() {
            bar.finish_and_clear();
        }
    }
}

async fn endpoint(args: &ClusterArgs) -> anyhow::Result<(Endpoint, String)> {
    let config = args.config().await?;
    let name = config.cluster_url.to_string();
    let namespace = config.default_namespace.clone();
    let client = kube::Client::try_from(config)?;
    Ok((
        Endpoint {
            client,
            name: name.trim_end_matches('/').to_string(),
        },
        namespace,
    ))
}

async fn run_async(args: Args) -> anyhow::Result<()> {
    let shown = Shown::default();
    if let Some(dir) = &args.from_directory {
        if !args.clusters.is_empty() || args.namespace.is_some() {
            return Err(UsageError(
                "--from-directory restores every object the directory holds, in the namespaces it names; drop --cluster and --namespace".into(),
            )
            .into());
        }
        let (target, _) = endpoint(&args.cluster).await?;
        let plan = directory::from_directory(&target, dir, args.dry_run, &shown).await?;
        let verb = if args.dry_run {
            "would be restored"
        } else {
            "restored"
        };
        print_plan(&plan, args.dry_run, &format!("{verb} into {}", target.name));
        return Ok(());
    }
    let (source, context_namespace) = endpoint(&args.cluster).await?;
    let options = Options {
        namespace: args.namespace.clone().unwrap_or(context_namespace),
        clusters: args.clusters.clone(),
        dry_run: args.dry_run,
        force: args.force,
    };
    if args.take_over {
        let taken = take_over::take_over(&source, &options, &shown).await?;
        for t in taken {
            let verb = if args.dry_run {
                "would take over"
            } else {
                "took over"
            };
            match t.from {
                Some(from) => println!(
                    "Cluster {}: {verb} from management cluster {from}",
                    t.cluster
                ),
                None => println!("Cluster {}: {verb} (claimed by no other)", t.cluster),
            }
        }
        return Ok(());
    }
    if let Some(dir) = &args.to_directory {
        let files = directory::to_directory(&source, dir, &options, &shown).await?;
        if args.dry_run {
            for f in files {
                println!("would write {}", f.display());
            }
        } else {
            println!("Saved {} objects to {}", files.len(), dir.display());
        }
        return Ok(());
    }
    let Some(to) = &args.to_kubeconfig else {
        if args.dry_run {
            shown.step("Performing move...");
            let discovered = mover::discover(&source, &options, &Default::default()).await?;
            print_plan(&discovered.plan, true, "would move");
            return Ok(());
        }
        return Err(UsageError(
            "please specify a target cluster using the --to-kubeconfig flag when not using --dry-run, --to-directory or --from-directory".into(),
        )
        .into());
    };
    let (target, _) = endpoint(&ClusterArgs {
        kubeconfig: Some(to.clone()),
        kubeconfig_context: args.to_kubeconfig_context.clone(),
    })
    .await?;
    match mover::move_to_cluster(&source, &target, &options, &shown).await? {
        Outcome::Finished => println!("Finished the unfinished move to {}", target.name),
        Outcome::Moved(plan) => {
            let verb = if args.dry_run { "would move" } else { "moved" };
            print_plan(&plan, args.dry_run, &format!("{verb} to {}", target.name));
        }
    }
    Ok(())
}

/// Moves these Clusters of `namespace` and what belongs to them from one management cluster to
/// another, as `capictl move --to-kubeconfig` does (for `quickstart --self-hosted`).
pub(super) async fn move_clusters(
    from: &ClusterArgs,
    to: &ClusterArgs,
    namespace: &str,
    clusters: Vec<String>,
) -> anyhow::Result<()> {
    let shown = Shown::default();
    let (source, _) = endpoint(from).await?;
    let (target, _) = endpoint(to).await?;
    let options = Options {
        namespace: namespace.to_string(),
        clusters,
        dry_run: false,
        force: false,
    };
    if let Outcome::Moved(plan) = mover::move_to_cluster(&source, &target, &options, &shown).await?
    {
        print_plan(&plan, false, &format!("moved to {}", target.name));
    }
    Ok(())
}

/// What moved (`done`: "moved to …", "would move", …) by Cluster and kind; with `dry_run`,
/// every object and what stays and why.
fn print_plan(plan: &Plan, dry_run: bool, done: &str) {
    let mut by_kind: BTreeMap<&str, usize> = BTreeMap::new();
    for n in plan.nodes() {
        *by_kind.entry(n.object.kind.as_str()).or_default() += 1;
    }
    let clusters: Vec<String> = plan.core("Cluster").iter().map(ObjectRef::key).collect();
    println!(
        "{} objects of {} Cluster{} ({}) {done}:",
        plan.len(),
        clusters.len(),
        if clusters.len() == 1 { "" } else { "s" },
        clusters.join(", ")
    );
    for (kind, count) in &by_kind {
        println!("  {count:>5} {kind}");
    }
    if dry_run {
        for n in plan.nodes() {
            let kept = if n.keep_in_source || n.global {
                " (copied; stays in the source too)"
            } else {
                ""
            };
            println!("  {}{kept}", n.object);
        }
    }
    if !plan.stranded.is_empty() {
        println!("Left in the source (--force):");
        for (o, why) in &plan.stranded {
            println!("  {o}: {why}");
        }
    }
    if dry_run && !plan.staying.is_empty() {
        println!("Staying in the source:");
        for (o, why) in &plan.staying {
            println!("  {o}: {why}");
        }
    }
}
