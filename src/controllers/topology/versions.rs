//! Which Kubernetes version each part of a managed topology runs, as upstream orchestrates an
//! upgrade of `spec.topology.version`: the control plane first, once it is neither
//! provisioning nor upgrading and every MachineDeployment has caught up with it; then the
//! MachineDeployments in list order, at most `topology.cluster.x-k8s.io/upgrade-concurrency`
//! (default 1) at a time, skipping those with `defer-upgrade` and stopping at the first with
//! `hold-upgrade-sequence`; the MachinePools after them alike. New MachineDeployments and
//! MachinePools are created only once the control plane is provisioned at the topology's
//! version.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::api::Cluster;
use crate::api::cluster_class::{
    DEFER_UPGRADE_ANNOTATION, HOLD_UPGRADE_SEQUENCE_ANNOTATION, UPGRADE_CONCURRENCY_ANNOTATION,
};

/// The control plane as it is.
#[derive(Clone, Debug)]
pub struct ControlPlaneNow {
    pub object: Value,
    /// No Machine has reported a version yet.
    pub provisioning: bool,
    /// Some Machines are not at its version yet.
    pub upgrading: bool,
}

/// Where an upgrade or a creation stands, for the TopologyReconciled condition.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Progress {
    /// `spec.topology.version`.
    pub version: String,
    /// One line per part that is not done: `KubeadmControlPlane upgrading to version v1.31.0`.
    pub lines: Vec<String>,
    /// The control plane is still being provisioned, or MachineDeployments wait to be created.
    pub creating: bool,
    /// Some part is not at the topology's version yet.
    pub upgrading: bool,
}

/// What exists of a Cluster's topology now.
#[derive(Clone, Debug, Default)]
pub struct Current {
    pub infrastructure_cluster: Option<Value>,
    pub control_plane: Option<ControlPlaneNow>,
    /// The machine template the control plane uses.
    pub control_plane_machines: Option<Value>,
    /// By name in the topology.
    pub deployments: BTreeMap<String, DeploymentNow>,
    /// The MachinePools, by name in the topology.
    pub pools: BTreeMap<String, DeploymentNow>,
    /// Why the control plane may not start its upgrade yet (the BeforeClusterUpgrade or
    /// BeforeControlPlaneUpgrade hooks hold it), if they do.
    pub upgrade_hold: Option<String>,
    /// Why the workers may not start theirs (AfterControlPlaneUpgrade or BeforeWorkersUpgrade).
    pub workers_hold: Option<String>,
    /// Why the upgrade is not over though every part has its version (AfterWorkersUpgrade or
    /// AfterClusterUpgrade).
    pub finish_hold: Option<String>,
}

impl Current {
    /// The MachineDeployments and MachinePools.
    fn workers(&self) -> impl Iterator<Item = &DeploymentNow> {
        self.deployments.values().chain(self.pools.values())
    }
}

/// Which list of the topology's workers a worker is in.
#[derive(Clone, Copy)]
enum WorkerKind {
    MachineDeployment,
    MachinePool,
}

/// A MachineDeployment (or MachinePool) of the topology as it is, with its template copies
/// (a pool's bootstrap config and infrastructure).
#[derive(Clone, Debug)]
pub struct DeploymentNow {
    pub object: Value,
    /// Some of its Machines are not at its version yet.
    pub upgrading: bool,
    pub bootstrap: Option<Value>,
    pub infrastructure: Option<Value>,
}

/// The versions the parts of the topology are to run now.
#[derive(Clone, Debug)]
pub struct Plan {
    pub control_plane_version: String,
    /// By topology name: the version of each MachineDeployment that exists or is created now
    /// (those whose creation waits are missing).
    pub deployment_versions: BTreeMap<String, String>,
    /// The same of the MachinePools.
    pub pool_versions: BTreeMap<String, String>,
    pub progress: Progress,
}

/// Whether the control plane has the topology's version and is done with it.
pub fn control_plane_upgraded(cluster: &Cluster, current: &Current) -> bool {
    let target = cluster.spec.topology.as_ref().map(|t| t.version.as_str());
    current.control_plane.as_ref().is_some_and(|cp| {
        version_at(&cp.object, &["spec", "version"]) == target && !cp.provisioning && !cp.upgrading
    })
}

/// Whether a worker still has another version than the topology's, or is still moving.
pub fn workers_upgrading(cluster: &Cluster, current: &Current) -> bool {
    let target = cluster.spec.topology.as_ref().map(|t| t.version.as_str());
    current.workers().any(|w| {
        w.upgrading || version_at(&w.object, &["spec", "template", "spec", "version"]) != target
    })
}

/// The version of the first worker that does not have the topology's yet.
pub fn workers_behind_at(cluster: &Cluster, current: &Current) -> Option<String> {
    let target = cluster.spec.topology.as_ref().map(|t| t.version.as_str());
    current
        .workers()
        .filter_map(|w| version_at(&w.object, &["spec", "template", "spec", "version"]))
        .find(|v| Some(*v) != target)
        .map(str::to_string)
}

/// The control plane's version now and the one the plan gives it when the plan starts its
/// upgrade in this reconcile: when the BeforeClusterUpgrade hooks are asked.
pub fn upgrade_starts(cluster: &Cluster, current: &Current) -> Option<(String, String)> {
    let now = version_at(
        &current.control_plane.as_ref()?.object,
        &["spec", "version"],
    )?;
    let planned = plan(cluster, current).ok()?.control_plane_version;
    (planned != now).then(|| (now.to_string(), planned))
}

fn version_at<'a>(object: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(object, |v, k| v.get(*k))?.as_str()
}

/// How many MachineDeployments may upgrade at once, from the Cluster's annotation.
pub fn concurrency(cluster: &Cluster) -> Result<usize, String> {
    match cluster
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(UPGRADE_CONCURRENCY_ANNOTATION))
    {
        None => Ok(1),
        Some(text) => match text.parse::<i64>() {
            Ok(n) if n >= 1 => Ok(n as usize),
            Ok(_) => Err(format!(
                "annotation {UPGRADE_CONCURRENCY_ANNOTATION}: value cannot be less than 1"
            )),
            Err(_) => Err(format!(
                "annotation {UPGRADE_CONCURRENCY_ANNOTATION}: could not parse the value of the annotation: {text:?} is not an integer"
            )),
        },
    }
}

pub fn plan(cluster: &Cluster, current: &Current) -> Result<Plan, String> {
    let topology = cluster
        .spec
        .topology
        .as_ref()
        .ok_or("the Cluster has no spec.topology")?;
    let target = topology.version.clone();
    let kind = |o: &Value| o["kind"].as_str().unwrap_or("ControlPlane").to_string();
    let deployment_version =
        |o: &Value| version_at(o, &["spec", "template", "spec", "version"]).map(str::to_string);
    let mut progress = Progress {
        version: target.clone(),
        ..Default::default()
    };
    let workers_moving = current.workers().any(|d| d.upgrading);

    // The control plane.
    let (control_plane_version, control_plane_stable) = match &current.control_plane {
        None => {
            progress.creating = true;
            (target.clone(), false)
        }
        Some(cp) => {
            let spec = version_at(&cp.object, &["spec", "version"])
                .unwrap_or_default()
                .to_string();
            let name = kind(&cp.object);
            let workers_behind = current
                .workers()
                .any(|d| deployment_version(&d.object).is_some_and(|v| v != spec));
            if cp.provisioning {
                progress.creating = true;
            }
            if spec == target {
                if cp.upgrading {
                    progress
                        .lines
                        .push(format!("{name} upgrading to version {target}"));
                }
                (spec, !cp.provisioning && !cp.upgrading)
            } else if cp.provisioning || cp.upgrading || workers_moving || workers_behind {
                progress
                    .lines
                    .push(format!("{name} pending upgrade to version {target}"));
                (spec, false)
            } else if let Some(hold) = &current.upgrade_hold {
                progress.lines.push(hold.clone());
                progress
                    .lines
                    .push(format!("{name} pending upgrade to version {target}"));
                (spec, false)
            } else {
                progress
                    .lines
                    .push(format!("{name} upgrading to version {target}"));
                (target.clone(), false)
            }
        }
    };

    // The MachineDeployments, then the MachinePools, in order.
    progress.lines.extend(current.workers_hold.clone());
    let limit = concurrency(cluster)?;
    let mut upgrading = current.workers().filter(|d| d.upgrading).count();
    let mut held = false;
    let mut deployment_versions = BTreeMap::new();
    let mut pool_versions = BTreeMap::new();
    let workers = topology.workers.as_ref();
    let deployments = workers
        .and_then(|w| w.machine_deployments.as_ref())
        .into_iter()
        .flatten()
        .map(|md| {
            (
                WorkerKind::MachineDeployment,
                &md.name,
                md.metadata.as_ref(),
            )
        });
    let pools = workers
        .and_then(|w| w.machine_pools.as_ref())
        .into_iter()
        .flatten()
        .map(|mp| (WorkerKind::MachinePool, &mp.name, mp.metadata.as_ref()));
    for (worker_kind, name, metadata) in deployments.chain(pools) {
        let (kind, nows, versions) = match worker_kind {
            WorkerKind::MachineDeployment => (
                "MachineDeployment",
                &current.deployments,
                &mut deployment_versions,
            ),
            WorkerKind::MachinePool => ("MachinePool", &current.pools, &mut pool_versions),
        };
        let annotations = metadata.and_then(|m| m.annotations.as_ref());
        let has = |a: &str| annotations.is_some_and(|m| m.contains_key(a));
        held |= has(HOLD_UPGRADE_SEQUENCE_ANNOTATION);
        let Some(now) = nows.get(name) else {
            if control_plane_stable {
                versions.insert(name.clone(), target.clone());
            } else {
                progress.creating = true;
                let why = if current
                    .control_plane
                    .as_ref()
                    .is_none_or(|c| c.provisioning)
                {
                    "provisioning"
                } else {
                    "upgrade"
                };
                progress.lines.push(format!(
                    "{kind} {name} creation deferred while control plane {why} is in progress"
                ));
            }
            continue;
        };
        let version = deployment_version(&now.object).unwrap_or_default();
        let (chosen, line) = if version == target {
            let line = now
                .upgrading
                .then(|| format!("{kind} {name} upgrading to version {target}"));
            (version, line)
        } else if !control_plane_stable || current.workers_hold.is_some() {
            (
                version,
                Some(format!("{kind} {name} pending upgrade to version {target}")),
            )
        } else if held {
            (
                version,
                Some(format!(
                    "{kind} {name} upgrade to version {target} on hold ({HOLD_UPGRADE_SEQUENCE_ANNOTATION})"
                )),
            )
        } else if has(DEFER_UPGRADE_ANNOTATION) {
            (
                version,
                Some(format!(
                    "{kind} {name} upgrade to version {target} deferred ({DEFER_UPGRADE_ANNOTATION})"
                )),
            )
        } else if upgrading >= limit {
            (
                version,
                Some(format!("{kind} {name} pending upgrade to version {target}")),
            )
        } else {
            upgrading += 1;
            (
                target.clone(),
                Some(format!("{kind} {name} upgrading to version {target}")),
            )
        };
        if chosen != target || now.upgrading {
            progress.upgrading = true;
        }
        progress.lines.extend(line);
        versions.insert(name.clone(), chosen);
    }
    if current.control_plane.as_ref().is_some_and(|cp| {
        version_at(&cp.object, &["spec", "version"]) != Some(target.as_str()) || cp.upgrading
    }) {
        progress.upgrading = true;
    }
    if let Some(hold) = &current.finish_hold {
        progress.lines.push(hold.clone());
        progress.upgrading = true;
    }
    Ok(Plan {
        control_plane_version,
        deployment_versions,
        pool_versions,
        progress,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cluster(version: &str, annotations: Value, deployments: Value) -> Cluster {
        serde_json::from_value(json!({
            "metadata": {"name": "c", "namespace": "ns", "annotations": annotations},
            "spec": {"topology": {"classRef": {"name": "cc"}, "version": version,
                "workers": {"machineDeployments": deployments}}},
        }))
        .unwrap()
    }

    fn cp(version: &str, provisioning: bool, upgrading: bool) -> ControlPlaneNow {
        ControlPlaneNow {
            object: json!({"kind": "KubeadmControlPlane", "spec": {"version": version}}),
            provisioning,
            upgrading,
        }
    }

    fn md(version: &str, upgrading: bool) -> DeploymentNow {
        DeploymentNow {
            object: json!({"spec": {"template": {"spec": {"version": version}}}}),
            upgrading,
            bootstrap: None,
            infrastructure: None,
        }
    }

    fn three() -> Value {
        json!([{"class": "w", "name": "a"}, {"class": "w", "name": "b"}, {"class": "w", "name": "c"}])
    }

    fn current(cp_now: Option<ControlPlaneNow>, mds: &[(&str, DeploymentNow)]) -> Current {
        Current {
            control_plane: cp_now,
            deployments: mds
                .iter()
                .map(|(n, d)| (n.to_string(), d.clone()))
                .collect(),
            ..Default::default()
        }
    }

    fn versions(p: &Plan) -> Vec<(String, String)> {
        p.deployment_versions
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    #[test]
    fn machine_deployments_wait_for_a_provisioned_control_plane() {
        let c = cluster("v1.30.4", json!({}), three());
        let p = plan(&c, &current(None, &[])).unwrap();
        assert_eq!(p.control_plane_version, "v1.30.4");
        assert!(p.deployment_versions.is_empty());
        assert!(p.progress.creating);
        assert!(
            p.progress.lines[0].contains("creation deferred while control plane provisioning"),
            "{:?}",
            p.progress
        );
        let p = plan(&c, &current(Some(cp("v1.30.4", false, false)), &[])).unwrap();
        assert_eq!(
            p.deployment_versions.len(),
            3,
            "created once the control plane is up"
        );
    }

    #[test]
    fn the_control_plane_upgrades_first_then_one_machine_deployment_at_a_time() {
        let c = cluster("v1.31.0", json!({}), three());
        let old = [
            ("a", md("v1.30.4", false)),
            ("b", md("v1.30.4", false)),
            ("c", md("v1.30.4", false)),
        ];
        // Step 1: the control plane starts; the workers wait.
        let p = plan(&c, &current(Some(cp("v1.30.4", false, false)), &old)).unwrap();
        assert_eq!(p.control_plane_version, "v1.31.0");
        assert!(versions(&p).iter().all(|(_, v)| v == "v1.30.4"));
        assert!(p.progress.upgrading);
        // While it rolls, nothing else moves.
        let p = plan(&c, &current(Some(cp("v1.31.0", false, true)), &old)).unwrap();
        assert!(versions(&p).iter().all(|(_, v)| v == "v1.30.4"));
        assert_eq!(
            p.progress.lines[0],
            "KubeadmControlPlane upgrading to version v1.31.0"
        );
        // Then the first MachineDeployment, alone.
        let p = plan(&c, &current(Some(cp("v1.31.0", false, false)), &old)).unwrap();
        assert_eq!(
            versions(&p),
            [
                ("a".into(), "v1.31.0".into()),
                ("b".into(), "v1.30.4".into()),
                ("c".into(), "v1.30.4".into())
            ]
        );
        // The next waits while it rolls; then goes.
        let rolling = [
            ("a", md("v1.31.0", true)),
            ("b", md("v1.30.4", false)),
            ("c", md("v1.30.4", false)),
        ];
        let p = plan(&c, &current(Some(cp("v1.31.0", false, false)), &rolling)).unwrap();
        assert_eq!(p.deployment_versions["b"], "v1.30.4");
        let done = [
            ("a", md("v1.31.0", false)),
            ("b", md("v1.30.4", false)),
            ("c", md("v1.30.4", false)),
        ];
        let p = plan(&c, &current(Some(cp("v1.31.0", false, false)), &done)).unwrap();
        assert_eq!(p.deployment_versions["b"], "v1.31.0");
        assert_eq!(p.deployment_versions["c"], "v1.30.4");
        // Two at a time when the Cluster says so.
        let c2 = cluster(
            "v1.31.0",
            json!({(UPGRADE_CONCURRENCY_ANNOTATION): "2"}),
            three(),
        );
        let p = plan(&c2, &current(Some(cp("v1.31.0", false, false)), &old)).unwrap();
        assert_eq!(p.deployment_versions["b"], "v1.31.0");
        assert_eq!(p.deployment_versions["c"], "v1.30.4");
    }

    #[test]
    fn lifecycle_hooks_hold_each_part_of_an_upgrade() {
        let c = cluster("v1.31.0", json!({}), three());
        let old = [
            ("a", md("v1.30.4", false)),
            ("b", md("v1.30.4", false)),
            ("c", md("v1.30.4", false)),
        ];
        let hold = |message: &str| Some(message.to_string());
        // The hooks before the control plane's upgrade keep it where it is, and say so.
        let mut now = current(Some(cp("v1.30.4", false, false)), &old);
        assert_eq!(
            upgrade_starts(&c, &now),
            Some(("v1.30.4".into(), "v1.31.0".into()))
        );
        now.upgrade_hold = hold("Following hooks are blocking upgrade: BeforeClusterUpgrade");
        let p = plan(&c, &now).unwrap();
        assert_eq!(p.control_plane_version, "v1.30.4");
        assert_eq!(
            p.progress.lines[..2],
            [
                "Following hooks are blocking upgrade: BeforeClusterUpgrade",
                "KubeadmControlPlane pending upgrade to version v1.31.0"
            ]
        );
        assert!(p.progress.upgrading);
        // Those after it keep the workers.
        let mut now = current(Some(cp("v1.31.0", false, false)), &old);
        assert!(control_plane_upgraded(&c, &now));
        assert!(workers_upgrading(&c, &now));
        assert_eq!(workers_behind_at(&c, &now).as_deref(), Some("v1.30.4"));
        now.workers_hold = hold("Following hooks are blocking upgrade: AfterControlPlaneUpgrade");
        let p = plan(&c, &now).unwrap();
        assert!(versions(&p).iter().all(|(_, v)| v == "v1.30.4"));
        assert_eq!(
            p.progress.lines[0],
            "Following hooks are blocking upgrade: AfterControlPlaneUpgrade"
        );
        // The last ones keep the upgrade from being over.
        let new = [
            ("a", md("v1.31.0", false)),
            ("b", md("v1.31.0", false)),
            ("c", md("v1.31.0", false)),
        ];
        let mut now = current(Some(cp("v1.31.0", false, false)), &new);
        assert!(!workers_upgrading(&c, &now));
        assert!(!plan(&c, &now).unwrap().progress.upgrading);
        now.finish_hold = hold("Following hooks are blocking upgrade: AfterClusterUpgrade");
        let p = plan(&c, &now).unwrap();
        assert!(p.progress.upgrading);
        assert_eq!(
            p.progress.lines,
            ["Following hooks are blocking upgrade: AfterClusterUpgrade"]
        );
    }

    #[test]
    fn defer_and_hold_annotations() {
        let mds = json!([
            {"class": "w", "name": "a", "metadata": {"annotations": {(DEFER_UPGRADE_ANNOTATION): ""}}},
            {"class": "w", "name": "b"},
            {"class": "w", "name": "c", "metadata": {"annotations": {(HOLD_UPGRADE_SEQUENCE_ANNOTATION): ""}}},
        ]);
        let c = cluster(
            "v1.31.0",
            json!({(UPGRADE_CONCURRENCY_ANNOTATION): "5"}),
            mds,
        );
        let old = [
            ("a", md("v1.30.4", false)),
            ("b", md("v1.30.4", false)),
            ("c", md("v1.30.4", false)),
        ];
        let p = plan(&c, &current(Some(cp("v1.31.0", false, false)), &old)).unwrap();
        assert_eq!(
            versions(&p),
            [
                ("a".into(), "v1.30.4".into()),
                ("b".into(), "v1.31.0".into()),
                ("c".into(), "v1.30.4".into())
            ]
        );
        // A worker behind the control plane keeps the control plane where it is.
        let c = cluster("v1.32.0", json!({}), three());
        let p = plan(&c, &current(Some(cp("v1.31.0", false, false)), &old)).unwrap();
        assert_eq!(p.control_plane_version, "v1.31.0");
        assert!(
            p.progress.lines[0].contains("pending upgrade"),
            "{:?}",
            p.progress.lines
        );
    }

    #[test]
    fn a_bad_concurrency_annotation_is_named() {
        let c = cluster(
            "v1.31.0",
            json!({(UPGRADE_CONCURRENCY_ANNOTATION): "0"}),
            three(),
        );
        assert!(
            plan(&c, &Current::default())
                .unwrap_err()
                .contains("cannot be less than 1")
        );
        let c = cluster(
            "v1.31.0",
            json!({(UPGRADE_CONCURRENCY_ANNOTATION): "x"}),
            three(),
        );
        assert!(
            plan(&c, &Current::default())
                .unwrap_err()
                .contains("could not parse")
        );
    }
}
