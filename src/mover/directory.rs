//! `capictl move --to-directory` and `--from-directory`: a management cluster's Clusters saved
//! as one YAML file per object (status, uid and owner references included, mode 0600) and
//! restored from those files into another management cluster, owners first, then status.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use super::graph::{ObjectRef, Type};
use super::{
    Endpoint, MoveError, Options, Progress, Result, aggregate, api_error, check_target_kinds,
    create_in_target, discover, discovery_types, ensure_namespaces, is_paused, read_source,
    refused, set_paused,
};

/// The file an object is saved in: `<Kind>_<Namespace>_<Name>.yaml`, as clusterctl names them
/// (a cluster-scoped object's namespace part is empty).
pub fn file_name(object: &ObjectRef) -> String {
    format!(
        "{}_{}_{}.yaml",
        object.kind,
        object.namespace.as_deref().unwrap_or_default(),
        object.name
    )
}

fn existing_directory(dir: &Path) -> Result<()> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(MoveError::Refused(format!(
            "{} is not a directory",
            dir.display()
        ))),
        Err(e) => Err(MoveError::Refused(format!(
            "the directory {} cannot be used: {e}; create it first",
            dir.display()
        ))),
    }
}

fn write_private(path: &Path, text: &str) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let fail = |e: std::io::Error| MoveError::Refused(format!("writing {}: {e}", path.display()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(fail)?;
    // An existing file keeps its mode on open: make it private too.
    use std::os::unix::fs::PermissionsExt;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
        .map_err(fail)?;
    file.write_all(text.as_bytes()).map_err(fail)
}

/// Saves the Clusters of `options` to `dir`, pausing them while it reads and resuming them
/// after; nothing is deleted. Returns the files written.
pub async fn to_directory(
    source: &Endpoint,
    dir: &Path,
    options: &Options,
    progress: &dyn Progress,
) -> Result<Vec<PathBuf>> {
    existing_directory(dir)?;
    progress.step("Moving to directory...");
    let discovered = discover(source, options, &BTreeSet::new()).await?;
    let plan = &discovered.plan;
    let (clusters, classes) = (plan.core("Cluster"), plan.core("ClusterClass"));
    progress.step(&format!(
        "Starting move of Cluster API objects Clusters={}",
        clusters.len()
    ));
    progress.step(&format!(
        "Moving Cluster API objects ClusterClasses={}",
        classes.len()
    ));
    if options.dry_run {
        return Ok(plan
            .nodes()
            .map(|n| dir.join(file_name(&n.object)))
            .collect());
    }
    progress.step("Pausing the source cluster");
    set_paused(source, &clusters, &classes, true).await?;
    let saved = async {
        progress.phase(&format!("Saving files to {}", dir.display()), plan.len());
        let mut files = Vec::new();
        for n in plan.nodes() {
            let live = read_source(source, &n.object).await?;
            let path = dir.join(file_name(&n.object));
            let text = crate::yaml::to_string(&live)
                .map_err(|e| MoveError::Refused(format!("{}: {e}", n.object)))?;
            write_private(&path, &text)?;
            progress.object("Saving", &n.object);
            files.push(path);
        }
        progress.phase_done();
        Ok::<_, MoveError>(files)
    }
    .await;
    progress.step("Resuming the source cluster");
    let resumed = set_paused(source, &clusters, &classes, false).await;
    let files = saved?;
    resumed?;
    Ok(files)
}

/// The objects saved in `dir`, each with its path. Every entry must be a YAML file holding
/// one object as `--to-directory` writes them.
pub fn read_directory(dir: &Path) -> Result<Vec<(PathBuf, Value)>> {
    existing_directory(dir)?;
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| MoveError::Refused(format!("reading {}: {e}", dir.display())))?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<std::io::Result<_>>()
        .map_err(|e| MoveError::Refused(format!("reading {}: {e}", dir.display())))?;
    paths.sort();
    let mut objects = Vec::new();
    for path in paths {
        let not_saved = |why: String| {
            MoveError::Refused(format!(
                "{}: {why}; the directory must hold only the files `capictl move --to-directory` wrote",
                path.display()
            ))
        };
        if path.is_dir() {
            return Err(not_saved("is a directory".into()));
        }
        let text = std::fs::read_to_string(&path).map_err(|e| not_saved(e.to_string()))?;
        let object: Value =
            crate::yaml::from_str(&text).map_err(|e| not_saved(format!("not YAML ({e})")))?;
        // A directory saved by a management cluster that stored v1beta1 (upstream before
        // v1.11, or a backup written then) restores as v1beta2, as that cluster would serve it.
        let object = crate::api::conversion::convert_offline(object, crate::api::conversion::HUB)
            .map_err(|e| not_saved(format!("converting: {e}")))?;
        let complete = object["apiVersion"].is_string()
            && object["kind"].is_string()
            && object["metadata"]["name"].is_string()
            && object["metadata"]["uid"].is_string();
        if !complete {
            return Err(not_saved(
                "not a saved object (apiVersion, kind, metadata.name and metadata.uid)".into(),
            ));
        }
        objects.push((path, object));
    }
    if objects.is_empty() {
        return Err(MoveError::Refused(format!(
            "{} holds no saved objects",
            dir.display()
        )));
    }
    Ok(objects)
}

/// Restores what `dir` holds into `target`: namespaces, objects owners first (owner references
/// to the new uids; an object already there is kept), their status, then the Clusters and
/// ClusterClasses resumed.
pub async fn from_directory(
    target: &Endpoint,
    dir: &Path,
    dry_run: bool,
    progress: &dyn Progress,
) -> Result<super::graph::Plan> {
    progress.step("Moving from directory...");
    let files = read_directory(dir)?;
    // The kinds as the target serves them.
    let types: BTreeMap<(String, String), Type> = discovery_types(&target.client)
        .await?
        .into_iter()
        .map(|t| ((t.api_version.clone(), t.kind.clone()), t))
        .collect();
    let mut listed = Vec::new();
    let mut unknown = BTreeSet::new();
    for (_, object) in &files {
        let key = (
            object["apiVersion"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            object["kind"].as_str().unwrap_or_default().to_string(),
        );
        match types.get(&key) {
            Some(t) => listed.push((t.clone(), object.clone())),
            None => {
                unknown.insert(format!("{} {}", key.0, key.1));
            }
        }
    }
    if !unknown.is_empty() {
        return refused(format!(
            "the target cluster {} does not serve {}; install the providers there (`capictl init`) before restoring",
            target.name,
            unknown.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    let classes_in_use: Vec<(String, String)> = listed
        .iter()
        .filter_map(|(_, o)| super::graph::class_in_use(o))
        .collect();
    let options = Options::default();
    let plan = super::plan_objects(&listed, &options, &classes_in_use)?;
    check_target_kinds(target, &plan).await?;
    let objects: BTreeMap<String, Value> = listed
        .into_iter()
        .filter_map(|(_, o)| Some((o["metadata"]["uid"].as_str()?.to_string(), o)))
        .collect();
    // A Cluster of the same name paused in the target is someone's on purpose.
    let mut paused = Vec::new();
    for c in &plan.core("Cluster") {
        if let Some(live) = target
            .dynamic(c)
            .get_opt(&c.name)
            .await
            .map_err(api_error(format!("reading {c} in the target")))?
            && is_paused(&serde_json::to_value(live).expect("objects serialize"))
        {
            paused.push(c.key());
        }
    }
    if !paused.is_empty() {
        return refused(format!(
            "cannot start operation while the following Clusters are paused in the target: {}",
            paused.join(", ")
        ));
    }
    // Everything the target would refuse (too large, invalid) is found before anything is
    // restored, and a dry run says so instead of "would be restored".
    super::dry_run_creates(target, &plan, &objects).await?;
    progress.step(&format!("Restoring files from {}", dir.display()));
    if dry_run {
        return Ok(plan);
    }
    progress.step("Creating target namespaces, if missing");
    ensure_namespaces(target, &plan, false).await?;
    progress.phase("Restoring objects into the target cluster", plan.len());
    let mut new_uids = BTreeMap::new();
    let mut created = BTreeSet::new();
    for n in plan.nodes() {
        let (uid, was_created) =
            create_in_target(target, n, &objects[&n.uid], false, &new_uids).await?;
        new_uids.insert(n.uid.clone(), uid);
        if was_created {
            created.insert(n.uid.clone());
        }
        progress.object("Restoring", &n.object);
    }
    progress.phase_done();
    // Objects that were already there keep their own status.
    let mut errors = Vec::new();
    for n in plan.nodes().filter(|n| created.contains(&n.uid)) {
        let status = &objects[&n.uid]["status"];
        if status.is_null() {
            continue;
        }
        let result = target
            .dynamic(&n.object)
            .patch_status(
                &n.object.name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status})),
            )
            .await;
        match result {
            // Kinds without a status subresource took it with the object.
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 405 => {}
            Err(e) => errors.push(format!("restoring the status of {}: {e}", n.object)),
            Ok(_) => {}
        }
    }
    if !errors.is_empty() {
        return refused(aggregate(&errors));
    }
    progress.step("Resuming the target cluster");
    set_paused(
        target,
        &plan.core("Cluster"),
        &plan.core("ClusterClass"),
        false,
    )
    .await?;
    Ok(plan)
}
