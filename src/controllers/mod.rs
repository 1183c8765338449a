//! The Cluster API controllers: one reconciler per kind, meeting each other only through API
//! objects. Each reads the world, decides with pure functions, does one step, and writes
//! status; a crash at any point is repaired by the next reconcile.
//!
//! The kit every reconciler runs on (Context, errors, the runtime, finalizers, pause, owner
//! references, status patches, provider objects reached through their contract) is
//! [`crate::reconcile`]; the workload clusters are reached through [`crate::workload`].

pub mod autoscaler;
pub mod cluster;
pub mod cluster_class;
pub mod cluster_resource_set;
pub mod cluster_resource_set_binding;
pub mod extension_config;
pub mod kubeadm_config;
pub mod kubeadm_control_plane;
pub mod machine;
pub mod machine_deployment;
pub mod machine_health_check;
pub mod machine_pool;
pub mod machine_set;
pub mod machines;
pub mod mdutil;
pub mod secrets;
pub mod topology;

#[cfg(test)]
mod tests {

    /// Reconcilers meet only through API objects: none imports another. What two of them share
    /// lives in a shared module (common, external, machines, mdutil, secrets, …).
    #[test]
    fn no_reconciler_imports_another() {
        const RECONCILERS: &[&str] = &[
            "autoscaler",
            "cluster",
            "cluster_class",
            "cluster_resource_set",
            "cluster_resource_set_binding",
            "kubeadm_config",
            "kubeadm_control_plane",
            "machine",
            "machine_deployment",
            "machine_health_check",
            "machine_pool",
            "machine_set",
        ];
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        // A large reconciler is a folder of its own (controllers/machine/{mod,status,…}.rs).
        let mut sources: Vec<std::path::PathBuf> = RECONCILERS
            .iter()
            .map(|r| {
                let folder = dir.join(format!("controllers/{r}"));
                if folder.is_dir() {
                    folder
                } else {
                    dir.join(format!("controllers/{r}.rs"))
                }
            })
            .collect();
        for shared in ["machines", "mdutil", "secrets"] {
            sources.push(dir.join(format!("controllers/{shared}.rs")));
        }
        sources.push(dir.join("reconcile"));
        sources.push(dir.join("cache.rs"));
        sources.push(dir.join("workload"));
        let mut found = Vec::new();
        let mut files = Vec::new();
        for source in sources {
            if source.is_dir() {
                files.extend(
                    std::fs::read_dir(&source)
                        .unwrap()
                        .map(|e| e.unwrap().path()),
                );
            } else {
                files.push(source);
            }
        }
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for reconciler in RECONCILERS {
                for pattern in [
                    format!("super::{reconciler}::"),
                    format!("super::{reconciler};"),
                    format!("controllers::{reconciler}::"),
                ] {
                    if text.contains(&pattern) {
                        found.push(format!("{} uses {pattern}", file.display()));
                    }
                }
            }
        }
        assert!(found.is_empty(), "{found:#?}");
    }
}
