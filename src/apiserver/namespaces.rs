//! The namespace deleter, as kube-controller-manager's namespace controller: a namespace being
//! deleted is emptied (objects without finalizers go at once, the others are marked and waited
//! for; objects a delete guard keeps stay, and hold the namespace), then removed.

use std::time::Duration;

use super::ApiServer;
use super::gc::Propagation;
use super::report_background_write;

/// Empties and removes namespaces that are being deleted, as kube-controller-manager's
/// namespace controller does: objects without finalizers go at once, the others are marked
/// for deletion and waited for.
pub(super) async fn namespace_deleter(
    server: std::sync::Weak<ApiServer>,
    mut removals: tokio::sync::watch::Receiver<u64>,
) {
    loop {
        // Holding only a weak reference between passes lets the server shut down.
        let Some(s) = server.upgrade() else { return };
        let pending = delete_namespaces(&s).await;
        drop(s);
        // Every deletion, through any server on the store, wakes it: there is nothing to poll
        // for (a fleet of in-memory workload clusters runs a thousand of these loops).
        let wait = if pending {
            Duration::from_millis(200)
        } else {
            Duration::from_secs(600)
        };
        if !after_removal(&mut removals, wait).await {
            return;
        }
    }
}

/// Waits for the store's next deletion, at most `wait`; false once the store is gone.
pub(super) async fn after_removal(
    removals: &mut tokio::sync::watch::Receiver<u64>,
    wait: Duration,
) -> bool {
    !matches!(
        tokio::time::timeout(wait, removals.changed()).await,
        Ok(Err(_))
    )
}

/// One pass over the terminating namespaces; whether any is still waiting.
pub(super) async fn delete_namespaces(server: &ApiServer) -> bool {
    let namespaces = server.namespaces();
    let (terminating, _, _) = server
        .store
        .list(&namespaces.prefix(), None, None, |r| r.meta().deleting);
    let mut pending = false;
    let mut prefixes: Vec<String> = server
        .registry
        .all()
        .iter()
        .filter(|r| r.namespaced)
        .map(|r| r.prefix())
        .collect();
    prefixes.sort();
    prefixes.dedup();
    for ns in terminating {
        let name = ns.name().to_string();
        let mut remaining = 0;
        for prefix in &prefixes {
            let (records, _, _) =
                server
                    .store
                    .list(&format!("{prefix}{name}/"), None, None, |_| true);
            for record in records {
                remaining += 1;
                if record.meta().deleting {
                    continue;
                }
                let Some(resource) = server.registry.of_key(&record.key) else {
                    continue;
                };
                // A guarded object stays, and holds its namespace, until its guard lets it go.
                if server
                    .admission
                    .deletion_refusal(&resource.group, &resource.plural, &record.value())
                    .is_some()
                {
                    continue;
                }
                // Objects without finalizers go at once; the others are marked and waited for.
                if let Err(e) = server
                    .delete_object(&resource, &record, Propagation::Background, None)
                    .await
                {
                    report_background_write("namespace deleter", &record.key, e);
                }
            }
        }
        if remaining > 0 {
            pending = true;
            continue;
        }
        // Empty: the namespace's own finalizers decide whether it goes now.
        if ns.meta().finalizers.is_empty() {
            if let Err(e) = server.remove_object(&namespaces, &ns).await {
                report_background_write("namespace deleter", &ns.key, e);
            }
        } else {
            pending = true;
        }
    }
    pending
}
