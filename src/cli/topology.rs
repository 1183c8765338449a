//! `capictl topology plan`: what the topology controller will create, change and delete for
//! the Clusters in some files, before they are applied. Each Cluster is server-side dry-run
//! applied (so defaulting and the admission rules judge it as they would the real apply),
//! then the topology controller's own computation runs on it and applies its objects as a
//! server-side dry run: no guesswork about defaults, webhooks or field ownership, and the
//! names are the ones the controller will use.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context as _;
use kube::api::{Patch, PatchParams};
use serde_json::Value;

use super::UsageError;
use super::connect::ClusterArgs;
use crate::api::Cluster;
use crate::controllers::topology::{self, Change, ChangeAction};

#[derive(Debug, clap::Subcommand)]
pub enum Topology {
    /// Show what the topology controller would create, change and delete for the Clusters in
    /// FILEs (with diffs), checked by the management cluster without writing anything.
    Plan(PlanArgs),
}

#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// Files with Clusters (and anything else); `-` reads stdin.
    #[arg(short, long = "file", value_name = "FILE", required = true)]
    files: Vec<String>,
    /// Only this Cluster of the files.
    #[arg(short, long, value_name = "NAME")]
    cluster: Option<String>,
    /// The namespace of objects that name none [default: the kubeconfig context's, else default]
    #[arg(short, long, value_name = "NS")]
    namespace: Option<String>,
    /// Also write each created and modified object (before and after) under this directory.
    #[arg(short, long, value_name = "DIR")]
    output_directory: Option<PathBuf>,
    #[command(flatten)]
    management: ClusterArgs,
}

impl Topology {
    pub fn run(self) -> anyhow::Result<()> {
        match self {
            Topology::Plan(args) => tokio::runtime::Runtime::new()?.block_on(plan(args)),
        }
    }
}

fn read_objects(files: &[String]) -> anyhow::Result<Vec<Value>> {
    let mut objects = Vec::new();
    for file in files {
        let text = if file == "-" {
            std::io::read_to_string(std::io::stdin())?
        } else {
            std::fs::read_to_string(file).with_context(|| format!("reading {file}"))?
        };
        let docs: Vec<Value> = crate::yaml::from_multiple(&text)
            .map_err(|e| UsageError(format!("{file} is not YAML: {e}")))?;
        objects.extend(docs.into_iter().filter(|d| d.is_object()));
    }
    Ok(objects)
}

/// An object as YAML without what the server keeps for itself.
fn shown(object: &Value) -> String {
    crate::yaml::to_string(&topology::comparable(object)).unwrap_or_default()
}

/// A unified diff of two objects' YAML.
fn diff(before: &Value, after: &Value) -> String {
    let (old, new) = (shown(before), shown(after));
    similar::TextDiff::from_lines(&old, &new)
        .unified_diff()
        .context_radius(3)
        .header("before", "after")
        .to_string()
}

fn action_word(a: ChangeAction) -> &'static str {
    match a {
        ChangeAction::Created => "created",
        ChangeAction::Modified => "modified",
        ChangeAction::Deleted => "deleted",
    }
}

/// The table of changes, as clusterctl's removed `alpha topology plan` printed it.
fn table(changes: &[Change]) -> String {
    let rows: Vec<[&str; 4]> = changes
        .iter()
        .map(|c| {
            [
                c.namespace.as_str(),
                c.kind.as_str(),
                c.name.as_str(),
                action_word(c.action),
            ]
        })
        .collect();
    let header = ["NAMESPACE", "KIND", "NAME", "ACTION"];
    let widths: Vec<usize> = (0..4)
        .map(|i| {
            rows.iter()
                .map(|r| r[i].len())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: [&str; 4]| {
        let mut out = String::from("  ");
        for (i, cell) in cells.iter().enumerate() {
            if i == 3 {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<w$}  ", w = widths[i]));
            }
        }
        out.push('\n');
        out
    };
    let mut out = line(header);
    for r in rows {
        out.push_str(&line(r));
    }
    out
}

fn write_objects(dir: &std::path::Path, cluster: &str, changes: &[Change]) -> anyhow::Result<()> {
    for c in changes {
        let base = dir.join(cluster).join(action_word(c.action));
        std::fs::create_dir_all(&base)?;
        let stem = format!("{}_{}_{}", c.kind, c.namespace, c.name);
        if let Some(after) = &c.after {
            std::fs::write(base.join(format!("{stem}.yaml")), shown(after))?;
        }
        if let (Some(before), Some(after)) = (&c.before, &c.after) {
            std::fs::write(base.join(format!("{stem}.original.yaml")), shown(before))?;
            std::fs::write(base.join(format!("{stem}.diff")), diff(before, after))?;
        }
    }
    Ok(())
}

async fn plan(args: PlanArgs) -> anyhow::Result<()> {
    let objects = read_objects(&args.files)?;
    let (client, context_namespace) = args.management.client().await?;
    let default_namespace = args.namespace.clone().unwrap_or(context_namespace);
    let mut clusters = Vec::new();
    // ClusterClasses and templates in the files that the management cluster does not have.
    let mut missing: Vec<String> = Vec::new();
    for mut object in objects {
        let cluster_scoped = object["kind"]
            .as_str()
            .is_some_and(|k| crate::generate::CLUSTER_SCOPED.contains(&k));
        if !cluster_scoped
            && object["metadata"]["namespace"]
                .as_str()
                .is_none_or(str::is_empty)
        {
            object["metadata"]["namespace"] = Value::String(default_namespace.clone());
        }
        let kind = object["kind"].as_str().unwrap_or_default().to_string();
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let namespace = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let is_cluster = kind == "Cluster"
            && object["apiVersion"]
                .as_str()
                .is_some_and(|v| v.starts_with("cluster.x-k8s.io/"));
        let api = super::connect::api_for(&client, &object);
        let stored = api.get_opt(&name).await.ok().flatten();
        // What applying this object would make of it, judged by the management cluster.
        let params = PatchParams {
            dry_run: true,
            ..PatchParams::apply("kubectl").force()
        };
        let applied = match api.patch(&name, &params, &Patch::Apply(&object)).await {
            Ok(o) => o,
            // The server's own words say what is wrong with the object and which field.
            Err(kube::Error::Api(s)) => anyhow::bail!(
                "{kind} {namespace}/{name} would be refused: {}; nothing was planned or written",
                s.message
            ),
            Err(e) => return Err(e).context(format!("dry-run applying {kind} {namespace}/{name}")),
        };
        let applied = serde_json::to_value(applied)?;
        if is_cluster {
            if args.cluster.as_ref().is_none_or(|c| *c == name) {
                clusters.push(applied);
            }
            continue;
        }
        if kind != "ClusterClass" && !kind.ends_with("Template") {
            continue;
        }
        match stored.map(|s| serde_json::to_value(s).expect("objects serialize")) {
            None => missing.push(format!("{kind} {namespace}/{name}")),
            Some(s) if topology::comparable(&s) != topology::comparable(&applied) => eprintln!(
                "Warning: {kind} {namespace}/{name} differs from the management cluster's; the plan uses the stored one (apply it first to plan with it)"
            ),
            Some(_) => {}
        }
    }
    if clusters.is_empty() {
        return Err(UsageError(match &args.cluster {
            Some(c) => format!("no Cluster {c:?} in the files"),
            None => "no Cluster in the files: the plan is of Clusters with spec.topology".into(),
        })
        .into());
    }
    let ctx = crate::reconcile::Context::new(
        client,
        crate::reconcile::claim::ManagementIdentity::none(),
        None,
        crate::reconcile::metrics::ControllerMetrics::new(),
    );
    let mut out = std::io::stdout().lock();
    for value in clusters {
        let cluster: Cluster = serde_json::from_value(value)?;
        let key = format!(
            "{}/{}",
            cluster.metadata.namespace.clone().unwrap_or_default(),
            cluster.metadata.name.clone().unwrap_or_default()
        );
        let reconciled = topology::plan(&ctx, &cluster).await?.map_err(|message| {
            // The class and templates are read from the management cluster, as the
            // controller reads them: ones only in the files are the likely reason.
            let apply_first = if missing.is_empty() {
                String::new()
            } else {
                format!(
                    " ({} {} in the files but not in the management cluster: apply {} first, then plan)",
                    missing.join(", "),
                    if missing.len() == 1 { "is" } else { "are" },
                    if missing.len() == 1 { "it" } else { "them" },
                )
            };
            anyhow::anyhow!(
                "the topology of Cluster {key} cannot be reconciled: {message}{apply_first}"
            )
        })?;
        if reconciled.changes.is_empty() {
            writeln!(out, "No changes for Cluster {key:?}.")?;
            continue;
        }
        writeln!(out, "Changes for Cluster {key:?}:\n")?;
        write!(out, "{}", table(&reconciled.changes))?;
        for c in &reconciled.changes {
            if let (ChangeAction::Modified, Some(before), Some(after)) =
                (c.action, &c.before, &c.after)
            {
                writeln!(
                    out,
                    "\n{} {}/{}:\n{}",
                    c.kind,
                    c.namespace,
                    c.name,
                    diff(before, after)
                )?;
            }
        }
        if let Some(dir) = &args.output_directory {
            write_objects(dir, &key.replace('/', "_"), &reconciled.changes)?;
            eprintln!(
                "Created and modified objects are written to directory {:?}",
                dir.display().to_string()
            );
        }
        let lines = &reconciled.desired.progress.lines;
        if !lines.is_empty() {
            writeln!(out, "\nThen:")?;
            for l in lines {
                writeln!(out, "  * {l}")?;
            }
        }
    }
    Ok(())
}
