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
use crate::api::common::kubernetes_version;

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
    /// The versions the control plane has yet to go through (`status.controlPlane.upgradePlan`).
    pub control_plane_plan: Vec<String>,
    /// And the workers (`status.workers.upgradePlan`).
    pub workers_plan: Vec<String>,
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
    /// The ClusterClass's `kubernetesVersions`: the versions a chained upgrade goes through.
    pub class_versions: Vec<String>,
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

/// The control plane's version now, and whether it is stable there (neither provisioning nor
/// upgrading).
pub fn control_plane_now(current: &Current) -> Option<(String, bool)> {
    let cp = current.control_plane.as_ref()?;
    let version = version_at(&cp.object, &["spec", "version"])?;
    Some((version.to_string(), !cp.provisioning && !cp.upgrading))
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

/// The versions the control plane goes through from `from` to `to` (upstream's upgrade plan):
/// with the ClusterClass's `kubernetesVersions`, the newest patch of each minor after `from`'s,
/// `to` last; without them, `to` alone (admission allows one minor at a time then). Empty when
/// `from` is `to`.
pub fn control_plane_steps(class_versions: &[String], from: &str, to: &str) -> Vec<String> {
    let (Some(current), Some(desired)) = (kubernetes_version(from), kubernetes_version(to)) else {
        return vec![to.to_string()];
    };
    if current == desired {
        return Vec::new();
    }
    let on_the_way: Vec<(&String, (u64, u64, u64))> = class_versions
        .iter()
        .filter_map(|v| Some((v, kubernetes_version(v)?)))
        .filter(|(_, v)| *v > current && *v <= desired)
        .collect();
    let mut steps: Vec<String> = Vec::new();
    let mut minor = current.1;
    if minor == desired.1
        && let Some((first, _)) = on_the_way.first()
    {
        steps.push(first.to_string());
    }
    for (text, v) in on_the_way {
        if v.1 > minor {
            steps.push(text.clone());
        } else if v.1 == minor && !steps.is_empty() {
            *steps.last_mut().expect("not empty") = text.clone();
        }
        minor = v.1;
    }
    if steps.last().map(String::as_str) != Some(to) {
        steps.push(to.to_string());
    }
    steps
}

/// The versions the workers go through from `lowest` (the oldest worker's) to `to`, as
/// upstream's default plan: every third minor the control plane passes (the kubelet may be
/// three minors behind the API server), then `to`. `control_plane` is the control plane's
/// version now and `steps` its plan.
pub fn worker_steps(lowest: &str, control_plane: &str, steps: &[String], to: &str) -> Vec<String> {
    let (Some(lowest), Some(desired)) = (kubernetes_version(lowest), kubernetes_version(to)) else {
        return vec![to.to_string()];
    };
    if lowest == desired {
        return Vec::new();
    }
    let by_minor: BTreeMap<u64, &str> = std::iter::once(control_plane)
        .chain(steps.iter().map(String::as_str))
        .filter_map(|v| Some((kubernetes_version(v)?.1, v)))
        .collect();
    let mut plan: Vec<String> = (1..desired.1.saturating_sub(lowest.1))
        .filter(|i| i % 3 == 0)
        .filter_map(|i| by_minor.get(&(lowest.1 + i)).map(|v| v.to_string()))
        .collect();
    if plan.last().map(String::as_str) != Some(to) {
        plan.push(to.to_string());
    }
    plan
}

/// The version of the oldest worker.
fn lowest_worker(current: &Current) -> Option<String> {
    current
        .workers()
        .filter_map(|w| version_at(&w.object, &["spec", "template", "spec", "version"]))
        .filter_map(|v| Some((kubernetes_version(v)?, v)))
        .min()
        .map(|(_, v)| v.to_string())
}

/// ` (v1.32.2, v1.33.0 pending)`: the steps after the one under way.
fn pending_steps(steps: &[String]) -> String {
    if steps.len() > 1 {
        format!(" ({} pending)", steps[1..].join(", "))
    } else {
        String::new()
    }
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
            let steps = control_plane_steps(&current.class_versions, &spec, &target);
            let next = steps.first().cloned().unwrap_or_else(|| target.clone());
            progress.control_plane_plan = steps.clone();
            progress.workers_plan = lowest_worker(current)
                .map(|lowest| worker_steps(&lowest, &spec, &steps, &target))
                .unwrap_or_default();
            // The workers must move first when their plan has them at the control plane's
            // version now.
            let workers_due = progress.workers_plan.first() == Some(&spec)
                && lowest_worker(current) != Some(spec.clone());
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
            } else if cp.provisioning || cp.upgrading || workers_moving || workers_due {
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
                progress.lines.push(format!(
                    "{name} upgrading to version {next}{}",
                    pending_steps(&steps)
                ));
                (next, false)
            }
        }
    };

    // Where the workers go now: the control plane's version, once it is stable there and
    // the workers' plan has them there (the topology's version in the end).
    let worker_target = current.control_plane.as_ref().and_then(|cp| {
        let spec = version_at(&cp.object, &["spec", "version"])?;
        if cp.provisioning || cp.upgrading {
            return None;
        }
        if spec == target {
            return Some(target.clone());
        }
        let steps = control_plane_steps(&current.class_versions, spec, &target);
        let lowest = lowest_worker(current)?;
        let due = worker_steps(&lowest, spec, &steps, &target)
            .first()
            .map(String::as_str)
            == Some(spec);
        due.then(|| spec.to_string())
    });

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
        let (chosen, line) = if version == target || worker_target.as_ref() == Some(&version) {
            let line = if now.upgrading {
                Some(format!("{kind} {name} upgrading to version {version}"))
            } else {
                (version != target)
                    .then(|| format!("{kind} {name} pending upgrade to version {target}"))
            };
            (version, line)
        } else if worker_target.is_none() || current.workers_hold.is_some() {
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
            let to = worker_target.clone().unwrap_or_else(|| target.clone());
            let line = format!("{kind} {name} upgrading to version {to}");
            (to, Some(line))
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
        // Workers behind the control plane within the kubelet's skew (three minors) do not
        // keep it where it is, as upstream's plan: they go straight to the new version after it.
        let c = cluster("v1.32.0", json!({}), three());
        let p = plan(&c, &current(Some(cp("v1.31.0", false, false)), &old)).unwrap();
        assert_eq!(p.control_plane_version, "v1.32.0");
        // Three minors behind, they must reach the control plane's version first.
        let c = cluster("v1.33.0", json!({}), three());
        let far = [
            ("a", md("v1.29.0", false)),
            ("b", md("v1.32.0", false)),
            ("c", md("v1.32.0", false)),
        ];
        let p = plan(&c, &current(Some(cp("v1.32.0", false, false)), &far)).unwrap();
        assert_eq!(p.control_plane_version, "v1.32.0");
        assert_eq!(
            versions(&p),
            [
                ("a".into(), "v1.32.0".into()),
                ("b".into(), "v1.32.0".into()),
                ("c".into(), "v1.32.0".into())
            ]
        );
        assert!(
            p.progress.lines[0].contains("pending upgrade"),
            "{:?}",
            p.progress.lines
        );
    }

    #[test]
    fn chained_upgrades_step_the_control_plane_through_each_minor_before_the_workers() {
        let class_versions: Vec<String> = [
            "v1.30.4", "v1.31.0", "v1.31.2", "v1.32.1", "v1.33.0", "v1.34.0",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            control_plane_steps(&class_versions, "v1.30.4", "v1.33.0"),
            ["v1.31.2", "v1.32.1", "v1.33.0"]
        );
        assert_eq!(
            control_plane_steps(&class_versions, "v1.31.0", "v1.31.2"),
            ["v1.31.2"]
        );
        assert_eq!(control_plane_steps(&[], "v1.30.4", "v1.31.0"), ["v1.31.0"]);
        assert!(control_plane_steps(&class_versions, "v1.33.0", "v1.33.0").is_empty());
        // Workers every third minor the control plane passes, then the end.
        let steps = control_plane_steps(&class_versions, "v1.30.4", "v1.34.0");
        assert_eq!(
            worker_steps("v1.30.4", "v1.30.4", &steps, "v1.34.0"),
            ["v1.33.0", "v1.34.0"]
        );
        assert_eq!(
            worker_steps("v1.30.4", "v1.30.4", &steps[..3], "v1.33.0"),
            ["v1.33.0"]
        );

        let c = cluster("v1.33.0", json!({}), three());
        let at = |cp_version: &str, upgrading: bool, workers: &str| {
            let mds = [
                ("a", md(workers, false)),
                ("b", md(workers, false)),
                ("c", md(workers, false)),
            ];
            let mut now = current(Some(cp(cp_version, false, upgrading)), &mds);
            now.class_versions = class_versions.clone();
            plan(&c, &now).unwrap()
        };
        // Each step of the control plane in turn, the workers where they are.
        for (from, to) in [
            ("v1.30.4", "v1.31.2"),
            ("v1.31.2", "v1.32.1"),
            ("v1.32.1", "v1.33.0"),
        ] {
            let p = at(from, false, "v1.30.4");
            assert_eq!(p.control_plane_version, to, "from {from}");
            assert!(
                versions(&p).iter().all(|(_, v)| v == "v1.30.4"),
                "from {from}"
            );
        }
        let p = at("v1.30.4", false, "v1.30.4");
        assert_eq!(
            p.progress.lines[0],
            "KubeadmControlPlane upgrading to version v1.31.2 (v1.32.1, v1.33.0 pending)"
        );
        assert_eq!(
            p.progress.control_plane_plan,
            ["v1.31.2", "v1.32.1", "v1.33.0"]
        );
        assert_eq!(p.progress.workers_plan, ["v1.33.0"]);
        let p = at("v1.33.0", false, "v1.33.0");
        assert!(p.progress.control_plane_plan.is_empty() && p.progress.workers_plan.is_empty());
        // While a step rolls, nothing else moves; at the end, the workers follow.
        assert_eq!(
            at("v1.32.1", true, "v1.30.4").control_plane_version,
            "v1.32.1"
        );
        let p = at("v1.33.0", false, "v1.30.4");
        assert_eq!(versions(&p)[0], ("a".into(), "v1.33.0".into()));
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
