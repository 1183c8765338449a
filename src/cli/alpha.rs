//! `capictl alpha rollout restart|pause|resume|undo`: clusterctl's rollout commands for
//! MachineDeployments and KubeadmControlPlanes, writing what clusterctl writes (the controllers
//! do the rolling).

use anyhow::Context as _;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::UsageError;
use crate::api::{KubeadmControlPlane, MachineDeployment, MachineSet};

#[derive(Debug, clap::Subcommand)]
pub enum Alpha {
    /// Manage the rollout of a MachineDeployment or KubeadmControlPlane.
    #[command(subcommand)]
    Rollout(Rollout),
}

#[derive(Debug, clap::Subcommand)]
pub enum Rollout {
    /// Replace every Machine: sets `spec.rollout.after` to now.
    Restart(Target),
    /// Stop rolling out: the MachineDeployment's `spec.paused`, the control plane's
    /// `cluster.x-k8s.io/paused` annotation.
    Pause(Target),
    /// Roll out again after a pause.
    Resume(Target),
    /// Go back to an earlier template of a MachineDeployment (the previous one by default).
    Undo(UndoArgs),
}

#[derive(Debug, clap::Args)]
pub struct Target {
    /// What to roll: `machinedeployment/NAME` (md) or `kubeadmcontrolplane/NAME` (kcp).
    #[arg(value_name = "KIND/NAME")]
    resource: String,
    /// The namespace [default: the kubeconfig context's]
    #[arg(short, long, value_name = "NS")]
    namespace: Option<String>,
    #[command(flatten)]
    cluster: super::connect::ClusterArgs,
}

#[derive(Debug, clap::Args)]
pub struct UndoArgs {
    #[command(flatten)]
    target: Target,
    /// The revision to go back to [default: the one before the current]
    #[arg(long, value_name = "N")]
    to_revision: Option<i64>,
}

/// What a `KIND/NAME` argument names.
#[derive(Debug, PartialEq, Eq)]
enum Kind {
    MachineDeployment,
    KubeadmControlPlane,
}

fn parse_target(text: &str) -> Result<(Kind, String), UsageError> {
    let (kind, name) = text.split_once('/').filter(|(_, n)| !n.is_empty()).ok_or_else(|| {
        UsageError(format!(
            "{text:?}: name what to roll as KIND/NAME, e.g. machinedeployment/md-0 or kubeadmcontrolplane/cp"
        ))
    })?;
    let kind = match kind.to_lowercase().as_str() {
        "machinedeployment" | "machinedeployments" | "md" => Kind::MachineDeployment,
        "kubeadmcontrolplane" | "kubeadmcontrolplanes" | "kcp" => Kind::KubeadmControlPlane,
        other => {
            return Err(UsageError(format!(
                "{other:?} cannot be rolled out: use machinedeployment/NAME or kubeadmcontrolplane/NAME"
            )));
        }
    };
    Ok((kind, name.to_string()))
}

/// The revision `undo` goes back to, among the MachineSets' (sorted): `to` when one has it,
/// else the one before the newest; why not, when there is none.
fn pick_revision(revisions: &[i64], to: Option<i64>) -> Result<i64, String> {
    let listed = || {
        revisions
            .iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    match to {
        Some(r) if revisions.contains(&r) => Ok(r),
        Some(r) => Err(format!("has no revision {r}; it has {}", listed())),
        None => {
            let current = revisions.last().copied().unwrap_or(0);
            revisions.iter().rev().copied().find(|r| *r < current).ok_or_else(|| {
                format!(
                    "has no revision before {current} to go back to (old MachineSets are deleted once a rollout completes)"
                )
            })
        }
    }
}

impl Alpha {
    pub fn run(self) -> anyhow::Result<()> {
        let Alpha::Rollout(rollout) = self;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(rollout.run())
    }
}

impl Rollout {
    async fn run(self) -> anyhow::Result<()> {
        let target = match &self {
            Rollout::Restart(t) | Rollout::Pause(t) | Rollout::Resume(t) => t,
            Rollout::Undo(u) => &u.target,
        };
        let (kind, name) = parse_target(&target.resource)?;
        let (client, default_namespace) = target.cluster.client().await?;
        let ns = target.namespace.clone().unwrap_or(default_namespace);
        let deployments: Api<MachineDeployment> = Api::namespaced(client.clone(), &ns);
        let planes: Api<KubeadmControlPlane> = Api::namespaced(client.clone(), &ns);
        let what = match kind {
            Kind::MachineDeployment => format!("machinedeployment.cluster.x-k8s.io/{name}"),
            Kind::KubeadmControlPlane => {
                format!("kubeadmcontrolplane.controlplane.cluster.x-k8s.io/{name}")
            }
        };
        // Whether it is paused now (and that it exists: a missing one is said by name).
        let paused = match kind {
            Kind::MachineDeployment => deployments
                .get_opt(&name)
                .await?
                .map(|md| md.spec.paused == Some(true)),
            Kind::KubeadmControlPlane => planes.get_opt(&name).await?.map(|kcp| {
                kcp.annotations()
                    .contains_key(crate::api::PAUSED_ANNOTATION)
            }),
        }
        .ok_or_else(|| anyhow::anyhow!("{what} not found in namespace {ns}"))?;
        let merge = |patch: serde_json::Value| Patch::Merge(patch);
        let params = PatchParams::default();
        match self {
            Rollout::Restart(_) => {
                if paused {
                    anyhow::bail!(
                        "can't restart paused {what} (run `capictl alpha rollout resume {}{}{}` first)",
                        target.resource,
                        target
                            .namespace
                            .as_ref()
                            .map(|ns| format!(" -n {ns}"))
                            .unwrap_or_default(),
                        target.cluster.repeated()
                    );
                }
                let now =
                    k8s_openapi::jiff::Timestamp::now().round(k8s_openapi::jiff::Unit::Second)?;
                let patch = merge(json!({"spec": {"rollout": {"after": now.to_string()}}}));
                match kind {
                    Kind::MachineDeployment => {
                        deployments.patch(&name, &params, &patch).await.map(drop)
                    }
                    Kind::KubeadmControlPlane => {
                        planes.patch(&name, &params, &patch).await.map(drop)
                    }
                }?;
                println!("{what} restarted");
            }
            Rollout::Pause(_) | Rollout::Resume(_) => {
                let pause = matches!(self, Rollout::Pause(_));
                if pause == paused {
                    println!(
                        "{what} is already {}",
                        if pause { "paused" } else { "resumed" }
                    );
                    return Ok(());
                }
                match kind {
                    Kind::MachineDeployment => {
                        let patch = merge(json!({"spec": {"paused": pause}}));
                        deployments.patch(&name, &params, &patch).await.map(drop)?
                    }
                    Kind::KubeadmControlPlane => {
                        let value = if pause {
                            json!("true")
                        } else {
                            serde_json::Value::Null
                        };
                        let patch = merge(
                            json!({"metadata": {"annotations": {(crate::api::PAUSED_ANNOTATION): value}}}),
                        );
                        planes.patch(&name, &params, &patch).await.map(drop)?
                    }
                }
                println!("{what} {}", if pause { "paused" } else { "resumed" });
            }
            Rollout::Undo(undo) => {
                if kind != Kind::MachineDeployment {
                    return Err(UsageError(format!(
                        "undo goes back to an earlier MachineSet's template: only a machinedeployment has them, not {what}"
                    ))
                    .into());
                }
                let md = deployments.get(&name).await?;
                let sets = Api::<MachineSet>::namespaced(client.clone(), &ns)
                    .list(&Default::default())
                    .await
                    .context("listing the MachineSets")?;
                let revision_of = |ms: &MachineSet| {
                    ms.annotations()
                        .get(crate::api::REVISION_ANNOTATION)
                        .and_then(|r| r.parse::<i64>().ok())
                };
                let uid = md.uid().unwrap_or_default();
                let mut owned: Vec<(i64, &MachineSet)> = sets
                    .items
                    .iter()
                    .filter(|ms| ms.owner_references().iter().any(|r| r.uid == uid))
                    .filter_map(|ms| Some((revision_of(ms)?, ms)))
                    .collect();
                owned.sort_by_key(|(r, _)| *r);
                let revisions: Vec<i64> = owned.iter().map(|(r, _)| *r).collect();
                let wanted = pick_revision(&revisions, undo.to_revision)
                    .map_err(|why| anyhow::anyhow!("{what} {why}"))?;
                let (_, ms) = owned
                    .iter()
                    .find(|(r, _)| *r == wanted)
                    .expect("pick_revision picks one of them");
                let mut template = serde_json::to_value(&ms.spec.template)?;
                if let Some(labels) = template["metadata"]["labels"].as_object_mut() {
                    labels.remove(crate::api::TEMPLATE_HASH_LABEL);
                }
                // A merge patch replaces the template's spec wholesale, as the MachineSet had it.
                let patch = merge(json!({"spec": {"template": template}}));
                deployments.patch(&name, &params, &patch).await?;
                println!("{what} rolled back to revision {wanted}");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn undo_goes_to_the_previous_revision_or_the_one_asked() {
        assert_eq!(pick_revision(&[1, 2, 3], None), Ok(2));
        assert_eq!(pick_revision(&[1, 2, 3], Some(1)), Ok(1));
        assert_eq!(
            pick_revision(&[2, 3], Some(1)),
            Err("has no revision 1; it has 2, 3".into())
        );
        assert!(
            pick_revision(&[3], None)
                .unwrap_err()
                .starts_with("has no revision before 3")
        );
    }

    #[test]
    fn targets_are_named_as_clusterctl_names_them() {
        assert_eq!(
            parse_target("machinedeployment/md-0").unwrap(),
            (Kind::MachineDeployment, "md-0".into())
        );
        assert_eq!(
            parse_target("kcp/cp").unwrap(),
            (Kind::KubeadmControlPlane, "cp".into())
        );
        for bad in ["md-0", "machinedeployment/", "cluster/c1"] {
            assert!(parse_target(bad).is_err(), "{bad}");
        }
    }
}
